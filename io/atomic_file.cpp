#include "io/atomic_file.h"

#include <unistd.h>

#include <atomic>
#include <cerrno>
#include <cstdint>
#include <cstdio>
#include <cstring>
#include <filesystem>
#include <system_error>

#include "io/error.h"

namespace gen3d::io {
namespace fs = std::filesystem;

namespace {

// Beside the target, so the rename stays on one file system; unique within this process
// (counter) and across processes (pid), so concurrent writers of one directory never share it.
std::string temp_name_for(const std::string& path) {
  static std::atomic<std::uint64_t> counter{0};
  return path + ".tmp" + std::to_string(::getpid()) + "_" + std::to_string(counter++);
}

void write_one(const std::string& temp, const std::string& final_path, std::string_view bytes) {
  std::FILE* f = std::fopen(temp.c_str(), "wb");
  if (!f) throw IoError("cannot write '" + final_path + "': " + std::strerror(errno));
  const size_t written = bytes.empty() ? 0 : std::fwrite(bytes.data(), 1, bytes.size(), f);
  const int flush_err = std::fflush(f);
  const int close_err = std::fclose(f);
  if (written != bytes.size() || flush_err != 0 || close_err != 0) {
    const int err = errno;
    std::error_code ec;
    fs::remove(temp, ec);
    throw IoError("cannot write '" + final_path + "': " + std::strerror(err));
  }
}

}  // namespace

void write_files_atomically(const std::vector<PendingFile>& files) {
  std::vector<std::string> temps;
  try {
    for (const auto& file : files) {
      temps.push_back(temp_name_for(file.path));
      write_one(temps.back(), file.path, file.bytes);
    }
    for (size_t i = 0; i < files.size(); ++i) {
      std::error_code ec;
      fs::rename(temps[i], files[i].path, ec);
      if (ec) throw IoError("cannot write '" + files[i].path + "': rename failed: " + ec.message());
    }
  } catch (...) {
    std::error_code ec;
    for (const auto& temp : temps) fs::remove(temp, ec);
    throw;
  }
}

void write_file_atomically(const std::string& path, std::string_view contents) {
  write_files_atomically({{path, std::string(contents)}});
}

}  // namespace gen3d::io
