#pragma once
// Stable-Diffusion-2-style UNet2DConditionModel (diffusers v0.32.2 semantics), built from the
// diffusers unet/config.json and the diffusers state_dict names; float32 compute, NHWC feature
// maps (golden/texmodels/README.md §1 is the recipe). The forward pass is written against
// nn::DeviceOps: it runs on the device chosen at load (UNetLoadOptions::device), the CPU by
// default.
//
// Feature maps are (B, H, W, C) so a map is also a (B·H·W, C) token matrix: 1×1 convolutions,
// Linear projections and attention read it in place. Transformer blocks expose a hook after
// attn1's residual so that the UNet2.5D wrapper (models/paint/mvunet.h) can record the block
// inputs of a reference pass and add its reference / multiview attention branches; a block
// function may instead run a whole block on the block's layers (the 2.1 PBR UNet2.5D,
// models/paint/pbr_unet.h, replaces attn1 per material and adds branches after attn2).

#include <cstdint>
#include <functional>
#include <memory>
#include <span>
#include <string>
#include <utility>
#include <vector>

#include "models/core/device.h"
#include "models/core/dtype.h"
#include "models/core/tensor.h"
#include "models/nn/layers.h"

namespace gen3d::models {

class SafetensorsFile;
class WeightMap;
namespace nn {
class DeviceOps;
}

// The diffusers UNet2DConditionModel config keys this runtime implements. Keys that change the
// network in ways not implemented here (class / addition embeddings, dual cross-attention,
// conv-projection transformers, ...) are rejected by parse() with a ModelError naming the key;
// keys without effect on inference (_class_name, sample_size, dropout, ...) are ignored.
struct UNetConfig {
  int in_channels = 4;
  int out_channels = 4;
  std::vector<int> block_out_channels{320, 640, 1280, 1280};
  std::vector<std::string> down_block_types{"CrossAttnDownBlock2D", "CrossAttnDownBlock2D",
                                            "CrossAttnDownBlock2D", "DownBlock2D"};
  std::vector<std::string> up_block_types{"UpBlock2D", "CrossAttnUpBlock2D", "CrossAttnUpBlock2D",
                                          "CrossAttnUpBlock2D"};
  int layers_per_block = 2;
  // Number of heads per level (diffusers' SD2 naming); a scalar in JSON applies to every level.
  // The mid block uses the last entry.
  std::vector<int> attention_head_dim{5, 10, 20, 20};
  int cross_attention_dim = 1024;
  int norm_num_groups = 32;
  double norm_eps = 1e-5;
  bool use_linear_projection = true;  // false (conv proj_in/proj_out) is not implemented
  bool flip_sin_to_cos = true;
  double freq_shift = 0.0;
  // Transformer blocks per attention, per level (scalar in JSON = every level). Up blocks use the
  // reversed list, the mid block the last entry.
  std::vector<int> transformer_layers_per_block{1, 1, 1, 1};
  bool center_input_sample = false;  // sample = 2·sample − 1 first
  double mid_block_scale_factor = 1.0;
  int time_embedding_dim = 0;  // 0: 4 · block_out_channels[0]
  int conv_in_kernel = 3;      // odd, padding (k − 1) / 2
  int conv_out_kernel = 3;
  bool upcast_attention = false;  // accepted: attention is float32 here anyway

  int levels() const { return static_cast<int>(block_out_channels.size()); }
  int time_embed_dim() const {
    return time_embedding_dim > 0 ? time_embedding_dim : 4 * block_out_channels.at(0);
  }

  // Throws ModelError describing every inconsistent value.
  void validate() const;
  // A diffusers unet/config.json text; `label` names it in errors.
  static UNetConfig parse(const std::string& json_text, const std::string& label);
  static UNetConfig read(const std::string& path);
};

// Called with "time_emb", "class_emb", "conv_in", "down_blocks.i", "mid_block", "up_blocks.i"
// and the value at that point: maps (B, H, W, C), embeddings (B, C). The tensor is a temporary.
using UNetProbe = std::function<void(const std::string& name, const Tensor& t)>;

// Rotary position tables for a self-attention (q_len == kv_len): cos and sin, each (batch, len,
// head_dim) with the pair layout of the 2.1 paint UNet's RotaryEmbedding.apply_rotary_emb:
// elements (2i, 2i+1) of every head rotate together, y[2i] = x[2i]·cos[2i] − x[2i+1]·sin[2i],
// y[2i+1] = x[2i+1]·cos[2i+1] + x[2i]·sin[2i+1]. Query item b reads table item
// b / (query batch / batch); the same rotation applies to every head and to q and k.
struct RotaryTables {
  const float* cos = nullptr;
  const float* sin = nullptr;
  std::int64_t batch = 1;
  std::int64_t len = 0;
  std::int64_t head_dim = 0;
};

// A diffusers Attention (to_q / to_k / to_v without bias, to_out.0 with bias), multi-head with
// head_dim = dim / heads. The calls without a DeviceOps run on the CPU; with one, every pointer
// is on that device, rotary tables included.
class AttentionLayer {
 public:
  AttentionLayer() = default;
  // `prefix` e.g. "down_blocks.0.attentions.0.transformer_blocks.0.attn1". `suffix` follows the
  // projection names: "_mr" reads to_q_mr, to_k_mr, to_v_mr and to_out_mr.0 (the 2.1 paint
  // UNet's per-material projections).
  static AttentionLayer load(nn::ParamSource& params, const std::string& prefix, std::int64_t dim,
                             std::int64_t kv_dim, int heads, const std::string& suffix = "");

