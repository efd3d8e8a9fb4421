#include "support/tiny_models.h"

#include <cmath>
#include <filesystem>
#include <fstream>
#include <map>
#include <random>
#include <stdexcept>
#include <utility>
#include <vector>

#include <nlohmann/json.hpp>

#include "models/core/safetensors.h"
#include "models/core/tensor.h"
#include "models/shape/dit.h"
#include "models/shape/dit21.h"
#include "models/shape/dit_config.h"
#include "models/shape/shape_vae.h"
#include "support/torch_save.h"

namespace gen3d::test {
namespace {

using models::Shape;
using models::Tensor;
using nlohmann::json;

// Sizes: every width small enough that a full image -> mesh run takes about a second.
constexpr int kContextWidth = 16;  // DINOv2 hidden = DiT context_in_dim
constexpr int kDinoHeads = 2;
constexpr int kDinoLayers = 1;
constexpr int kDinoImageSize = 28;  // 2 x 2 patches of 14 + CLS = 5 condition tokens
constexpr int kLatentChannels = 8;  // DiT in_channels = VAE embed_dim
constexpr int kLatentTokens = 32;

json dit_params() {
  return {{"in_channels", kLatentChannels},
          {"context_in_dim", kContextWidth},
          {"hidden_size", 32},
          {"mlp_ratio", 4.0},
          {"num_heads", 4},
          {"depth", 1},
          {"depth_single_blocks", 1},
          {"axes_dim", {8}},
          {"theta", 10000},
          {"qkv_bias", true},
          {"guidance_embed", false}};
}

// HunYuanDiTPlain: depth 3 (a long skip into block 2), its last block with 4 experts.
json dit21_params() {
  return {{"input_size", kLatentTokens},
          {"in_channels", kLatentChannels},
          {"hidden_size", 32},
          {"context_dim", kContextWidth},
          {"depth", 3},
          {"num_heads", 2},
          {"qk_norm", true},
          {"text_len", 5},
          {"with_decoupled_ca", false},
          {"use_attention_pooling", false},
          {"qk_norm_type", "rms"},
          {"qkv_bias", false},
          {"use_pos_emb", false},
          {"num_moe_layers", 1},
          {"num_experts", 4},
          {"moe_top_k", 2}};
}

json vae_params() {
  return {{"num_latents", kLatentTokens},
          {"embed_dim", kLatentChannels},
          {"num_freqs", 4},
          {"include_pi", false},
          {"heads", 4},
          {"width", 32},
          {"num_decoder_layers", 1},
          {"qkv_bias", false},
          {"qk_norm", true},
          {"scale_factor", 0.75},
          {"geo_decoder_mlp_expand_ratio", 4},
          {"geo_decoder_downsample_ratio", 1},
          {"geo_decoder_ln_post", true}};
}

// A Dinov2Config dict in the form the official conditioner block passes to transformers.
json dinov2_config(int hidden = kContextWidth, int heads = kDinoHeads, int layers = kDinoLayers,
                   int image_size = kDinoImageSize) {
  return {{"attention_probs_dropout_prob", 0.0},
          {"drop_path_rate", 0.0},
          {"hidden_act", "gelu"},
          {"hidden_dropout_prob", 0.0},
          {"hidden_size", hidden},
          {"image_size", image_size},
          {"initializer_range", 0.02},
          {"layer_norm_eps", 1e-6},
          {"layerscale_value", 1.0},
          {"mlp_ratio", 4},
          {"model_type", "dinov2"},
          {"num_attention_heads", heads},
          {"num_channels", 3},
          {"num_hidden_layers", layers},
          {"patch_size", 14},
          {"qkv_bias", true},
          {"use_swiglu_ffn", false}};
}

// Official config layout (config.yaml as JSON): one section per sub-model.
json folder_config(TinyShapeVersion version) {
  const json model =
      version == TinyShapeVersion::k21
          ? json{{"target", "hy3dshape.models.denoisers.hunyuandit.HunYuanDiTPlain"},
                 {"params", dit21_params()}}
          : json{{"target", "hy3dgen.shapegen.models.Hunyuan3DDiT"}, {"params", dit_params()}};
  return {{"model", model},
          {"vae", {{"target", "hy3dgen.shapegen.models.ShapeVAE"}, {"params", vae_params()}}},
          {"conditioner",
           {{"target", "hy3dgen.shapegen.models.SingleImageEncoder"},
            {"params",
             {{"main_image_encoder",
               {{"type", "DinoImageEncoder"},
                {"kwargs",
                 {{"config", dinov2_config()},
                  {"image_size", kDinoImageSize},
                  {"use_cls_token", true}}}}}}}}},
          {"scheduler",
           {{"target", "hy3dgen.shapegen.schedulers.FlowMatchEulerDiscreteScheduler"},
            {"params", {{"num_train_timesteps", 1000}}}}}};
}

// folder_config() in the style of the official hunyuan3d-dit-v2-0/config.yaml.
constexpr const char* kConfigYaml = R"(model:
  target: hy3dgen.shapegen.models.Hunyuan3DDiT
  params:
    in_channels: 8
    context_in_dim: 16
    hidden_size: 32
    mlp_ratio: 4.0
    num_heads: 4
    depth: 1
    depth_single_blocks: 1
    axes_dim: [ 8 ]
    theta: 10000
    qkv_bias: true
    guidance_embed: false

vae:
  target: hy3dgen.shapegen.models.ShapeVAE
  params:
    num_latents: 32
    embed_dim: 8
    num_freqs: 4
    include_pi: false
    heads: 4
    width: 32
    num_decoder_layers: 1
    qkv_bias: false
    qk_norm: true
    scale_factor: 0.75
    geo_decoder_mlp_expand_ratio: 4
    geo_decoder_downsample_ratio: 1
    geo_decoder_ln_post: true

conditioner:
  target: hy3dgen.shapegen.models.SingleImageEncoder
  params:
    main_image_encoder:
      type: DinoImageEncoder # dino large
      kwargs:
        config:
          attention_probs_dropout_prob: 0.0
          drop_path_rate: 0.0
          hidden_act: gelu
          hidden_dropout_prob: 0.0
          hidden_size: 16
          image_size: 28
          initializer_range: 0.02
          layer_norm_eps: 1.e-6
          layerscale_value: 1.0
          mlp_ratio: 4
          model_type: dinov2
          num_attention_heads: 2
          num_channels: 3
          num_hidden_layers: 1
          patch_size: 14
          qkv_bias: True
          use_swiglu_ffn: False
        image_size: 28
        use_cls_token: true

scheduler:
  target: hy3dgen.shapegen.schedulers.FlowMatchEulerDiscreteScheduler
  params:
    num_train_timesteps: 1000
)";

// Dinov2Model state_dict with small random values: Linear weights ~ N(0, 1/fan_in), biases
// ~ N(0, 0.02), LayerNorm weights around 1, layer scales in [0.1, 0.5].
std::vector<std::pair<std::string, Tensor>> dinov2_weights(std::mt19937_64& rng,
                                                           int width = kContextWidth,
                                                           int layers = kDinoLayers,
                                                           int image_size = kDinoImageSize) {
  const std::int64_t c = width, hidden = 4 * c, p = 14;
  const std::int64_t positions = (image_size / p) * (image_size / p) + 1;
  std::vector<std::pair<std::string, Tensor>> out;
  auto add = [&](const std::string& name, const Shape& shape, double mean, double sd) {
    Tensor t(shape);
    std::normal_distribution<double> nd(mean, sd);
    for (float& v : t.span()) v = static_cast<float>(nd(rng));
    out.emplace_back(name, std::move(t));
  };
  auto linear = [&](const std::string& name, std::int64_t n_out, std::int64_t n_in) {
    add(name + ".weight", {n_out, n_in}, 0.0, 1.0 / std::sqrt(static_cast<double>(n_in)));
    add(name + ".bias", {n_out}, 0.0, 0.02);
  };
  auto norm = [&](const std::string& name) {
    add(name + ".weight", {c}, 1.0, 0.1);
    add(name + ".bias", {c}, 0.0, 0.05);
  };
  auto scale = [&](const std::string& name) {
    Tensor t({c});
    std::uniform_real_distribution<double> ud(0.1, 0.5);
    for (float& v : t.span()) v = static_cast<float>(ud(rng));
    out.emplace_back(name, std::move(t));
  };
  add("embeddings.cls_token", {1, 1, c}, 0.0, 0.5);
  add("embeddings.mask_token", {1, c}, 0.0, 0.5);
  add("embeddings.position_embeddings", {1, positions, c}, 0.0, 0.5);
  add("embeddings.patch_embeddings.projection.weight", {c, 3, p, p}, 0.0,
      1.0 / std::sqrt(3.0 * p * p));
  add("embeddings.patch_embeddings.projection.bias", {c}, 0.0, 0.02);
  for (int i = 0; i < layers; ++i) {
    const std::string l = "encoder.layer." + std::to_string(i) + ".";
    norm(l + "norm1");
    for (const char* qkv : {"query", "key", "value"})
      linear(l + "attention.attention." + qkv, c, c);
    linear(l + "attention.output.dense", c, c);
    scale(l + "layer_scale1.lambda1");
    norm(l + "norm2");
    linear(l + "mlp.fc1", hidden, c);
    linear(l + "mlp.fc2", c, hidden);
    scale(l + "layer_scale2.lambda1");
  }
  norm("layernorm");
  return out;
}

}  // namespace

