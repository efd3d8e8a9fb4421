#pragma once
// Internal: all-or-nothing file writes (temp file in the target directory, then rename).

#include <functional>
#include <string>
#include <vector>

namespace gen3d::mesh::detail {

// One file to be written: its final path and its bytes.
struct PendingFile {
  std::string path;
  std::string bytes;
};

// Writes every file to a temporary sibling, then renames them all into place. On any failure the
// temporaries are removed and MeshError (naming the file) is thrown; files already renamed stay.
void write_files_atomically(const std::vector<PendingFile>& files);

}  // namespace gen3d::mesh::detail