  // resid (batch·q_len, dim) += scale · Attention(x, ctx): queries from x (batch, q_len, dim),
  // keys / values from ctx (ctx_batch, kv_len, kv_dim); query item b attends to context item
  // b / (batch / ctx_batch) (ctx_batch divides batch), so a context shared by several query
  // items is projected once. ctx may equal x (self-attention). `rope` (self-attention only:
  // ctx == x) rotates q and k after the projections.
  void forward_add(float* resid, float scale, const float* x, std::int64_t batch,
                   std::int64_t q_len, const float* ctx, std::int64_t ctx_batch,
                   std::int64_t kv_len, const RotaryTables* rope = nullptr) const;
  void forward_add(const nn::DeviceOps& ops, float* resid, float scale, const float* x,
                   std::int64_t batch, std::int64_t q_len, const float* ctx, std::int64_t ctx_batch,
                   std::int64_t kv_len, const RotaryTables* rope = nullptr) const;

  // The keys and values of a context (rows, kv_dim) -> (rows, 2·dim), [to_k | to_v] per row: a
  // context that does not change between calls (a prompt, reference features) is projected once.
  Tensor project_kv(const float* ctx, std::int64_t rows) const;
  Tensor project_kv(const nn::DeviceOps& ops, const float* ctx, std::int64_t rows) const;
  // forward_add with the context already projected: kv (ctx_batch·kv_len, 2·dim) from
  // project_kv. Bit-identical to forward_add on the same context when kv was projected with the
  // same row count as forward_add would (ctx_batch·kv_len rows in one call).
  void forward_add_kv(float* resid, float scale, const float* x, std::int64_t batch,
                      std::int64_t q_len, const float* kv, std::int64_t ctx_batch,
                      std::int64_t kv_len) const;
  void forward_add_kv(const nn::DeviceOps& ops, float* resid, float scale, const float* x,
                      std::int64_t batch, std::int64_t q_len, const float* kv,
                      std::int64_t ctx_batch, std::int64_t kv_len) const;

  std::int64_t dim() const { return dim_; }
  int heads() const { return heads_; }

 private:
  // Attention of the projected queries q (batch·q_len, dim; reused as scratch) over kv, to_out,
  // then resid += scale · out.
  void attend_add(const nn::DeviceOps& ops, float* resid, float scale, Tensor& q, const float* kv,
                  std::int64_t batch, std::int64_t q_len, std::int64_t ctx_batch,
                  std::int64_t kv_len) const;

  std::int64_t dim_ = 0, kv_dim_ = 0;
  int heads_ = 1;
  nn::Linear q_;    // to_q (dim -> dim)
  nn::Linear kv_;   // to_k rows then to_v rows (kv_dim -> 2·dim)
  nn::Linear out_;  // to_out.0 (dim -> dim, with bias)
};

// One BasicTransformerBlock of the network, in forward order.
struct TransformerSite {
  std::string name;  // UNet2.5D layer name: down_i_j_k / mid_j_k / up_i_j_k
  std::string path;  // state_dict path: down_blocks.i.attentions.j.transformer_blocks.k
  std::int64_t channels = 0;
  int heads = 1;
};

// Called inside transformer block `site` right after attn1's residual: h = norm1(x) (the input
// of attn1), x = the block's running state; both (batch, L, C) token matrices of the block's
// batch, on the UNet's device. The hook may add to x in place.
using TransformerHook = std::function<void(int site, const Tensor& h, Tensor& x)>;

// The layers of one BasicTransformerBlock (diffusers attention.py), for a wrapper that runs the
// block itself (TransformerBlockFn).
struct TransformerBlockLayers {
  nn::LayerNorm norm1, norm2, norm3;
  AttentionLayer attn1, attn2;
  nn::Linear ff0;  // ff.net.0.proj: C -> 8C, [value | gate] of the GEGLU
  nn::Linear ff2;  // ff.net.2: 4C -> C

