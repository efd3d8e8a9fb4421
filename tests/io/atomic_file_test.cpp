// All-or-nothing writes: contents land whole, failures name the file and leave no temporaries.

#include "io/atomic_file.h"

#include <gtest/gtest.h>

#include <filesystem>
#include <fstream>
#include <iterator>
#include <string>

#include "io/error.h"
#include "support/paths.h"

namespace gen3d::io {
namespace {
namespace fs = std::filesystem;

std::string read(const std::string& path) {
  std::ifstream in(path, std::ios::binary);
  return std::string((std::istreambuf_iterator<char>(in)), std::istreambuf_iterator<char>());
}

size_t entries(const std::string& dir) {
  return static_cast<size_t>(std::distance(fs::directory_iterator(dir), fs::directory_iterator()));
}

TEST(AtomicFile, WritesAndReplacesWholeFiles) {
  const std::string dir = test::temp_dir("atomic_file_writes");
  const std::string path = dir + "/a.txt";
  write_file_atomically(path, "first");
  write_file_atomically(path, std::string("second\0with nul", 15));
  EXPECT_EQ(read(path), std::string("second\0with nul", 15));
  write_file_atomically(dir + "/empty.txt", "");
  EXPECT_TRUE(fs::is_regular_file(dir + "/empty.txt"));
  EXPECT_EQ(fs::file_size(dir + "/empty.txt"), 0u);
  EXPECT_EQ(entries(dir), 2u);  // no temporaries left behind
}

TEST(AtomicFile, WritesSeveralFilesTogether) {
  const std::string dir = test::temp_dir("atomic_file_several");
  write_files_atomically({{dir + "/m.obj", "o"}, {dir + "/m.mtl", "m"}, {dir + "/m.png", "p"}});
  EXPECT_EQ(read(dir + "/m.obj"), "o");
  EXPECT_EQ(read(dir + "/m.mtl"), "m");
  EXPECT_EQ(read(dir + "/m.png"), "p");
  EXPECT_EQ(entries(dir), 3u);
}

TEST(AtomicFile, FailuresNameTheFileAndCleanUp) {
  const std::string dir = test::temp_dir("atomic_file_failures");
  try {
    write_file_atomically(dir + "/missing/dir/x.txt", "x");
    FAIL() << "writing into a missing directory succeeded";
  } catch (const IoError& e) {
    EXPECT_NE(std::string(e.what()).find("missing/dir/x.txt"), std::string::npos) << e.what();
  }
  // A directory in the way: both temporaries are written, the first rename fails, nothing is
  // renamed and the temporaries are removed.
  fs::create_directory(dir + "/taken");
  fs::create_directory(dir + "/taken/inner");
  EXPECT_THROW(write_files_atomically({{dir + "/taken", "1"}, {dir + "/second.txt", "2"}}),
               IoError);
  EXPECT_FALSE(fs::exists(dir + "/second.txt"));
  EXPECT_EQ(entries(dir), 1u);
}

}  // namespace
}  // namespace gen3d::io
