#pragma once
// The one rule for finding a network's weights in a model folder.

#include <string>
#include <string_view>

namespace gen3d::models::nn {

// The weights file `<stem>.safetensors` in `dir`, else `<stem>.fp16.safetensors`: full precision
// first, since the in-memory precision is chosen at load whatever the file holds. Throws
// ModelError naming the folder and both names; when only `<stem>.bin` (a PyTorch pickle) is
// there, the message says so.
std::string find_weights(const std::string& dir, std::string_view stem);

// `path` made canonical where it exists (cache keys), else unchanged.
std::string canonical_path(const std::string& path);

}  // namespace gen3d::models::nn
