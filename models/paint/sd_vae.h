#pragma once
// Stable Diffusion AutoencoderKL (diffusers v0.32.2 semantics), built from the diffusers
// vae/config.json and the diffusers state_dict names; float32 compute, NHWC tensors (B, H, W, C)
// (golden/texmodels/README.md §2 is the recipe).
//
// Encoder: conv_in, DownEncoderBlock2D levels (ResNets, then a pad-right/bottom stride-2 conv
// except on the last level), mid block (ResNet, single-head self-attention, ResNet),
// GroupNorm + SiLU + conv_out to 2·latent channels, quant_conv. Decoder: post_quant_conv,
// conv_in, mid block, UpDecoderBlock2D levels (layers_per_block + 1 ResNets, then nearest ×2 +
// conv except on the last level), GroupNorm + SiLU + conv_out. Every GroupNorm has eps 1e-6.
// Images of a batch are processed one at a time so that full-size (512²) runs keep a few
// hundred MB of activations. The network runs on nn::DeviceOps: the CPU by default, or the device
// set_device names (bf16 weights).

#include <cstdint>
#include <functional>
#include <memory>
#include <string>
#include <utility>
#include <vector>

#include "models/core/device.h"
#include "models/core/dtype.h"
#include "models/core/tensor.h"

namespace gen3d::models {

class WeightMap;

// The AutoencoderKL config keys this runtime implements. Keys without effect on inference
// (_class_name, sample_size, force_upcast, ...) are ignored; values that change the network in
// ways not implemented here are rejected with a ModelError naming the key.
struct SdVaeConfig {
  int in_channels = 3;
  int out_channels = 3;
  int latent_channels = 4;
  std::vector<int> block_out_channels{128, 256, 512, 512};
  std::vector<std::string> down_block_types{"DownEncoderBlock2D", "DownEncoderBlock2D",
                                            "DownEncoderBlock2D", "DownEncoderBlock2D"};
  std::vector<std::string> up_block_types{"UpDecoderBlock2D", "UpDecoderBlock2D",
                                          "UpDecoderBlock2D", "UpDecoderBlock2D"};
  int layers_per_block = 2;
  int norm_num_groups = 32;
  double scaling_factor = 0.18215;
  bool mid_block_add_attention = true;
  bool use_quant_conv = true;
  bool use_post_quant_conv = true;

  int levels() const { return static_cast<int>(block_out_channels.size()); }
  // Spatial reduction between image and latent: 2^(levels - 1).
  int downscale() const { return 1 << (levels() - 1); }

  // Throws ModelError describing every inconsistent value (prefixed by `label`).
  void validate(const std::string& label = "SD VAE config") const;
  // A diffusers vae/config.json text; `label` names it in errors.
  static SdVaeConfig parse(const std::string& json_text, const std::string& label);
  static SdVaeConfig read(const std::string& path);
};

// Intermediates for tests: "enc.conv_in", "enc.down_blocks.i", "enc.mid_block", "enc.conv_out",
// "quant_conv" (encode) and "post_quant_conv", "dec.conv_in", "dec.mid_block", "dec.up_blocks.i",
// "dec.conv_out" (decode), each (B, H, W, C) for the whole batch. With a probe set, the
// intermediates of all images are kept until the end of the call.
using VaeProbe = std::function<void(const std::string& name, const Tensor& nhwc)>;

class SdVae {
 public:
  // Claims every tensor the config implies from `weights` (names relative to the map, e.g.
  // "encoder.conv_in.weight"); problems are recorded in the map, so the caller's
  // weights.finish("SD VAE") reports every missing / mis-shaped / unexpected tensor at once.
  // The deprecated attention names (query / key / value / proj_attn) are accepted too.
  // `storage`: in-memory dtype of the convolution and Linear weights (kBF16: bf16 precision).
  static std::unique_ptr<SdVae> load(const SdVaeConfig& cfg, WeightMap& weights,
                                     WeightStorage storage = WeightStorage::kF32);
  // A diffusers folder: dir/config.json and dir/diffusion_pytorch_model.safetensors (or
  // diffusion_pytorch_model.fp16.safetensors). Strict: finishes the weight map.
  static std::unique_ptr<SdVae> load_folder(const std::string& dir,
                                            WeightStorage storage = WeightStorage::kF32);
  // The tensors load() claims for `cfg` (current diffusers names), with shapes.
  static std::vector<std::pair<std::string, Shape>> expected_tensors(const SdVaeConfig& cfg);

  ~SdVae();
  SdVae(const SdVae&) = delete;
  SdVae& operator=(const SdVae&) = delete;

  const SdVaeConfig& config() const { return cfg_; }
  std::int64_t num_parameters() const;

  // Where encode and decode run (default the CPU); inputs and outputs stay host tensors. A
  // device runs the bf16 layers (weights uploaded there once, on first use), so it needs a model
  // loaded with WeightStorage::kBF16: other storages throw ModelError naming it.
  void set_device(Device device);
  Device device() const { return device_; }

  // Diagonal Gaussian posterior, each (B, H / downscale, W / downscale, latent_channels).
  struct Posterior {
    Tensor mean, std;
  };
  // image01 (B, H, W, in_channels) in [0, 1]; the network sees (image - 0.5) * 2. logvar is
  // clamped to [-30, 20], std = exp(logvar / 2).
  Posterior encode(const Tensor& image01, const VaeProbe& probe = {}) const;
  // (mean + std · eps) · scaling_factor, or mean · scaling_factor when eps is null. eps has the
  // posterior's shape.
  Tensor encode_scaled(const Tensor& image01, const Tensor* eps) const;
  // Raw decoder output (B, H, W, out_channels) of latents z (unscaled), before / 2 + 0.5.
  Tensor decode(const Tensor& z, const VaeProbe& probe = {}) const;
  // clamp(decode(latents_scaled / scaling_factor) / 2 + 0.5, 0, 1).
  Tensor decode_to_image(const Tensor& latents_scaled) const;

  struct Impl;  // defined in sd_vae.cpp

 private:
  SdVae(SdVaeConfig cfg, std::unique_ptr<Impl> impl);
  SdVaeConfig cfg_;
  std::unique_ptr<Impl> impl_;
  Device device_ = Device::kCpu;
};

}  // namespace gen3d::models
