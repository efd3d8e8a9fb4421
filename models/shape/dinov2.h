#pragma once
// DINOv2 image encoder (Hugging Face Dinov2Model, inference) and the Hunyuan3D-2 image
// conditioner around it (DinoImageEncoder: transform + encoder + CLS handling; the unconditional
// context is zeros). float32 compute; golden/dinov2/README.md §7-9 is the recipe.
//
// The module tree mirrors the Hugging Face state_dict ("embeddings.patch_embeddings.projection",
// "encoder.layer.{i}.attention.attention.query", "encoder.layer.{i}.mlp.weights_in", ...). The
// loader takes a standalone Dinov2Model checkpoint or the conditioner part of a combined pipeline
// checkpoint (prefix "conditioner.main_image_encoder.model."), and is strict (WeightMap).

#include <cstdint>
#include <functional>
#include <memory>
#include <span>
#include <string>
#include <string_view>
#include <utility>
#include <vector>

#include "models/core/device.h"
#include "models/core/dtype.h"  // WeightStorage
#include "models/core/tensor.h"

namespace gen3d::models {

class SafetensorsFile;
class WeightMap;

// Dinov2Config, keyed like transformers' configuration_dinov2.py. Defaults: dinov2-giant as used
// by Hunyuan3D-2.
struct Dinov2Config {
  int hidden_size = 1536;        // C
  int num_hidden_layers = 40;    // transformer layers
  int num_attention_heads = 24;  // head dim = C / heads
  int patch_size = 14;           // P (conv kernel = stride)
  int num_channels = 3;          // input channels
  int image_size = 518;          // sets the stored position grid: (image_size / P)^2 + 1 rows
  double mlp_ratio = 4.0;        // MLP hidden = int(C * mlp_ratio)
  double layer_norm_eps = 1e-6;  // every LayerNorm
  bool qkv_bias = true;          // bias on query / key / value
  bool use_swiglu_ffn = true;    // SwiGLU FFN (weights_in / weights_out) instead of fc1 / fc2
  std::string hidden_act =
      "gelu";  // MLP activation: gelu (exact erf), gelu_new / gelu_pytorch_tanh, silu
  double layerscale_value = 1.0;  // init value only (the weights carry lambda1)

  int head_dim() const { return hidden_size / num_attention_heads; }
  int mlp_hidden() const { return static_cast<int>(hidden_size * mlp_ratio); }
  // Dinov2SwiGLUFFN width: (int(mlp_hidden * 2 / 3) + 7) // 8 * 8.
  int swiglu_hidden() const;
  int position_grid() const { return image_size / patch_size; }  // M (stored grid is M x M)

  void validate() const;  // throws ModelError describing every inconsistent value
  // A Dinov2Config dict. Known keys are read; the remaining transformers keys (dropouts,
  // initializer_range, model_type, torch_dtype, ...) are accepted and ignored.
  static Dinov2Config from_json(std::string_view json_text);
  static Dinov2Config giant() { return {}; }
};

// DinoImageEncoder kwargs: the encoder config, the transform size and the CLS switch; for
// DinoImageEncoderMV (Hunyuan3D-2mv) also the view count of its view embedding.
struct ImageEncoderConfig {
  Dinov2Config model;
  int image_size = 518;       // transform size (Resize + CenterCrop); sets the token count
  bool use_cls_token = true;  // keep token 0 of last_hidden_state
  bool multiview = false;     // type DinoImageEncoderMV: views in, one sequence out
  int view_num = 4;           // DinoImageEncoderMV view_num: rows of the view embedding

  // Context tokens of one image (per view with multiview): (image_size / P)^2 (+1 with CLS).
  int tokens() const;
  int width() const { return model.hidden_size; }
  void validate() const;
  // Accepts the official conditioner block ({"target", "params": {"main_image_encoder":
  // {"type", "kwargs"}}}; type DinoImageEncoder or DinoImageEncoderMV), a {"type", "kwargs"} block,
  // the kwargs object ({"config", "image_size", "use_cls_token"}) or a bare Dinov2Config dict
  // (image_size = config's).
  static ImageEncoderConfig from_json(std::string_view json_text);
  // Reads a JSON file; `section` is a '/'-separated path of object keys ("" = the whole file),
  // e.g. "conditioner" or "models/a/conditioner_config".
  static ImageEncoderConfig from_file(const std::string& path, std::string_view section = "");
};

struct Dinov2Options {
  WeightStorage storage = WeightStorage::kF32;  // in-memory dtype of Linear / patch weights
  // Where forward passes run (inputs and outputs stay on the CPU). On a device the layers run in
  // bf16 with the weights uploaded there once; per-layer traces are taken on the CPU only.
  // int8 storage (the qkv, output and MLP products W8A8) runs on the CPU only.
  Device device = Device::kCpu;
};

class Dinov2Model {
 public:
  using Options = Dinov2Options;
  // Called with golden-style names ("emb.patch", "emb.pos", "hidden_states.k",
  // "layer.{i}.norm1" ... "layer.{i}.ls2", "last_hidden_state") and the value at that point
  // (a temporary: copy what you keep). Per-layer traces cost extra copies (attention probs are
  // only computed for it).
  using TraceFn = std::function<void(const std::string& name, const Tensor& value)>;

