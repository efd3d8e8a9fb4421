#pragma once
// ShapeVAE decoder of Hunyuan3D-2 (latents -> decoded latents -> occupancy logits), float32
// compute. Built from a ShapeVAEConfig (official config keys) and a checkpoint with the official
// state_dict names (standalone VAE file, or the "vae." part of a combined pipeline checkpoint);
// the loader is strict (WeightMap). Recipe: golden/README.md "ShapeVAE decode" and
// specs/volume-decoding.md section 2.

#include <cstddef>
#include <cstdint>
#include <functional>
#include <memory>
#include <string>
#include <string_view>
#include <utility>
#include <vector>

#include "models/core/device.h"
#include "models/core/dtype.h"
#include "models/core/tensor.h"
#include "models/shape/field.h"

namespace gen3d::models {

class SafetensorsFile;
class WeightMap;

struct ShapeVAEConfig {
  int num_latents = 3072;                    // N latent tokens
  int embed_dim = 64;                        // latent channels C
  int num_freqs = 8;                         // Fourier frequencies F (2^0 .. 2^(F-1))
  bool include_pi = false;                   // frequencies times pi
  int heads = 16;                            // attention heads (head dim = width / heads)
  int width = 1024;                          // W
  int num_decoder_layers = 16;               // self-attention blocks
  bool qkv_bias = false;                     // bias on c_qkv / c_q / c_kv
  bool qk_norm = true;                       // per-head LayerNorm on q and k
  double scale_factor = 0.9990943042622529;  // decode multiplies by 1 / scale_factor
  int geo_decoder_mlp_expand_ratio = 4;      // geometry-decoder MLP hidden = ratio * Wg
  int geo_decoder_downsample_ratio = 1;      // r: the geometry decoder runs at width Wg = W / r
                                             // with heads / r heads, behind latents_proj (W -> Wg)
  bool geo_decoder_ln_post = true;           // final LayerNorm (eps 1e-5); off forces qk_norm off
                                             // in the geometry decoder (reference coupling)

  int head_dim() const { return width / heads; }
  int geo_width() const { return width / geo_decoder_downsample_ratio; }  // Wg
  int geo_heads() const { return heads / geo_decoder_downsample_ratio; }  // same head dim
  int fourier_dim() const { return 3 * (2 * num_freqs + 1); }
  // Throws ModelError describing every inconsistent value.
  void validate() const;
  // `{"target": ..., "params": {...}}` or a bare params object; unknown keys are errors (the
  // encoder-only keys of official configs are accepted and ignored).
  static ShapeVAEConfig from_json(std::string_view json_text);
  // Reads `section` (e.g. "vae") of a JSON config file such as golden/config.json.
  static ShapeVAEConfig from_file(const std::string& path, std::string_view section = "vae");
  // This config with the geometry decoder's sizes as the checkpoint stores them (tensor names
  // relative to the VAE): the downsample ratio from geo_decoder.query_proj's width, the MLP expand
  // ratio from its c_fc, ln_post from its presence. Missing or inconsistent tensors leave a value
  // as configured (the strict loader then names them). Lighter decoders, such as the one of the
  // FlashVDM turbo VAEs, differ from the full one only there.
  ShapeVAEConfig with_geo_decoder_of(const WeightMap& weights) const;
};

class ShapeVAE {
 public:
  // Called with golden-style names ("act.post_kl", "trace.geo_decoder.ln_post.out", ...) and the
  // value at that point (a temporary: copy what you keep).
  using TraceFn = std::function<void(const std::string& name, const Tensor& value)>;

  // `storage` is the in-memory dtype of the Linear weights (kBF16: the bf16 precision mode).
  static ShapeVAE load(const ShapeVAEConfig& config, const std::string& path,
                       WeightStorage storage = WeightStorage::kF32);
  static ShapeVAE load(const ShapeVAEConfig& config, std::shared_ptr<const SafetensorsFile> file,
                       WeightStorage storage = WeightStorage::kF32);
  // Claims its tensors from `weights` and calls weights.finish("ShapeVAE").
  static ShapeVAE load(const ShapeVAEConfig& config, WeightMap& weights,
                       WeightStorage storage = WeightStorage::kF32);
  // Seeded random weights (official names and shapes, golden-like init). random() loads them.
  static std::vector<std::pair<std::string, Tensor>> random_weights(const ShapeVAEConfig& config,
                                                                    std::uint64_t seed);
  static ShapeVAE random(const ShapeVAEConfig& config, std::uint64_t seed,
                         WeightStorage storage = WeightStorage::kF32);
  // The tensors load() claims (names relative to the VAE), with their shapes; nothing is read.
  static std::vector<std::pair<std::string, Shape>> expected_tensors(const ShapeVAEConfig& config);

  ShapeVAE(ShapeVAE&&) noexcept;
  ShapeVAE& operator=(ShapeVAE&&) noexcept;
  ~ShapeVAE();

  const ShapeVAEConfig& config() const;
  std::int64_t num_parameters() const;
  // Bytes of the weights as kept (float32, bf16, or int8 with scales for the int8 layers).
  std::size_t weight_bytes() const;

  // Where decode(), query() and geometry fields made from now on run (inputs and outputs stay on
  // the CPU). On a device the layers run in bf16, with the weights uploaded there once; traces
  // are taken on the CPU only, and geometry fields evaluate every key (no FlashVDM selection).
  // int8 weights are a CPU form: a VAE loaded with WeightStorage::kInt8 refuses other devices.
  void set_device(Device device);
  Device device() const { return device_; }

  // latents [B, N, C] in the sampler's scaled space -> decoded latents [B, N, W]
  // (x (1/scale_factor), post_kl, self-attention blocks; no final LayerNorm).
  Tensor decode(const Tensor& latents, const TraceFn* trace = nullptr) const;

  // Geometry decoder at shared query points: decoded [B, N, W], points [P, 3] -> logits [B, P, 1].
  Tensor query(const Tensor& decoded, const Tensor& points, const TraceFn* trace = nullptr) const;

  // The geometry decoder of batch item b as a Field (keys/values computed once, here). The field
  // shares the weights (safe to outlive this object) and supports FlashVDM key selection.
  std::shared_ptr<const Field> geometry_field(const Tensor& decoded, std::int64_t b = 0) const;

  // Fourier embedding of points [P, 3] -> [P, 3 (2F + 1)] (input, sines, cosines).
  Tensor fourier(const Tensor& points) const;

  struct Impl;

 private:
  explicit ShapeVAE(std::shared_ptr<const Impl> impl);
  std::shared_ptr<const Impl> impl_;
  Device device_ = Device::kCpu;
};

// FlashVDM's key count for T latent tokens: 1024 if T = 3072, 256 if T = 512, else T / 3.
std::int64_t flashvdm_top_k(std::int64_t num_keys);

}  // namespace gen3d::models
