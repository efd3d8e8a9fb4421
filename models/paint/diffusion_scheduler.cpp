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

// diffusers' "trailing" spacing: np.arange(T, 0, -T / steps).round() - 1, with numpy's arange
// arithmetic (start + i * ((start + delta) - start)) and round-half-even.
std::vector<int> trailing_timesteps(int T, int steps) {
  const double start = T, delta = -static_cast<double>(T) / steps;
  const auto len = static_cast<std::int64_t>(std::ceil((0.0 - start) / delta));
  const double d = (start + delta) - start;
  std::vector<int> out;
  for (std::int64_t i = 0; i < len; ++i) {
    const double v = i == 0 ? start : (i == 1 ? start + delta : start + static_cast<double>(i) * d);
    out.push_back(static_cast<int>(std::nearbyint(v)) - 1);
  }
  return out;
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
  // UniPCMultistepScheduler's keys (diffusers maps midpoint / heun / logrho to bh2).
  r.read("solver_order", c.solver_order);
  r.read("predict_x0", c.predict_x0);
  std::string solver;
  r.read_choice("solver_type", solver, {"bh1", "bh2", "midpoint", "heun", "logrho"});
  if (!solver.empty()) c.solver_type = solver == "bh1" ? "bh1" : "bh2";
  r.read("lower_order_final", c.lower_order_final);
  r.read("disable_corrector", c.disable_corrector);
  r.read_choice("final_sigmas_type", c.final_sigmas_type, {"zero", "sigma_min"});
  for (const char* key : {"use_karras_sigmas", "use_exponential_sigmas", "use_beta_sigmas",
                          "use_flow_sigmas", "use_dynamic_shifting"})
    r.require(key, false, "only false: sigmas from the training schedule");
  r.require("solver_p", nullptr, "only null: UniPC's own predictor");
  if (c.solver_order < 1 || c.solver_order > 3) r.problem("solver_order must be in [1, 3]");
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
    for (int t : trailing_timesteps(T, steps)) timesteps_.push_back(static_cast<float>(t));
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

// ---------------------------------------------------------------------------------------------
// UniPC (diffusers v0.30.0 scheduling_unipc_multistep.py; the comments name its functions)

namespace {

// torch.linalg.solve of a small float32 system (n <= 3), as LAPACK's getrf/getrs do it: partial
// pivoting, the column below a pivot scaled by the pivot's reciprocal.
std::vector<float> solve_small(std::vector<std::vector<float>> a, std::vector<float> b) {
  const std::size_t n = b.size();
  for (std::size_t c = 0; c < n; ++c) {
    std::size_t p = c;
    for (std::size_t r = c + 1; r < n; ++r)
      if (std::abs(a[r][c]) > std::abs(a[p][c])) p = r;
    std::swap(a[c], a[p]);
    std::swap(b[c], b[p]);
    if (a[c][c] == 0.0f) throw ModelError("UniPCScheduler: singular order conditions");
    const float inv = 1.0f / a[c][c];
    for (std::size_t r = c + 1; r < n; ++r) {
      const float l = a[r][c] * inv;
      for (std::size_t k = c + 1; k < n; ++k) a[r][k] -= l * a[c][k];
      b[r] -= l * b[c];
    }
  }
  std::vector<float> x(n);
  for (std::size_t r = n; r-- > 0;) {
    float v = b[r];
    for (std::size_t k = r + 1; k < n; ++k) v -= a[r][k] * x[k];
    x[r] = v / a[r][r];
  }
  return x;
}

// The coefficients both updates share: h-phi terms, B(h) and the order conditions' right side
// (multistep_uni_p_bh_update / multistep_uni_c_bh_update, float32 scalars).
struct BhTerms {
  float hh, h_phi_1, b_h;
  std::vector<float> b;  // `order` entries
};

BhTerms bh_terms(float h, int order, bool predict_x0, bool bh1) {
  BhTerms t;
  t.hh = predict_x0 ? -h : h;
  t.h_phi_1 = std::expm1(t.hh);  // h phi_1(h) = e^h - 1
  float h_phi_k = t.h_phi_1 / t.hh - 1.0f;
  t.b_h = bh1 ? t.hh : std::expm1(t.hh);
  int factorial = 1;
  for (int i = 1; i <= order; ++i) {
    t.b.push_back(h_phi_k * static_cast<float>(factorial) / t.b_h);
    factorial *= i + 1;
    h_phi_k = h_phi_k / t.hh - static_cast<float>(1.0 / factorial);
  }
  return t;
}

}  // namespace

UniPCScheduler::UniPCScheduler(SchedulerConfig cfg) : cfg_(std::move(cfg)) {
  if (cfg_.rescale_betas_zero_snr)
    throw ModelError("UniPCScheduler: rescale_betas_zero_snr is not supported");
  if (cfg_.prediction_type != "epsilon" && cfg_.prediction_type != "v_prediction")
    throw ModelError("UniPCScheduler: unsupported prediction_type '" + cfg_.prediction_type + "'");
  if (cfg_.solver_order < 1 || cfg_.solver_order > 3)
    throw ModelError("UniPCScheduler: solver_order must be in [1, 3], got " +
                     std::to_string(cfg_.solver_order));
  if (cfg_.solver_type != "bh1" && cfg_.solver_type != "bh2")
    throw ModelError("UniPCScheduler: unsupported solver_type '" + cfg_.solver_type + "'");
  if (cfg_.final_sigmas_type != "zero" && cfg_.final_sigmas_type != "sigma_min")
    throw ModelError("UniPCScheduler: unsupported final_sigmas_type '" + cfg_.final_sigmas_type +
                     "'");
  alphas_cumprod_ = train_alphas_cumprod(cfg_);
  train_sigmas_.resize(alphas_cumprod_.size());
  for (std::size_t i = 0; i < alphas_cumprod_.size(); ++i) {
    const float a = alphas_cumprod_[i];
    train_sigmas_[i] = std::sqrt((1.0f - a) / a);
  }
}

void UniPCScheduler::set_timesteps(int steps) {
  const int T = cfg_.num_train_timesteps;
  if (steps < 1 || steps > T)
    throw ModelError("UniPCScheduler: steps must be in [1, " + std::to_string(T) + "], got " +
                     std::to_string(steps));
  timesteps_.clear();
  const std::string& sp = cfg_.timestep_spacing;
  if (sp == "linspace") {
    // np.linspace(0, T - 1, steps + 1).round()[::-1][:-1]: i * step in double, the last value
    // exactly T - 1, round-half-even.
    const double step = static_cast<double>(T - 1) / steps;
    for (int i = steps; i >= 1; --i)
      timesteps_.push_back(i == steps ? T - 1 : static_cast<int>(std::nearbyint(i * step)));
  } else if (sp == "leading") {
    // UniPC's own: T // (steps + 1) apart, plus steps_offset.
    const int ratio = T / (steps + 1);
    for (int i = steps; i >= 1; --i) timesteps_.push_back(i * ratio + cfg_.steps_offset);
  } else if (sp == "trailing") {
    timesteps_ = trailing_timesteps(T, steps);
  } else {
    throw ModelError("UniPCScheduler: unsupported timestep_spacing '" + sp + "'");
  }
  timesteps_f_.assign(timesteps_.begin(), timesteps_.end());
  // np.interp over the training sigmas (exact at integer timesteps), then the final sigma.
  sigmas_.clear();
  for (int t : timesteps_)
    sigmas_.push_back(static_cast<float>(interp_index(static_cast<double>(t), train_sigmas_)));
  sigmas_.push_back(cfg_.final_sigmas_type == "sigma_min" ? train_sigmas_.front() : 0.0f);
  outputs_.clear();
  last_sample_.clear();
  lower_order_nums_ = this_order_ = next_step_ = 0;
  n_ = -1;
}

// _sigma_to_alpha_sigma_t and lambda = log(alpha) - log(sigma); the last sigma 0 gives
// lambda = inf, which the updates turn into x = the predicted x0.
UniPCScheduler::Noise UniPCScheduler::at(int index) const {
  const float s = sigmas_[static_cast<std::size_t>(index)];
  Noise n;
  n.alpha = 1.0f / std::sqrt(s * s + 1.0f);
  n.sigma = s * n.alpha;
  n.lambda = std::log(n.alpha) - std::log(n.sigma);
  return n;
}

// convert_model_output: the data (x0) prediction, or the noise prediction without predict_x0.
void UniPCScheduler::convert(const float* x, const float* model_output, std::int64_t n, int i,
                             std::vector<float>& out) const {
  const Noise t = at(i);
  const bool v_pred = cfg_.prediction_type == "v_prediction";
  out.resize(static_cast<std::size_t>(n));
  for (std::int64_t k = 0; k < n; ++k) {
    const float xs = x[k], mo = model_output[k];
    float v;
    if (cfg_.predict_x0)
      v = v_pred ? t.alpha * xs - t.sigma * mo : (xs - t.sigma * mo) / t.alpha;
    else
      v = v_pred ? t.alpha * mo + t.sigma * xs : mo;
    out[static_cast<std::size_t>(k)] = v;
  }
}

// multistep_uni_p_bh_update: x (the sample at step i) -> the sample at step i + 1.
void UniPCScheduler::predict(float* x, int order, int i) const {
  const Noise t = at(i + 1), s0 = at(i);
  const float h = t.lambda - s0.lambda;
  const std::vector<float>& m0 = outputs_.back();
  const std::size_t n = m0.size();
  std::vector<float> rks;
  std::vector<const std::vector<float>*> ms;
  for (int k = 1; k < order; ++k) {
    rks.push_back((at(i - k).lambda - s0.lambda) / h);
    ms.push_back(&outputs_[outputs_.size() - 1 - static_cast<std::size_t>(k)]);
  }
  const BhTerms bh = bh_terms(h, order, cfg_.predict_x0, cfg_.solver_type == "bh1");
  std::vector<float> rhos;  // rhos_p: 0.5 for order 2 ("a simplified version"), else solved
  if (order == 2) {
    rhos = {0.5f};
  } else if (order > 2) {
    std::vector<std::vector<float>> r(static_cast<std::size_t>(order - 1));
    for (int p = 0; p < order - 1; ++p)
      for (int c = 0; c < order - 1; ++c)
        r[static_cast<std::size_t>(p)].push_back(std::pow(rks[static_cast<std::size_t>(c)], p));
    rhos = solve_small(r, std::vector<float>(bh.b.begin(), bh.b.end() - 1));
  }
  const float a = cfg_.predict_x0 ? t.sigma / s0.sigma : t.alpha / s0.alpha;
  const float c0 = (cfg_.predict_x0 ? t.alpha : t.sigma) * bh.h_phi_1;
  const float cb = (cfg_.predict_x0 ? t.alpha : t.sigma) * bh.b_h;
  for (std::size_t e = 0; e < n; ++e) {
    float xt = a * x[e] - c0 * m0[e];
    if (!rhos.empty()) {
      float res = 0.0f;
      for (std::size_t k = 0; k < rhos.size(); ++k)
        res += rhos[k] * (((*ms[k])[e] - m0[e]) / rks[k]);  // rho_k * D1_k
      xt = xt - cb * res;
    }
    x[e] = xt;
  }
}

// multistep_uni_c_bh_update: the sample at step i corrected with its model output `model_t`,
// from the sample before the last prediction and the outputs of the steps before.
void UniPCScheduler::correct(float* x, const std::vector<float>& model_t, int order, int i) const {
  const Noise t = at(i), s0 = at(i - 1);
  const float h = t.lambda - s0.lambda;
  const std::vector<float>& m0 = outputs_.back();
  const std::size_t n = m0.size();
  std::vector<float> rks;
  std::vector<const std::vector<float>*> ms;
  for (int k = 1; k < order; ++k) {
    rks.push_back((at(i - (k + 1)).lambda - s0.lambda) / h);
    ms.push_back(&outputs_[outputs_.size() - 1 - static_cast<std::size_t>(k)]);
  }
  rks.push_back(1.0f);
  const BhTerms bh = bh_terms(h, order, cfg_.predict_x0, cfg_.solver_type == "bh1");
  std::vector<float> rhos;  // rhos_c: 0.5 for order 1, else solved
  if (order == 1) {
    rhos = {0.5f};
  } else {
    std::vector<std::vector<float>> r(static_cast<std::size_t>(order));
    for (int p = 0; p < order; ++p)
      for (int c = 0; c < order; ++c)
        r[static_cast<std::size_t>(p)].push_back(std::pow(rks[static_cast<std::size_t>(c)], p));
    rhos = solve_small(r, bh.b);
  }
  const float a = cfg_.predict_x0 ? t.sigma / s0.sigma : t.alpha / s0.alpha;
  const float c0 = (cfg_.predict_x0 ? t.alpha : t.sigma) * bh.h_phi_1;
  const float cb = (cfg_.predict_x0 ? t.alpha : t.sigma) * bh.b_h;
  const std::vector<float>& last = last_sample_;
  for (std::size_t e = 0; e < n; ++e) {
    const float xt = a * last[e] - c0 * m0[e];
    float res = 0.0f;
    for (std::size_t k = 0; k + 1 < rhos.size(); ++k)
      res += rhos[k] * (((*ms[k])[e] - m0[e]) / rks[k]);
    const float d1_t = model_t[e] - m0[e];
    x[e] = xt - cb * (res + rhos.back() * d1_t);
  }
}

void UniPCScheduler::step(float* x, const float* model_output, std::int64_t n, int i) {
  if (timesteps_.empty()) throw ModelError("UniPCScheduler: set_timesteps not called");
  if (i != next_step_)
    throw ModelError("UniPCScheduler: step " + std::to_string(i) +
                     " called out of order (next: " + std::to_string(next_step_) + ")");
  if (i >= size())
    throw ModelError("UniPCScheduler: step index " + std::to_string(i) + " outside [0, " +
                     std::to_string(size()) + ")");
  if (n <= 0 || (n_ >= 0 && n != n_))
    throw ModelError("UniPCScheduler: step " + std::to_string(i) + " has " + std::to_string(n) +
                     " values, earlier steps " + std::to_string(n_));
  n_ = n;
  std::vector<float> converted;
  convert(x, model_output, n, i, converted);
  const auto& off = cfg_.disable_corrector;
  if (i > 0 && !last_sample_.empty() && std::find(off.begin(), off.end(), i - 1) == off.end())
    correct(x, converted, this_order_, i);
  outputs_.push_back(std::move(converted));
  if (outputs_.size() > static_cast<std::size_t>(cfg_.solver_order))
    outputs_.erase(outputs_.begin());
  const int order =
      cfg_.lower_order_final ? std::min(cfg_.solver_order, size() - i) : cfg_.solver_order;
  this_order_ = std::min(order, lower_order_nums_ + 1);  // warm-up: one more order per step
  last_sample_.assign(x, x + n);
  predict(x, this_order_, i);
  lower_order_nums_ = std::min(lower_order_nums_ + 1, cfg_.solver_order);
  ++next_step_;
}

}  // namespace gen3d::models