std::string tiny_dinov2_config_json(int hidden, int heads, int layers, int image_size) {
  return dinov2_config(hidden, heads, layers, image_size).dump(2);
}

std::vector<std::pair<std::string, Tensor>> tiny_dinov2_weights(std::uint64_t seed, int hidden,
                                                                int layers, int image_size) {
  std::mt19937_64 rng(seed);
  return dinov2_weights(rng, hidden, layers, image_size);
}

// HunYuanDiTPlain weights by the 2.1 golden set's recipe: Linear W ~ N(0, 1/fan_in), biases
// N(0, 0.1^2), norm weights 1 + N(0, 0.15^2), the MoE gate N(0, 9/fan_in).
std::vector<std::pair<std::string, Tensor>> dit21_weights(const json& params, std::uint64_t seed) {
  std::mt19937_64 rng(seed);
  std::vector<std::pair<std::string, Tensor>> out;
  for (const auto& [name, shape] :
       models::HunyuanDiTPlain::expected_tensors(models::DiT21Config::from_json(params.dump()))) {
    Tensor t(shape);
    double mean = 0.0, sd = 0.1;
    if (name.ends_with(".weight") && shape.rank() == 1) {
      mean = 1.0;
      sd = 0.15;
    } else if (name.ends_with(".weight")) {
      sd = (name.ends_with(".gate.weight") ? 3.0 : 1.0) /
           std::sqrt(static_cast<double>(shape.dims()[1]));
    }
    std::normal_distribution<double> nd(mean, sd);
    for (float& v : t.span()) v = static_cast<float>(nd(rng));
    out.emplace_back(name, std::move(t));
  }
  return out;
}

