// HunyuanDiTPlain (Hunyuan3D-2.1 shape DiT): config parsing, strict loading, the staged pass the
// step caches drive, the sampler with every cache, and expert routing. The numerics against the
// official code are in dit21_golden_test.cpp.

#include "models/shape/dit21.h"

#include <gtest/gtest.h>

#include <algorithm>
#include <cmath>
#include <functional>
#include <map>

#include "models/core/error.h"
#include "models/core/safetensors.h"
#include "models/nn/init.h"
#include "models/shape/sampler.h"
#include "models/shape/step_cache.h"
#include "support/paths.h"

namespace gen3d::models {
namespace {

DiT21Config tiny_config() {
  DiT21Config c;
  c.input_size = 9;
  c.in_channels = 8;
  c.hidden_size = 32;
  c.context_dim = 12;
  c.depth = 5;
  c.num_heads = 2;
  c.num_moe_layers = 2;
  c.num_experts = 4;
  c.moe_top_k = 2;
  return c;
}

struct Inputs {
  Tensor x, t, ctx;
};
Inputs make_inputs(const DiT21Config& c, std::int64_t B, std::int64_t L, std::int64_t Lc) {
  Inputs in{nn::gaussian_noise({B, L, c.in_channels}, 3), Tensor({B}),
            nn::gaussian_noise({B, Lc, c.context_dim}, 4)};
  for (std::int64_t b = 0; b < B; ++b) in.t.data()[b] = 0.2f + 0.5f * static_cast<float>(b);
  return in;
}

void expect_identical(const Tensor& a, const Tensor& b, const char* what) {
  ASSERT_EQ(a.shape(), b.shape()) << what;
  for (std::int64_t i = 0; i < a.numel(); ++i)
    ASSERT_EQ(a.data()[i], b.data()[i]) << what << " " << i;
}

std::string message_of(const std::function<void()>& f) {
  try {
    f();
  } catch (const ModelError& e) {
    return e.what();
  }
  return "";
}

TEST(DiT21Config, ReadsTheOfficialParamsAndNamesEveryBadKey) {
  const auto c =
      DiT21Config::from_json(R"({"target": "hy3dshape.models.denoisers.hunyuandit.HunYuanDiTPlain",
    "params": {"input_size": 4096, "in_channels": 64, "hidden_size": 2048, "context_dim": 1024,
    "depth": 21, "num_heads": 16, "qk_norm": true, "text_len": 1370, "with_decoupled_ca": false,
    "use_attention_pooling": false, "qk_norm_type": "rms", "qkv_bias": false, "use_pos_emb": false,
    "num_moe_layers": 6, "num_experts": 8, "moe_top_k": 2}})");
  EXPECT_EQ(c.head_dim(), 128);
  EXPECT_TRUE(c.uses_moe(15));
  EXPECT_FALSE(c.uses_moe(14));
  EXPECT_TRUE(c.has_skip(11));
  EXPECT_FALSE(c.has_skip(10));
  const std::string unknown =
      message_of([] { DiT21Config::from_json(R"({"depth": 2, "deph": 3})"); });
  EXPECT_NE(unknown.find("deph"), std::string::npos) << unknown;
  const std::string type =
      message_of([] { DiT21Config::from_json(R"({"num_experts": "eight"})"); });
  EXPECT_NE(type.find("num_experts"), std::string::npos) << type;
  const std::string pooling =
      message_of([] { DiT21Config::from_json(R"({"use_attention_pooling": true})"); });
  EXPECT_NE(pooling.find("use_attention_pooling"), std::string::npos) << pooling;
  const std::string topk =
      message_of([] { DiT21Config::from_json(R"({"num_experts": 2, "moe_top_k": 3})"); });
  EXPECT_NE(topk.find("moe_top_k"), std::string::npos) << topk;
  EXPECT_TRUE(DiT21Config::describes(R"({"target": "x.HunYuanDiTPlain", "params": {}})"));
  EXPECT_FALSE(DiT21Config::describes(R"({"target": "x.Hunyuan3DDiT", "params": {}})"));
  EXPECT_FALSE(DiT21Config::describes(R"({"context_in_dim": 1536, "depth_single_blocks": 2})"));
}

TEST(HunyuanDiTPlain, CheckpointWithAMissingAndAMisShapedTensorNamesBoth) {
  const auto cfg = tiny_config();
  const auto expected = HunyuanDiTPlain::expected_tensors(cfg);
  std::vector<Tensor> values;
  values.reserve(expected.size());
  std::vector<std::pair<std::string, const Tensor*>> list;
  for (const auto& [name, shape] : expected) {
    if (name == "blocks.4.moe.experts.3.net.2.weight") continue;  // missing
    values.push_back(name == "blocks.3.skip_linear.weight" ? Tensor({32, 63}) : Tensor(shape));
    list.push_back({"model." + name, &values.back()});
  }
  const std::string path = test::temp_dir("dit21_bad") + "/model.safetensors";
  write_safetensors(path, list, DType::kF16);
  WeightMap w = WeightMap::for_submodel(SafetensorsFile::open(path), "model");
  const std::string msg = message_of([&] { HunyuanDiTPlain::load(cfg, w); });
  EXPECT_NE(msg.find("blocks.4.moe.experts.3.net.2.weight"), std::string::npos) << msg;
  EXPECT_NE(msg.find("blocks.3.skip_linear.weight"), std::string::npos) << msg;
}

TEST(HunyuanDiTPlain, StagedPassReproducesForwardAndKeepsTheSkipOrder) {
  const auto cfg = tiny_config();
  const auto model = HunyuanDiTPlain::random(cfg, 21);
  const auto in = make_inputs(cfg, 2, 9, 5);
  const Tensor ref = model.forward(in.x, in.t, in.ctx);
  auto p = model.begin_pass(in.x, in.t, in.ctx);
  ASSERT_EQ(p->num_blocks(), 5);
  p->run_blocks(0, 1);
  p->run_blocks(1, 4);
  p->run_blocks(4, 5);
  expect_identical(p->output(), ref, "staged");
  // Blocks run once each, in order: the long skips pair block i with block depth - 1 - i.
  auto q = model.begin_pass(in.x, in.t, in.ctx);
  q->run_blocks(0, 2);
  EXPECT_THROW(q->run_blocks(3, 5), ModelError);
  EXPECT_THROW(q->run_blocks(0, 1), ModelError);
  // Image rows exclude the time token; reusing them skips every block.
  auto r = model.begin_pass(in.x, in.t, in.ctx);
  r->run_blocks(0, 5);
  const Tensor hL = r->image_rows();
  EXPECT_EQ(hL.shape(), (Shape{2, 9, 32}));
  auto s = model.begin_pass(in.x, in.t, in.ctx);
  s->set_image_rows(hL);
  expect_identical(s->output(), ref, "rows reused");
  EXPECT_THROW(model.begin_pass(in.x, in.t, in.ctx, &in.t), ModelError);  // no guidance input
}

class RecordReplayHook final : public BranchHook {
 public:
  bool replay = false;
  std::map<std::pair<int, int>, Tensor> stored;
  bool predicting() const override { return replay; }
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
  }
};

