#pragma once
// Hunyuan3D-Paint UNet2.5D (official hy3dgen/texgen/hunyuanpaint/unet/modules.py,
// UNet2p5DConditionModel): a main SD2-style UNet with a 12-channel conv_in ([noisy | normal |
// position] latents), a camera embedding added to the time embedding, and per transformer block
// a reference-attention and a multiview-attention branch; plus a plain reference UNet
// ("unet_dual") whose post-norm1 block inputs are the reference features.
// golden/texmodels/README.md §3 ("Reference features", "Main UNet block", "Camera ids") is the
// recipe. Latents are NHWC; multiview batches are (B·N, h, w, C) with row = b·N + n.

#include <cstdint>
#include <map>
#include <memory>
#include <span>
#include <string>
#include <utility>
#include <vector>

#include "models/core/device.h"
#include "models/core/dtype.h"
#include "models/core/tensor.h"
#include "models/paint/unet.h"

namespace gen3d::models {

class SafetensorsFile;

// The reference UNet's post-norm1 hidden states of every transformer block.
struct RefFeatures {
  // down_i_j_k / mid_j_k / up_i_j_k -> (B, N_ref·L, C), on the reference UNet's device
  std::map<std::string, Tensor> layers;
  std::int64_t batch = 0;  // B
  int num_ref = 0;         // N_ref
};

class WeightMap;

// What every denoising step of one generation shares, projected once: per transformer site the
// keys and values of the reference features (attn_refview) and of the prompt (attn2). The main
// UNet's forward then projects only its own queries and the multiview tokens. Bit-identical to
// projecting them every step (the projections run with the same row counts).
// The projections live on the UNet's device.
struct MultiviewConditions {
  Tensor text;                   // (B or 1, T, D), on the host
  std::vector<float> ref_scale;  // (B)
  std::vector<Tensor> text_kv;   // [site] (text rows · T, 2·C)
  std::vector<std::vector<Tensor>>
      ref_kv;  // [site][b] (N_ref·L, 2·C); empty where ref_scale[b] is 0
};

// Runs the reference UNet `dual` at timestep 0 on ref_latents (B·N_ref, h, w, C) with `text` and
// records every transformer block's norm1 output, "(b n) l c -> b (n l) c" (the same memory), by
// layer name, on `dual`'s device. With a probe the output layers run too and "conv_out" is probed.
RefFeatures record_reference_features(const UNet2DCondition& dual, const Tensor& ref_latents,
                                      int num_ref, const Tensor& text, const UNetProbe& probe = {});

// The UNet2.5D checkpoints (2.0's and 2.1's) hold "unet." and "unet_dual." state dicts: throws
// one ModelError "<file>: <what> weights do not match the config (N problems):" listing every
// missing, mis-shaped or unclaimed tensor of the two maps and every tensor under neither prefix.
void check_unet25d_weights(const SafetensorsFile& file, const WeightMap& main,
                           const WeightMap& dual, const std::string& what);

class MultiviewUNet {
 public:
  static constexpr int kMaxNumRefImage = 5;  // camera ids are offset by this
  static constexpr int kCameraEmbeddings = 49;

  // The UNet2p5DConditionModel state_dict: "unet." (main UNet, 12-channel conv_in,
  // class_embedding (49, time_embed_dim), learned_text_clip_gen / _ref (1, T, cross_attention_dim),
  // blocks wrapped as "...transformer_blocks.k.transformer.*" next to "...attn_multiview.*" and
  // "...attn_refview.*") and "unet_dual." (reference UNet, same wrapping). `base` is the diffusers
  // unet/config.json (in_channels of the reference UNet; the main UNet reads 3 · in_channels).
  // Strict: every missing, mis-shaped or unexpected tensor is listed in one ModelError.
  // `storage`: in-memory dtype of the Linear and convolution weights (kBF16: bf16 precision).
  // `device`: where both UNets and the wrapper's attention branches run (UNetLoadOptions::device:
  // bf16 on a device, int8 refused); inputs and outputs stay host tensors.
  static std::unique_ptr<MultiviewUNet> load(const UNetConfig& base,
                                             std::shared_ptr<const SafetensorsFile> file,
                                             WeightStorage storage = WeightStorage::kF32,
                                             Device device = Device::kCpu);
  static std::unique_ptr<MultiviewUNet> load(const UNetConfig& base, const std::string& path,
                                             WeightStorage storage = WeightStorage::kF32,
                                             Device device = Device::kCpu);
  // A diffusers-style folder: dir/config.json and the state_dict in
  // diffusion_pytorch_model.safetensors, .fp16.safetensors or .bin (the official
  // hunyuan3d-paint-v2-0/unet folder ships a torch.save .bin, read natively).
  static std::unique_ptr<MultiviewUNet> load_folder(const std::string& dir,
                                                    WeightStorage storage = WeightStorage::kF32,
                                                    Device device = Device::kCpu);
  // Random weights of the right shapes (benchmarks): uniform in ±0.02 (norm scales 1, biases 0).
  static std::unique_ptr<MultiviewUNet> random(const UNetConfig& base, std::uint64_t seed,
                                               std::int64_t text_tokens = 77,
                                               WeightStorage storage = WeightStorage::kF32,
                                               Device device = Device::kCpu);
  // The tensors load() expects ("unet." / "unet_dual." prefixed), with shapes.
  static std::vector<std::pair<std::string, Shape>> expected_tensors(const UNetConfig& base,
                                                                     std::int64_t text_tokens = 77);

