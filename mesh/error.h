#pragma once
// MeshError: the one exception type thrown by gen3d::mesh for bad input files and bad arguments.

#include <stdexcept>
#include <string>

namespace gen3d::mesh {

// Thrown with one readable message that names the file (when there is one) and the problem.
class MeshError : public std::runtime_error {
 public:
  explicit MeshError(const std::string& message) : std::runtime_error(message) {}
};

}  // namespace gen3d::mesh
