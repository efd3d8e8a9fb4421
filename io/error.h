#pragma once
// IoError: the one exception type of gen3d::io, thrown when a file cannot be written.

#include <stdexcept>
#include <string>

namespace gen3d::io {

// Thrown with one readable message that names the file and the system's reason.
class IoError : public std::runtime_error {
 public:
  explicit IoError(const std::string& message) : std::runtime_error(message) {}
};

}  // namespace gen3d::io
