#include "models/nn/weight_files.h"

#include <filesystem>

#include "models/core/error.h"

namespace gen3d::models::nn {

namespace fs = std::filesystem;

std::string find_weights(const std::string& dir, std::string_view stem) {
  const std::string full = std::string(stem) + ".safetensors";
  const std::string half = std::string(stem) + ".fp16.safetensors";
  const std::string torch = std::string(stem) + ".bin";
  for (const std::string& name : {full, half, torch})
    if (fs::is_regular_file(fs::path(dir) / name)) return (fs::path(dir) / name).string();
  throw ModelError(dir + ": no " + full + ", " + half + " or " + torch);
}

std::string canonical_path(const std::string& path) {
  std::error_code ec;
  const fs::path c = fs::weakly_canonical(path, ec);
  return ec ? path : c.string();
}

}  // namespace gen3d::models::nn
