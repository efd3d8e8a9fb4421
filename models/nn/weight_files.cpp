#include "models/nn/weight_files.h"

#include <filesystem>

#include "models/core/error.h"

namespace gen3d::models::nn {

namespace fs = std::filesystem;

std::string find_weights(const std::string& dir, std::string_view stem) {
  const std::string full = std::string(stem) + ".safetensors";
  const std::string half = std::string(stem) + ".fp16.safetensors";
  const std::string torch = std::string(stem) + ".bin";
  // Hunyuan3D-2.1's shape folders publish a torch.save checkpoint, model.fp16.ckpt.
  const std::string ckpt = std::string(stem) + ".ckpt";
  const std::string ckpt_half = std::string(stem) + ".fp16.ckpt";
  for (const std::string& name : {full, half, torch, ckpt, ckpt_half})
    if (fs::is_regular_file(fs::path(dir) / name)) return (fs::path(dir) / name).string();
  throw ModelError(dir + ": no " + full + ", " + half + ", " + torch + ", " + ckpt + " or " +
                   ckpt_half);
}

std::string canonical_path(const std::string& path) {
  std::error_code ec;
  const fs::path c = fs::weakly_canonical(path, ec);
  return ec ? path : c.string();
}

}  // namespace gen3d::models::nn
