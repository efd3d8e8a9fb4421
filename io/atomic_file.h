#pragma once
// All-or-nothing file writes: every file goes to a temporary sibling first and is renamed into
// place, so a failure or a crash never leaves a half-written file under the final name.

#include <string>
#include <string_view>
#include <vector>

namespace gen3d::io {

// One file to be written: its final path and its bytes.
struct PendingFile {
  std::string path;
  std::string bytes;
};

// Writes every file to a temporary sibling, then renames them all into place (a mesh and its
// material and texture appear together). On any failure the temporaries are removed and IoError
// naming the file is thrown; files already renamed stay.
void write_files_atomically(const std::vector<PendingFile>& files);

// The same for one file.
void write_file_atomically(const std::string& path, std::string_view contents);

}  // namespace gen3d::io
