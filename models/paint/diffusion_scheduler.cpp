#include "models/paint/diffusion_scheduler.h"

#include <algorithm>
#include <cmath>
#include <nlohmann/json.hpp>
#include <utility>

#include "models/core/error.h"
#include "models/nn/config_reader.h"

namespace gen3d::models {

namespace {

using json = nlohmann::json;

// torch.linspace(a, b, n, dtype=float32) on the CPU, rounding included: float step; blocks of
// 16 values from a fused start + step * idx base (8-lane vectors, base + j * step per lane);
// the tail and the scalar path evaluated as fused multiply-adds from the nearer end.
std::vector<float> torch_linspace_f32(double a, double b, int n) {
  std::vector<float> out(static_cast<std::size_t>(std::max(n, 0)));
  if (n <= 0) return out;
  const float start = static_cast<float>(a), end = static_cast<float>(b);
  if (n == 1) {
    out[0] = start;
    return out;
  }
  const float step = (end - start) / static_cast<float>(n - 1);
  const std::int64_t half = n / 2;
  auto scalar = [&](std::int64_t idx) {
    return idx < half ? std::fma(step, static_cast<float>(idx), start)
                      : std::fma(-step, static_cast<float>(n - idx - 1), end);
  };
  // The vector loop consumes whole pairs of 8-lane vectors; the rest is scalar.
  constexpr std::int64_t kLanes = 8;
  const std::int64_t vec_end = (n / (2 * kLanes)) * (2 * kLanes);
  for (std::int64_t i = 0; i < vec_end; i += kLanes) {
    const float base = scalar(i);
    for (std::int64_t j = 0; j < kLanes; ++j)
      out[static_cast<std::size_t>(i + j)] = base + static_cast<float>(j) * step;
  }
  for (std::int64_t k = vec_end; k < n; ++k) out[static_cast<std::size_t>(k)] = scalar(k);
  return out;
}

// np.interp(x, arange(len(fp)), fp) in double.
double interp_index(double x, const std::vector<float>& fp) {
  const auto last = static_cast<std::int64_t>(fp.size()) - 1;
  if (x <= 0.0) return fp.front();
  if (x >= static_cast<double>(last)) return fp.back();
  const auto j = static_cast<std::int64_t>(std::floor(x));
  const double y0 = fp[static_cast<std::size_t>(j)], y1 = fp[static_cast<std::size_t>(j + 1)];
  return (y1 - y0) * (x - static_cast<double>(j)) + y0;
}

}  // namespace

SchedulerConfig SchedulerConfig::parse(const std::string& json_text, const std::string& label) {
  const json j = nn::parse_config(json_text, label);
  SchedulerConfig c;
  nn::ConfigReader r(j, label + ": scheduler config");
  r.read("num_train_timesteps", c.num_train_timesteps);
  r.read("beta_start", c.beta_start);
  r.read("beta_end", c.beta_end);
  r.read("steps_offset", c.steps_offset);
  r.read_choice("beta_schedule", c.beta_schedule, {"scaled_linear", "linear"});
  r.read_choice("prediction_type", c.prediction_type, {"epsilon", "v_prediction"});
  r.read_choice("timestep_spacing", c.timestep_spacing, {"leading", "trailing", "linspace"});
  r.require("rescale_betas_zero_snr", false, "only false");
  r.require("clip_sample", false, "only false");
  r.require("thresholding", false, "only false");
  r.require("trained_betas", nullptr, "only beta_start/beta_end schedules");
  if (c.num_train_timesteps < 2 || c.num_train_timesteps > 100000)
    r.problem("num_train_timesteps must be in [2, 100000]");
  if (!(c.beta_start > 0.0 && c.beta_end > 0.0 && c.beta_start < 1.0 && c.beta_end < 1.0))
    r.problem("beta_start and beta_end must lie in (0, 1)");
  if (c.steps_offset < 0 || c.steps_offset >= c.num_train_timesteps)
    r.problem("steps_offset must be in [0, num_train_timesteps)");
  r.finish(nn::ConfigReader::Unknown::kAccept);  // other schedulers' keys share the file
  return c;
}

SchedulerConfig SchedulerConfig::read(const std::string& path) {
  return parse(nn::read_config_file(path).dump(), path);
}

std::vector<float> train_alphas_cumprod(const SchedulerConfig& cfg) {
  std::vector<float> betas;
  if (cfg.beta_schedule == "scaled_linear") {
    betas = torch_linspace_f32(std::sqrt(cfg.beta_start), std::sqrt(cfg.beta_end),
                               cfg.num_train_timesteps);
    for (float& b : betas) b = b * b;
  } else if (cfg.beta_schedule == "linear") {
    betas = torch_linspace_f32(cfg.beta_start, cfg.beta_end, cfg.num_train_timesteps);
  } else {
    throw ModelError("scheduler: unsupported beta_schedule '" + cfg.beta_schedule + "'");
  }
  // torch.cumprod on the CPU accumulates float products in double.
  std::vector<float> acp(betas.size());
  double c = 1.0;
  for (std::size_t i = 0; i < betas.size(); ++i) {
    c *= static_cast<double>(1.0f - betas[i]);
    acp[i] = static_cast<float>(c);
  }
  return acp;
}

// ---------------------------------------------------------------------------------------------
// Euler ancestral

EulerAncestralScheduler::EulerAncestralScheduler(SchedulerConfig cfg) : cfg_(std::move(cfg)) {
  if (cfg_.rescale_betas_zero_snr)
    throw ModelError("EulerAncestralScheduler: rescale_betas_zero_snr is not supported");
  if (cfg_.prediction_type != "epsilon" && cfg_.prediction_type != "v_prediction")
    throw ModelError("EulerAncestralScheduler: unsupported prediction_type '" +
                     cfg_.prediction_type + "'");
  alphas_cumprod_ = train_alphas_cumprod(cfg_);
  train_sigmas_.resize(alphas_cumprod_.size());
  for (std::size_t i = 0; i < alphas_cumprod_.size(); ++i) {
    const float a = alphas_cumprod_[i];
    train_sigmas_[i] = std::sqrt((1.0f - a) / a);
  }
}

void EulerAncestralScheduler::set_timesteps(int steps) {
  const int T = cfg_.num_train_timesteps;
  if (steps < 1 || steps > T)
    throw ModelError("EulerAncestralScheduler: steps must be in [1, " + std::to_string(T) +
                     "], got " + std::to_string(steps));
  timesteps_.clear();
  const std::string& sp = cfg_.timestep_spacing;
  if (sp == "linspace") {
    // np.linspace(0, T - 1, steps) in double, last = T - 1 exactly, then float32, reversed.
    std::vector<float> t(static_cast<std::size_t>(steps));
    const double step = steps > 1 ? static_cast<double>(T - 1) / (steps - 1) : 0.0;
    for (int i = 0; i < steps; ++i) t[static_cast<std::size_t>(i)] = static_cast<float>(i * step);
    if (steps > 1) t.back() = static_cast<float>(T - 1);
    timesteps_.assign(t.rbegin(), t.rend());
  } else if (sp == "leading") {
    const int ratio = T / steps;
    for (int i = steps - 1; i >= 0; --i)
      timesteps_.push_back(static_cast<float>(i * ratio) + static_cast<float>(cfg_.steps_offset));
  } else if (sp == "trailing") {
    // np.arange(T, 0, -T / steps): start + i * ((start + delta) - start), then rint, float32,
    // minus 1.
    const double start = T, delta = -static_cast<double>(T) / steps;
    const auto len = static_cast<std::int64_t>(std::ceil((0.0 - start) / delta));
    const double d = (start + delta) - start;
    for (std::int64_t i = 0; i < len; ++i) {
      const double v =
          i == 0 ? start : (i == 1 ? start + delta : start + static_cast<double>(i) * d);
      timesteps_.push_back(static_cast<float>(std::nearbyint(v)) - 1.0f);
    }
  } else {
    throw ModelError("EulerAncestralScheduler: unsupported timestep_spacing '" + sp + "'");
  }
  sigmas_.clear();
  for (float t : timesteps_) sigmas_.push_back(static_cast<float>(interp_index(t, train_sigmas_)));
  sigmas_.push_back(0.0f);
}

float EulerAncestralScheduler::init_noise_sigma() const {
  if (sigmas_.empty()) throw ModelError("EulerAncestralScheduler: set_timesteps not called");
  const float m = *std::max_element(sigmas_.begin(), sigmas_.end());
  if (cfg_.timestep_spacing == "linspace" || cfg_.timestep_spacing == "trailing") return m;
  return std::sqrt(m * m + 1.0f);
}

void EulerAncestralScheduler::check_index(int i) const {
  if (i < 0 || i >= size())
    throw ModelError("EulerAncestralScheduler: step index " + std::to_string(i) + " outside [0, " +
                     std::to_string(size()) + ")");
}

float EulerAncestralScheduler::input_scale(int i) const {
  check_index(i);
  const float s = sigmas_[static_cast<std::size_t>(i)];
  return 1.0f / std::sqrt(s * s + 1.0f);
}

void EulerAncestralScheduler::scale_model_input(const float* x, std::int64_t n, int i,
                                                float* out) const {
  check_index(i);
  const float s = sigmas_[static_cast<std::size_t>(i)];
  const float d = std::sqrt(s * s + 1.0f);
  for (std::int64_t k = 0; k < n; ++k) out[k] = x[k] / d;
}

void EulerAncestralScheduler::step(float* x, const float* model_output, const float* noise,
                                   std::int64_t n, int i) const {
  check_index(i);
  const float sigma = sigmas_[static_cast<std::size_t>(i)];
  const float sigma_to = sigmas_[static_cast<std::size_t>(i) + 1];
  // Scalars exactly as the reference evaluates them (float32, left to right).
  const float from2 = sigma * sigma, to2 = sigma_to * sigma_to;
  const float sigma_up = std::sqrt(to2 * (from2 - to2) / from2);
  const float sigma_down = std::sqrt(std::max(0.0f, to2 - sigma_up * sigma_up));
  const float dt = sigma_down - sigma;
  const bool v_pred = cfg_.prediction_type == "v_prediction";
  const float s2p1 = from2 + 1.0f;
  const float v_out = -sigma / std::sqrt(s2p1);
  if (sigma_up != 0.0f && !noise)
    throw ModelError("EulerAncestralScheduler: step " + std::to_string(i) + " needs noise");
  for (std::int64_t k = 0; k < n; ++k) {
    const float xs = x[k], mo = model_output[k];
    const float pred = v_pred ? mo * v_out + xs / s2p1 : xs - sigma * mo;
    const float derivative = (xs - pred) / sigma;
    float prev = xs + derivative * dt;
    if (sigma_up != 0.0f) prev = prev + noise[k] * sigma_up;
    x[k] = prev;
  }
}

// ---------------------------------------------------------------------------------------------
// LCM

namespace {
constexpr double kSigmaData = 0.5;
constexpr double kTimestepScaling = 10.0;
}  // namespace

LcmScheduler::LcmScheduler(SchedulerConfig cfg) : cfg_(std::move(cfg)) {
  if (cfg_.rescale_betas_zero_snr)
    throw ModelError("LcmScheduler: rescale_betas_zero_snr is not supported");
  if (cfg_.prediction_type != "epsilon" && cfg_.prediction_type != "v_prediction")
    throw ModelError("LcmScheduler: unsupported prediction_type '" + cfg_.prediction_type + "'");
  alphas_cumprod_ = train_alphas_cumprod(cfg_);
}

void LcmScheduler::set_timesteps(std::vector<int> timesteps) {
  if (timesteps.empty()) throw ModelError("LcmScheduler: empty timestep list");
  for (std::size_t k = 0; k < timesteps.size(); ++k) {
    if (timesteps[k] < 0 || timesteps[k] >= cfg_.num_train_timesteps)
      throw ModelError("LcmScheduler: timestep " + std::to_string(timesteps[k]) + " outside [0, " +
                       std::to_string(cfg_.num_train_timesteps) + ")");
    if (k > 0 && timesteps[k] >= timesteps[k - 1])
      throw ModelError("LcmScheduler: timesteps must be strictly descending");
  }
  timesteps_ = std::move(timesteps);
  timesteps_f_.assign(timesteps_.begin(), timesteps_.end());
}

void LcmScheduler::check_index(int i) const {
  if (i < 0 || i >= size())
    throw ModelError("LcmScheduler: step index " + std::to_string(i) + " outside [0, " +
                     std::to_string(size()) + ")");
}

double LcmScheduler::c_skip(int i) const {
  check_index(i);
  const double st = timesteps_[static_cast<std::size_t>(i)] * kTimestepScaling;
  return kSigmaData * kSigmaData / (st * st + kSigmaData * kSigmaData);
}

double LcmScheduler::c_out(int i) const {
  check_index(i);
  const double st = timesteps_[static_cast<std::size_t>(i)] * kTimestepScaling;
  return st / std::sqrt(st * st + kSigmaData * kSigmaData);
}

void LcmScheduler::step(float* x, const float* model_output, const float* noise, std::int64_t n,
                        int i, float* denoised) const {
  check_index(i);
  const bool last = i == size() - 1;
  const int t = timesteps_[static_cast<std::size_t>(i)];
  const int t_prev = last ? t : timesteps_[static_cast<std::size_t>(i) + 1];
  const float acp = alphas_cumprod_[static_cast<std::size_t>(t)];
  const float acp_prev = alphas_cumprod_[static_cast<std::size_t>(t_prev)];
  const float sa = std::sqrt(acp), sb = std::sqrt(1.0f - acp);
  const float sa_prev = std::sqrt(acp_prev), sb_prev = std::sqrt(1.0f - acp_prev);
  // The reference multiplies an integer timestep tensor by 10.0, so the scalings are float32.
  const float st = static_cast<float>(t) * static_cast<float>(kTimestepScaling);
  const float sd2 = static_cast<float>(kSigmaData * kSigmaData);
  const float cs = sd2 / (st * st + sd2);
  const float co = st / std::sqrt(st * st + sd2);
  if (!last && !noise) throw ModelError("LcmScheduler: step " + std::to_string(i) + " needs noise");
  const bool v_pred = cfg_.prediction_type == "v_prediction";
  for (std::int64_t k = 0; k < n; ++k) {
    const float xs = x[k], mo = model_output[k];
    const float x0 = v_pred ? sa * xs - sb * mo : (xs - sb * mo) / sa;
    const float den = co * x0 + cs * xs;
    if (denoised) denoised[k] = den;
    x[k] = last ? den : sa_prev * den + sb_prev * noise[k];
  }
}

std::vector<int> LcmScheduler::turbo_timesteps(int steps, int num_train_timesteps) {
  constexpr int kGrid = 30;  // DDIMSolver(ddim_timesteps=30) of the official pipeline
  if (steps < 1 || steps > kGrid)
    throw ModelError("LcmScheduler::turbo_timesteps: steps must be in [1, 30], got " +
                     std::to_string(steps));
  const int ratio = num_train_timesteps / kGrid;
  const int stride = kGrid / steps;
  std::vector<int> t;
  for (int k = 0; k < steps; ++k) {
    const int index = kGrid - 1 - k * stride;  // grid index, grid value (index + 1) * ratio - 1
    t.push_back((index + 1) * ratio - 1);
  }
  return t;
}

}  // namespace gen3d::models