  const UNetConfig& config() const { return base_; }
  Device device() const { return main_.device(); }  // where forward passes run
  std::int64_t num_parameters() const;
  const UNet2DCondition& main_unet() const { return main_; }
  const UNet2DCondition& reference_unet() const { return dual_; }
  const Tensor& learned_text_gen() const { return text_gen_; }  // (1, T, cross_attention_dim)
  const Tensor& learned_text_ref() const { return text_ref_; }
  const Tensor& class_embedding() const { return class_emb_; }  // (49, time_embed_dim)

  // Runs the reference UNet at timestep 0 on ref_latents (B·N_ref, h, w, in_channels) with text
  // (B or 1, T, D) (normally learned_text_ref()) and records every block's post-norm1 states.
  RefFeatures reference_features(const Tensor& ref_latents, int num_ref, const Tensor& text) const;

  // latents / normals / positions (B·N, h, w, in_channels), row = b·N + n; text (B or 1, T, D);
  // camera_ids (B·N) official ids (before the +5 offset); ref_scale (B) (0 skips the reference
  // branch of that item; ref may then lack it) -> noise prediction (B·N, h, w, out_channels).
  Tensor forward(const Tensor& latents, const Tensor& normals, const Tensor& positions,
                 float timestep, const Tensor& text, std::span<const int> camera_ids,
                 const RefFeatures& ref, std::span<const float> ref_scale, int num_views,
                 const UNetProbe& probe = {}) const;

  // The per-generation constants of forward(text, ref, ref_scale) (see MultiviewConditions).
  MultiviewConditions conditions(const Tensor& text, const RefFeatures& ref,
                                 std::span<const float> ref_scale) const;

  // forward() on precomputed conditions (batch B = cond.ref_scale.size()). With a feature cache
  // (DeepCache, UNetFeatureCache): a full pass stores the deep features, and with reuse_deep the
  // pass runs only the shallow layers on them (an approximation: the deep features are those of
  // an earlier step).
  Tensor forward(const Tensor& latents, const Tensor& normals, const Tensor& positions,
                 float timestep, std::span<const int> camera_ids, const MultiviewConditions& cond,
                 int num_views, UNetFeatureCache* cache = nullptr, bool reuse_deep = false) const;

  // Official pipelines.py: ((azim // 30 + 9) % 12) // D[elev] + O[elev] for elev in
  // {−20, 0, 20, −90, 90}; throws ModelError for other elevations.
  static int camera_id(int azim, int elev);

 private:
  MultiviewUNet(UNetConfig base, UNet2DCondition main, UNet2DCondition dual);
  struct Builder;

  // The checks and the inputs of both forwards: [noisy | normal | position] (B·N, h, w, 3·C)
  // and the camera embeddings (B·N, E); returns B.
  std::int64_t prepare(const Tensor& latents, const Tensor& normals, const Tensor& positions,
                       const Tensor& text, std::span<const int> camera_ids, std::size_t ref_scales,
                       int num_views, Tensor& x, Tensor& class_emb) const;
  // The reference features of every site for batch B, checked, on the UNet's device (a view
  // where they are there already); empty where unused.
  std::vector<Tensor> reference_layers(const RefFeatures& ref, std::int64_t B, bool uses_ref) const;

  UNetConfig base_;
  UNet2DCondition main_;
  UNet2DCondition dual_;
  Tensor class_emb_, text_gen_, text_ref_;
  std::vector<AttentionLayer> attn_multiview_;  // per main transformer site
  std::vector<AttentionLayer> attn_refview_;
  std::int64_t extra_params_ = 0;
};

}  // namespace gen3d::models
