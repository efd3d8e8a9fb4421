#pragma once
// ImageError: the one exception type thrown by gen3d::image for bad files and bad arguments.

#include <stdexcept>
#include <string>

namespace gen3d::image {

// Thrown with one readable message that names the function or file and the problem.
class ImageError : public std::runtime_error {
 public:
  explicit ImageError(const std::string& message) : std::runtime_error(message) {}
};

}  // namespace gen3d::image