// The 2.1 DiT section in the official config.yaml style (replacing the 2.0 one).
constexpr const char* kModel21Yaml = R"(model:
  target: hy3dshape.models.denoisers.hunyuandit.HunYuanDiTPlain
  params:
    input_size: 32
    in_channels: 8
    hidden_size: 32
    context_dim: 16
    depth: 3
    num_heads: 2
    qk_norm: true
    text_len: 5
    with_decoupled_ca: false
    use_attention_pooling: false
    qk_norm_type: 'rms'
    qkv_bias: false
    use_pos_emb: false
    num_moe_layers: 1
    num_experts: 4
    moe_top_k: 2
)";

std::string tiny_model_config_json(TinyShapeVersion version) {
  return folder_config(version).dump(2);
}

std::string tiny_model_config_yaml(TinyShapeVersion version) {
  if (version == TinyShapeVersion::k20) return kConfigYaml;
  const std::string yaml = kConfigYaml;
  return kModel21Yaml + yaml.substr(yaml.find("\nvae:"));
}

TinyModelFolder write_tiny_model_folder(const std::string& dir, std::uint64_t seed,
                                        TinyConfigFile config_file, TinyShapeVersion version) {
  namespace fs = std::filesystem;
  fs::create_directories(dir);
  TinyModelFolder f;
  f.dir = dir;
  f.weights = (fs::path(dir) / "model.fp16.safetensors").string();
  const bool yaml = config_file == TinyConfigFile::kYaml;
  f.config = (fs::path(dir) / (yaml ? "config.yaml" : "config.json")).string();
  f.context_width = kContextWidth;
  f.context_tokens = (kDinoImageSize / 14) * (kDinoImageSize / 14) + 1;
  f.latent_tokens = kLatentTokens;

  const json config = folder_config(version);
  std::vector<std::pair<std::string, Tensor>> all;
  if (version == TinyShapeVersion::k21) {
    for (auto& [name, t] : dit21_weights(config["model"]["params"], seed))
      all.emplace_back("model." + name, std::move(t));
  } else {
    // The DiT's own random init (the golden recipe); the hook sees every tensor by official name.
    models::Hunyuan3DDiT::random(
        models::DiTConfig::from_json(config["model"].dump()), seed, {},
        [&](const std::string& name, Tensor& value) { all.emplace_back("model." + name, value); });
  }
  for (auto& [name, t] : models::ShapeVAE::random_weights(
           models::ShapeVAEConfig::from_json(config["vae"].dump()), seed + 1))
    all.emplace_back("vae." + name, std::move(t));
  std::mt19937_64 rng(seed + 2);
  for (auto& [name, t] : dinov2_weights(rng))
    all.emplace_back("conditioner.main_image_encoder.model." + name, std::move(t));

  if (version == TinyShapeVersion::k21) {
    // model.fp16.ckpt: {'model': sd, 'vae': sd, 'conditioner': sd}, un-prefixed inside.
    f.weights = (fs::path(dir) / "model.fp16.ckpt").string();
    std::vector<std::pair<std::string, NamedTensors>> groups;
    for (auto& [name, t] : all) {
      const std::string group = name.substr(0, name.find('.'));
      if (groups.empty() || groups.back().first != group)
        groups.emplace_back(group, NamedTensors{});
      groups.back().second.emplace_back(name.substr(group.size() + 1), std::move(t));
    }
    write_torch_save(f.weights, groups, models::DType::kF16);
  } else {
    std::vector<std::pair<std::string, const Tensor*>> refs;
    refs.reserve(all.size());
    for (const auto& [name, t] : all) refs.emplace_back(name, &t);
    models::write_safetensors(f.weights, refs, models::DType::kF16, {{"format", "pt"}});
  }
  std::ofstream out(f.config);
  out << (yaml ? tiny_model_config_yaml(version) : config.dump(2) + "\n");
  if (!out) throw std::runtime_error("cannot write " + f.config);
  return f;
}

}  // namespace gen3d::test