TEST(HunyuanDiTPlain, PredictedBranchesRebuildTheForward) {
  const auto cfg = tiny_config();
  const auto model = HunyuanDiTPlain::random(cfg, 22);
  const auto in = make_inputs(cfg, 2, 9, 5);
  const Tensor ref = model.forward(in.x, in.t, in.ctx);
  RecordReplayHook hook;
  auto a = model.begin_pass(in.x, in.t, in.ctx);
  a->run_blocks(0, a->num_blocks(), &hook);
  expect_identical(a->output(), ref, "recording pass");
  EXPECT_EQ(hook.stored.size(), 15u);  // 5 blocks x (self-attention, cross-attention, FFN)
  EXPECT_EQ(hook.stored.at({0, static_cast<int>(Branch::kFfn)}).dim(1), 10);  // time token too
  hook.replay = true;
  auto b = model.begin_pass(in.x, in.t, in.ctx);
  b->run_blocks(0, b->num_blocks(), &hook);
  expect_identical(b->output(), ref, "replay");
}

TEST(HunyuanDiTPlain, SamplerRunsEveryStepCache) {
  const auto cfg = tiny_config();
  const auto model = HunyuanDiTPlain::random(cfg, 23);
  const Tensor x0 = nn::gaussian_noise({1, 9, cfg.in_channels}, 5);
  const Tensor cond = nn::gaussian_noise({1, 5, cfg.context_dim}, 6);
  SamplerOptions o;
  o.steps = 12;
  const Tensor base = sample(model, o, nullptr, x0.clone(), cond);
  for (float v : base.span()) ASSERT_TRUE(std::isfinite(v));
  // Thresholds of zero never skip: bit-identical to no cache.
  StepCacheConfig fb;
  fb.method = CacheMethod::kFBCache;
  fb.fbcache.rel_l1_thresh = 0.0;
  auto fb0 = make_step_cache(fb);
  expect_identical(sample(model, o, fb0.get(), x0.clone(), cond), base, "fbcache tau 0");
  StepCacheConfig tc;
  tc.method = CacheMethod::kTeaCache;
  tc.teacache.rel_l1_thresh = 0.0;
  auto tc0 = make_step_cache(tc);
  expect_identical(sample(model, o, tc0.get(), x0.clone(), cond), base, "teacache tau 0");
  // Skipping and predicting caches change the result but run through the U-ViT skips.
  fb.fbcache.rel_l1_thresh = 1e9;
  auto fbs = make_step_cache(fb);
  const Tensor f = sample(model, o, fbs.get(), x0.clone(), cond);
  EXPECT_EQ(fbs->report().full, 1);
  EXPECT_GT(fbs->report().skipped, 0);
  StepCacheConfig ts;
  ts.method = CacheMethod::kTaylorSeer;
  auto tsc = make_step_cache(ts);
  const Tensor p = sample(model, o, tsc.get(), x0.clone(), cond);
  EXPECT_GT(tsc->report().predicted, 0);
  double dp = 0.0, df = 0.0;
  for (std::int64_t k = 0; k < base.numel(); ++k) {
    ASSERT_TRUE(std::isfinite(p.data()[k]) && std::isfinite(f.data()[k]));
    dp += std::abs(p.data()[k] - base.data()[k]);
    df += std::abs(f.data()[k] - base.data()[k]);
  }
  EXPECT_GT(dp, 0.0);
  EXPECT_GT(df, 0.0);
}

