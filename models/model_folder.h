#pragma once
// What a model folder holds, checked without running (or even loading) any network: which
// official Hunyuan3D-2 networks are there, their files, dtypes, parameter counts and memory at
// each precision, and what is missing or mis-shaped. Also a per-tensor summary of one weights
// file (sums over the stored values), so that files can be compared across tools.

#include <cstdint>
#include <set>
#include <string>
#include <vector>

namespace gen3d::models {

struct TensorSummary {
  std::string name;
  std::string dtype;  // safetensors spelling: F32, F16, BF16, I64, ...
  std::vector<std::int64_t> shape;
  double sum = 0.0;      // float64 over the values as stored
  double abs_sum = 0.0;  // float64 over |value|
};

// Every tensor of a .safetensors or torch.save .bin file, in name order.
std::vector<TensorSummary> summarize_weights(const std::string& path);

struct NetworkCheck {
  // "paint", "paint-turbo", "paint-pbr", "delight", "dinov2", "realesrgan", "shape" (2.0) or
  // the shape folder's name from models/shape/shape_models.h ("shape-turbo", "shape-vae-turbo",
  // ...)
  std::string network;
  std::string folder;                 // the official sub-folder it lives in
  std::vector<std::string> files;     // the files read (configs and weights)
  std::set<std::string> dtypes;       // stored dtypes of its weights
  std::int64_t parameters = 0;        // elements of every float tensor
  bool shapes_checked = false;        // tensors compared with what the network's loader claims
  std::vector<std::string> problems;  // missing files, missing / mis-shaped / unexpected tensors
};

// The official networks found in `dir` (an official model folder: hunyuan3d-paint-v2-0[-turbo]/,
// hunyuan3d-delight-v2-0/, the shape DiT and VAE folders of shape_models.h,
// hunyuan3d-paintpbr-v2-1/; or one of those folders itself). Beside the network folders, the 2.1
// paint's image encoder (dinov2-giant/ or facebook/dinov2-giant/) and RealESRGAN_x4plus.pth (or
// ckpt/) are checked too when present. Throws ModelError when `dir` is not a folder or holds none
// of them.
std::vector<NetworkCheck> check_model_folder(const std::string& dir);

// A human-readable report: one block per network with its memory at fp32, bf16 and int8.
std::string format_model_check(const std::vector<NetworkCheck>& checks);

}  // namespace gen3d::models
