#include "models/shape/step_cache.h"

#include <algorithm>
#include <cmath>
#include <map>
#include <utility>

#include "models/core/error.h"

namespace gen3d::models {

namespace {

using i64 = std::int64_t;

std::size_t tensor_bytes(const Tensor& t) {
  return static_cast<std::size_t>(t.numel()) * sizeof(float);
}

// a - b, element-wise, same shape.
Tensor subtract(const Tensor& a, const Tensor& b) {
  Tensor out(a.shape());
  for (i64 i = 0; i < a.numel(); ++i) out.data()[i] = a.data()[i] - b.data()[i];
  return out;
}

Tensor add(const Tensor& a, const Tensor& b) {
  Tensor out(a.shape());
  for (i64 i = 0; i < a.numel(); ++i) out.data()[i] = a.data()[i] + b.data()[i];
  return out;
}

// ---------------------------------------------------------------------------------------------
class NoCache final : public StepCache {
 public:
  CacheMethod method() const override { return CacheMethod::kNone; }

 protected:
  Tensor run(DiTPass& pass, int, StepStats& stats) override {
    stats.decision = StepDecision::kFull;
    pass.run_blocks(0, pass.num_blocks());
    return pass.output();
  }
  void clear() override {}
  std::size_t bytes() const override { return 0; }
};

// ---------------------------------------------------------------------------------------------
// FBCache (§4): compare block 0's output (or residual) with a reference; on SKIP reuse the
// residual R = hL - h1 of the remaining blocks.
class FBCache final : public StepCache {
 public:
  explicit FBCache(FBCacheOptions o) : o_(std::move(o)) {}
  CacheMethod method() const override { return CacheMethod::kFBCache; }

 protected:
  Tensor run(DiTPass& pass, int step, StepStats& stats) override {
    const Tensor h0 = o_.compare_residual ? pass.image_rows() : Tensor();
    pass.run_blocks(0, 1);                                             // stem + double block 0
    Tensor h1 = pass.image_rows();                                     // [B, L, H]
    Tensor cmp = o_.compare_residual ? subtract(h1, h0) : h1.clone();  // [B, L, H]
    bool skip = false;
    if (!prev_.empty() && !R_.empty() && step >= o_.warmup_steps) {
      stats.statistic = rel_l1(cmp, prev_, /*by_prev=*/o_.last_computed);
      skip = below_threshold(stats.statistic, o_.rel_l1_thresh);
    }
    if (!o_.last_computed || !skip) prev_ = std::move(cmp);  // §4.1 step 3 / §4.2
    if (skip) {
      stats.decision = StepDecision::kSkip;
      pass.set_image_rows(add(h1, R_));  // hL = h1 + R (R unchanged)
    } else {
      stats.decision = StepDecision::kFull;
      pass.run_blocks(1, pass.num_blocks());
      R_ = subtract(pass.image_rows(), h1);  // R = hL - h1
    }
    return pass.output();
  }
  void clear() override {
    prev_ = Tensor();
    R_ = Tensor();
  }
  std::size_t bytes() const override { return tensor_bytes(prev_) + tensor_bytes(R_); }

 private:
  FBCacheOptions o_;
  Tensor prev_;  // [B, L, H] reference (h1 or h1 - h0)
  Tensor R_;     // [B, L, H] residual of blocks 1..end
};

// ---------------------------------------------------------------------------------------------
// TeaCache (§5.1, with the §9.2 fix: the decision is explicit every step, forced steps run all
// blocks): accumulate |P(relL1_prev(m0, prev))|; SKIP reuses R = hL - h0 of all blocks.
class TeaCache final : public StepCache {
 public:
  explicit TeaCache(TeaCacheOptions o) : o_(std::move(o)) {}
  CacheMethod method() const override { return CacheMethod::kTeaCache; }

