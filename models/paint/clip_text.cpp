#include "models/paint/clip_text.h"

#include <algorithm>
#include <cmath>
#include <filesystem>

#include <nlohmann/json.hpp>

#include "models/core/error.h"
#include "models/core/safetensors.h"
#include "models/kernels/activations.h"
#include "models/kernels/linear.h"
#include "models/kernels/norms.h"
#include "models/nn/config_reader.h"
#include "models/nn/layers.h"
#include "models/nn/params.h"
#include "models/nn/weight_files.h"

namespace gen3d::models {

namespace {

namespace fs = std::filesystem;
using json = nlohmann::json;
using i64 = std::int64_t;

struct Layer {
  nn::LayerNorm ln1, ln2;
  nn::Linear q, k, v, o, fc1, fc2;
};

}  // namespace

ClipTextConfig ClipTextConfig::parse(const std::string& json_text, const std::string& label) {
  const json j = nn::parse_config(json_text, label);
  ClipTextConfig c;
  nn::ConfigReader r(j, label + ": CLIP text config");
  r.read("vocab_size", c.vocab_size);
  r.read("hidden_size", c.hidden_size);
  r.read("intermediate_size", c.intermediate_size);
  r.read("num_hidden_layers", c.num_hidden_layers);
  r.read("num_attention_heads", c.num_attention_heads);
  r.read("max_position_embeddings", c.max_position_embeddings);
  r.read("layer_norm_eps", c.layer_norm_eps);
  r.read_choice("hidden_act", c.hidden_act, {"gelu", "quick_gelu"});
  if (c.hidden_size <= 0 || c.num_attention_heads <= 0 ||
      c.hidden_size % c.num_attention_heads != 0)
    r.problem("hidden_size " + std::to_string(c.hidden_size) +
              " is not a positive multiple of num_attention_heads " +
              std::to_string(c.num_attention_heads));
  if (c.vocab_size <= 0 || c.intermediate_size <= 0 || c.num_hidden_layers < 0 ||
      c.max_position_embeddings <= 0)
    r.problem("sizes must be positive");
  r.finish(nn::ConfigReader::Unknown::kAccept);  // transformers configs carry training keys
  return c;
}

ClipTextConfig ClipTextConfig::read(const std::string& path) {
  return parse(nn::read_config_file(path).dump(), path);
}

std::vector<int> EmptyPromptTokens::ids(int length) const {
  std::vector<int> out(static_cast<std::size_t>(std::max(length, 2)), pad);
  out[0] = bos;
  out[1] = eos;
  return out;
}

EmptyPromptTokens EmptyPromptTokens::read(const std::string& dir) {
  const std::string vocab_path = (fs::path(dir) / "vocab.json").string();
  const std::string special_path = (fs::path(dir) / "special_tokens_map.json").string();
  const json vocab = nn::read_config_file(vocab_path);
  const json special = nn::read_config_file(special_path);
  // A special token is a string or {"content": string}.
  const auto token = [&](const char* key) -> std::string {
    if (!special.contains(key)) throw ModelError(special_path + ": no \"" + key + "\"");
    const json& t = special.at(key);
    if (t.is_string()) return t.get<std::string>();
    if (t.is_object() && t.contains("content") && t.at("content").is_string())
      return t.at("content").get<std::string>();
    throw ModelError(special_path + ": \"" + key + "\" is neither a string nor {content}");
  };
  const auto id = [&](const std::string& tok) {
    if (!vocab.contains(tok) || !vocab.at(tok).is_number_integer())
      throw ModelError(vocab_path + ": token \"" + tok + "\" not in the vocabulary");
    return vocab.at(tok).get<int>();
  };
  EmptyPromptTokens t;
  t.bos = id(token("bos_token"));
  t.eos = id(token("eos_token"));
  t.pad = special.contains("pad_token") ? id(token("pad_token")) : t.eos;
  return t;
}

struct ClipTextEncoder::Weights {
  ClipTextConfig cfg;
  Tensor token_embedding, position_embedding;
  std::vector<Layer> layers;
  nn::LayerNorm final_norm;
};

ClipTextEncoder::ClipTextEncoder() : w_(std::make_unique<Weights>()) {}
ClipTextEncoder::~ClipTextEncoder() = default;

const ClipTextConfig& ClipTextEncoder::config() const {
  return w_->cfg;
}

void ClipTextEncoder::build(const ClipTextConfig& cfg, nn::ParamSource& m) {
  Weights& w = *w_;
  w.cfg = cfg;
  const i64 D = cfg.hidden_size, F = cfg.intermediate_size;
  const auto eps = static_cast<float>(cfg.layer_norm_eps);
  w.token_embedding = m.take("text_model.embeddings.token_embedding.weight", {cfg.vocab_size, D});
  w.position_embedding =
      m.take("text_model.embeddings.position_embedding.weight", {cfg.max_position_embeddings, D});
  // Older checkpoints store the position-id buffer (int64 arange): not a weight.
  m.skip("text_model.embeddings.position_ids");
  w.layers.resize(static_cast<std::size_t>(cfg.num_hidden_layers));
  for (int i = 0; i < cfg.num_hidden_layers; ++i) {
    const std::string p = "text_model.encoder.layers." + std::to_string(i) + ".";
    Layer& l = w.layers[static_cast<std::size_t>(i)];
    l.ln1.load(m, p + "layer_norm1", D, eps);
    l.ln2.load(m, p + "layer_norm2", D, eps);
    l.q.load(m, p + "self_attn.q_proj", D, D);
    l.k.load(m, p + "self_attn.k_proj", D, D);
    l.v.load(m, p + "self_attn.v_proj", D, D);
    l.o.load(m, p + "self_attn.out_proj", D, D);
    l.fc1.load(m, p + "mlp.fc1", D, F);
    l.fc2.load(m, p + "mlp.fc2", F, D);
  }
  w.final_norm.load(m, "text_model.final_layer_norm", D, eps);
}

std::unique_ptr<ClipTextEncoder> ClipTextEncoder::load(const ClipTextConfig& cfg,
                                                       WeightMap& weights, WeightStorage storage) {
  nn::CheckpointParams m(weights, storage);
  std::unique_ptr<ClipTextEncoder> e(new ClipTextEncoder());
  e->build(cfg, m);
  return e;
}

std::vector<std::pair<std::string, Shape>> ClipTextEncoder::expected_tensors(
    const ClipTextConfig& cfg) {
  nn::ShapeRecorder p;
  ClipTextEncoder().build(cfg, p);
  return std::move(p.list);
}

std::unique_ptr<ClipTextEncoder> ClipTextEncoder::load_folder(const std::string& dir,
                                                              WeightStorage storage) {
  const fs::path root(dir);
  const ClipTextConfig cfg = ClipTextConfig::read((root / "config.json").string());
  WeightMap m(SafetensorsFile::open(nn::find_weights(dir, "model")), "");
  auto e = load(cfg, m, storage);
  m.finish("CLIP text encoder");
  return e;
}

Tensor ClipTextEncoder::encode(const std::vector<int>& ids) const {
  const Weights& w = *w_;
  const ClipTextConfig& c = w.cfg;
  const i64 T = static_cast<i64>(ids.size()), D = c.hidden_size, F = c.intermediate_size;
  const i64 H = c.num_attention_heads, hd = D / H;
  if (T == 0 || T > c.max_position_embeddings)
    throw ModelError("CLIP text encoder: " + std::to_string(T) + " tokens (1.." +
                     std::to_string(c.max_position_embeddings) + " supported)");
  Tensor x(Shape{1, T, D});
  for (i64 t = 0; t < T; ++t) {
    const int id = ids[static_cast<std::size_t>(t)];
    if (id < 0 || id >= c.vocab_size)
      throw ModelError("CLIP text encoder: token id " + std::to_string(id) + " out of range");
    for (i64 d = 0; d < D; ++d)
      x.data()[t * D + d] =
          w.token_embedding.data()[id * D + d] + w.position_embedding.data()[t * D + d];
  }
  std::vector<float> h(static_cast<std::size_t>(T * D)), q(h.size()), k(h.size()), v(h.size()),
      a(h.size()), f(static_cast<std::size_t>(T * F)), scores(static_cast<std::size_t>(T));
  const float scale = 1.0f / std::sqrt(static_cast<float>(hd));
  for (const Layer& l : w.layers) {
    l.ln1(h.data(), x.data(), T);
    l.q(q.data(), h.data(), T);
    l.k(k.data(), h.data(), T);
    l.v(v.data(), h.data(), T);
    // Causal attention: token t sees tokens 0..t.
    for (i64 n = 0; n < H; ++n)
      for (i64 t = 0; t < T; ++t) {
        float mx = -INFINITY;
        for (i64 s = 0; s <= t; ++s) {
          float dot = 0.0f;
          for (i64 d = 0; d < hd; ++d) dot += q[t * D + n * hd + d] * k[s * D + n * hd + d];
          scores[s] = dot * scale;
          mx = std::max(mx, scores[s]);
        }
        float sum = 0.0f;
        for (i64 s = 0; s <= t; ++s) sum += (scores[s] = std::exp(scores[s] - mx));
        for (i64 d = 0; d < hd; ++d) {
          float acc = 0.0f;
          for (i64 s = 0; s <= t; ++s) acc += scores[s] * v[s * D + n * hd + d];
          a[t * D + n * hd + d] = acc / sum;
        }
      }
    l.o(h.data(), a.data(), T);
    for (i64 i = 0; i < T * D; ++i) x.data()[i] += h[i];
    l.ln2(h.data(), x.data(), T);
    l.fc1(f.data(), h.data(), T);
    if (c.hidden_act == "quick_gelu") {
      for (float& e : f) e = e / (1.0f + std::exp(-1.702f * e));
    } else {
      kernels::act_inplace(kernels::Act::kGeluErf, f.data(), T * F);
    }
    l.fc2(h.data(), f.data(), T);
    for (i64 i = 0; i < T * D; ++i) x.data()[i] += h[i];
  }
  w.final_norm(x.data(), x.data(), T);
  return x;
}

}  // namespace gen3d::models
