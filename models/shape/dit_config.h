#pragma once
// Hunyuan3DDiT hyper-parameters, keyed exactly like the official config.yaml `params`.

#include <string>
#include <string_view>
#include <vector>

namespace gen3d::models {

struct DiTConfig {
  int in_channels = 64;           // latent channels per token (= ShapeVAE embed_dim)
  int context_in_dim = 1536;      // width of the conditioning tokens (DINOv2-giant: 1536)
  int hidden_size = 1024;         // H, the transformer width
  double mlp_ratio = 4.0;         // MLP hidden = int(H * mlp_ratio)
  int num_heads = 16;             // attention heads; head dim D = H / num_heads
  int depth = 16;                 // double-stream blocks
  int depth_single_blocks = 32;   // single-stream blocks
  std::vector<int> axes_dim{64};  // only checked: sum must equal D (no positional encoding)
  double theta = 10000;           // unused by the forward pass (no RoPE); kept for fidelity
  bool qkv_bias = true;           // bias on the double blocks' qkv Linears
  bool guidance_embed = false;    // guidance-distilled checkpoints add guidance_in
  double time_factor = 1000;      // passed as the sinusoid's max_period by the official code

  int head_dim() const { return hidden_size / num_heads; }
  int mlp_hidden() const { return static_cast<int>(hidden_size * mlp_ratio); }

  // Throws ModelError describing every inconsistent value.
  void validate() const;

  // Parses a `{"target": ..., "params": {...}}` section or a bare params object. Unknown keys
  // are an error (listed together); `ckpt_path` is accepted and ignored.
  static DiTConfig from_json(std::string_view json_text);
  // Reads `section` (e.g. "model") of a JSON config file such as golden/config.json.
  static DiTConfig from_file(const std::string& path, std::string_view section = "model");
};

}  // namespace gen3d::models