  // Standalone Dinov2Model checkpoint or a combined pipeline checkpoint (conditioner prefix).
  static Dinov2Model load(const Dinov2Config& config, const std::string& path, Options opt = {});
  static Dinov2Model load(const Dinov2Config& config, std::shared_ptr<const SafetensorsFile> file,
                          Options opt = {});
  // Claims its tensors from `weights` (names relative to the model) and calls finish().
  static Dinov2Model load(const Dinov2Config& config, WeightMap& weights, Options opt = {});
  // Seeded random weights (benchmarks, tests): weights ~ U(+-sqrt(3 / fan_in)), small biases,
  // LayerNorm weights around 1, layer scales in [0.1, 1].
  static Dinov2Model random(const Dinov2Config& config, std::uint64_t seed, Options opt = {});
  // The tensors load() claims for `config` (names relative to the model), with shapes.
  static std::vector<std::pair<std::string, Shape>> expected_tensors(const Dinov2Config& config);

  Dinov2Model(Dinov2Model&&) noexcept;
  Dinov2Model& operator=(Dinov2Model&&) noexcept;
  ~Dinov2Model();

  const Dinov2Config& config() const;
  std::int64_t num_parameters() const;
  std::size_t weight_bytes() const;

  // pixel_values [B, num_channels, H, W] (H, W >= P; trailing pixels beyond a multiple of P are
  // ignored, like the strided conv) -> last_hidden_state [B, 1 + (H/P)(W/P), C].
  Tensor forward(const Tensor& pixel_values, const TraceFn* trace = nullptr) const;

  // Position embeddings for a gh x gw grid [1, 1 + gh gw, C]: the stored table when it has
  // gh * gw patch rows and the input is square, else bicubic (A = -0.75, align_corners = False,
  // explicit size) resampling of the stored M x M grid; the CLS row is kept.
  Tensor position_embeddings(int gh, int gw, bool square_input) const;

 private:
  struct Impl;
  explicit Dinov2Model(std::unique_ptr<Impl> impl);
  std::unique_ptr<Impl> impl_;
};

// The conditioner: SingleImageEncoder(main_image_encoder = DinoImageEncoder).
class DinoImageEncoder {
 public:
  DinoImageEncoder(ImageEncoderConfig config, std::shared_ptr<const Dinov2Model> model);

  static DinoImageEncoder load(const ImageEncoderConfig& config, const std::string& path,
                               Dinov2Options opt = {});
  const ImageEncoderConfig& config() const { return config_; }
  const Dinov2Model& model() const { return *model_; }

  // images [B, 3, S, S] in [-1, 1] (ImageProcessorV2 output) -> context [B, tokens(), C].
  // A multiview encoder refuses (it takes views: encode_views).
  Tensor encode(const Tensor& images, const Dinov2Model::TraceFn* trace = nullptr) const;
  // DinoImageEncoderMV: views [V, 3, S, S] in [-1, 1], one per index of view_idxs (increasing,
  // front 0, left 1, back 2, right 3: models/shape/multiview.h) -> context [1, V tokens(), C],
  // each view's tokens plus its view embedding row, the views one after the other. `hidden`, when
  // given, receives the encoder's output before the embedding [V, tokens(), C]. A single-image
  // encoder refuses.
  Tensor encode_views(const Tensor& views, std::span<const int> view_idxs,
                      Tensor* hidden = nullptr) const;
  // The unconditional context for classifier-free guidance: zeros [B, tokens(), C].
  Tensor unconditional(std::int64_t batch) const;

 private:
  ImageEncoderConfig config_;
  std::shared_ptr<const Dinov2Model> model_;
  Tensor view_embed_;  // [view_num, C] (multiview only)
};

// Process-wide cache of loaded conditioners keyed by (weights path, config path, section,
// storage): heavy weights load once and are shared read-only by every node and run.
std::shared_ptr<const DinoImageEncoder> shared_image_encoder(const std::string& weights,
                                                             const std::string& config,
                                                             const std::string& section,
                                                             WeightStorage storage,
                                                             Device device = Device::kCpu);

}  // namespace gen3d::models
