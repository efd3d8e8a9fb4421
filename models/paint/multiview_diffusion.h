#pragma once
// Multiview diffusion of Hunyuan3D-Paint: the official paint pipeline's sampling
// (HunyuanPaintPipeline.__call__ / denoise) on the native UNet2.5D and SD VAE.
//
// Normal mode: Euler-ancestral (trailing spacing, 30 steps), classifier-free guidance 2.0 with the
// batch [unconditional, conditional] = text [zeros, learned prompt], reference latents [zeros,
// ref], ref_scale [0, 1]. Turbo: LCM over the 10 official timesteps, conditional half only.
// One deliberate difference: the reference UNet runs once per texture (at t = 0 its features do
// not depend on the step), where the official forward re-runs it every step; so do the key /
// value projections of its features and of the prompt (MultiviewConditions), bit-identically.
//
// Tensors are NHWC; images in [0, 1].

#include <cstdint>
#include <functional>
#include <memory>
#include <string>
#include <vector>

#include "models/core/device.h"
#include "models/core/dtype.h"
#include "models/core/tensor.h"
#include "models/paint/diffusion_scheduler.h"

namespace gen3d::models {

class MultiviewUNet;
class SdVae;

// A paint model folder in the official diffusers layout: unet/ (config.json + weights of the
// UNet2.5D wrapper: unet.* and unet_dual.*), vae/, scheduler/scheduler_config.json.
struct PaintModel {
  std::string dir;
  std::shared_ptr<const MultiviewUNet> unet;
  std::shared_ptr<const SdVae> vae;
  SchedulerConfig scheduler;
};

// Loads `dir` (strict: every missing / mis-shaped / unexpected tensor is named). Shared per
// process: the same folder, storage and device load once.
// `storage`: in-memory dtype of the UNet's and VAE's weights (kBF16: the bf16 precision mode).
// `device`: where the UNet and the VAE run (the sampler stays on the host). A device runs the
// networks in bf16: f32 / f16 storage is kept as bf16 there (logged), int8 is refused.
std::shared_ptr<const PaintModel> shared_paint_model(const std::string& dir,
                                                     WeightStorage storage = WeightStorage::kF32,
                                                     Device device = Device::kCpu);
std::shared_ptr<const PaintModel> load_paint_model(const std::string& dir,
                                                   WeightStorage storage = WeightStorage::kF32,
                                                   Device device = Device::kCpu);

struct PaintOptions {
  bool turbo = false;      // LCM, 10 steps, no CFG
  int steps = 30;          // Euler-ancestral steps (normal mode)
  float guidance = 2.0f;   // CFG scale (normal mode; <= 1 runs the conditional half only)
  std::uint64_t seed = 0;  // all noise (VAE posteriors, initial latents, ancestral draws)
  // Normal mode only: DeepCache (UNetFeatureCache, shallowest branch). Every cache_interval-th
  // step (0, N, 2N, ...) runs the whole UNet; the steps between reuse its deep features and run
  // only the shallow layers. 1: off (exact). An approximation: docs/texgen.md gives its error.
  int cache_interval = 1;
};

struct PaintInputs {
  Tensor reference;          // (1, S, S, 3): the reference view (RGB, composited)
  Tensor normals;            // (N, S, S, 3): normal maps of the N views
  Tensor positions;          // (N, S, S, 3): position maps
  std::vector<int> cameras;  // N official camera ids (MultiviewUNet::camera_id)
};

// Noise injected instead of drawn (golden tests). Shapes as the README's §4b `in.noise.*`, NHWC.
struct PaintNoise {
  Tensor vae_ref, vae_normal, vae_position;  // posterior draws (1 / N / N, h, w, 4)
  Tensor init;                               // (N, h, w, 4), before × init_noise_sigma
  std::vector<Tensor> steps;                 // per step (N, h, w, 4)
};

// What one step saw; valid during the observer call only.
struct PaintStep {
  int index = 0;
  float timestep = 0.0f;
  const Tensor* model_input = nullptr;     // (B·N, h, w, 4), B = 2 with CFG (rows 0..N-1 uncond)
  const Tensor* noise_pred_raw = nullptr;  // (B·N, h, w, 4)
  const Tensor* noise_pred = nullptr;      // (N, h, w, 4) after CFG
  const Tensor* latents = nullptr;         // (N, h, w, 4) after the scheduler step
};
using PaintObserver = std::function<void(const PaintStep&)>;

struct PaintLatents {  // the encoded conditions (tests)
  Tensor ref, normals, positions;
};

// Runs the sampler and decodes; returns (N, S, S, 3) images in [0, 1]. `latents_out` (optional)
// receives the encoded conditions and `decoded_out` the raw decoder output before the clamp.
Tensor paint_views(const PaintModel& model, const PaintInputs& inputs, const PaintOptions& options,
                   const PaintNoise* noise = nullptr, const PaintObserver& observer = {},
                   PaintLatents* latents_out = nullptr, Tensor* decoded_out = nullptr);

}  // namespace gen3d::models
