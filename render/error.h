#pragma once
// RenderError: the one exception type the render library throws.

#include <stdexcept>
#include <string>

namespace gen3d::render {

// Thrown for invalid arguments (sizes, indices, mismatched buffers) with a readable message that
// names the function and the offending value.
class RenderError : public std::runtime_error {
 public:
  explicit RenderError(const std::string& what) : std::runtime_error(what) {}
};

}  // namespace gen3d::render
