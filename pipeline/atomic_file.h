#pragma once
// Whole-file writes that never leave a half-written file behind: temp file + rename.

#include <string>
#include <string_view>

namespace gen3d::pipeline {

// Writes `contents` to `path` atomically. Throws std::runtime_error naming the path on failure.
void write_file_atomic(const std::string& path, std::string_view contents);

}  // namespace gen3d::pipeline
