#pragma once
// The shape networks' checkpoints: where each sub-model sits in the official files (the one place
// that knows the prefixes and config sections), how a path resolves to weights + config, and the
// loaded networks shared through the process-wide model cache (models/nn/model_cache.h).

#include <cstddef>
#include <cstdint>
#include <memory>
#include <optional>
#include <string>
#include <string_view>

#include "models/shape/denoiser.h"
#include "models/shape/dit.h"
#include "models/shape/sampler.h"
#include "models/shape/shape_vae.h"

namespace gen3d::models {

// Combined pipeline checkpoints prefix every key with its sub-model (the official loader splits
// keys at the first dot); standalone checkpoints have no prefix. The sections of the official
// config.yaml carry the same names.
inline constexpr std::string_view kDiTPrefix = "model";
inline constexpr std::string_view kVaePrefix = "vae";
inline constexpr std::string_view kConditionerPrefix = "conditioner";
// The config section naming the pipeline's scheduler (no weights).
inline constexpr std::string_view kSchedulerSection = "scheduler";
// SingleImageEncoder.main_image_encoder.model = Dinov2Model inside the conditioner.
inline constexpr std::string_view kImageEncoderPrefix = "conditioner.main_image_encoder.model";

struct CheckpointSource {
  std::string weights;              // .safetensors or torch.save file (standalone or combined)
  std::string config;               // config.yaml or JSON config with the official keys
  std::string section{kDiTPrefix};  // section of `config` holding the network's params
  WeightStorage storage = WeightStorage::kF32;
  Device device = Device::kCpu;  // where the loaded network runs (models::ensure_device first)
};

// Resolves `path` (a checkpoint file or a directory) and an optional config path:
// a directory gives its weights by the one rule of nn::find_weights (stem "model"), else
// model.ckpt / model.fp16.ckpt (torch.save of {'model': sd, 'vae': sd, 'conditioner': sd}, as
// Hunyuan3D-2.1 ships it), else its only .safetensors file; the config defaults to config.json
// next to the weights, else config.yaml (the official name). Throws ModelError naming what is
// missing.
CheckpointSource resolve_checkpoint(const std::string& path, const std::string& config = {});

// What a checkpoint (file or official model folder) holds besides the DiT.
struct CheckpointContents {
  std::string
      config;  // config.json / config.yaml next to the weights (or the one given); "" if none
  bool has_vae = false;
  bool has_conditioner = false;
};
// Empty when `path` does not resolve to a readable checkpoint (the stage that loads it reports
// why, with its node name).
std::optional<CheckpointContents> inspect_checkpoint(const std::string& path,
                                                     const std::string& config = {});
// The section of a config file holding the conditioner: kConditionerPrefix in the official
// config; "" for a standalone DINOv2 folder's config.json (the Dinov2Config itself).
std::string conditioner_section_of(const std::string& config);

// The sampling schedule a config's `scheduler` section gives the official pipeline
// (hy3dgen/shapegen/schedulers.py): ConsistencyFlowMatchEulerDiscreteScheduler, the step-distilled
// (turbo) models' choice, or FlowMatchEulerDiscreteScheduler.
struct ShapeSchedulerConfig {
  ScheduleKind kind = ScheduleKind::kFlowMatch;
  int pcm_timesteps = 50;  // consistency grid (the class default; turbo configs set 100)
  int num_train_timesteps = 1000;
  double shift = 1.0;  // flow matching only
};
// nullopt when `config` has no `scheduler` section (a standalone DiT config, the JSON goldens);
// throws ModelError for an unreadable file or a scheduler class the sampler does not implement.
std::optional<ShapeSchedulerConfig> scheduler_of(const std::string& config);

// The shared model for `source` (loaded on first use).
std::shared_ptr<const Hunyuan3DDiT> shared_dit(const CheckpointSource& source);
// The shared shape denoiser of `source`: HunyuanDiTPlain (2.1) when its config section names
// that class or has only its keys, else Hunyuan3DDiT (2.0).
std::shared_ptr<const ShapeDenoiser> shared_denoiser(const CheckpointSource& source);
// The shared random model for (config, seed) (benchmarks, cache studies without weights).
std::shared_ptr<const Hunyuan3DDiT> shared_random_dit(const DiTConfig& config, std::uint64_t seed);
// The shared ShapeVAE of `source` (its weights, config and config section; section "" reads
// kVaePrefix when the config has it, else the whole file).
std::shared_ptr<const ShapeVAE> shared_shape_vae(const CheckpointSource& source);

}  // namespace gen3d::models
