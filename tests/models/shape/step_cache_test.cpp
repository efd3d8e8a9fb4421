// Step caches driven by a fake DiT whose blocks are cheap analytic functions, against the worked
// examples of specs/dit-cache.md (§4.4, §5.2, §5.4, §6.5) and its test checklist (§10).

#include "models/shape/step_cache.h"

#include <gtest/gtest.h>

#include <cmath>
#include <functional>
#include <limits>
#include <vector>

#include "models/core/error.h"

namespace gen3d::models {
namespace {

constexpr std::int64_t kB = 2, kL = 3, kH = 4;

Tensor filled(float v) {
  Tensor t({kB, kL, kH});
  for (auto& x : t.span()) x = v;
  return t;
}

// Image rows h [2, 3, 4]. Block 0 sets every element of h to first(step) (when set); block 1 maps
// h -> 2h + 1 ("Rest" of §4.4); with `branch`, every block instead adds a kTotal branch y(step)
// (computed or predicted through the hook). m0 is filled with m0(step). output() = h.
struct FakeModel {
  int blocks = 2;
  float h0 = 0.0f;
  std::function<float(int)> first;
  std::function<float(int)> m0;
  std::function<float(int)> branch;
  int block_evaluations = 0;  // blocks run in compute mode, all steps
};

class FakePass final : public DiTPass {
 public:
  FakePass(FakeModel& m, int step) : m_(m), step_(step), h_(filled(m.h0)) {}
  int num_blocks() const override { return m_.blocks; }
  Tensor image_rows() const override { return h_.clone(); }
  void set_image_rows(const Tensor& h) override { h_ = h.clone(); }
  Tensor block0_modulated_input() override { return filled(m_.m0(step_)); }
  void run_blocks(int begin, int end, BranchHook* hook) override {
    for (int b = begin; b < end; ++b) {
      if (m_.branch && hook) {
        Tensor y({kB, kL, kH});
        if (hook->predicting()) {
          hook->predict({b, Branch::kTotal}, y);
        } else {
          ++m_.block_evaluations;
          y = filled(m_.branch(step_));
          hook->computed({b, Branch::kTotal}, RowsView{y.data(), kB, kL, kH, kL * kH});
        }
        for (std::int64_t i = 0; i < h_.numel(); ++i) h_.data()[i] += y.data()[i];
        continue;
      }
      ++m_.block_evaluations;
      if (b == 0 && m_.first) {
        h_ = filled(m_.first(step_));
      } else if (b == 1) {
        for (auto& x : h_.span()) x = 2.0f * x + 1.0f;
      }
    }
  }
  Tensor output() override { return h_.clone(); }

