#include "models/shape/dit.h"

#include <gtest/gtest.h>

#include <algorithm>
#include <random>

#include "models/core/dtype.h"
#include "models/core/error.h"
#include "models/core/safetensors.h"
#include "models/kernels/kernel_test_util.h"
#include "support/paths.h"

namespace gen3d::models {
namespace {

DiTConfig tiny_config() {
  DiTConfig c;
  c.in_channels = 8;
  c.context_in_dim = 12;
  c.hidden_size = 32;
  c.num_heads = 4;
  c.depth = 2;
  c.depth_single_blocks = 2;
  c.axes_dim = {8};
  return c;
}

// The official state_dict key set, written independently from golden/README.md's key pattern.
std::vector<std::pair<std::string, Shape>> official_keys(const DiTConfig& c) {
  const std::int64_t H = c.hidden_size, D = c.head_dim(), M = c.mlp_hidden();
  std::vector<std::pair<std::string, Shape>> k;
  auto lin = [&](const std::string& n, std::int64_t in, std::int64_t out, bool bias = true) {
    k.push_back({n + ".weight", {out, in}});
    if (bias) k.push_back({n + ".bias", {out}});
  };
  lin("latent_in", c.in_channels, H);
  lin("time_in.in_layer", 256, H);
  lin("time_in.out_layer", H, H);
  if (c.guidance_embed) {
    lin("guidance_in.in_layer", 256, H);
    lin("guidance_in.out_layer", H, H);
  }
  lin("cond_in", c.context_in_dim, H);
  for (int i = 0; i < c.depth; ++i) {
    const std::string p = "double_blocks." + std::to_string(i) + ".";
    for (const std::string s : {"img", "txt"}) {
      lin(p + s + "_mod.lin", H, 6 * H);
      lin(p + s + "_attn.qkv", H, 3 * H, c.qkv_bias);
      k.push_back({p + s + "_attn.norm.query_norm.scale", {D}});
      k.push_back({p + s + "_attn.norm.key_norm.scale", {D}});
      lin(p + s + "_attn.proj", H, H);
      lin(p + s + "_mlp.0", H, M);
      lin(p + s + "_mlp.2", M, H);
    }
  }
  for (int i = 0; i < c.depth_single_blocks; ++i) {
    const std::string p = "single_blocks." + std::to_string(i) + ".";
    lin(p + "linear1", H, 3 * H + M);
    lin(p + "linear2", H + M, H);
    lin(p + "modulation.lin", H, 3 * H);
    k.push_back({p + "norm.query_norm.scale", {D}});
    k.push_back({p + "norm.key_norm.scale", {D}});
  }
  lin("final_layer.linear", H, c.in_channels);
  lin("final_layer.adaLN_modulation.1", H, 2 * H);
  return k;
}

// Writes a checkpoint with half-representable random values for `keys`.
std::string write_checkpoint(const std::string& path,
                             const std::vector<std::pair<std::string, Shape>>& keys,
                             DType dtype = DType::kF32) {
  std::mt19937_64 rng(99);
  std::vector<Tensor> store;
  store.reserve(keys.size());
  std::vector<std::pair<std::string, const Tensor*>> named;
  for (const auto& [name, shape] : keys) {
    Tensor t(shape);
    const bool scale = name.ends_with(".scale");
    std::normal_distribution<float> d(
        scale ? 1.0f : 0.0f,
        scale ? 0.15f : (name.ends_with(".weight") ? 1.0f / std::sqrt(float(shape[1])) : 0.1f));
    for (auto& v : t.span()) v = half_to_float(float_to_half(d(rng)));
    store.push_back(std::move(t));
  }
  for (std::size_t i = 0; i < keys.size(); ++i) named.push_back({keys[i].first, &store[i]});
  write_safetensors(path, named, dtype);
  return path;
}

struct Inputs {
  Tensor x, t, ctx;
};
Inputs make_inputs(const DiTConfig& c, std::int64_t B, std::int64_t L, std::int64_t Lc) {
  Inputs in{Tensor({B, L, c.in_channels}), Tensor({B}), Tensor({B, Lc, c.context_in_dim})};
  auto x = ktest::random_vec(static_cast<std::size_t>(in.x.numel()), 1);
  auto ctx = ktest::random_vec(static_cast<std::size_t>(in.ctx.numel()), 2);
  std::copy(x.begin(), x.end(), in.x.data());
  std::copy(ctx.begin(), ctx.end(), in.ctx.data());
  for (std::int64_t b = 0; b < B; ++b) in.t.data()[b] = 0.1f + 0.37f * static_cast<float>(b);
  return in;
}

TEST(Hunyuan3DDiT, LoadsTheOfficialKeySetStrictly) {
  const auto cfg = tiny_config();
  const std::string dir = gen3d::test::temp_dir("models_dit_keys");
  const auto path = write_checkpoint(dir + "/dit.safetensors", official_keys(cfg));
  const auto model = Hunyuan3DDiT::load(cfg, path);
  std::int64_t n = 0;
  for (const auto& [name, s] : official_keys(cfg)) n += s.numel();
  EXPECT_EQ(model.num_parameters(), n);
  EXPECT_EQ(n, 119528);  // golden/README.md: dit_weights has 119528 parameters
}

TEST(Hunyuan3DDiT, BadCheckpointListsEveryProblemWithShapes) {
  const auto cfg = tiny_config();
  auto keys = official_keys(cfg);
  // Drop one tensor, mis-shape another, add an unexpected one.
  keys.erase(std::find_if(keys.begin(), keys.end(), [](const auto& k) {
    return k.first == "single_blocks.1.norm.key_norm.scale";
  }));
  for (auto& [name, shape] : keys)
    if (name == "double_blocks.0.img_attn.qkv.weight") shape = Shape({96, 31});
  keys.push_back({"double_blocks.0.img_attn.extra.weight", {3, 3}});
  const std::string dir = gen3d::test::temp_dir("models_dit_bad");
  const auto path = write_checkpoint(dir + "/bad.safetensors", keys);
  try {
    Hunyuan3DDiT::load(cfg, path);
    FAIL() << "load should fail";
  } catch (const ModelError& e) {
    const std::string m = e.what();
    EXPECT_NE(m.find(path), std::string::npos) << m;
    EXPECT_NE(m.find("3 problems"), std::string::npos) << m;
    EXPECT_NE(m.find("missing single_blocks.1.norm.key_norm.scale (expected shape [8])"),
              std::string::npos)
        << m;
    EXPECT_NE(
        m.find("mis-shaped double_blocks.0.img_attn.qkv.weight: expected [96, 32], got [96, 31]"),
        std::string::npos)
        << m;
    EXPECT_NE(m.find("unexpected double_blocks.0.img_attn.extra.weight F32 [3, 3]"),
              std::string::npos)
        << m;
  }
}

TEST(Hunyuan3DDiT, ConfigMismatchIsReported) {
  auto cfg = tiny_config();
  const std::string dir = gen3d::test::temp_dir("models_dit_cfg_mismatch");
  const auto path = write_checkpoint(dir + "/dit.safetensors", official_keys(cfg));
  cfg.guidance_embed = true;  // checkpoint has no guidance_in
  try {
    Hunyuan3DDiT::load(cfg, path);
    FAIL();
  } catch (const ModelError& e) {
    EXPECT_NE(std::string(e.what()).find(
                  "missing guidance_in.in_layer.weight (expected shape [32, 256])"),
              std::string::npos)
        << e.what();
  }
  cfg.guidance_embed = false;
  cfg.qkv_bias = false;  // checkpoint has qkv biases: unexpected
  try {
    Hunyuan3DDiT::load(cfg, path);
    FAIL();
  } catch (const ModelError& e) {
    EXPECT_NE(std::string(e.what()).find("unexpected double_blocks.0.img_attn.qkv.bias F32 [96]"),
              std::string::npos)
        << e.what();
  }
}

TEST(Hunyuan3DDiT, F16FileAndF16StorageGiveTheSameOutput) {
  const auto cfg = tiny_config();
  const std::string dir = gen3d::test::temp_dir("models_dit_f16");
  const auto keys = official_keys(cfg);
  const auto p32 = write_checkpoint(dir + "/w32.safetensors", keys, DType::kF32);
  const auto p16 = write_checkpoint(dir + "/w16.safetensors", keys, DType::kF16);
  const auto m32 = Hunyuan3DDiT::load(cfg, p32);
  const auto m16 = Hunyuan3DDiT::load(cfg, p16);
  const auto m16s = Hunyuan3DDiT::load(cfg, p16, {WeightStorage::kF16});
  EXPECT_LT(m16s.weight_bytes(), m32.weight_bytes() * 6 / 10);
  const auto in = make_inputs(cfg, 2, 16, 6);
  const Tensor a = m32.forward(in.x, in.t, in.ctx);
  const Tensor b = m16.forward(in.x, in.t, in.ctx);
  const Tensor c = m16s.forward(in.x, in.t, in.ctx);
  ASSERT_EQ(a.shape(), Shape({2, 16, 8}));
  for (std::int64_t i = 0; i < a.numel(); ++i)
    ASSERT_EQ(a.data()[i], b.data()[i]) << i;  // bit-equal
  EXPECT_LE(ktest::nmse(c.data(), a.data(), static_cast<std::size_t>(a.numel())), 1e-12);
}

TEST(Hunyuan3DDiT, BatchItemsAreIndependentAndTracingIsPassive) {
  const auto cfg = tiny_config();
  const auto model = Hunyuan3DDiT::random(cfg, 5);
  const auto in = make_inputs(cfg, 3, 20, 7);
  int traced = 0;
  Hunyuan3DDiT::TraceFn fn = [&](const std::string&, const Tensor&) { ++traced; };
  const Tensor full = model.forward(in.x, in.t, in.ctx, nullptr, &fn);
  EXPECT_GT(traced, 50);
  const Tensor untraced = model.forward(in.x, in.t, in.ctx);
  for (std::int64_t i = 0; i < full.numel(); ++i) ASSERT_EQ(full.data()[i], untraced.data()[i]);
  for (std::int64_t b = 0; b < 3; ++b) {
    Tensor x1 = Tensor(in.x).slice0(b, b + 1).clone();
    Tensor t1 = Tensor(in.t).slice0(b, b + 1).clone();
    Tensor c1 = Tensor(in.ctx).slice0(b, b + 1).clone();
    const Tensor one = model.forward(x1, t1, c1);
    EXPECT_LE(ktest::nmse(one.data(), full.data() + b * one.numel(),
                          static_cast<std::size_t>(one.numel())),
              1e-12);
  }
}

TEST(Hunyuan3DDiT, ForwardChecksInputShapes) {
  const auto cfg = tiny_config();
  const auto model = Hunyuan3DDiT::random(cfg, 1);
  const auto in = make_inputs(cfg, 2, 4, 3);
  EXPECT_THROW(model.forward(Tensor({2, 4, 7}), in.t, in.ctx), ModelError);
  EXPECT_THROW(model.forward(in.x, Tensor({3}), in.ctx), ModelError);
  EXPECT_THROW(model.forward(in.x, in.t, Tensor({2, 3, 11})), ModelError);
  try {
    model.forward(in.x, in.t, Tensor({1, 3, 12}));
    FAIL();
  } catch (const ModelError& e) {
    EXPECT_NE(std::string(e.what()).find("context has shape [1, 3, 12], expected [2, *, 12]"),
              std::string::npos)
        << e.what();
  }
}

TEST(Hunyuan3DDiT, GuidanceEmbeddingIsUsedWhenConfigured) {
  auto cfg = tiny_config();
  cfg.guidance_embed = true;
  const auto model = Hunyuan3DDiT::random(cfg, 3);
  const auto in = make_inputs(cfg, 2, 5, 4);
  EXPECT_THROW(model.forward(in.x, in.t, in.ctx), ModelError);  // guidance required
  Tensor g1({2}), g2({2});
  g1.data()[0] = g1.data()[1] = 5.0f;
  g2.data()[0] = g2.data()[1] = 1.0f;
  const Tensor a = model.forward(in.x, in.t, in.ctx, &g1);
  const Tensor b = model.forward(in.x, in.t, in.ctx, &g2);
  EXPECT_GT(ktest::nmse(a.data(), b.data(), static_cast<std::size_t>(a.numel())), 1e-4);
}

TEST(Hunyuan3DDiT, TimestepEmbeddingRecipe) {
  const auto model = Hunyuan3DDiT::random(tiny_config(), 1);
  const auto& f = model.time_freqs();
  ASSERT_EQ(f.size(), 128u);
  EXPECT_EQ(f[0], 1.0f);
  EXPECT_NEAR(f[64], 1.0 / std::sqrt(1000.0), 1e-7);  // max_period 1000, not 10000
  Tensor t({1});
  t.data()[0] = 0.0f;
  const Tensor e = model.timestep_embedding(t);
  EXPECT_EQ(e.shape(), Shape({1, 256}));
  EXPECT_EQ(e.data()[0], 1.0f);    // cos first
  EXPECT_EQ(e.data()[128], 0.0f);  // then sin
}

}  // namespace
}  // namespace gen3d::models
