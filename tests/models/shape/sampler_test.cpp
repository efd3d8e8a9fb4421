// Flow-matching sampler, schedules, noise, the staged DiT pass and the model registry, on tiny
// random DiTs (no golden data needed).

#include "models/shape/sampler.h"
#include "models/nn/init.h"

#include <gtest/gtest.h>
#include <tbb/global_control.h>

#include <cmath>
#include <filesystem>
#include <map>

#include "models/core/error.h"
#include "models/nn/model_cache.h"
#include "models/shape/checkpoints.h"
#include "models/shape/dit.h"
#include "support/paths.h"

namespace gen3d::models {
namespace {

DiTConfig tiny_config(bool guidance = false) {
  DiTConfig c;
  c.in_channels = 8;
  c.context_in_dim = 12;
  c.hidden_size = 32;
  c.num_heads = 4;
  c.depth = 2;
  c.depth_single_blocks = 2;
  c.axes_dim = {8};
  c.guidance_embed = guidance;
  return c;
}

void expect_identical(const Tensor& a, const Tensor& b, const char* what) {
  ASSERT_EQ(a.shape(), b.shape()) << what;
  for (std::int64_t i = 0; i < a.numel(); ++i) ASSERT_EQ(a.data()[i], b.data()[i]) << what << i;
}

TEST(Schedule, FlowMatchRunsUpwardWithZeroLastStep) {
  const Schedule s = flow_match_schedule(5);
  ASSERT_EQ(s.size(), 5);
  const std::vector<float> sig = {0.0f, 0.25f, 0.5f, 0.75f, 1.0f, 1.0f};
  EXPECT_EQ(s.sigmas, sig);
  for (int i = 0; i < 5; ++i) {
    EXPECT_EQ(s.model_t[static_cast<std::size_t>(i)], sig[static_cast<std::size_t>(i)]);
    EXPECT_EQ(s.timesteps[static_cast<std::size_t>(i)], 1000.0f * sig[static_cast<std::size_t>(i)]);
  }
  EXPECT_EQ(s.dt.back(), 0.0f);
  EXPECT_EQ(s.dt[0], 0.25f);
  // A shift keeps the endpoints and bends the middle.
  const Schedule sh = flow_match_schedule(5, 3.0);
  EXPECT_EQ(sh.sigmas.front(), 0.0f);
  EXPECT_EQ(sh.sigmas[4], 1.0f);
  EXPECT_NEAR(sh.sigmas[2], 3.0 * 0.5 / (1.0 + 2.0 * 0.5), 1e-7);
  EXPECT_THROW(flow_match_schedule(0), ModelError);
}

TEST(Schedule, ConsistencyEveryStepIsEffective) {
  const Schedule s = consistency_schedule(8, 100);
  ASSERT_EQ(s.size(), 8);
  EXPECT_EQ(s.sigmas.front(), 0.0f);
  EXPECT_EQ(s.sigmas.back(), 1.0f);
  for (float d : s.dt) EXPECT_GT(d, 0.0f);
  // Index 12 of the pcm grid (floor(12.5 * 1)) is linspace(0, 1, 1000)[119].
  EXPECT_EQ(s.sigmas[1], static_cast<float>(119.0 * (1.0 / 999.0)));
}

TEST(Noise, DeterministicStandardNormal) {
  const Tensor a = nn::gaussian_noise({4, 1000, 25}, 7), b = nn::gaussian_noise({4, 1000, 25}, 7);
  const Tensor c = nn::gaussian_noise({4, 1000, 25}, 8);
  expect_identical(a, b, "same seed");
  int same = 0;
  double sum = 0.0, sq = 0.0;
  for (std::int64_t i = 0; i < a.numel(); ++i) {
    same += a.data()[i] == c.data()[i];
    sum += a.data()[i];
    sq += static_cast<double>(a.data()[i]) * a.data()[i];
  }
  EXPECT_LT(same, 10);
  const double n = static_cast<double>(a.numel()), mean = sum / n;
  EXPECT_NEAR(mean, 0.0, 0.01);
  EXPECT_NEAR(sq / n - mean * mean, 1.0, 0.02);
  // Prefix-stable: a smaller tensor is the start of a bigger one (counter-based generator).
  const Tensor small = nn::gaussian_noise({10}, 7);
  for (int i = 0; i < 10; ++i) EXPECT_EQ(small.data()[i], a.data()[i]);
}

struct Inputs {
  Tensor x, t, ctx;
};

Inputs make_inputs(const DiTConfig& c, std::int64_t B, std::int64_t L, std::int64_t Lc) {
  Inputs in{nn::gaussian_noise({B, L, c.in_channels}, 1), Tensor({B}),
            nn::gaussian_noise({B, Lc, c.context_in_dim}, 2)};
  for (std::int64_t b = 0; b < B; ++b) in.t.data()[b] = 0.2f + 0.3f * static_cast<float>(b);
  return in;
}

TEST(DiTPass, StagedPassReproducesForwardExactly) {
  const auto cfg = tiny_config();
  const auto model = Hunyuan3DDiT::random(cfg, 11);
  const auto in = make_inputs(cfg, 2, 7, 5);
  const Tensor ref = model.forward(in.x, in.t, in.ctx);
  auto p = model.begin_pass(in.x, in.t, in.ctx);
  ASSERT_EQ(p->num_blocks(), 4);
  p->run_blocks(0, 1);
  p->run_blocks(1, 3);
  p->run_blocks(3, 4);
  expect_identical(p->output(), ref, "staged");
  // image_rows / set_image_rows round trip, and an out-of-range block range is an error.
  auto q = model.begin_pass(in.x, in.t, in.ctx);
  q->run_blocks(0, 4);
  const Tensor hL = q->image_rows();
  EXPECT_EQ(hL.shape(), (Shape{2, 7, 32}));
  auto r = model.begin_pass(in.x, in.t, in.ctx);
  r->set_image_rows(hL);  // skip every block, reuse the rows: same output
  expect_identical(r->output(), ref, "rows reused");
  EXPECT_THROW(r->run_blocks(2, 5), ModelError);
  // m0 depends on the timestep (modulation), not only on x.
  const Tensor m0 = model.begin_pass(in.x, in.t, in.ctx)->block0_modulated_input();
  EXPECT_EQ(m0.shape(), (Shape{2, 7, 32}));
}

// Records every branch output (compute mode), then replays them as predictions: the predict path
// (modulation + gated residual adds only) must rebuild exactly the computed forward.
class RecordReplayHook final : public BranchHook {
 public:
  bool replay = false;
  bool lean = false;
  std::map<std::pair<int, int>, Tensor> stored;
  int predicted = 0;
  bool predicting() const override { return replay; }
  bool image_rows_only() const override { return lean; }
  void computed(const BranchKey& key, const RowsView& y) override {
    Tensor t({y.batch, y.rows, y.dim});
    for (std::int64_t b = 0; b < y.batch; ++b)
      std::copy_n(y.data + b * y.batch_stride, y.rows * y.dim, t.data() + b * y.rows * y.dim);
    stored[{key.block, static_cast<int>(key.branch)}] = std::move(t);
  }
  void predict(const BranchKey& key, Tensor& out) override {
    const Tensor& t = stored.at({key.block, static_cast<int>(key.branch)});
    ASSERT_EQ(t.shape(), out.shape());
    std::copy_n(t.data(), t.numel(), out.data());
    ++predicted;
  }
};

TEST(DiTPass, PredictedBranchesRebuildTheForward) {
  const auto cfg = tiny_config();
  const auto model = Hunyuan3DDiT::random(cfg, 12);
  const auto in = make_inputs(cfg, 2, 7, 5);
  const Tensor ref = model.forward(in.x, in.t, in.ctx);
  for (const bool lean : {false, true}) {
    RecordReplayHook hook;
    hook.lean = lean;
    auto a = model.begin_pass(in.x, in.t, in.ctx);
    a->run_blocks(0, a->num_blocks(), &hook);
    expect_identical(a->output(), ref, "recording pass");
    // 2 double blocks x (2 img + 2 txt branches, or 2 img when lean) + 2 single blocks.
    EXPECT_EQ(hook.stored.size(), lean ? 6u : 10u);
    EXPECT_EQ(hook.stored.at({2, static_cast<int>(Branch::kTotal)}).dim(1), lean ? 7 : 12);
    hook.replay = true;
    auto b = model.begin_pass(in.x, in.t, in.ctx);
    b->run_blocks(0, b->num_blocks(), &hook);
    expect_identical(b->output(), ref, lean ? "lean replay" : "replay");
    EXPECT_EQ(hook.predicted, lean ? 6 : 10);
  }
}

TEST(Sampler, CfgBatchOrderCombineAndEulerUpdate) {
  const auto cfg = tiny_config();
  const auto model = Hunyuan3DDiT::random(cfg, 5);
  const std::int64_t B = 2, L = 6, Lc = 4;
  const Tensor x0 = nn::gaussian_noise({B, L, cfg.in_channels}, 3);
  const Tensor cond = nn::gaussian_noise({B, Lc, cfg.context_in_dim}, 4);
  SamplerOptions o;
  o.steps = 3;
  o.guidance_scale = 5.0;
  FlowMatchSampler s(model, o);
  ASSERT_TRUE(s.cfg());
  s.start(x0.clone(), cond);
  bool seen = false;
  StepObserver obs = [&](const StepObservation& ob) {
    if (ob.step != 0) return;
    seen = true;
    // Reference: one forward over [x; x] with contexts [cond; zeros].
    Tensor X({2 * B, L, cfg.in_channels}), C({2 * B, Lc, cfg.context_in_dim}), T({2 * B});
    std::copy_n(x0.data(), x0.numel(), X.data());
    std::copy_n(x0.data(), x0.numel(), X.data() + x0.numel());
    std::copy_n(cond.data(), cond.numel(), C.data());
    for (auto& t : T.span()) t = 0.0f;
    const Tensor V = model.forward(X, T, C);
    for (std::int64_t k = 0; k < x0.numel(); ++k) {
      const float c = V.data()[k], u = V.data()[x0.numel() + k];
      ASSERT_EQ(ob.v_cond->data()[k], c);
      ASSERT_EQ(ob.v_uncond->data()[k], u);
      ASSERT_EQ(ob.v->data()[k], u + 5.0f * (c - u));
      ASSERT_EQ(ob.latents->data()[k], x0.data()[k] + 0.5f * ob.v->data()[k]);
    }
  };
  while (!s.done()) s.step(&obs);
  EXPECT_TRUE(seen);
  // An explicit all-zero unconditional context is the default.
  Tensor zeros(cond.shape());
  const Tensor a = sample(model, o, nullptr, x0.clone(), cond);
  const Tensor b = sample(model, o, nullptr, x0.clone(), cond, &zeros);
  expect_identical(a, b, "zero uncond");
  Tensor ones(cond.shape());
  for (auto& v : ones.span()) v = 1.0f;
  const Tensor c = sample(model, o, nullptr, x0.clone(), cond, &ones);
  EXPECT_NE(a.data()[0], c.data()[0]);
}

TEST(Sampler, ZeroDtElisionIsExactAndReported) {
  const auto cfg = tiny_config();
  const auto model = Hunyuan3DDiT::random(cfg, 6);
  const Tensor x0 = nn::gaussian_noise({1, 5, cfg.in_channels}, 9);
  const Tensor cond = nn::gaussian_noise({1, 3, cfg.context_in_dim}, 10);
  SamplerOptions o;
  o.steps = 4;
  auto c1 = make_step_cache({}), c2 = make_step_cache({});
  const Tensor a = sample(model, o, c1.get(), x0.clone(), cond);
  o.elide_zero_dt_steps = false;
  const Tensor b = sample(model, o, c2.get(), x0.clone(), cond);
  expect_identical(a, b, "elided");
  EXPECT_EQ(c1->report().elided, 1);
  EXPECT_EQ(c1->report().full, 3);
  EXPECT_EQ(c2->report().elided, 0);
  EXPECT_EQ(c2->report().full, 4);
  // The consistency schedule has no zero step: nothing is elided.
  o.elide_zero_dt_steps = true;
  o.schedule = ScheduleKind::kConsistency;
  o.steps = 5;
  auto c3 = make_step_cache({});
  sample(model, o, c3.get(), x0.clone(), cond);
  EXPECT_EQ(c3->report().elided, 0);
  EXPECT_EQ(c3->report().full, 5);
}

TEST(Sampler, GuidanceEmbeddedModelSkipsCfg) {
  const auto cfg = tiny_config(true);
  const auto model = Hunyuan3DDiT::random(cfg, 7);
  SamplerOptions o;
  o.steps = 3;
  FlowMatchSampler s(model, o);
  EXPECT_FALSE(s.cfg());
  const Tensor x0 = nn::gaussian_noise({2, 5, cfg.in_channels}, 1);
  const Tensor cond = nn::gaussian_noise({2, 3, cfg.context_in_dim}, 2);
  s.start(x0.clone(), cond);
  StepObserver obs = [&](const StepObservation& ob) {
    if (ob.step != 0) return;
    EXPECT_EQ(ob.v_cond, nullptr);
    Tensor T({2}), G({2});
    for (auto& g : G.span()) g = 5.0f;
    const Tensor V = model.forward(x0, T, cond, &G);  // batch B, guidance = scale
    for (std::int64_t k = 0; k < V.numel(); ++k) ASSERT_EQ(ob.v->data()[k], V.data()[k]);
  };
  s.step(&obs);
  EXPECT_THROW(s.start(nn::gaussian_noise({2, 5, 3}, 1), cond), ModelError);
}

TEST(Sampler, CachesOnARealDiT) {
  const auto cfg = tiny_config();
  const auto model = Hunyuan3DDiT::random(cfg, 8);
  const Tensor x0 = nn::gaussian_noise({1, 16, cfg.in_channels}, 1);
  const Tensor cond = nn::gaussian_noise({1, 6, cfg.context_in_dim}, 2);
  SamplerOptions o;
  o.steps = 20;
  const Tensor base = sample(model, o, nullptr, x0.clone(), cond);

  // TaylorSeer: the image-rows-only shortcut gives bit-identical latents with less memory.
  StepCacheConfig ts;
  ts.method = CacheMethod::kTaylorSeer;
  auto full = make_step_cache(ts);
  const Tensor a = sample(model, o, full.get(), x0.clone(), cond);
  ts.taylorseer.image_rows_only = true;
  auto lean = make_step_cache(ts);
  const Tensor b = sample(model, o, lean.get(), x0.clone(), cond);
  expect_identical(a, b, "taylorseer lean");
  EXPECT_LT(lean->report().peak_bytes, full->report().peak_bytes);
  EXPECT_EQ(full->report().predicted, 13);  // N = 20: FULL {0, 1, 5, 9, 13, 17, 19(elided)}
  EXPECT_EQ(full->report().elided, 1);

  // FBCache with a huge threshold skips every step after the first: the output is then the
  // residual-reuse approximation, not the baseline.
  StepCacheConfig fb;
  fb.method = CacheMethod::kFBCache;
  fb.fbcache.rel_l1_thresh = 1e9;
  auto fbc = make_step_cache(fb);
  const Tensor f = sample(model, o, fbc.get(), x0.clone(), cond);
  EXPECT_EQ(fbc->report().full, 1);
  EXPECT_EQ(fbc->report().skipped, 18);
  double diff = 0.0;
  for (std::int64_t k = 0; k < f.numel(); ++k) diff += std::abs(f.data()[k] - base.data()[k]);
  EXPECT_GT(diff, 0.0);
  // With tau = 0 it never skips and reproduces the baseline bit for bit.
  fb.fbcache.rel_l1_thresh = 0.0;
  auto fb0 = make_step_cache(fb);
  expect_identical(sample(model, o, fb0.get(), x0.clone(), cond), base, "fbcache tau 0");
  StepCacheConfig tc;
  tc.method = CacheMethod::kTeaCache;
  tc.teacache.rel_l1_thresh = 0.0;
  auto tc0 = make_step_cache(tc);
  expect_identical(sample(model, o, tc0.get(), x0.clone(), cond), base, "teacache tau 0");
}

TEST(Sampler, SameSeedSameLatentsWhateverTheThreadCount) {
  const auto cfg = tiny_config();
  const auto model = Hunyuan3DDiT::random(cfg, 9);
  const Tensor cond = nn::gaussian_noise({2, 9, cfg.context_in_dim}, 2);
  SamplerOptions o;
  o.steps = 6;
  StepCacheConfig c;
  c.method = CacheMethod::kTaylorSeer;
  auto run = [&] {
    auto cache = make_step_cache(c);
    return sample(model, o, cache.get(), nn::gaussian_noise({2, 40, cfg.in_channels}, 77), cond);
  };
  const Tensor a = run();
  Tensor b;
  {
    tbb::global_control one(tbb::global_control::max_allowed_parallelism, 1);
    b = run();
  }
  expect_identical(a, b, "1 thread vs default");
  expect_identical(run(), a, "second run");
}

TEST(ModelRegistry, LoadsOncePerKey) {
  nn::clear_shared_models();
  const auto a = shared_random_dit(tiny_config(), 1);
  const auto b = shared_random_dit(tiny_config(), 1);
  const auto c = shared_random_dit(tiny_config(), 2);
  EXPECT_EQ(a.get(), b.get());
  EXPECT_NE(a.get(), c.get());
  EXPECT_EQ(nn::shared_model_count(), 2u);
  EXPECT_THROW(resolve_checkpoint("no/such/weights.safetensors"), ModelError);
  const std::string golden = test::source_dir() + "/tests/data/golden";
  if (std::filesystem::exists(golden + "/dit_weights.fp32.safetensors")) {
    const CheckpointSource s = resolve_checkpoint(golden + "/dit_weights.fp32.safetensors");
    EXPECT_EQ(s.config, golden + "/config.json");
    const auto m1 = shared_dit(s);
    const auto m2 = shared_dit(s);
    EXPECT_EQ(m1.get(), m2.get());
    EXPECT_EQ(m1->num_parameters(), 119528);
  }
  nn::clear_shared_models();
  EXPECT_EQ(nn::shared_model_count(), 0u);
}

}  // namespace
}  // namespace gen3d::models
