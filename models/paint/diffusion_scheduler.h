#pragma once
// Diffusion schedulers of the texture stage, re-stated from diffusers v0.32.2:
// EulerAncestralDiscreteScheduler (paint, delight) and LCMScheduler (turbo paint).
// The arithmetic is float32 operation by operation as diffusers/PyTorch do it on the CPU, so
// timestep tables are identical and sigma tables / step outputs agree to float rounding.
// Tensors are flat float arrays of n elements (the scheduler math is element-wise); the
// ancestral / LCM noise is drawn by the caller and passed in.

#include <cstdint>
#include <string>
#include <vector>

namespace gen3d::models {

// diffusers scheduler/scheduler_config.json (keys as there; unknown keys are ignored).
struct SchedulerConfig {
  int num_train_timesteps = 1000;
  double beta_start = 0.00085, beta_end = 0.012;
  std::string beta_schedule = "scaled_linear";  // "scaled_linear" or "linear"
  std::string prediction_type = "epsilon";      // "epsilon" or "v_prediction"
  std::string timestep_spacing = "leading";     // "leading", "trailing" or "linspace"
  int steps_offset = 1;
  bool rescale_betas_zero_snr = false;  // true is not supported

  // Unsupported or mistyped values (rescale_betas_zero_snr true, trained_betas, clip_sample /
  // thresholding true, unknown schedule / prediction / spacing) -> ModelError naming `label`
  // and the key.
  static SchedulerConfig parse(const std::string& json_text, const std::string& label);
  static SchedulerConfig read(const std::string& path);
};

// alphas_cumprod of the training schedule (float32, num_train_timesteps entries), bit-identical
// to torch.cumprod(1 - betas) of diffusers on the CPU.
std::vector<float> train_alphas_cumprod(const SchedulerConfig& cfg);

class EulerAncestralScheduler {
 public:
  explicit EulerAncestralScheduler(SchedulerConfig cfg);

  void set_timesteps(int steps);
  const std::vector<float>& timesteps() const { return timesteps_; }
  const std::vector<float>& sigmas() const { return sigmas_; }  // size() + 1, last 0
  float init_noise_sigma() const;
  int size() const { return static_cast<int>(timesteps_.size()); }
  // 1 / sqrt(sigma_i^2 + 1) (scale_model_input itself divides, as diffusers does).
  float input_scale(int i) const;
  // out[k] = x[k] / sqrt(sigma_i^2 + 1); out may alias x.
  void scale_model_input(const float* x, std::int64_t n, int i, float* out) const;
  // One ancestral step from sigma_i to sigma_{i+1}, x updated in place; `noise` holds n standard
  // normal draws (may be null when sigma_{i+1} is 0, where it has no effect).
  void step(float* x, const float* model_output, const float* noise, std::int64_t n, int i) const;
  const std::vector<float>& alphas_cumprod() const { return alphas_cumprod_; }
  const SchedulerConfig& config() const { return cfg_; }

 private:
  void check_index(int i) const;
  SchedulerConfig cfg_;
  std::vector<float> alphas_cumprod_;
  std::vector<float> train_sigmas_;  // sqrt((1 - acp) / acp), float32, per train timestep
  std::vector<float> timesteps_, sigmas_;
};

class LcmScheduler {
 public:
  explicit LcmScheduler(SchedulerConfig cfg);

  // Explicit, strictly descending timesteps in [0, num_train_timesteps).
  void set_timesteps(std::vector<int> timesteps);
  const std::vector<float>& timesteps() const { return timesteps_f_; }
  const std::vector<int>& timesteps_int() const { return timesteps_; }
  int size() const { return static_cast<int>(timesteps_.size()); }
  // Boundary-condition scalings (sigma_data 0.5, timestep_scaling 10) of step i, in double.
  double c_skip(int i) const;
  double c_out(int i) const;
  // denoised = c_out * x0_pred + c_skip * x; x <- sqrt(acp_prev) * denoised +
  // sqrt(1 - acp_prev) * noise, or x <- denoised at the last step (noise unused, may be null).
  // `denoised` (n floats) may be null.
  void step(float* x, const float* model_output, const float* noise, std::int64_t n, int i,
            float* denoised) const;
  const std::vector<float>& alphas_cumprod() const { return alphas_cumprod_; }
  const SchedulerConfig& config() const { return cfg_; }

  // The turbo paint grid: DDIMSolver timesteps (k * (T / 30)) - 1, k = 1..30, taken from the
  // top every 30 / steps entries ([989, 890, ..., 98] for the official 10 steps).
  static std::vector<int> turbo_timesteps(int steps = 10, int num_train_timesteps = 1000);

 private:
  void check_index(int i) const;
  SchedulerConfig cfg_;
  std::vector<float> alphas_cumprod_;
  std::vector<int> timesteps_;
  std::vector<float> timesteps_f_;
};

}  // namespace gen3d::models
