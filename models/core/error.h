#pragma once
// The one exception type of the models library: bad files, bad configs, shape mismatches.

#include <stdexcept>
#include <string>

namespace gen3d::models {

class ModelError : public std::runtime_error {
 public:
  explicit ModelError(const std::string& what) : std::runtime_error(what) {}
};

}  // namespace gen3d::models
