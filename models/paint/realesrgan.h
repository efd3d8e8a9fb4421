#pragma once
// Real-ESRGAN's x4 super-resolution network (BasicSR v1.4.2 basicsr/archs/rrdbnet_arch.py
// `RRDBNet`, scale 4) and the pre/post-processing of Real-ESRGAN v0.3.0 realesrgan/utils.py
// `RealESRGANer.enhance`, as Hunyuan3D-2.1 (hy3dpaint/utils/image_super_utils.py) runs it on every
// generated view. golden/hunyuan3d-2.1/esrgan/README.md is the recipe.
//
// Network, all convolutions 3×3 / stride 1 / zero padding 1 with bias, lrelu = LeakyReLU(0.2):
//   feat = conv_first(x); trunk = feat + conv_body(body(feat)), body = num_block RRDBs;
//   RRDB(x) = rdb3(rdb2(rdb1(x))) · 0.2 + x; RDB(x) = conv5(cat[x, x1..x4]) · 0.2 + x with
//   x_k = lrelu(conv_k(cat[x, x1..x_{k-1}])) (num_grow_ch channels each);
//   out = conv_last(lrelu(conv_hr(lrelu(conv_up2(up2(lrelu(conv_up1(up2(trunk))))))))),
//   up2 = nearest ×2. No input normalisation and no output activation (out is unbounded).
// Maps are NHWC (B, H, W, C); float32 activations, weights float32 or bf16 (oneDNN convolutions).

#include <cstdint>
#include <functional>
#include <memory>
#include <string>
#include <utility>
#include <vector>

#include <nlohmann/json_fwd.hpp>

#include "image/image.h"
#include "models/core/dtype.h"
#include "models/core/tensor.h"

namespace gen3d::models {

class WeightMap;

// RRDBNet's constructor arguments (the official names). The official RealESRGAN_x4plus.pth is
// num_feat 64, num_block 23, num_grow_ch 32.
struct RrdbNetConfig {
  int num_in_ch = 3;
  int num_out_ch = 3;
  int scale = 4;  // only 4: scales 2 and 1 add a pixel_unshuffle this runtime does not implement
  int num_feat = 64;
  int num_block = 23;
  int num_grow_ch = 32;

  // Throws ModelError naming `label` and every unsupported value.
  void validate(const std::string& label = "RRDBNet config") const;
  // The RRDBNet kwargs as a JSON object ({"num_in_ch": 3, ...}); unknown keys are errors.
  static RrdbNetConfig from_json(const nlohmann::json& params, const std::string& label);
  // The sizes a checkpoint implies (conv_first, conv_last, body.i.rdb1.conv1 shapes and the
  // number of body blocks); the official .pth files carry no config. Throws ModelError naming
  // `label` when the tensors that decide it are absent or inconsistent.
  static RrdbNetConfig infer(const WeightMap& weights, const std::string& label);

