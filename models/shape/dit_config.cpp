#include "models/shape/dit_config.h"

#include <nlohmann/json.hpp>

#include "models/core/error.h"
#include "models/nn/config_reader.h"

namespace gen3d::models {

namespace {

using nlohmann::json;

DiTConfig parse_params(const json& p, const std::string& where) {
  if (!p.is_object()) throw ModelError(where + ": DiT params must be a JSON object");
  DiTConfig c;
  nn::ConfigReader r(p, where + ": invalid DiT config");
  r.read("in_channels", c.in_channels);
  r.read("context_in_dim", c.context_in_dim);
  r.read("hidden_size", c.hidden_size);
  r.read("mlp_ratio", c.mlp_ratio);
  r.read("num_heads", c.num_heads);
  r.read("depth", c.depth);
  r.read("depth_single_blocks", c.depth_single_blocks);
  r.read("axes_dim", c.axes_dim);
  r.read("theta", c.theta);
  r.read("qkv_bias", c.qkv_bias);
  r.read("guidance_embed", c.guidance_embed);
  r.read("time_factor", c.time_factor);
  r.ignore({"ckpt_path"});
  r.finish();
  c.validate();
  return c;
}

}  // namespace

void DiTConfig::validate() const {
  std::vector<std::string> errors;
  auto positive = [&](const char* name, long v) {
    if (v <= 0) errors.push_back(std::string(name) + " must be > 0, got " + std::to_string(v));
  };
  positive("in_channels", in_channels);
  positive("context_in_dim", context_in_dim);
  positive("hidden_size", hidden_size);
  positive("num_heads", num_heads);
  if (depth < 0) errors.push_back("depth must be >= 0");
  if (depth_single_blocks < 0) errors.push_back("depth_single_blocks must be >= 0");
  if (!(mlp_ratio > 0)) errors.push_back("mlp_ratio must be > 0");
  if (!(time_factor > 1)) errors.push_back("time_factor must be > 1");
  if (num_heads > 0 && hidden_size % num_heads != 0)
    errors.push_back("hidden_size " + std::to_string(hidden_size) +
                     " is not divisible by num_heads " + std::to_string(num_heads));
  if (num_heads > 0 && hidden_size > 0) {
    long sum = 0;
    for (int d : axes_dim) sum += d;
    if (sum != head_dim())
      errors.push_back("sum(axes_dim) = " + std::to_string(sum) + " must equal the head dim " +
                       std::to_string(head_dim()));
  }
  nn::throw_problems("invalid DiT config:", errors);
}

DiTConfig DiTConfig::from_json(std::string_view json_text) {
  const json j = json::parse(json_text, nullptr, /*allow_exceptions=*/false);
  if (j.is_discarded()) throw ModelError("DiT config is not valid JSON");
  return parse_params(nn::section_params(j, "DiT config"), "DiT config");
}

DiTConfig DiTConfig::from_file(const std::string& path, std::string_view section) {
  return nn::parse_config_section(path, section,
                                  [](const std::string& text) { return from_json(text); });
}

}  // namespace gen3d::models