  // out (rows, C) = ff(h (rows, C)), in row chunks; out may equal h. With `ops`, out and h are
  // on its device.
  void feed_forward(float* out, const float* h, std::int64_t rows) const;
  void feed_forward(const nn::DeviceOps& ops, float* out, const float* h, std::int64_t rows) const;
};

// Replaces the body of transformer block `site`: x (batch, L, C) is the block's running state,
// updated in place (the UNet applies proj_in before and proj_out after, as always), on the
// UNet's device.
using TransformerBlockFn =
    std::function<void(int site, const TransformerBlockLayers& layers, Tensor& x)>;

struct UNetLoadOptions {
  // In-memory dtype of the Linear and convolution weights (kBF16: the bf16 precision mode).
  WeightStorage storage = WeightStorage::kF32;
  // Inserted after "transformer_blocks.k." in the names of the block's own tensors: the
  // UNet2.5D wraps every block and its state_dict reads "...transformer_blocks.k.transformer.
  // attn1...".
  std::string block_infix;
  // Where forward passes run. On a device the layers run in bf16 (weights uploaded there once,
  // on first use; int8 storage and mid_block_scale_factor != 1 are refused), inputs and outputs
  // are host tensors, and transformer hooks and block functions get tensors on the device.
  Device device = Device::kCpu;
};

// DeepCache (Ma et al., "DeepCache: Accelerating Diffusion Models for Free", CVPR 2024): the
// deep part of the UNet changes slowly between denoising steps, so a full pass stores the up
// path's state where it re-enters the shallow layers and the next passes reuse it, running only
// conv_in, the first `shallow_layers` layers (resnet + attention) of the first down block, the
// matching last layers of the last up block, and the output layers. shallow_layers = 1 is the
// shallowest branch (DeepCache's default); layers_per_block runs the whole first level.
struct UNetFeatureCache {
  int shallow_layers = 1;  // 1 .. layers_per_block
  Tensor deep;             // (B, H, W, C): stored by the last full pass (C of level 0, or of
                           // level 1 when shallow_layers = layers_per_block), on the UNet's
                           // device
};

// Everything forward() can be asked for beyond the plain call.
struct UNetCall {
  const Tensor* class_emb = nullptr;          // (B, time_embed_dim), added to the time embedding
  const TransformerHook* hook = nullptr;      // see TransformerHook
  const TransformerBlockFn* block = nullptr;  // see TransformerBlockFn (then hook is not called)
  // Per transformer site, attn2's keys and values of `text` (text_kv(text)): the prompt is
  // projected once per generation instead of once per call. Bit-identical results. Host tensors
  // on a device UNet are copied there at each call.
  const std::vector<Tensor>* text_kv = nullptr;
  // With a cache: a full pass stores the deep features; with reuse_deep the pass runs the shallow
  // layers only on cache->deep (which must come from a pass of the same batch and size).
  UNetFeatureCache* cache = nullptr;
  bool reuse_deep = false;
  bool skip_output = false;  // stop after the last up block; returns empty
  UNetProbe probe;
};

class UNet2DCondition {
 public:
  // Claims the diffusers state_dict names from `params` (relative to the UNet).
  static UNet2DCondition load(const UNetConfig& config, nn::ParamSource& params,
                              const UNetLoadOptions& opt = {});
  // Same from a WeightMap; finish() is left to the caller (a wrapper may claim more tensors).
  static UNet2DCondition load(const UNetConfig& config, WeightMap& weights,
                              const UNetLoadOptions& opt = {});
  // A standalone diffusers UNet checkpoint: every tensor must be claimed (strict).
  static UNet2DCondition load(const UNetConfig& config, std::shared_ptr<const SafetensorsFile> file,
                              WeightStorage storage = WeightStorage::kF32,
                              Device device = Device::kCpu);
  // The tensors load() claims, in order, with their shapes.
  static std::vector<std::pair<std::string, Shape>> expected_tensors(
      const UNetConfig& config, const UNetLoadOptions& opt = {});

  UNet2DCondition(UNet2DCondition&&) noexcept;
  UNet2DCondition& operator=(UNet2DCondition&&) noexcept;
  ~UNet2DCondition();

  const UNetConfig& config() const;
  std::int64_t num_parameters() const;
  const std::vector<TransformerSite>& transformer_sites() const;
  Device device() const;  // where forward passes run

  // sample (B, H, W, in_channels) NHWC, timesteps (B) float, text (Bt, T, cross_attention_dim)
  // with Bt dividing B (sample item b reads text item b / (B / Bt)) -> (B, H, W, out_channels).
  // H and W must be divisible by 2^(levels − 1). The inputs may be on the host or on the UNet's
  // device; the output and the probes' tensors are on the host.
  Tensor forward(const Tensor& sample, std::span<const float> timesteps, const Tensor& text,
                 const UNetProbe& probe = {}) const;
  Tensor forward(const Tensor& sample, std::span<const float> timesteps, const Tensor& text,
                 const UNetCall& call) const;

  // The sinusoidal projection + time_embedding MLP: (B) -> (B, time_embed_dim), on the host.
  Tensor time_embedding(std::span<const float> timesteps) const;

  // attn2's keys and values of text (Bt, T, cross_attention_dim) for every transformer site, in
  // site order: (Bt·T, 2·channels) each (UNetCall::text_kv), on the UNet's device.
  std::vector<Tensor> text_kv(const Tensor& text) const;

 private:
  struct Impl;
  explicit UNet2DCondition(std::unique_ptr<Impl> impl);
  std::unique_ptr<Impl> impl_;
};

}  // namespace gen3d::models
