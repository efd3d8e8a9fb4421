// Unit tests of models/dinov2: config parsing, the strict loader (missing / unexpected /
// mis-shaped tensors named), checkpoint prefixes, position-embedding interpolation, batch
// independence, both FFN variants, F16 storage and the unconditional context.

#include <gtest/gtest.h>

#include <cmath>
#include <filesystem>
#include <map>
#include <random>
#include <string>

#include "models/core/error.h"
#include "models/core/safetensors.h"
#include "models/shape/dinov2.h"
#include "support/paths.h"

namespace gen3d::models {
namespace {

Dinov2Config tiny(bool swiglu) {
  Dinov2Config c;
  c.hidden_size = 16;
  c.num_hidden_layers = 2;
  c.num_attention_heads = 2;
  c.image_size = 42;  // stored grid 3 x 3
  c.use_swiglu_ffn = swiglu;
  return c;
}

// A Hugging Face Dinov2Model state dict for `c`, seeded random values.
std::map<std::string, Tensor> state_dict(const Dinov2Config& c, unsigned seed) {
  std::mt19937 rng(seed);
  std::uniform_real_distribution<float> u(-0.3f, 0.3f);
  const std::int64_t C = c.hidden_size, M = c.position_grid(), P = c.patch_size;
  std::map<std::string, Tensor> sd;
  auto add = [&](const std::string& n, Shape s) {
    Tensor t(s);
    for (auto& v : t.span()) v = u(rng);
    if (n.find("norm") != std::string::npos && n.ends_with(".weight"))
      for (auto& v : t.span()) v += 1.0f;
    sd.emplace(n, std::move(t));
  };
  add("embeddings.cls_token", {1, 1, C});
  add("embeddings.mask_token", {1, C});
  add("embeddings.position_embeddings", {1, M * M + 1, C});
  add("embeddings.patch_embeddings.projection.weight", {C, 3, P, P});
  add("embeddings.patch_embeddings.projection.bias", {C});
  for (int i = 0; i < c.num_hidden_layers; ++i) {
    const std::string l = "encoder.layer." + std::to_string(i) + ".";
    for (const char* n : {"norm1", "norm2"}) {
      add(l + n + ".weight", {C});
      add(l + n + ".bias", {C});
    }
    for (const char* n : {"query", "key", "value"}) {
      add(l + "attention.attention." + n + ".weight", {C, C});
      add(l + "attention.attention." + n + ".bias", {C});
    }
    add(l + "attention.output.dense.weight", {C, C});
    add(l + "attention.output.dense.bias", {C});
    add(l + "layer_scale1.lambda1", {C});
    add(l + "layer_scale2.lambda1", {C});
    if (c.use_swiglu_ffn) {
      const std::int64_t hf = c.swiglu_hidden();
      add(l + "mlp.weights_in.weight", {2 * hf, C});
      add(l + "mlp.weights_in.bias", {2 * hf});
      add(l + "mlp.weights_out.weight", {C, hf});
      add(l + "mlp.weights_out.bias", {C});
    } else {
      add(l + "mlp.fc1.weight", {4 * C, C});
      add(l + "mlp.fc1.bias", {4 * C});
      add(l + "mlp.fc2.weight", {C, 4 * C});
      add(l + "mlp.fc2.bias", {C});
    }
  }
  add("layernorm.weight", {C});
  add("layernorm.bias", {C});
  return sd;
}

std::string write(const std::map<std::string, Tensor>& sd, const std::string& name,
                  const std::string& prefix = "", DType dtype = DType::kF32) {
  // A folder per file: CTest runs the tests that write them in parallel processes.
  const std::string path = test::temp_dir("dinov2_test_" + name) + "/" + name;
  std::vector<std::pair<std::string, const Tensor*>> list;
  for (const auto& [n, t] : sd) list.emplace_back(prefix + n, &t);
  write_safetensors(path, list, dtype);
  return path;
}

Tensor random_pixels(std::int64_t B, std::int64_t H, std::int64_t W, unsigned seed) {
  std::mt19937 rng(seed);
  std::normal_distribution<float> n(0.0f, 1.0f);
  Tensor x({B, 3, H, W});
  for (auto& v : x.span()) v = n(rng);
  return x;
}

double max_abs_diff(const Tensor& a, const Tensor& b) {
  EXPECT_EQ(a.shape(), b.shape());
  double m = 0;
  for (std::int64_t i = 0; i < a.numel(); ++i)
    m = std::max(m, std::abs(double(a.data()[i]) - double(b.data()[i])));
  return m;
}

TEST(Dinov2Config, SwigluWidthRounding) {
  Dinov2Config c;
  EXPECT_EQ(c.swiglu_hidden(), 4096);  // giant
  c.hidden_size = 40;
  EXPECT_EQ(c.swiglu_hidden(), 112);
  EXPECT_EQ(Dinov2Config::giant().position_grid(), 37);
}

TEST(Dinov2Config, ParsesOfficialBlocks) {
  const std::string cfg = R"({"hidden_size": 32, "num_hidden_layers": 2, "num_attention_heads": 4,
      "image_size": 56, "use_swiglu_ffn": false, "hidden_dropout_prob": 0.0, "model_type": "dinov2"})";
  const ImageEncoderConfig bare = ImageEncoderConfig::from_json(cfg);
  EXPECT_EQ(bare.image_size, 56);
  EXPECT_EQ(bare.tokens(), 17);
  const ImageEncoderConfig full = ImageEncoderConfig::from_json(
      R"({"target": "hy3dgen.shapegen.models.SingleImageEncoder", "params": {"main_image_encoder":
         {"type": "DinoImageEncoder", "kwargs": {"config": )" +
      cfg + R"(, "image_size": 70, "use_cls_token": false}}}})");
  EXPECT_EQ(full.model.hidden_size, 32);
  EXPECT_EQ(full.image_size, 70);
  EXPECT_FALSE(full.use_cls_token);
  EXPECT_EQ(full.tokens(), 25);
  EXPECT_THROW(ImageEncoderConfig::from_json(R"({"type": "CLIPImageEncoder", "kwargs": {}})"),
               ModelError);
  EXPECT_THROW(Dinov2Config::from_json(R"({"hidden_size": 30, "num_attention_heads": 4})"),
               ModelError);
  EXPECT_THROW(Dinov2Config::from_json(R"({"hidden_act": "relu6"})"), ModelError);
}

TEST(Dinov2Model, StrictLoaderNamesProblems) {
  const Dinov2Config c = tiny(true);
  auto sd = state_dict(c, 1);
  EXPECT_NO_THROW(Dinov2Model::load(c, write(sd, "ok.safetensors")));

  auto missing = sd;
  missing.erase("encoder.layer.1.layer_scale2.lambda1");
  try {
    Dinov2Model::load(c, write(missing, "missing.safetensors"));
    FAIL() << "missing tensor accepted";
  } catch (const ModelError& e) {
    EXPECT_NE(std::string(e.what()).find("encoder.layer.1.layer_scale2.lambda1"), std::string::npos)
        << e.what();
  }
  auto extra = sd;
  extra.emplace("encoder.layer.0.mlp.fc1.weight", Tensor({64, 16}));
  try {
    Dinov2Model::load(c, write(extra, "extra.safetensors"));
    FAIL() << "unexpected tensor accepted";
  } catch (const ModelError& e) {
    EXPECT_NE(std::string(e.what()).find("encoder.layer.0.mlp.fc1.weight"), std::string::npos)
        << e.what();
  }
  auto bad = sd;
  bad["embeddings.position_embeddings"] = Tensor({1, 17, 16});
  try {
    Dinov2Model::load(c, write(bad, "bad.safetensors"));
    FAIL() << "mis-shaped tensor accepted";
  } catch (const ModelError& e) {
    EXPECT_NE(std::string(e.what()).find("position_embeddings"), std::string::npos) << e.what();
  }
}

TEST(Dinov2Model, CombinedCheckpointPrefixAndF16) {
  const Dinov2Config c = tiny(false);
  auto sd = state_dict(c, 2);
  const Tensor x = random_pixels(1, 42, 42, 5);
  const Tensor plain = Dinov2Model::load(c, write(sd, "plain.safetensors")).forward(x);
  // Combined checkpoint: the conditioner under its prefix, next to other sub-models' keys.
  auto combined = sd;
  std::map<std::string, Tensor> all;
  for (auto& [n, t] : combined) all.emplace("conditioner.main_image_encoder.model." + n, t);
  all.emplace("model.latent_in.weight", Tensor({4, 4}));
  all.emplace("vae.post_kl.weight", Tensor({4, 4}));
  const Tensor pref = Dinov2Model::load(c, write(all, "combined.safetensors")).forward(x);
  EXPECT_EQ(max_abs_diff(plain, pref), 0.0);
  // F16 storage of the matrices: close, not equal.
  Dinov2Options f16{WeightStorage::kF16};
  const Tensor half = Dinov2Model::load(c, write(sd, "plain2.safetensors"), f16).forward(x);
  EXPECT_LT(max_abs_diff(plain, half), 2e-2);
}

TEST(Dinov2Model, BatchItemsAreIndependent) {
  for (bool swiglu : {false, true}) {
    const Dinov2Model m = Dinov2Model::random(tiny(swiglu), 11);
    const Tensor x = random_pixels(2, 42, 42, 9);
    const Tensor both = m.forward(x);
    ASSERT_EQ(both.shape(), (Shape{2, 10, 16}));
    Tensor x1({1, 3, 42, 42});
    std::copy_n(x.data() + x1.numel(), x1.numel(), x1.data());
    const Tensor one = m.forward(x1);
    double d = 0;
    for (std::int64_t i = 0; i < one.numel(); ++i)
      d = std::max(d, double(std::abs(one.data()[i] - both.data()[one.numel() + i])));
    EXPECT_LT(d, 1e-5) << "swiglu " << swiglu;
  }
}

TEST(Dinov2Model, PositionEmbeddingInterpolation) {
  const Dinov2Model m = Dinov2Model::random(tiny(true), 3);
  const Tensor stored = m.position_embeddings(3, 3, true);
  ASSERT_EQ(stored.shape(), (Shape{1, 10, 16}));
  // Same grid but a non-square input still resamples: 3 -> 3 bicubic is the identity (t = 0).
  EXPECT_LT(max_abs_diff(m.position_embeddings(3, 3, false), stored), 1e-6);
  const Tensor up = m.position_embeddings(5, 5, true);
  ASSERT_EQ(up.shape(), (Shape{1, 26, 16}));
  for (int c = 0; c < 16; ++c) EXPECT_EQ(up.data()[c], stored.data()[c]);  // CLS row kept
  // Constant grids stay constant (Keys weights sum to 1).
  EXPECT_EQ(m.position_embeddings(2, 4, true).shape(), (Shape{1, 9, 16}));
  // Forward uses the grid of the input: 28 px -> 2 x 2 patches.
  EXPECT_EQ(m.forward(random_pixels(1, 28, 28, 1)).shape(), (Shape{1, 5, 16}));
  EXPECT_EQ(m.forward(random_pixels(1, 30, 44, 1)).shape(), (Shape{1, 7, 16}));  // 2 x 3
  EXPECT_THROW(m.forward(random_pixels(1, 10, 28, 1)), ModelError);
}

TEST(DinoImageEncoder, ContextAndUnconditional) {
  ImageEncoderConfig ec;
  ec.model = tiny(true);
  ec.image_size = 28;
  ec.use_cls_token = false;
  const DinoImageEncoder enc(ec,
                             std::make_shared<const Dinov2Model>(Dinov2Model::random(ec.model, 4)));
  Tensor img({2, 3, 48, 48});
  for (auto& v : img.span()) v = 0.25f;
  const Tensor ctx = enc.encode(img);
  EXPECT_EQ(ctx.shape(), (Shape{2, 4, 16}));
  const Tensor un = enc.unconditional(2);
  EXPECT_EQ(un.shape(), ctx.shape());
  for (float v : un.span()) EXPECT_EQ(v, 0.0f);
  EXPECT_THROW(enc.encode(Tensor({1, 1, 48, 48})), ModelError);
}

}  // namespace
}  // namespace gen3d::models
