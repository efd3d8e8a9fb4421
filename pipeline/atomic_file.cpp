#include "pipeline/atomic_file.h"

#include <unistd.h>

#include <cerrno>
#include <cstdio>
#include <cstring>
#include <filesystem>
#include <stdexcept>

namespace gen3d::pipeline {

void write_file_atomic(const std::string& path, std::string_view contents) {
  namespace fs = std::filesystem;
  const fs::path target(path);
  // The temp file sits beside the target so the rename stays on one file system.
  const fs::path temp = target.parent_path() /
                        (".tmp." + target.filename().string() + "." + std::to_string(getpid()));
  std::FILE* f = std::fopen(temp.c_str(), "wb");
  if (!f) throw std::runtime_error("cannot write " + path + ": " + std::strerror(errno));
  const bool written = std::fwrite(contents.data(), 1, contents.size(), f) == contents.size();
  const bool closed = std::fclose(f) == 0;
  std::error_code ec;
  if (!written || !closed) {
    const int err = errno;
    fs::remove(temp, ec);
    throw std::runtime_error("cannot write " + path + ": " + std::strerror(err));
  }
  fs::rename(temp, target, ec);
  if (ec) {
    fs::remove(temp, ec);
    throw std::runtime_error("cannot write " + path + ": " + ec.message());
  }
}

}  // namespace gen3d::pipeline