 protected:
  Tensor run(DiTPass& pass, int step, StepStats& stats) override {
    const int N = num_steps(), W = o_.warmup;
    bool skip = false;
    if (step < W || step >= N - W) {
      acc_ = 0.0;  // forced FULL; prev not updated (§9.3)
    } else if (prev_.empty()) {
      prev_ = pass.block0_modulated_input();  // first compared step: init prev, FULL
      acc_ = 0.0;
    } else {
      Tensor m0 = pass.block0_modulated_input();  // [B, L, H]
      stats.statistic = rel_l1(m0, prev_, /*by_prev=*/true);
      acc_ += std::abs(teacache_polynomial(o_.coefficients, stats.statistic));
      skip = below_threshold(acc_, o_.rel_l1_thresh);
      if (!skip) acc_ = 0.0;  // also resets a NaN accumulator
      prev_ = std::move(m0);
    }
    stats.accumulator = acc_;
    if (skip && !R_.empty()) {
      stats.decision = StepDecision::kSkip;
      pass.set_image_rows(add(pass.image_rows(), R_));  // hL = h0 + R
    } else {
      stats.decision = StepDecision::kFull;
      const Tensor h0 = pass.image_rows();
      pass.run_blocks(0, pass.num_blocks());
      R_ = subtract(pass.image_rows(), h0);  // R = hL - h0
    }
    return pass.output();
  }
  void clear() override {
    prev_ = Tensor();
    R_ = Tensor();
    acc_ = 0.0;
  }
  std::size_t bytes() const override { return tensor_bytes(prev_) + tensor_bytes(R_); }

 private:
  TeaCacheOptions o_;
  Tensor prev_;  // [B, L, H] m0 of the last compared step
  Tensor R_;     // [B, L, H] residual of all blocks
  double acc_ = 0.0;
};

// ---------------------------------------------------------------------------------------------
// TaylorSeer (§6): per-branch finite-difference factors refreshed on FULL steps, Taylor
// predictions (reference backward-difference form) on PREDICT steps.
class TaylorSeer final : public StepCache, private BranchHook {
 public:
  explicit TaylorSeer(TaylorSeerOptions o) : o_(o) {}
  CacheMethod method() const override { return CacheMethod::kTaylorSeer; }

 protected:
  Tensor run(DiTPass& pass, int step, StepStats& stats) override {
    step_ = step;
    predicting_ = !taylorseer_full_step(step, num_steps(), o_);
    if (!predicting_) full_steps_.push_back(step);  // A (appended at the start of a FULL step)
    stats.decision = predicting_ ? StepDecision::kPredict : StepDecision::kFull;
    pass.run_blocks(0, pass.num_blocks(), this);
    return pass.output();
  }
  void clear() override {
    factors_.clear();
    full_steps_.clear();
  }
  std::size_t bytes() const override {
    std::size_t b = 0;
    for (const auto& [key, f] : factors_)
      for (const Tensor& t : f) b += tensor_bytes(t);
    return b;
  }

 private:
  using Key = std::pair<int, int>;  // (joint block, branch)
  bool predicting() const override { return predicting_; }
  bool image_rows_only() const override { return o_.image_rows_only; }

  // §6.3: G^0 = y; G^{j+1} = (G^j - F^j_old) / d while F^j_old exists (and i > W - 2).
  void computed(const BranchKey& key, const RowsView& y) override {
    if (full_steps_.size() < 2) return;  // first FULL step of the run: store nothing
    const float d = static_cast<float>(full_steps_[full_steps_.size() - 1] -
                                       full_steps_[full_steps_.size() - 2]);
    std::vector<Tensor>& old = factors_[Key{key.block, static_cast<int>(key.branch)}];
    std::vector<Tensor> g;
    g.reserve(static_cast<std::size_t>(o_.n_derivatives) + 1);
    Tensor g0({y.batch, y.rows, y.dim});  // [B, rows, H]
    for (i64 b = 0; b < y.batch; ++b)
      std::copy_n(y.data + b * y.batch_stride, y.rows * y.dim, g0.data() + b * y.rows * y.dim);
    g.push_back(std::move(g0));
    for (int j = 0; j < o_.n_derivatives; ++j) {
      if (static_cast<std::size_t>(j) >= old.size() || !(step_ > o_.warmup - 2)) break;
      const Tensor& prev = g.back();
      const Tensor& fj = old[static_cast<std::size_t>(j)];
      Tensor next(prev.shape());
      for (i64 i = 0; i < next.numel(); ++i) next.data()[i] = (prev.data()[i] - fj.data()[i]) / d;
      g.push_back(std::move(next));
    }
    old = std::move(g);
  }

