#include "models/shape/dit21_config.h"

#include <nlohmann/json.hpp>

#include "models/core/error.h"
#include "models/nn/config_reader.h"

namespace gen3d::models {

namespace {

using nlohmann::json;

DiT21Config parse_params(const json& p, const std::string& where) {
  if (!p.is_object()) throw ModelError(where + ": DiT params must be an object");
  DiT21Config c;
  nn::ConfigReader r(p, where + ": invalid HunYuanDiTPlain config");
  r.read("input_size", c.input_size);
  r.read("in_channels", c.in_channels);
  r.read("hidden_size", c.hidden_size);
  r.read("context_dim", c.context_dim);
  r.read("depth", c.depth);
  r.read("num_heads", c.num_heads);
  r.read("qk_norm", c.qk_norm);
  r.read("text_len", c.text_len);
  r.read("qkv_bias", c.qkv_bias);
  r.read("num_moe_layers", c.num_moe_layers);
  r.read("num_experts", c.num_experts);
  r.read("moe_top_k", c.moe_top_k);
  r.require("qk_norm_type", "rms", "only RMS q/k norms are implemented");
  r.require("norm_type", "layer", "only LayerNorm blocks are implemented");
  r.require("with_decoupled_ca", false, "decoupled cross-attention is not implemented");
  r.require("use_attention_pooling", false, "attention pooling is not implemented");
  r.require("use_pos_emb", false, "the positional embedding is not implemented");
  if (r.has("guidance_cond_proj_dim")) r.read("guidance_cond_proj_dim", c.guidance_cond_proj_dim);
  // mlp_ratio is ignored by the official blocks (their MLP is always 4x); the decoupled
  // cross-attention sizes matter only with it on.
  r.ignore({"mlp_ratio", "decoupled_ca_dim", "decoupled_ca_weight", "additional_cond_hidden_state",
            "ckpt_path"});
  r.finish();
  c.validate();
  return c;
}

}  // namespace

void DiT21Config::validate() const {
  std::vector<std::string> errors;
  auto positive = [&](const char* name, long v) {
    if (v <= 0) errors.push_back(std::string(name) + " must be > 0, got " + std::to_string(v));
  };
  positive("input_size", input_size);
  positive("in_channels", in_channels);
  positive("hidden_size", hidden_size);
  positive("context_dim", context_dim);
  positive("num_heads", num_heads);
  if (depth < 0) errors.push_back("depth must be >= 0");
  if (guidance_cond_proj_dim < 0) errors.push_back("guidance_cond_proj_dim must be >= 0");
  if (num_moe_layers < 0) errors.push_back("num_moe_layers must be >= 0");
  if (num_heads > 0 && hidden_size % num_heads != 0)
    errors.push_back("hidden_size " + std::to_string(hidden_size) +
                     " is not divisible by num_heads " + std::to_string(num_heads));
  if (num_moe_layers > 0) {
    positive("num_experts", num_experts);
    if (moe_top_k < 1 || moe_top_k > num_experts)
      errors.push_back("moe_top_k must be in [1, num_experts], got " + std::to_string(moe_top_k));
  }
  nn::throw_problems("invalid HunYuanDiTPlain config:", errors);
}

DiT21Config DiT21Config::from_json(std::string_view json_text) {
  const json j = json::parse(json_text, nullptr, /*allow_exceptions=*/false);
  if (j.is_discarded()) throw ModelError("DiT config is not valid JSON");
  return parse_params(nn::section_params(j, "DiT config"), "DiT config");
}

DiT21Config DiT21Config::from_file(const std::string& path, std::string_view section) {
  return nn::parse_config_section(path, section,
                                  [](const std::string& text) { return from_json(text); });
}

bool DiT21Config::describes(std::string_view json_text) {
  const json j = json::parse(json_text, nullptr, /*allow_exceptions=*/false);
  if (!j.is_object()) return false;
  if (j.contains("target") && j["target"].is_string())
    return j["target"].get<std::string>().ends_with("HunYuanDiTPlain");
  const json& p = j.contains("params") ? j["params"] : j;
  return p.is_object() && (p.contains("num_moe_layers") || p.contains("context_dim"));
}

}  // namespace gen3d::models
