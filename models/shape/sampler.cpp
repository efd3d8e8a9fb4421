#include "models/shape/sampler.h"

#include <cmath>
#include <numbers>

#include "models/core/error.h"
#include "models/shape/denoiser.h"

namespace gen3d::models {

namespace {

using i64 = std::int64_t;

// numpy.linspace(start, stop, num, endpoint): start + i * step in double, last = stop if endpoint.
std::vector<double> linspace(double start, double stop, int num, bool endpoint) {
  std::vector<double> v(static_cast<std::size_t>(std::max(num, 0)));
  if (num <= 0) return v;
  const int div = endpoint ? num - 1 : num;
  const double step = div > 0 ? (stop - start) / div : 0.0;
  for (int i = 0; i < num; ++i) v[static_cast<std::size_t>(i)] = start + i * step;
  if (endpoint && num > 1) v.back() = stop;
  return v;
}

void finish_tables(Schedule& s, const std::vector<float>& step_sigmas, int num_train_timesteps) {
  const float T = static_cast<float>(num_train_timesteps);
  s.sigmas = step_sigmas;
  s.sigmas.push_back(1.0f);
  for (float sigma : step_sigmas) {
    const float ts = sigma * T;  // float32, like the reference tensors
    s.timesteps.push_back(ts);
    s.model_t.push_back(ts / T);
  }
  for (std::size_t i = 0; i + 1 < s.sigmas.size(); ++i)
    s.dt.push_back(s.sigmas[i + 1] - s.sigmas[i]);
}

}  // namespace

Schedule flow_match_schedule(int steps, double shift, int num_train_timesteps) {
  if (steps < 1) throw ModelError("flow_match_schedule: steps must be >= 1");
  if (!(shift > 0.0)) throw ModelError("flow_match_schedule: shift must be > 0");
  std::vector<float> sig;
  for (double v : linspace(0.0, 1.0, steps, true)) {
    float s = static_cast<float>(v);
    if (shift != 1.0) s = static_cast<float>(shift * s / (1.0 + (shift - 1.0) * s));
    sig.push_back(s);
  }
  Schedule s;
  finish_tables(s, sig, num_train_timesteps);
  return s;
}

Schedule consistency_schedule(int steps, int pcm_timesteps, int num_train_timesteps) {
  if (steps < 1) throw ModelError("consistency_schedule: steps must be >= 1");
  if (pcm_timesteps < 1 || pcm_timesteps > num_train_timesteps)
    throw ModelError("consistency_schedule: pcm_timesteps must be in [1, num_train_timesteps]");
  const std::vector<double> grid = linspace(0.0, 1.0, num_train_timesteps, true);
  const int ratio = num_train_timesteps / pcm_timesteps;
  std::vector<float> table;  // sigmas[euler_timesteps], float32
  table.push_back(static_cast<float>(grid[0]));
  for (int k = 1; k < pcm_timesteps; ++k)
    table.push_back(static_cast<float>(grid[static_cast<std::size_t>(k * ratio - 1)]));
  std::vector<float> sig;
  for (double v : linspace(0.0, pcm_timesteps, steps, false)) {
    const auto idx = static_cast<std::size_t>(std::floor(v));
    sig.push_back(table.at(idx));
  }
  Schedule s;
  finish_tables(s, sig, num_train_timesteps);
  return s;
}

FlowMatchSampler::FlowMatchSampler(const ShapeDenoiser& model, SamplerOptions options,
                                   StepCache* cache)
    : model_(model), opt_(options), cache_(cache) {
  if (!cache_) {
    own_cache_ = make_step_cache({});
    cache_ = own_cache_.get();
  }
  schedule_ = opt_.schedule == ScheduleKind::kConsistency
                  ? consistency_schedule(opt_.steps, opt_.pcm_timesteps, opt_.num_train_timesteps)
                  : flow_match_schedule(opt_.steps, opt_.shift, opt_.num_train_timesteps);
  cfg_ = opt_.guidance_scale >= 0.0 && !model_.guidance_embedded();
}

FlowMatchSampler::~FlowMatchSampler() = default;

void FlowMatchSampler::start(Tensor initial_latents, const Tensor& cond, const Tensor* uncond) {
  const int C = model_.latent_channels(), Cc = model_.context_dim();
  if (initial_latents.rank() != 3 || initial_latents.dim(2) != C)
    throw ModelError("sampler: latents must be [B, L, " + std::to_string(C) + "], got " +
                     initial_latents.shape().str());
  const i64 B = initial_latents.dim(0);
  if (cond.rank() != 3 || cond.dim(0) != B || cond.dim(2) != Cc)
    throw ModelError("sampler: condition must be [" + std::to_string(B) + ", Lc, " +
                     std::to_string(Cc) + "], got " + cond.shape().str());
  if (uncond && !(uncond->shape() == cond.shape()))
    throw ModelError("sampler: unconditional context " + uncond->shape().str() +
                     " must have the condition's shape " + cond.shape().str());
  x_ = initial_latents.is_view() ? initial_latents.clone() : std::move(initial_latents);
  if (cfg_) {
    const i64 n = cond.numel();
    context_ = Tensor({2 * B, cond.dim(1), cond.dim(2)});  // [cond; uncond]
    std::copy_n(cond.data(), n, context_.data());
    if (uncond) std::copy_n(uncond->data(), n, context_.data() + n);  // else zeros
  } else {
    context_ = cond.clone();
  }
  guidance_ = Tensor();
  if (model_.guidance_embedded()) {
    guidance_ = Tensor({B});
    for (auto& g : guidance_.span()) g = static_cast<float>(opt_.guidance_scale);
  }
  step_ = 0;
  cache_->reset(schedule_.size());
  progress_ = progress::Steps("denoise step", schedule_.size());
}

StepDecision FlowMatchSampler::step(const StepObserver* observer) {
  if (x_.empty()) throw ModelError("sampler: step() before start()");
  if (done()) throw ModelError("sampler: all steps done");
  const int i = step_++;
  const float dt = schedule_.dt[static_cast<std::size_t>(i)];
  const float t = schedule_.model_t[static_cast<std::size_t>(i)];
  StepObservation obs;
  obs.step = i;
  obs.t = t;
  obs.dt = dt;
  if (dt == 0.0f && opt_.elide_zero_dt_steps) {
    cache_->elided(i);  // x_{i+1} = x_i exactly
    obs.decision = StepDecision::kElided;
    obs.latents = &x_;
    if (observer && *observer) (*observer)(obs);
    progress_.done(step_);
    return obs.decision;
  }
  const i64 B = x_.dim(0), L = x_.dim(1), C = x_.dim(2), n = x_.numel();
  const i64 MB = cfg_ ? 2 * B : B;  // model batch
  Tensor X;
  if (cfg_) {
    X = Tensor({MB, L, C});  // [2B, L, C] = [x; x]
    std::copy_n(x_.data(), n, X.data());
    std::copy_n(x_.data(), n, X.data() + n);
  }
  const Tensor& xin = cfg_ ? X : x_;
  Tensor tt({MB});  // [MB]
  for (auto& v : tt.span()) v = t;
  auto pass = model_.begin_pass(xin, tt, context_, guidance_.empty() ? nullptr : &guidance_);
  Tensor V = cache_->forward(*pass, i);  // [MB, L, C]
  obs.decision = cache_->report().per_step.back().decision;

  Tensor v;
  Tensor vc, vu;
  if (cfg_) {
    const float s = static_cast<float>(opt_.guidance_scale);
    v = Tensor({B, L, C});  // [B, L, C] = u + s (c - u)
    const float* c = V.data();
    const float* u = V.data() + n;
    for (i64 k = 0; k < n; ++k) v.data()[k] = u[k] + s * (c[k] - u[k]);
    if (observer && *observer) {
      vc = Tensor::view(V.data(), x_.shape());
      vu = Tensor::view(V.data() + n, x_.shape());
      obs.v_cond = &vc;
      obs.v_uncond = &vu;
    }
  } else {
    v = std::move(V);
  }
  for (i64 k = 0; k < n; ++k) x_.data()[k] += dt * v.data()[k];  // Euler, float32
  obs.latents = &x_;
  obs.v = &v;
  if (observer && *observer) (*observer)(obs);
  progress_.done(step_);
  return obs.decision;
}

Tensor sample(const ShapeDenoiser& model, const SamplerOptions& options, StepCache* cache,
              Tensor initial_latents, const Tensor& cond, const Tensor* uncond,
              const StepObserver* observer) {
  FlowMatchSampler s(model, options, cache);
  s.start(std::move(initial_latents), cond, uncond);
  while (!s.done()) s.step(observer);
  return s.latents().clone();
}

}  // namespace gen3d::models