 private:
  FakeModel& m_;
  int step_;
  Tensor h_;
};

struct RunResult {
  std::vector<StepDecision> decisions;
  std::vector<float> out;  // output element 0 per step
  CacheReport report;
};

RunResult run(StepCache& cache, FakeModel& model, int N) {
  RunResult r;
  cache.reset(N);
  for (int i = 0; i < N; ++i) {
    FakePass pass(model, i);
    const Tensor v = cache.forward(pass, i);
    r.out.push_back(v.data()[0]);
    if (!std::isnan(v.data()[0])) {
      for (std::int64_t k = 1; k < v.numel(); ++k) EXPECT_EQ(v.data()[k], v.data()[0]);
    }
    r.decisions.push_back(cache.report().per_step.back().decision);
  }
  r.report = cache.report();
  return r;
}

constexpr auto F = StepDecision::kFull;
constexpr auto S = StepDecision::kSkip;
constexpr auto P = StepDecision::kPredict;

// ---- NoCache --------------------------------------------------------------------------------

TEST(StepCache, NoCacheRunsEveryBlockEveryStep) {
  FakeModel m;
  m.first = [](int i) { return 1.0f + 0.1f * i; };
  auto cache = make_step_cache({});
  const auto r = run(*cache, m, 5);
  for (int i = 0; i < 5; ++i) {
    EXPECT_EQ(r.decisions[static_cast<std::size_t>(i)], F);
    EXPECT_FLOAT_EQ(r.out[static_cast<std::size_t>(i)], 2.0f * (1.0f + 0.1f * i) + 1.0f);
  }
  EXPECT_EQ(m.block_evaluations, 10);
  EXPECT_EQ(r.report.full, 5);
  EXPECT_EQ(cache->memory_bytes(), 0u);
}

// ---- FBCache (§4.4) -------------------------------------------------------------------------

const std::vector<float> kFbC = {1.00f, 1.10f, 1.14f, 1.18f, 1.22f, 1.35f, 1.40f};

TEST(StepCache, FBCacheCannTable) {
  FakeModel m;
  m.first = [](int i) { return kFbC[static_cast<std::size_t>(i)]; };
  StepCacheConfig c;
  c.method = CacheMethod::kFBCache;
  c.fbcache.rel_l1_thresh = 0.05;
  auto cache = make_step_cache(c);
  const auto r = run(*cache, m, 7);
  EXPECT_EQ(r.decisions, (std::vector<StepDecision>{F, F, S, S, S, F, S}));
  const std::vector<float> hL = {3.00f, 3.20f, 3.24f, 3.28f, 3.32f, 3.70f, 3.75f};
  const std::vector<double> stat = {NAN, 0.09091, 0.03509, 0.03390, 0.03279, 0.09630, 0.03571};
  for (std::size_t i = 0; i < hL.size(); ++i) {
    EXPECT_NEAR(r.out[i], hL[i], 1e-5) << "step " << i;
    if (i > 0) {
      EXPECT_NEAR(r.report.per_step[i].statistic, stat[i], 1e-5) << "step " << i;
    }
  }
  EXPECT_TRUE(std::isnan(r.report.per_step[0].statistic));
  EXPECT_EQ(r.report.skipped, 4);
  EXPECT_EQ(r.report.full, 3);
  // Block 0 runs on every step, block 1 on FULL steps only.
  EXPECT_EQ(m.block_evaluations, 7 + 3);
  EXPECT_EQ(r.report.peak_bytes, 2u * kB * kL * kH * sizeof(float));  // prev and R
}

TEST(StepCache, FBCacheLastComputedVariantTable) {
  FakeModel m;
  m.first = [](int i) { return kFbC[static_cast<std::size_t>(i)]; };
  StepCacheConfig c;
  c.method = CacheMethod::kFBCache;
  c.fbcache.rel_l1_thresh = 0.05;
  c.fbcache.last_computed = true;
  auto cache = make_step_cache(c);
  const auto r = run(*cache, m, 7);
  EXPECT_EQ(r.decisions, (std::vector<StepDecision>{F, F, S, F, S, F, S}));
  const std::vector<float> hL = {3.00f, 3.20f, 3.24f, 3.36f, 3.40f, 3.70f, 3.75f};
  const std::vector<double> stat = {NAN, 0.10000, 0.03636, 0.07273, 0.03390, 0.14407, 0.03704};
  for (std::size_t i = 0; i < hL.size(); ++i) {
    EXPECT_NEAR(r.out[i], hL[i], 1e-5) << "step " << i;
    if (i > 0) {
      EXPECT_NEAR(r.report.per_step[i].statistic, stat[i], 1e-5) << "step " << i;
    }
  }
}

TEST(StepCache, FBCacheResidualCompareUsesFirstBlockResidual) {
  // h0 = 0.5, so the residual h1 - h0 differs from h1: c = 1.0, 1.02 gives relL1_cur 0.0196 on
  // the outputs but 0.0385 on the residuals; tau 0.03 separates them.
  FakeModel m;
  m.h0 = 0.5f;
  m.first = [](int i) { return i == 0 ? 1.0f : 1.02f; };
  StepCacheConfig c;
  c.method = CacheMethod::kFBCache;
  c.fbcache.rel_l1_thresh = 0.03;
  auto out_cache = make_step_cache(c);
  EXPECT_EQ(run(*out_cache, m, 2).decisions, (std::vector<StepDecision>{F, S}));
  c.fbcache.compare_residual = true;
  auto res_cache = make_step_cache(c);
  EXPECT_EQ(run(*res_cache, m, 2).decisions, (std::vector<StepDecision>{F, F}));
}

TEST(StepCache, FBCacheThresholdEdgeCases) {
  EXPECT_FALSE(below_threshold(0.05, 0.05));  // tie: FULL
  EXPECT_TRUE(below_threshold(0.0499, 0.05));
  EXPECT_FALSE(below_threshold(0.0, 0.0));  // tau = 0 never skips
  EXPECT_FALSE(below_threshold(std::numeric_limits<double>::quiet_NaN(), 1.0));

  FakeModel m;  // constant first-block output: statistic 0 on every step
  m.first = [](int) { return 1.0f; };
  StepCacheConfig c;
  c.method = CacheMethod::kFBCache;
  c.fbcache.rel_l1_thresh = 0.0;
  auto cache = make_step_cache(c);
  EXPECT_EQ(run(*cache, m, 4).report.skipped, 0);

  FakeModel nan_model;  // NaN statistic: FULL
  nan_model.first = [](int i) { return i == 2 ? NAN : 1.0f; };
  c.fbcache.rel_l1_thresh = 0.5;
  auto nan_cache = make_step_cache(c);
  EXPECT_EQ(run(*nan_cache, nan_model, 3).decisions, (std::vector<StepDecision>{F, S, F}));
}

TEST(StepCache, FBCacheReferenceUpdateRules) {
  // Drift of 2 % per step, tau 0.03: the CANN rule compares consecutive steps (1.96 %) and skips
  // from step 1 on; the last-computed rule accumulates drift and computes every other step.
  FakeModel m;
  m.first = [](int i) { return std::pow(1.02f, static_cast<float>(i)); };
  StepCacheConfig c;
  c.method = CacheMethod::kFBCache;
  c.fbcache.rel_l1_thresh = 0.03;
  auto cann = make_step_cache(c);
  EXPECT_EQ(run(*cann, m, 6).decisions, (std::vector<StepDecision>{F, S, S, S, S, S}));
  c.fbcache.last_computed = true;
  auto para = make_step_cache(c);
  EXPECT_EQ(run(*para, m, 6).decisions, (std::vector<StepDecision>{F, S, F, S, F, S}));
}

// ---- TeaCache (§5) --------------------------------------------------------------------------

const std::vector<double> kCoeffs = TeaCacheOptions{}.coefficients;

TEST(StepCache, TeaCachePolynomialValues) {
  const std::vector<std::pair<double, double>> table = {
      {0.0, 0.096124},  {0.005, 0.082014}, {0.01, 0.070990}, {0.02, 0.057069},
      {0.03, 0.052219}, {0.05, 0.062038},  {0.08, 0.101343}, {0.10, 0.129196},
      {0.15, 0.161723}, {0.20, 0.133731},  {0.30, 0.342552}};
  for (const auto& [r, p] : table) EXPECT_NEAR(teacache_polynomial(kCoeffs, r), p, 1e-6) << r;
  // Global minimum over r >= 0: 0.0521497 at r ~ 0.0314.
  double best = 1e9, at = 0.0;
  for (int k = 0; k <= 100000; ++k) {
    const double r = k * 1e-5, p = std::abs(teacache_polynomial(kCoeffs, r));
    if (p < best) {
      best = p;
      at = r;
    }
  }
  EXPECT_NEAR(best, 0.0521497, 1e-7);
  EXPECT_NEAR(at, 0.0314, 5e-4);
}

// m0 values whose relL1_prev to the previous step is r_i (m0_i = m0_{i-1} (1 + r_i)).
std::function<float(int)> m0_with_changes(std::vector<double> r_by_step) {
  std::vector<float> v(r_by_step.size(), 1.0f);
  for (std::size_t i = 1; i < v.size(); ++i)
    v[i] = static_cast<float>(static_cast<double>(v[i - 1]) * (1.0 + r_by_step[i]));
  return [v](int i) { return v[static_cast<std::size_t>(i)]; };
}

TEST(StepCache, TeaCacheWorkedExample) {
  FakeModel m;
  m.first = [](int i) { return 1.0f + 0.01f * i; };
  std::vector<double> r(12, 0.0);
  const double ri[] = {0.030, 0.030, 0.030, 0.010, 0.030, 0.030, 0.100};
  for (int i = 3; i <= 9; ++i) r[static_cast<std::size_t>(i)] = ri[i - 3];
  m.m0 = m0_with_changes(r);
  StepCacheConfig c;
  c.method = CacheMethod::kTeaCache;  // tau 0.1, W 2
  auto cache = make_step_cache(c);
  const auto res = run(*cache, m, 12);
  EXPECT_EQ(res.decisions, (std::vector<StepDecision>{F, F, F, S, F, S, F, S, F, F, F, F}));
  const double acc[] = {0, 0, 0, 0.052219, 0, 0.052219, 0, 0.052219, 0, 0, 0, 0};
  for (std::size_t i = 0; i < 12; ++i)
    EXPECT_NEAR(res.report.per_step[i].accumulator, acc[i], 2e-6) << "step " << i;
  EXPECT_EQ(res.report.skipped, 3);
  // A skipped step reuses R = hL - h0 of the last FULL step: step 3 = h0 + (hL_2 - h0).
  EXPECT_FLOAT_EQ(res.out[3], res.out[2]);
}

int teacache_skips(int N, int W, double tau, double r) {
  FakeModel m;
  m.first = [](int) { return 1.0f; };
  m.m0 = m0_with_changes(std::vector<double>(static_cast<std::size_t>(N), r));
  StepCacheConfig c;
  c.method = CacheMethod::kTeaCache;
  c.teacache.warmup = W;
  c.teacache.rel_l1_thresh = tau;
  auto cache = make_step_cache(c);
  return run(*cache, m, N).report.skipped;
}

TEST(StepCache, TeaCacheSkipBoundsAtThePolynomialMinimum) {
  EXPECT_EQ(teacache_skips(100, 2, 0.1, 0.0314), 48);
  EXPECT_EQ(teacache_skips(100, 2, 0.2, 0.0314), 72);
  EXPECT_EQ(teacache_skips(100, 0, 0.1, 0.0314), 50);
  EXPECT_EQ(teacache_skips(100, 0, 0.2, 0.0314), 75);
}

TEST(StepCache, TeaCacheForcedCutoffStepsRunAllBlocksAfterASkip) {
  // §9.2 regression: N = 100, W = 2, tau 0.2, constant r: step 97 is a SKIP; steps 98 and 99
  // must be FULL and run every block (the recipe ran block 0 only there).
  FakeModel m;
  m.first = [](int i) { return 1.0f + 0.01f * i; };
  m.m0 = m0_with_changes(std::vector<double>(100, 0.0314));
  StepCacheConfig c;
  c.method = CacheMethod::kTeaCache;
  c.teacache.rel_l1_thresh = 0.2;
  auto cache = make_step_cache(c);
  cache->reset(100);
  for (int i = 0; i < 100; ++i) {
    FakePass pass(m, i);
    const int before = m.block_evaluations;
    const Tensor v = cache->forward(pass, i);
    const StepDecision d = cache->report().per_step.back().decision;
    if (i == 97) {
      EXPECT_EQ(d, S);
    }
    if (i >= 98) {
      EXPECT_EQ(d, F) << i;
      EXPECT_EQ(m.block_evaluations - before, 2) << "step " << i << " ran every block";
      EXPECT_FLOAT_EQ(v.data()[0], 2.0f * (1.0f + 0.01f * i) + 1.0f);
    }
  }
}

// ---- TaylorSeer (§6) ------------------------------------------------------------------------

std::vector<int> full_steps(int N, const TaylorSeerOptions& o) {
  std::vector<int> v;
  for (int i = 0; i < N; ++i)
    if (taylorseer_full_step(i, N, o)) v.push_back(i);
  return v;
}

TEST(StepCache, TaylorSeerScheduleVectors) {
  const TaylorSeerOptions def;
  auto f100 = full_steps(100, def);
  std::vector<int> expect = {0};
  for (int i = 1; i <= 97; i += 4) expect.push_back(i);
  expect.push_back(99);
  EXPECT_EQ(f100, expect);
  EXPECT_EQ(f100.size(), 27u);
  auto f50 = full_steps(50, def);
  EXPECT_EQ(f50.size(), 14u);
  EXPECT_EQ(f50.front(), 0);
  EXPECT_EQ(f50[1], 1);
  EXPECT_EQ(f50.back(), 49);
  const int predicted[] = {0, 48, 64, 72, 77, 80, 83};
  for (int K = 1; K <= 7; ++K) {
    TaylorSeerOptions o;
    o.warmup = 3;
    o.cutoff_steps = 0;
    o.skip_interval_steps = K;
    EXPECT_EQ(100 - static_cast<int>(full_steps(100, o).size()), predicted[K - 1]) << "K " << K;
  }
}

TEST(StepCache, TaylorSeerLinearAndQuadraticTrajectories) {
  // One block whose branch is y(i); h0 = 0, so the output is the (predicted) branch value.
  for (const bool quadratic : {false, true}) {
    FakeModel m;
    m.blocks = 1;
    m.branch = [quadratic](int i) {
      return quadratic ? static_cast<float>(i * i) : 2.0f + 3.0f * static_cast<float>(i);
    };
    StepCacheConfig c;
    c.method = CacheMethod::kTaylorSeer;
    auto cache = make_step_cache(c);
    const auto r = run(*cache, m, 18);
    for (int i = 0; i < 18; ++i) {
      const bool full = i == 0 || i == 1 || (i - 1) % 4 == 0;
      EXPECT_EQ(r.decisions[static_cast<std::size_t>(i)], full ? F : P) << i;
    }
    const std::vector<int> pred_steps = {2, 3, 4, 6, 7, 8, 10, 11, 12, 14, 15, 16};
    const std::vector<float> lin_pred = {5, 5, 5, 20, 23, 26, 32, 35, 38, 44, 47, 50};
    const std::vector<float> quad_pred = {1, 1, 1, 31, 37, 43, 96, 113, 132, 192, 217, 244};
    for (std::size_t k = 0; k < pred_steps.size(); ++k) {
      const float want = quadratic ? quad_pred[k] : lin_pred[k];
      EXPECT_EQ(r.out[static_cast<std::size_t>(pred_steps[k])], want)
          << (quadratic ? "quadratic" : "linear") << " step " << pred_steps[k];
    }
    // Factors filled one order per FULL step: {F0}, {F0,F1}, {F0..F2}, {F0..F3} (1 element each
    // of [2, 3, 4] floats).
    EXPECT_EQ(r.report.peak_bytes, 4u * kB * kL * kH * sizeof(float));
    EXPECT_EQ(m.block_evaluations, 6);  // FULL steps 0, 1, 5, 9, 13, 17
  }
}

TEST(StepCache, ConfigValidation) {
  StepCacheConfig c;
  c.method = CacheMethod::kTaylorSeer;
  c.taylorseer.warmup = 0;
  EXPECT_FALSE(c.problems().empty());
  EXPECT_THROW(make_step_cache(c), ModelError);
  c.taylorseer.warmup = 1;
  c.taylorseer.skip_interval_steps = 0;
  EXPECT_THROW(c.validate(), ModelError);
  c = {};
  c.method = CacheMethod::kFBCache;
  c.fbcache.rel_l1_thresh = -0.1;
  EXPECT_EQ(c.problems().size(), 1u);
  c = {};
  c.method = CacheMethod::kTeaCache;
  c.teacache.coefficients.clear();
  EXPECT_FALSE(c.problems().empty());
  EXPECT_EQ(parse_cache_method("TeaCache"), CacheMethod::kTeaCache);
  EXPECT_EQ(parse_cache_method("taylorseer"), CacheMethod::kTaylorSeer);
  EXPECT_THROW(parse_cache_method("teacash"), ModelError);
}

TEST(StepCache, ResetGivesFreshRunDecisions) {
  // §10.6: a second run with other inputs decides like a fresh cache.
  FakeModel a;
  a.first = [](int i) { return kFbC[static_cast<std::size_t>(i)]; };
  FakeModel b;
  b.first = [](int i) { return 5.0f + kFbC[static_cast<std::size_t>(i)]; };
  StepCacheConfig c;
  c.method = CacheMethod::kFBCache;
  c.fbcache.rel_l1_thresh = 0.05;
  auto reused = make_step_cache(c);
  run(*reused, a, 7);
  const auto second = run(*reused, b, 7);
  auto fresh = make_step_cache(c);
  const auto expected = run(*fresh, b, 7);
  EXPECT_EQ(second.decisions, expected.decisions);
  EXPECT_EQ(second.out, expected.out);
  EXPECT_EQ(second.report.full + second.report.skipped, 7);
}

}  // namespace
}  // namespace gen3d::models
