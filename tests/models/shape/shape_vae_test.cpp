// ShapeVAE unit tests: config parsing, strict loading (missing / unexpected / mis-shaped tensors
// named), combined-checkpoint prefixes, Fourier layout, batch consistency of the geometry field.

#include <gtest/gtest.h>

#include <algorithm>
#include <cmath>
#include <filesystem>

#include "models/core/error.h"
#include "models/core/safetensors.h"
#include "models/shape/shape_vae.h"
#include "support/paths.h"

namespace gen3d::models {
namespace {

using i64 = std::int64_t;

ShapeVAEConfig tiny() {
  ShapeVAEConfig c;
  c.num_latents = 12;
  c.embed_dim = 4;
  c.num_freqs = 2;
  c.include_pi = true;
  c.heads = 2;
  c.width = 8;
  c.num_decoder_layers = 2;
  c.scale_factor = 0.5;
  return c;
}

std::string write_weights(const std::string& name, std::vector<std::pair<std::string, Tensor>> w,
                          const std::string& prefix = "") {
  // A folder per file: CTest runs the tests that write them in parallel processes.
  const std::string dir = test::temp_dir("shape_vae_test_" + name);
  const std::string path = dir + "/" + name;
  std::vector<std::pair<std::string, const Tensor*>> list;
  std::vector<std::string> names;
  for (auto& [n, t] : w) names.push_back(prefix + n);
  for (std::size_t i = 0; i < w.size(); ++i) list.emplace_back(names[i], &w[i].second);
  write_safetensors(path, list);
  return path;
}

std::string error_of(const ShapeVAEConfig& c, const std::string& path) {
  try {
    ShapeVAE::load(c, path);
  } catch (const ModelError& e) {
    return e.what();
  }
  return "";
}

TEST(ShapeVAEConfig, ParsesOfficialKeysAndRejectsUnknown) {
  const auto c = ShapeVAEConfig::from_json(
      R"({"target": "x", "params": {"num_latents": 32, "embed_dim": 8, "num_freqs": 4,
          "include_pi": true, "heads": 4, "width": 32, "num_decoder_layers": 2, "qkv_bias": false,
          "qk_norm": true, "scale_factor": 0.75, "pc_size": 81920}})");
  EXPECT_EQ(c.width, 32);
  EXPECT_TRUE(c.include_pi);
  EXPECT_DOUBLE_EQ(c.scale_factor, 0.75);
  EXPECT_EQ(c.fourier_dim(), 27);
  try {
    ShapeVAEConfig::from_json(R"({"widht": 3, "heads": 5, "width": 32})");
    FAIL();
  } catch (const ModelError& e) {
    EXPECT_NE(std::string(e.what()).find("widht"), std::string::npos) << e.what();
  }
  EXPECT_THROW(ShapeVAEConfig::from_json(R"({"heads": 5, "width": 32})"), ModelError);
  EXPECT_THROW(ShapeVAEConfig::from_json(R"({"geo_decoder_downsample_ratio": 3})"), ModelError);
  EXPECT_EQ(ShapeVAEConfig::from_json(R"({"geo_decoder_downsample_ratio": 2})").geo_width(), 512);
}

// A lighter geometry decoder (narrower behind latents_proj, other MLP ratio, no ln_post) is read
// from the weights whatever the config says about it; the rest of the loader stays strict.
TEST(ShapeVAE, GeometryDecoderSizesFromWeights) {
  ShapeVAEConfig light = tiny();
  light.geo_decoder_downsample_ratio = 2;
  light.geo_decoder_mlp_expand_ratio = 1;
  light.geo_decoder_ln_post = false;
  auto w = ShapeVAE::random_weights(light, 4);
  bool has_proj = false;
  for (const auto& [n, t] : w) {
    if (n == "geo_decoder.latents_proj.weight") {
      has_proj = true;
      EXPECT_EQ(t.shape(), Shape({4, 8}));
    }
    EXPECT_EQ(n.find("ln_post"), std::string::npos) << n;
    EXPECT_EQ(n.find("cross_attn_decoder.attn.attention"), std::string::npos) << n;
  }
  EXPECT_TRUE(has_proj);
  const std::string path = write_weights("light.safetensors", w);
  const ShapeVAE a = ShapeVAE::load(tiny(), path), b = ShapeVAE::random(light, 4);
  EXPECT_EQ(a.config().geo_decoder_downsample_ratio, 2);
  EXPECT_EQ(a.config().geo_decoder_mlp_expand_ratio, 1);
  EXPECT_FALSE(a.config().geo_decoder_ln_post);
  EXPECT_EQ(a.num_parameters(), b.num_parameters());
  Tensor lat({1, 12, 4});
  for (i64 i = 0; i < lat.numel(); ++i) lat.data()[i] = static_cast<float>(std::cos(0.7 * i));
  Tensor pts({9, 3});
  for (i64 i = 0; i < pts.numel(); ++i) pts.data()[i] = static_cast<float>(std::sin(0.4 * i));
  const Tensor qa = a.query(a.decode(lat), pts), qb = b.query(b.decode(lat), pts);
  for (i64 i = 0; i < qa.numel(); ++i) ASSERT_EQ(qa.data()[i], qb.data()[i]) << i;
  // Still strict elsewhere: a mis-shaped tensor of the light decoder is named.
  for (auto& [n, t] : w)
    if (n == "geo_decoder.latents_proj.weight") t = Tensor({4, 7});
  const std::string e = error_of(tiny(), write_weights("light_bad.safetensors", w));
  EXPECT_NE(e.find("geo_decoder.latents_proj.weight"), std::string::npos) << e;
}

