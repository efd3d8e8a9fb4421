// CLIP text encoder (the delighting pipeline's empty prompt): tokenizer ids from the folder files,
// config checks, strict loading, and causal attention (a token never sees later ones).

#include <cmath>
#include <filesystem>
#include <fstream>
#include <random>

#include <gtest/gtest.h>
#include <nlohmann/json.hpp>

#include "models/core/error.h"
#include "models/core/safetensors.h"
#include "models/paint/clip_text.h"
#include "support/paths.h"

namespace gen3d::models {
namespace {

namespace fs = std::filesystem;
using nlohmann::json;

ClipTextConfig tiny_config() {
  return ClipTextConfig::parse(json{{"vocab_size", 10},
                                    {"hidden_size", 8},
                                    {"intermediate_size", 16},
                                    {"num_hidden_layers", 2},
                                    {"num_attention_heads", 2},
                                    {"max_position_embeddings", 6},
                                    {"hidden_act", "gelu"}}
                                   .dump(),
                               "tiny");
}

// Random weights for `cfg` (norm scales random too, so the LayerNorm affine is exercised).
std::string write_weights(const ClipTextConfig& c, const std::string& dir, bool drop_one = false) {
  std::mt19937 rng(3);
  std::normal_distribution<float> nd(0.0f, 0.3f);
  std::vector<std::pair<std::string, Tensor>> t;
  const auto add = [&](const std::string& n, Shape s) {
    Tensor x(s);
    for (auto& v : x.span()) v = nd(rng);
    t.emplace_back(n, std::move(x));
  };
  const std::int64_t D = c.hidden_size, F = c.intermediate_size;
  add("text_model.embeddings.token_embedding.weight", {c.vocab_size, D});
  add("text_model.embeddings.position_embedding.weight", {c.max_position_embeddings, D});
  for (int i = 0; i < c.num_hidden_layers; ++i) {
    const std::string l = "text_model.encoder.layers." + std::to_string(i) + ".";
    for (const char* n : {"layer_norm1", "layer_norm2"}) {
      add(l + n + ".weight", {D});
      add(l + n + ".bias", {D});
    }
    for (const char* p : {"q_proj", "k_proj", "v_proj", "out_proj"}) {
      add(l + "self_attn." + p + ".weight", {D, D});
      add(l + "self_attn." + p + ".bias", {D});
    }
    add(l + "mlp.fc1.weight", {F, D});
    add(l + "mlp.fc1.bias", {F});
    add(l + "mlp.fc2.weight", {D, F});
    add(l + "mlp.fc2.bias", {D});
  }
  if (!drop_one) add("text_model.final_layer_norm.weight", {D});
  add("text_model.final_layer_norm.bias", {D});
  std::vector<std::pair<std::string, const Tensor*>> refs;
  for (const auto& [n, x] : t) refs.emplace_back(n, &x);
  const std::string path = dir + "/model.safetensors";
  write_safetensors(path, refs);
  return path;
}

std::unique_ptr<ClipTextEncoder> load(const ClipTextConfig& c, const std::string& path) {
  WeightMap m(SafetensorsFile::open(path), "");
  auto e = ClipTextEncoder::load(c, m);
  m.finish("CLIP text encoder");
  return e;
}

TEST(ClipText, EmptyPromptIdsComeFromTheTokenizerFiles) {
  const std::string dir = test::temp_dir("clip_tokenizer");
  std::ofstream(dir + "/vocab.json")
      << json{{"<|startoftext|>", 49406}, {"<|endoftext|>", 49407}, {"!", 0}}.dump();
  std::ofstream(dir + "/special_tokens_map.json") << json{
      {"bos_token", {{"content", "<|startoftext|>"}}},
      {"eos_token", "<|endoftext|>"},
      {"pad_token", "!"}}.dump();
  const EmptyPromptTokens t = EmptyPromptTokens::read(dir);
  const std::vector<int> ids = t.ids(5);
  EXPECT_EQ(ids, (std::vector<int>{49406, 49407, 0, 0, 0}));

  // No pad token: pads with EOS (the SD 1.x tokenizers).
  std::ofstream(dir + "/special_tokens_map.json")
      << json{{"bos_token", "<|startoftext|>"}, {"eos_token", "<|endoftext|>"}}.dump();
  EXPECT_EQ(EmptyPromptTokens::read(dir).ids(3), (std::vector<int>{49406, 49407, 49407}));

  std::ofstream(dir + "/special_tokens_map.json") << json{{"bos_token", "<s>"}}.dump();
  EXPECT_THROW(EmptyPromptTokens::read(dir), ModelError);
  EXPECT_THROW(EmptyPromptTokens::read(dir + "/absent"), ModelError);
}

TEST(ClipText, ConfigErrorsNameTheKey) {
  try {
    ClipTextConfig::parse(R"({"hidden_act": "relu"})", "te/config.json");
    FAIL();
  } catch (const ModelError& e) {
    EXPECT_NE(std::string(e.what()).find("hidden_act"), std::string::npos);
  }
  EXPECT_THROW(ClipTextConfig::parse(R"({"hidden_size": 10, "num_attention_heads": 3})", "c"),
               ModelError);
  EXPECT_THROW(ClipTextConfig::parse("{", "c"), ModelError);
}

TEST(ClipText, MissingWeightIsNamed) {
  const ClipTextConfig c = tiny_config();
  const std::string path = write_weights(c, test::temp_dir("clip_missing"), true);
  try {
    load(c, path);
    FAIL();
  } catch (const ModelError& e) {
    EXPECT_NE(std::string(e.what()).find("text_model.final_layer_norm.weight"), std::string::npos)
        << e.what();
  }
}

TEST(ClipText, AttentionIsCausal) {
  const ClipTextConfig c = tiny_config();
  const auto enc = load(c, write_weights(c, test::temp_dir("clip_causal")));
  const std::vector<int> a{1, 2, 3, 4, 5, 6};
  std::vector<int> b = a;
  b[3] = 9;  // change token 3
  const Tensor ya = enc->encode(a), yb = enc->encode(b);
  ASSERT_EQ(ya.shape(), (Shape{1, 6, 8}));
  const auto row_diff = [&](int t) {
    double d = 0;
    for (int k = 0; k < 8; ++k) d += std::fabs(ya.at(0, t, k) - yb.at(0, t, k));
    return d;
  };
  for (int t = 0; t < 3; ++t) EXPECT_EQ(row_diff(t), 0.0) << "token " << t << " saw the future";
  for (int t = 3; t < 6; ++t) EXPECT_GT(row_diff(t), 1e-4) << "token " << t;

  // Shorter sequences give the same prefix (positions are absolute, attention causal).
  const Tensor yp = enc->encode({1, 2, 3});
  for (int t = 0; t < 3; ++t)
    for (int k = 0; k < 8; ++k) EXPECT_NEAR(yp.at(0, t, k), ya.at(0, t, k), 1e-5);

  EXPECT_THROW(enc->encode({1, 2, 3, 4, 5, 6, 7}), ModelError);  // longer than the positions
  EXPECT_THROW(enc->encode({10}), ModelError);                   // id outside the vocabulary
}

}  // namespace
}  // namespace gen3d::models
