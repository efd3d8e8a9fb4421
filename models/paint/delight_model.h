#pragma once
// Learned delighting of Hunyuan3D-2 (hunyuan3d-delight-v2-0): an InstructPix2Pix pipeline — the
// 8-channel UNet over [noisy latent | image latent], Euler-ancestral, the empty prompt — followed
// by the official per-channel colour re-matching (image::delight_model_output).
//
// Guidance as the official Light_Shadow_Remover calls it: guidance_scale 1.0 with
// image_guidance_scale 1.5. The InstructPix2Pix pipeline guides only when guidance_scale > 1, so
// the official run makes one conditional UNet pass per step and image_guidance has no effect;
// both are kept as options (guidance > 1 runs the three-branch batch [text, image, none]).
//
// Tensors are NHWC; images in [0, 1].

#include <cstdint>
#include <functional>
#include <memory>
#include <string>

#include "models/core/device.h"
#include "models/core/dtype.h"
#include "models/core/tensor.h"
#include "models/paint/diffusion_scheduler.h"

namespace gen3d::models {

class UNet2DCondition;
class SdVae;

// The official diffusers folder: unet/ (8 input channels), vae/, scheduler/, and the empty
// prompt's embedding from text_encoder/ + tokenizer/ (computed once at load).
struct DelightModel {
  std::string dir;
  std::shared_ptr<const UNet2DCondition> unet;
  std::shared_ptr<const SdVae> vae;
  SchedulerConfig scheduler;
  Tensor empty_prompt;  // (1, T, D)
};

// `storage`: in-memory dtype of the UNet's, VAE's and text encoder's weights (kBF16: bf16).
// `device`: where the UNet and the VAE run (the text encoder, run once at load, and the sampler
// stay on the host). A device runs them in bf16: f32 / f16 storage is kept as bf16 (logged),
// int8 is refused. Shared per process by folder, storage and device.
std::shared_ptr<const DelightModel> load_delight_model(const std::string& dir,
                                                       WeightStorage storage = WeightStorage::kF32,
                                                       Device device = Device::kCpu);
std::shared_ptr<const DelightModel> shared_delight_model(
    const std::string& dir, WeightStorage storage = WeightStorage::kF32,
    Device device = Device::kCpu);

struct DelightModelOptions {
  int steps = 50;
  float guidance = 1.0f;        // text guidance (official 1.0: no CFG)
  float image_guidance = 1.5f;  // image guidance (only used when guidance > 1)
  std::uint64_t seed = 42;
};

// Called after each step with (step index, step count); may throw to cancel.
using DelightObserver = std::function<void(int, int)>;

// The network part: image (1, S, S, 3) in [0, 1] -> the pipeline's output image (1, S, S, 3),
// quantized to 8 bits as the pipeline's PIL output is ((x·255).round() / 255).
Tensor delight_network(const DelightModel& model, const Tensor& image,
                       const DelightModelOptions& options, const DelightObserver& observer = {});

}  // namespace gen3d::models
