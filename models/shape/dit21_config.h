#pragma once
// HunYuanDiTPlain (the Hunyuan3D-2.1 shape DiT) hyper-parameters, keyed exactly like the
// `model.params` of the official config.yaml (hy3dshape/models/denoisers/hunyuandit.py).

#include <string>
#include <string_view>

namespace gen3d::models {

struct DiT21Config {
  int input_size = 4096;   // latent tokens L (only checked against the latents' length)
  int in_channels = 64;    // latent channels per token (= ShapeVAE embed_dim)
  int hidden_size = 2048;  // H
  int context_dim = 1024;  // width of the condition tokens (DINOv2-L: 1024)
  int depth = 21;          // blocks; block i > depth / 2 takes a long skip from block depth-1-i
  int num_heads = 16;      // head dim D = H / num_heads
  bool qk_norm = true;     // RMSNorm of q and k per head
  int text_len = 1370;     // condition tokens (only used by attention pooling, unsupported)
  bool qkv_bias = false;   // bias on to_q / to_k / to_v
  int num_moe_layers = 6;  // the last blocks (depth - i <= num_moe_layers) use mixture of experts
  int num_experts = 8;     // routed experts per MoE block
  int moe_top_k = 2;       // experts per token (softmax weights, not renormalized)
  // Width of the guidance condition t_embedder.cond_proj takes (0: none). Its weight is loaded but
  // never applied: the official flow-matching pipeline does not pass a guidance condition to this
  // DiT (hy3dgen/shapegen/pipelines.py, Hunyuan3DDiTFlowMatchingPipeline.__call__) and runs CFG.
  int guidance_cond_proj_dim = 0;

  int head_dim() const { return hidden_size / num_heads; }
  int ffn_hidden() const { return 4 * hidden_size; }  // MLP and experts: always 4H
  bool uses_moe(int block) const { return depth - block <= num_moe_layers; }
  bool has_skip(int block) const { return block > depth / 2; }

  // Throws ModelError describing every inconsistent value.
  void validate() const;

  // A `{"target": ..., "params": {...}}` section or a bare params object. Unknown keys are an
  // error; options the official code has but the 2.1 checkpoints leave off (attention pooling,
  // decoupled cross-attention, positional embedding, RMS block norms) are accepted only at their
  // off value.
  static DiT21Config from_json(std::string_view json_text);
  // Reads `section` (e.g. "model") of a JSON or YAML config file.
  static DiT21Config from_file(const std::string& path, std::string_view section = "model");
  // Whether a config section names HunYuanDiTPlain (its `target`, or keys only it has).
  static bool describes(std::string_view json_text);
};

}  // namespace gen3d::models
