#include "models/dit_config.h"

#include <fstream>
#include <nlohmann/json.hpp>
#include <sstream>

#include "models/error.h"

namespace gen3d::models {

namespace {

using nlohmann::json;

DiTConfig parse_params(const json& p, const std::string& where) {
  if (!p.is_object()) throw ModelError(where + ": DiT params must be a JSON object");
  DiTConfig c;
  std::vector<std::string> errors;
  auto get_int = [&](const char* key, int& dst) {
    if (!p.contains(key)) return;
    const json& v = p[key];
    if (!v.is_number_integer()) {
      errors.push_back(std::string(key) + ": expected an integer, got " + v.dump());
      return;
    }
    dst = v.get<int>();
  };
  auto get_num = [&](const char* key, double& dst) {
    if (!p.contains(key)) return;
    const json& v = p[key];
    if (!v.is_number()) {
      errors.push_back(std::string(key) + ": expected a number, got " + v.dump());
      return;
    }
    dst = v.get<double>();
  };
  auto get_bool = [&](const char* key, bool& dst) {
    if (!p.contains(key)) return;
    const json& v = p[key];
    if (!v.is_boolean()) {
      errors.push_back(std::string(key) + ": expected true/false, got " + v.dump());
      return;
    }
    dst = v.get<bool>();
  };
  static const char* kKnown[] = {
      "in_channels",    "context_in_dim",      "hidden_size", "mlp_ratio", "num_heads",
      "depth",          "depth_single_blocks", "axes_dim",    "theta",     "qkv_bias",
      "guidance_embed", "time_factor",         "ckpt_path"};
  for (auto it = p.begin(); it != p.end(); ++it) {
    bool known = false;
    for (const char* k : kKnown) known = known || it.key() == k;
    if (!known) errors.push_back("unknown key '" + it.key() + "'");
  }
  get_int("in_channels", c.in_channels);
  get_int("context_in_dim", c.context_in_dim);
  get_int("hidden_size", c.hidden_size);
  get_num("mlp_ratio", c.mlp_ratio);
  get_int("num_heads", c.num_heads);
  get_int("depth", c.depth);
  get_int("depth_single_blocks", c.depth_single_blocks);
  get_num("theta", c.theta);
  get_bool("qkv_bias", c.qkv_bias);
  get_bool("guidance_embed", c.guidance_embed);
  get_num("time_factor", c.time_factor);
  if (p.contains("axes_dim")) {
    const json& a = p["axes_dim"];
    if (!a.is_array()) {
      errors.push_back("axes_dim: expected an array of integers, got " + a.dump());
    } else {
      c.axes_dim.clear();
      for (const auto& d : a) {
        if (!d.is_number_integer()) {
          errors.push_back("axes_dim: expected integers, got " + d.dump());
          break;
        }
        c.axes_dim.push_back(d.get<int>());
      }
    }
  }
  if (!errors.empty()) {
    std::string msg = where + ": invalid DiT config:";
    for (const auto& e : errors) msg += "\n  " + e;
    throw ModelError(msg);
  }
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
  if (!errors.empty()) {
    std::string msg = "invalid DiT config:";
    for (const auto& e : errors) msg += "\n  " + e;
    throw ModelError(msg);
  }
}

DiTConfig DiTConfig::from_json(std::string_view json_text) {
  const json j = json::parse(json_text, nullptr, /*allow_exceptions=*/false);
  if (j.is_discarded()) throw ModelError("DiT config is not valid JSON");
  if (j.is_object() && j.contains("params")) {
    for (auto it = j.begin(); it != j.end(); ++it)
      if (it.key() != "params" && it.key() != "target")
        throw ModelError("DiT config section: unknown key '" + it.key() + "'");
    return parse_params(j["params"], "DiT config");
  }
  return parse_params(j, "DiT config");
}

DiTConfig DiTConfig::from_file(const std::string& path, std::string_view section) {
  std::ifstream in(path);
  if (!in) throw ModelError(path + ": cannot open config");
  std::stringstream ss;
  ss << in.rdbuf();
  const json j = json::parse(ss.str(), nullptr, false);
  if (j.is_discarded() || !j.is_object()) throw ModelError(path + ": not a JSON object");
  const std::string key(section);
  if (!j.contains(key)) throw ModelError(path + ": no section '" + key + "'");
  try {
    return from_json(j[key].dump());
  } catch (const ModelError& e) {
    throw ModelError(path + " [" + key + "]: " + e.what());
  }
}

}  // namespace gen3d::models