  // §6.4: ŷ = Σ_j F^j x^j / j!, x = i - A[-1].
  void predict(const BranchKey& key, Tensor& out) override {
    const auto it = factors_.find(Key{key.block, static_cast<int>(key.branch)});
    if (it == factors_.end() || it->second.empty())
      throw ModelError("TaylorSeer: no factors for block " + std::to_string(key.block) +
                       " at step " + std::to_string(step_) + " (warmup must be >= 1)");
    const std::vector<Tensor>& f = it->second;
    if (!(f[0].shape() == out.shape()))
      throw ModelError("TaylorSeer: factor shape " + f[0].shape().str() + " != branch shape " +
                       out.shape().str());
    const double x = static_cast<double>(step_ - full_steps_.back());
    std::copy_n(f[0].data(), out.numel(), out.data());
    double coef = 1.0;
    for (std::size_t j = 1; j < f.size(); ++j) {
      coef *= x / static_cast<double>(j);  // x^j / j!
      const float c = static_cast<float>(coef);
      const float* fj = f[j].data();
      for (i64 i = 0; i < out.numel(); ++i) out.data()[i] += c * fj[i];
    }
  }

  TaylorSeerOptions o_;
  int step_ = 0;
  bool predicting_ = false;
  std::vector<int> full_steps_;                 // A
  std::map<Key, std::vector<Tensor>> factors_;  // F^0..F^k per branch
};

}  // namespace

// ---------------------------------------------------------------------------------------------

const char* to_string(StepDecision d) {
  switch (d) {
    case StepDecision::kFull:
      return "full";
    case StepDecision::kSkip:
      return "skip";
    case StepDecision::kPredict:
      return "predict";
    case StepDecision::kElided:
      return "elided";
  }
  return "?";
}

const char* to_string(CacheMethod m) {
  switch (m) {
    case CacheMethod::kNone:
      return "none";
    case CacheMethod::kFBCache:
      return "fbcache";
    case CacheMethod::kTeaCache:
      return "teacache";
    case CacheMethod::kTaylorSeer:
      return "taylorseer";
  }
  return "?";
}

CacheMethod parse_cache_method(std::string_view name) {
  if (name == "none" || name == "NoCache") return CacheMethod::kNone;
  if (name == "fbcache" || name == "FBCache") return CacheMethod::kFBCache;
  if (name == "teacache" || name == "TeaCache") return CacheMethod::kTeaCache;
  if (name == "taylorseer" || name == "TaylorSeer") return CacheMethod::kTaylorSeer;
  throw ModelError("unknown cache method \"" + std::string(name) +
                   "\" (use none, fbcache, teacache or taylorseer)");
}

std::vector<std::string> StepCacheConfig::problems() const {
  std::vector<std::string> p;
  auto need = [&](bool ok, const std::string& what) {
    if (!ok) p.push_back(what);
  };
  switch (method) {
    case CacheMethod::kNone:
      break;
    case CacheMethod::kFBCache:
      need(std::isfinite(fbcache.rel_l1_thresh) && fbcache.rel_l1_thresh >= 0.0,
           "fbcache rel_l1_thresh must be a number >= 0");
      need(fbcache.warmup_steps >= 0, "fbcache warmup_steps must be >= 0");
      break;
    case CacheMethod::kTeaCache:
      need(std::isfinite(teacache.rel_l1_thresh) && teacache.rel_l1_thresh >= 0.0,
           "teacache rel_l1_thresh must be a number >= 0");
      need(teacache.warmup >= 0, "teacache warmup must be >= 0");
      need(!teacache.coefficients.empty(), "teacache coefficients must not be empty");
      for (double c : teacache.coefficients)
        need(std::isfinite(c), "teacache coefficients must be finite numbers");
      break;
    case CacheMethod::kTaylorSeer:
      need(taylorseer.n_derivatives >= 0, "taylorseer n_derivatives must be >= 0");
      need(taylorseer.skip_interval_steps >= 1, "taylorseer skip_interval_steps must be >= 1");
      need(taylorseer.warmup >= 1,
           "taylorseer warmup must be >= 1 (with 0 the first predicted step has no factors)");
      need(taylorseer.cutoff_steps >= 0, "taylorseer cutoff_steps must be >= 0");
      break;
  }
  return p;
}

void StepCacheConfig::validate() const {
  const auto p = problems();
  if (p.empty()) return;
  std::string msg = std::string("invalid ") + to_string(method) + " configuration:";
  for (const auto& s : p) msg += "\n  " + s;
  throw ModelError(msg);
}

double CacheReport::skip_rate() const {
  return steps > 0 ? static_cast<double>(skipped + predicted) / steps : 0.0;
}

void StepCache::reset(int num_steps) {
  if (num_steps < 1) throw ModelError("StepCache::reset: num_steps must be >= 1");
  clear();
  num_steps_ = num_steps;
  report_ = CacheReport{};
  report_.method = to_string(method());
  report_.steps = num_steps;
}

Tensor StepCache::forward(DiTPass& pass, int step) {
  if (num_steps_ == 0) throw ModelError("StepCache::forward before reset()");
  StepStats stats;
  stats.step = step;
  Tensor v = run(pass, step, stats);
  switch (stats.decision) {
    case StepDecision::kFull:
      ++report_.full;
      break;
    case StepDecision::kSkip:
      ++report_.skipped;
      break;
    case StepDecision::kPredict:
      ++report_.predicted;
      break;
    case StepDecision::kElided:
      ++report_.elided;
      break;
  }
  report_.peak_bytes = std::max(report_.peak_bytes, bytes());
  report_.per_step.push_back(stats);
  return v;
}

void StepCache::elided(int step) {
  StepStats stats;
  stats.step = step;
  stats.decision = StepDecision::kElided;
  ++report_.elided;
  report_.per_step.push_back(stats);
}

std::unique_ptr<StepCache> make_step_cache(const StepCacheConfig& config) {
  config.validate();
  switch (config.method) {
    case CacheMethod::kNone:
      return std::make_unique<NoCache>();
    case CacheMethod::kFBCache:
      return std::make_unique<FBCache>(config.fbcache);
    case CacheMethod::kTeaCache:
      return std::make_unique<TeaCache>(config.teacache);
    case CacheMethod::kTaylorSeer:
      return std::make_unique<TaylorSeer>(config.taylorseer);
  }
  throw ModelError("make_step_cache: unknown method");
}

double rel_l1(const Tensor& cur, const Tensor& prev, bool by_prev) {
  if (!(cur.shape() == prev.shape()))
    throw ModelError("rel_l1: shapes differ: " + cur.shape().str() + " vs " + prev.shape().str());
  const i64 n = cur.numel();
  if (n == 0) return std::numeric_limits<double>::quiet_NaN();
  double diff = 0.0, ref = 0.0;
  const Tensor& r = by_prev ? prev : cur;
  for (i64 i = 0; i < n; ++i) {
    diff += std::abs(static_cast<double>(cur.data()[i]) - static_cast<double>(prev.data()[i]));
    ref += std::abs(static_cast<double>(r.data()[i]));
  }
  return (diff / static_cast<double>(n)) / (ref / static_cast<double>(n) + 1e-8);
}

double teacache_polynomial(const std::vector<double>& coefficients, double r) {
  double p = 0.0;
  for (double c : coefficients) p = p * r + c;
  return p;
}

bool taylorseer_full_step(int step, int num_steps, const TaylorSeerOptions& o) {
  return step < o.warmup || (step - o.warmup) % o.skip_interval_steps == 0 ||
         num_steps - step <= o.cutoff_steps;
}

}  // namespace gen3d::models
