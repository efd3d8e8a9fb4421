#pragma once
// The published Hunyuan3D shape model folders (Hunyuan3D-2, -2mini, -2mv, -2.1 on Hugging Face)
// and what each one means for a run: its name in `gen3d models check`, its short name for
// `gen3d shape --model`, and the FlashVDM VAE the official pipeline's enable_flashvdm() swaps in
// for it. The sampler and step count follow the folder's config (its scheduler section).

#include <span>
#include <string>
#include <string_view>

namespace gen3d::models {

struct ShapeModelInfo {
  std::string_view folder;   // published sub-folder, e.g. "hunyuan3d-dit-v2-0-turbo"
  std::string_view repo;     // Hugging Face repository publishing it
  std::string_view name;     // short name for `gen3d shape --model` ("turbo", "mini-fast", ...)
  std::string_view network;  // name in `gen3d models check` ("shape-turbo", ...)
  // The turbo VAE folder enable_flashvdm() loads for this model (hy3dgen/shapegen/pipelines.py,
  // turbo_vae_mapping, keyed by repository); "" where gen3d keeps the checkpoint's own VAE.
  std::string_view turbo_vae;
};

// Every published shape DiT folder, in a fixed order.
std::span<const ShapeModelInfo> shape_models();
// The DiT folder named `folder_name` (the last component of a path), or null.
const ShapeModelInfo* find_shape_model_info(std::string_view folder_name);

// A published standalone ShapeVAE folder (hunyuan3d-vae-v2-0[-turbo],
// hunyuan3d-vae-v2-mini[-turbo]).
struct ShapeVaeInfo {
  std::string_view folder;
  std::string_view repo;
  std::string_view network;  // "shape-vae", "shape-vae-turbo", ...
};
std::span<const ShapeVaeInfo> shape_vaes();
const ShapeVaeInfo* find_shape_vae_info(std::string_view folder_name);

// The DiT folder `name` designates under `models_dir`: a short name ("turbo", "2.0", "mv-fast")
// or a published folder name, found in `models_dir` itself or one folder down (a download of each
// repository beside the others: models/hy2/hunyuan3d-dit-v2-0-turbo/). Throws ModelError naming
// the names known and the shape folders present.
std::string find_shape_model(const std::string& models_dir, std::string_view name);

// The turbo VAE folder the DiT folder `dit_dir` is run with: its info's turbo_vae, looked for
// beside `dit_dir` and one level up (the 2mv turbo uses Hunyuan3D-2's VAE, downloaded beside). ""
// when the model has none or it is not there.
std::string find_turbo_vae(const std::string& dit_dir);

}  // namespace gen3d::models
