#include "mesh/atomic_write.h"

#include <atomic>
#include <cerrno>
#include <cstdio>
#include <cstring>
#include <filesystem>
#include <fstream>
#include <system_error>

#include <unistd.h>

#include "mesh/error.h"

namespace gen3d::mesh::detail {
namespace fs = std::filesystem;

namespace {

// A name unique within this process and across processes (pid), so concurrent writers of the same
// directory never share a temporary.
std::string temp_name_for(const std::string& path) {
  static std::atomic<uint64_t> counter{0};
  return path + ".tmp" + std::to_string(::getpid()) + "_" + std::to_string(counter++);
}

void write_one(const std::string& tmp, const std::string& final_path, const std::string& bytes) {
  std::FILE* f = std::fopen(tmp.c_str(), "wb");
  if (!f) {
    throw MeshError("cannot write '" + final_path + "': " + std::strerror(errno));
  }
  const size_t written = bytes.empty() ? 0 : std::fwrite(bytes.data(), 1, bytes.size(), f);
  const int flush_err = std::fflush(f);
  const int close_err = std::fclose(f);
  if (written != bytes.size() || flush_err != 0 || close_err != 0) {
    std::error_code ec;
    fs::remove(tmp, ec);
    throw MeshError("cannot write '" + final_path + "': " + std::strerror(errno));
  }
}

}  // namespace

void write_files_atomically(const std::vector<PendingFile>& files) {
  std::vector<std::string> temps;
  auto cleanup = [&] {
    std::error_code ec;
    for (const auto& t : temps) fs::remove(t, ec);
  };
  try {
    for (const auto& file : files) {
      temps.push_back(temp_name_for(file.path));
      write_one(temps.back(), file.path, file.bytes);
    }
    for (size_t i = 0; i < files.size(); ++i) {
      std::error_code ec;
      fs::rename(temps[i], files[i].path, ec);
      if (ec) {
        throw MeshError("cannot write '" + files[i].path + "': rename failed: " + ec.message());
      }
    }
  } catch (...) {
    cleanup();
    throw;
  }
}

}  // namespace gen3d::mesh::detail
