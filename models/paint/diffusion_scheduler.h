#pragma once
// Diffusion schedulers of the texture stage, re-stated from diffusers v0.32.2:
// EulerAncestralDiscreteScheduler (paint, delight) and LCMScheduler (turbo paint); and from
// diffusers v0.30.0, UniPCMultistepScheduler (Hunyuan3D-2.1's PBR paint).
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
  // UniPCMultistepScheduler only (diffusers' defaults; the others ignore them).
  int solver_order = 2;                    // predictor order, 1..3 (the corrector adds one)
  bool predict_x0 = true;                  // update on the predicted x0 (data prediction)
  std::string solver_type = "bh2";         // B(h): "bh1" = h, "bh2" = e^h - 1
  bool lower_order_final = true;           // lower orders on the last steps
  std::vector<int> disable_corrector;      // step indices whose corrector is skipped
  std::string final_sigmas_type = "zero";  // "zero" or "sigma_min": the sigma after the last step

  // Unsupported or mistyped values (rescale_betas_zero_snr true, trained_betas, clip_sample /
  // thresholding true, unknown schedule / prediction / spacing / solver, Karras, exponential,
  // beta or flow sigmas, a solver_p) -> ModelError naming `label` and the key. Keys of other
  // schedulers sharing the file are accepted.
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

// UniPCMultistepScheduler (diffusers v0.30.0, scheduling_unipc_multistep.py): the multistep
// UniP predictor with the UniC corrector, on float32 scalars as the reference computes them on
// the CPU. No noise is drawn and the model input is not scaled (init noise sigma 1). The
// scheduler keeps the last model outputs, so a run calls step(0), step(1), ... in order after
// set_timesteps.
class UniPCScheduler {
 public:
  explicit UniPCScheduler(SchedulerConfig cfg);

  // The table of `timestep_spacing` ("trailing": round(arange(T, 0, -T / steps)) - 1) and its
  // sigmas; clears the multistep history.
  void set_timesteps(int steps);
  const std::vector<float>& timesteps() const { return timesteps_f_; }
  const std::vector<int>& timesteps_int() const { return timesteps_; }
  const std::vector<float>& sigmas() const { return sigmas_; }  // size() + 1
  int size() const { return static_cast<int>(timesteps_.size()); }
  float init_noise_sigma() const { return 1.0f; }
  // x (n floats) corrected at step i (from i = 1) and predicted to step i + 1, in place;
  // `model_output` is the network's prediction (epsilon or v) at timesteps()[i]. Throws unless
  // i is the step after the previous call (0 after set_timesteps) and n is unchanged.
  void step(float* x, const float* model_output, std::int64_t n, int i);
  const std::vector<float>& alphas_cumprod() const { return alphas_cumprod_; }
  const SchedulerConfig& config() const { return cfg_; }

 private:
  struct Noise {  // the VP schedule at one sigma
    float alpha, sigma, lambda;
  };
  Noise at(int index) const;
  void convert(const float* x, const float* model_output, std::int64_t n, int i,
               std::vector<float>& out) const;
  void predict(float* x, int order, int i) const;
  void correct(float* x, const std::vector<float>& model_t, int order, int i) const;

  SchedulerConfig cfg_;
  std::vector<float> alphas_cumprod_, train_sigmas_;
  std::vector<int> timesteps_;
  std::vector<float> timesteps_f_, sigmas_;
  // Multistep state: converted outputs of the last steps (oldest first), the sample before the
  // last prediction, the order of the last prediction.
  std::vector<std::vector<float>> outputs_;
  std::vector<float> last_sample_;
  int lower_order_nums_ = 0, this_order_ = 0, next_step_ = 0;
  std::int64_t n_ = -1;
};

}  // namespace gen3d::models
