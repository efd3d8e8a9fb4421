#pragma once
// The one rule for finding a network's weights in a model folder.

#include <string>
#include <string_view>

namespace gen3d::models::nn {

// The weights file of `dir`: `<stem>.safetensors`, else `<stem>.fp16.safetensors`, else
// `<stem>.bin` (a torch.save file, as the official diffusers folders publish it; read natively by
// models/core/torch_file.h), else `<stem>.ckpt` or `<stem>.fp16.ckpt` (torch.save checkpoints of
// Hunyuan3D-2.1's shape folders). Full precision first, since the in-memory precision is chosen at
// load whatever the file holds. Throws ModelError naming the folder and the names looked for.
std::string find_weights(const std::string& dir, std::string_view stem);

// `path` made canonical where it exists (cache keys), else unchanged.
std::string canonical_path(const std::string& path);

}  // namespace gen3d::models::nn
