#pragma once
// Flow-matching sampling for the Hunyuan3D-2 and -2.1 shape DiTs (denoiser.h): the official Euler
// schedule (sigmas run 0 -> 1, t = sigma, the last step has dt = 0), the consistency ("turbo")
// timestep table, batched classifier-free guidance and a step cache consulted every step. See
// golden/README.md "Scheduler and sampler" and specs/dit-cache.md §2.

#include <cstdint>
#include <functional>
#include <memory>
#include <vector>

#include "models/core/tensor.h"
#include "models/shape/step_cache.h"
#include "progress/progress.h"

namespace gen3d::models {

class ShapeDenoiser;

// All tables float32, like the reference's tensors.
struct Schedule {
  std::vector<float> sigmas;     // [N + 1]: the N step sigmas, then an appended 1.0
  std::vector<float> timesteps;  // [N]: sigma * num_train_timesteps
  std::vector<float> model_t;    // [N]: the t fed to the DiT, timesteps / num_train_timesteps
  std::vector<float> dt;         // [N]: sigmas[i + 1] - sigmas[i]
  int size() const { return static_cast<int>(timesteps.size()); }
};

// FlowMatchEulerDiscreteScheduler as the flow pipeline drives it: sigmas = linspace(0, 1, N)
// (double, then float32), then the shift map shift·σ / (1 + (shift − 1)·σ).
Schedule flow_match_schedule(int steps, double shift = 1.0, int num_train_timesteps = 1000);
// ConsistencyFlowMatchEulerDiscreteScheduler(pcm_timesteps): its own sigma grid
// linspace(0, 1, T)[euler_timesteps] sampled at floor(linspace(0, pcm, N, endpoint=False)).
Schedule consistency_schedule(int steps, int pcm_timesteps = 100, int num_train_timesteps = 1000);

enum class ScheduleKind { kFlowMatch, kConsistency };

struct SamplerOptions {
  int steps = 50;               // N
  double guidance_scale = 5.0;  // s; CFG iff s >= 0 and the model has no guidance embedding
  ScheduleKind schedule = ScheduleKind::kFlowMatch;
  double shift = 1.0;               // flow-match shift (1.0 for v2-0)
  int pcm_timesteps = 100;          // consistency schedule only
  int num_train_timesteps = 1000;   // both schedulers' training grid
  bool elide_zero_dt_steps = true;  // skip the DiT call when dt == 0 (exact; spec §2.1)
};

// What one step did; the tensors are valid during the observer call only.
struct StepObservation {
  int step = 0;
  float t = 0.0f, dt = 0.0f;
  StepDecision decision = StepDecision::kFull;
  const Tensor* latents = nullptr;   // after the Euler update [B, L, C]
  const Tensor* v_cond = nullptr;    // CFG: DiT output of the cond half; null if elided / no CFG
  const Tensor* v_uncond = nullptr;  // CFG: uncond half
  const Tensor* v = nullptr;         // the velocity used (guided with CFG); null if elided
};
using StepObserver = std::function<void(const StepObservation&)>;

class FlowMatchSampler {
 public:
  // `cache` is consulted every step (null: no caching). Both must outlive the sampler.
  FlowMatchSampler(const ShapeDenoiser& model, SamplerOptions options, StepCache* cache = nullptr);
  ~FlowMatchSampler();

  // initial latents [B, L, in_channels], cond [B, Lc, context_in_dim], uncond the same shape
  // (null: zeros, like the official unconditional embedding). Resets the cache.
  void start(Tensor initial_latents, const Tensor& cond, const Tensor* uncond = nullptr);
  bool done() const { return step_ >= schedule_.size(); }
  int step_index() const { return step_; }
  // Runs the next step; returns its decision.
  StepDecision step(const StepObserver* observer = nullptr);

  const Tensor& latents() const { return x_; }
  const Schedule& schedule() const { return schedule_; }
  bool cfg() const { return cfg_; }
  const StepCache& cache() const { return *cache_; }

 private:
  const ShapeDenoiser& model_;
  SamplerOptions opt_;
  std::unique_ptr<StepCache> own_cache_;
  StepCache* cache_;
  Schedule schedule_;
  bool cfg_ = false;
  int step_ = 0;
  Tensor x_;         // [B, L, C]
  Tensor context_;   // [B, Lc, Cc] or [2B, Lc, Cc] ([cond; uncond])
  Tensor guidance_;  // [B] (guidance-embedded models)

  progress::Steps progress_;  // "denoise step" i of N, to the progress hub
};

// Runs all steps; returns the final latents.
Tensor sample(const ShapeDenoiser& model, const SamplerOptions& options, StepCache* cache,
              Tensor initial_latents, const Tensor& cond, const Tensor* uncond = nullptr,
              const StepObserver* observer = nullptr);

}  // namespace gen3d::models