  bool operator==(const RrdbNetConfig&) const = default;
};

// RealESRGANer's tiling (`tile_process`): the input is cut into tile × tile pieces (the last
// row/column smaller), each run with up to tile_pad more input pixels on every side (clipped at
// the image), and only the tile's own region of the output is kept. tile 0: one forward of the
// whole image (what Hunyuan3D-2.1 does); memory then grows with the image.
struct TileOptions {
  int tile = 0;       // input tile size in pixels; 0 = no tiling
  int tile_pad = 10;  // input pixels of context on each side of a tile (RealESRGANer's default)
};

// Intermediates of a forward for tests, each (1, h, w, c): "act.conv_first",
// "trace.body.0.rdb1.x1".."x5" (growth features after lrelu, conv5 before its 0.2 scale),
// "act.body.0.rdb1".."rdb3", "act.body.<i>", "act.conv_body", "act.trunk", "act.conv_up1"
// (before lrelu), "act.up1", "act.up2", "act.hr", "out" (the golden set's names).
using RrdbProbe = std::function<void(const std::string& name, const Tensor& nhwc)>;
using TileObserver = std::function<void(int done, int total)>;

class RrdbNet {
 public:
  // Claims every tensor `cfg` implies from `weights` (official names relative to the map:
  // "conv_first.weight", "body.0.rdb1.conv1.weight", ...); problems are recorded in the map, and
  // the caller's weights.finish() reports every missing / mis-shaped / unexpected tensor.
  // `storage`: kBF16 keeps the convolution weights in bf16 (oneDNN bf16 convolutions).
  static RrdbNet load(const RrdbNetConfig& cfg, WeightMap& weights,
                      WeightStorage storage = WeightStorage::kF32);
  // A weight file: the official .pth ({'params_ema': state_dict}, else {'params': ...}, read as
  // "params_ema.<name>") or a safetensors file with or without that prefix. The config is `cfg`
  // when given, else inferred from the tensor shapes. Strict: every tensor is claimed.
  static RrdbNet load_file(const std::string& path, WeightStorage storage = WeightStorage::kF32,
                           const RrdbNetConfig* cfg = nullptr);
  // Seeded random weights (benchmarks): uniform in ±scale.
  static RrdbNet random(const RrdbNetConfig& cfg, std::uint64_t seed,
                        WeightStorage storage = WeightStorage::kF32, float scale = 0.02f);
  // The tensors load() claims for `cfg`, with shapes.
  static std::vector<std::pair<std::string, Shape>> expected_tensors(const RrdbNetConfig& cfg);

  RrdbNet(RrdbNet&&) noexcept;
  RrdbNet& operator=(RrdbNet&&) noexcept;
  ~RrdbNet();

  const RrdbNetConfig& config() const { return cfg_; }
  std::int64_t num_parameters() const;
  bool bf16() const;
  // Input pixels on each side that influence an output pixel: a tile_pad at least this large
  // makes tiled output equal untiled output (up to float summation order).
  int receptive_radius() const;

  // The network on x (B, H, W, num_in_ch) -> (B, scale·H, scale·W, num_out_ch), one image at a
  // time.
  Tensor forward(const Tensor& x, const RrdbProbe& probe = {}) const;
  // The same through RealESRGANer's tiling (tile 0: forward()). `on_tile(done, total)` is called
  // after each tile (progress, cancellation: it may throw).
  Tensor forward_tiled(const Tensor& x, const TileOptions& tiles,
                       const TileObserver& on_tile = {}) const;

  struct Impl;

 private:
  RrdbNet(RrdbNetConfig cfg, std::unique_ptr<Impl> impl);
  RrdbNetConfig cfg_;
  std::unique_ptr<Impl> impl_;
};

// The float32 tensor RealESRGANer feeds the network for an 8-bit RGB image (H, W, 3): value/255,
// channels reversed (cv2.cvtColor(BGR2RGB) applied to an RGB array: the network sees B, G, R):
// (1, H, W, 3) NHWC.
Tensor esrgan_input(const image::ImageU8& rgb);
// The returned image for a raw network output (1, sH, sW, 3) in B, G, R order:
// u8(round_half_even(255 · clamp(value, 0, 1))) with channels reversed back to RGB.
image::ImageU8 esrgan_output(const Tensor& out_bgr);
// RealESRGANer.enhance(img) for an 8-bit RGB image as Hunyuan3D-2.1 calls it (outscale None,
// pre_pad 0), with its tiling: (scale·H, scale·W, 3). Grey and alpha images are not supported
// (ModelError).
image::ImageU8 esrgan_enhance(const RrdbNet& net, const image::ImageU8& rgb,
                              const TileOptions& tiles = {}, const TileObserver& on_tile = {});

// The network of `path` at `storage`, loaded once per process (model cache).
std::shared_ptr<const RrdbNet> shared_rrdbnet(const std::string& path, WeightStorage storage);

}  // namespace gen3d::models