// bf16 rounds the experts' GEMMs, never the gate: the routing of a bf16 model equals the fp32
// model's wherever the fp32 gate decides by a clear margin.
// int8 weights are a CPU form: asking for them on a device is refused by name.
TEST(HunyuanDiTPlain, Int8OnADeviceIsRefused) {
  try {
    (void)HunyuanDiTPlain::random(tiny_config(), 1, {WeightStorage::kInt8, Device::kCuda});
    FAIL() << "int8 on cuda was accepted";
  } catch (const ModelError& e) {
    EXPECT_NE(std::string(e.what()).find("int8"), std::string::npos) << e.what();
    EXPECT_NE(std::string(e.what()).find("cuda"), std::string::npos) << e.what();
  }
}

TEST(HunyuanDiTPlain, Bf16KeepsTheGateInFloat32) {
  const auto cfg = tiny_config();
  const auto m32 = HunyuanDiTPlain::random(cfg, 24);
  const auto m16 = HunyuanDiTPlain::random(cfg, 24, {WeightStorage::kBF16});
  EXPECT_LT(m16.weight_bytes(), m32.weight_bytes());
  // Gate weights [E, H] in float32 in both: bf16 saves 2 bytes on every other parameter only.
  std::int64_t gate_params = 0;
  for (const auto& [name, shape] : HunyuanDiTPlain::expected_tensors(cfg))
    if (name.ends_with(".gate.weight")) gate_params += shape.numel();
  EXPECT_GT(gate_params, 0);
  const auto in = make_inputs(cfg, 2, 9, 5);
  std::map<std::string, Tensor> s32, s16;
  HunyuanDiTPlain::TraceFn r32 = [&](const std::string& n, const Tensor& v) { s32[n] = v.clone(); };
  HunyuanDiTPlain::TraceFn r16 = [&](const std::string& n, const Tensor& v) { s16[n] = v.clone(); };
  m32.forward(in.x, in.t, in.ctx, &r32);
  m16.forward(in.x, in.t, in.ctx, &r16);
  int clear = 0;
  for (const auto& [name, idx] : s32) {
    if (!name.ends_with(".topk_idx")) continue;
    const Tensor& sc = s32.at(name.substr(0, name.size() - 9) + ".scores");
    const std::int64_t E = sc.dim(1), K = idx.dim(1);
    for (std::int64_t r = 0; r < sc.dim(0); ++r) {
      std::vector<float> s(sc.data() + r * E, sc.data() + (r + 1) * E);
      std::sort(s.begin(), s.end(), std::greater<>());
      if (s[K - 1] - s[K] < 0.05f) continue;
      ++clear;
      for (std::int64_t k = 0; k < K; ++k)
        EXPECT_EQ(idx.data()[r * K + k], s16.at(name).data()[r * K + k]) << name << " row " << r;
    }
  }
  EXPECT_GT(clear, 0);
}

}  // namespace
}  // namespace gen3d::models