TEST(ShapeVAE, StrictLoaderNamesProblems) {
  const ShapeVAEConfig c = tiny();
  auto w = ShapeVAE::random_weights(c, 3);
  EXPECT_NO_THROW(ShapeVAE::load(c, write_weights("ok.safetensors", w)));
  // Missing tensor.
  auto missing = w;
  missing.erase(std::find_if(missing.begin(), missing.end(), [](const auto& p) {
    return p.first == "geo_decoder.ln_post.weight";
  }));
  EXPECT_NE(
      error_of(c, write_weights("missing.safetensors", missing)).find("geo_decoder.ln_post.weight"),
      std::string::npos);
  // Unexpected tensor.
  auto extra = w;
  extra.emplace_back("geo_decoder.surprise", Tensor({2}));
  EXPECT_NE(error_of(c, write_weights("extra.safetensors", extra)).find("geo_decoder.surprise"),
            std::string::npos);
  // Mis-shaped tensor.
  auto bad = w;
  for (auto& [n, t] : bad)
    if (n == "post_kl.weight") t = Tensor({8, 5});
  const std::string e = error_of(c, write_weights("bad.safetensors", bad));
  EXPECT_NE(e.find("post_kl.weight"), std::string::npos) << e;
}

TEST(ShapeVAE, CombinedCheckpointPrefixAndRandomAgree) {
  const ShapeVAEConfig c = tiny();
  const std::string path =
      write_weights("combined.safetensors", ShapeVAE::random_weights(c, 5), "vae.");
  const ShapeVAE a = ShapeVAE::load(c, path), b = ShapeVAE::random(c, 5);
  Tensor lat({2, 12, 4});
  for (i64 i = 0; i < lat.numel(); ++i) lat.data()[i] = static_cast<float>(std::cos(0.3 * i));
  const Tensor da = a.decode(lat), db = b.decode(lat);
  for (i64 i = 0; i < da.numel(); ++i) ASSERT_EQ(da.data()[i], db.data()[i]);
}

TEST(ShapeVAE, FourierLayoutInputSinesCosines) {
  const ShapeVAE vae = ShapeVAE::random(tiny(), 1);
  Tensor p({1, 3});
  p.data()[0] = 0.1f;
  p.data()[1] = -0.2f;
  p.data()[2] = 0.3f;
  const Tensor f = vae.fourier(p);  // [1, 15], F = 2, include_pi
  ASSERT_EQ(f.dim(1), 15);
  const float pi = static_cast<float>(M_PI);
  for (int a = 0; a < 3; ++a) {
    EXPECT_EQ(f.data()[a], p.data()[a]);
    for (int j = 0; j < 2; ++j) {
      const float arg = p.data()[a] * (static_cast<float>(1 << j) * pi);
      EXPECT_NEAR(f.data()[3 + a * 2 + j], std::sin(arg), 1e-7);
      EXPECT_NEAR(f.data()[9 + a * 2 + j], std::cos(arg), 1e-7);
    }
  }
}

TEST(ShapeVAE, GeometryFieldEqualsBatchedQuery) {
  const ShapeVAE vae = ShapeVAE::random(tiny(), 9);
  Tensor lat({2, 12, 4});
  for (i64 i = 0; i < lat.numel(); ++i) lat.data()[i] = static_cast<float>(std::sin(1.3 * i));
  const Tensor dec = vae.decode(lat);
  Tensor pts({37, 3});
  for (i64 i = 0; i < pts.numel(); ++i) pts.data()[i] = static_cast<float>(std::sin(0.9 * i));
  const Tensor q = vae.query(dec, pts);  // [2, 37, 1]
  for (i64 b = 0; b < 2; ++b) {
    std::vector<float> out(37);
    vae.geometry_field(dec, b)->evaluate(pts.data(), 37, out.data());
    for (i64 i = 0; i < 37; ++i)
      EXPECT_NEAR(out[static_cast<std::size_t>(i)], q.data()[b * 37 + i], 1e-5);
  }
  EXPECT_THROW(vae.geometry_field(dec, 2), ModelError);
  EXPECT_THROW(vae.decode(Tensor({2, 12, 5})), ModelError);
}

}  // namespace
}  // namespace gen3d::models
