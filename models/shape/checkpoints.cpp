#include "models/shape/checkpoints.h"

#include <filesystem>
#include <vector>

#include <spdlog/spdlog.h>
#include <nlohmann/json.hpp>

#include "models/core/error.h"
#include "models/core/safetensors.h"
#include "models/nn/config_reader.h"
#include "models/nn/model_cache.h"
#include "models/nn/weight_files.h"
#include "models/shape/dit21.h"

namespace gen3d::models {

namespace fs = std::filesystem;

namespace {

// The config of `s.weights`: `config` when given, else the one beside the weights.
CheckpointSource with_config(CheckpointSource s, const std::string& config) {
  if (!config.empty()) {
    s.config = config;
  } else {
    // The official folders ship config.yaml; a converted config.json beside it takes precedence.
    const fs::path dir = fs::path(s.weights).parent_path();
    for (const char* name : {"config.json", "config.yaml"})
      if (fs::is_regular_file(dir / name)) {
        s.config = (dir / name).string();
        break;
      }
    if (s.config.empty())
      throw ModelError("no config.json or config.yaml next to " + s.weights +
                       ": pass the config path");
  }
  if (!fs::is_regular_file(s.config)) throw ModelError("model config not found: " + s.config);
  return s;
}

}  // namespace

CheckpointSource resolve_checkpoint(const std::string& path, const std::string& config) {
  CheckpointSource s;
  const fs::path p(path);
  if (fs::is_directory(p)) {
    try {
      s.weights = nn::find_weights(path, "model");
    } catch (const ModelError&) {
      // The torch.save checkpoint the official loader reads by default since 2.1 (a dict of the
      // sub-models' state dicts, read flattened by models/core/torch_file.h).
      for (const char* name : {"model.ckpt", "model.fp16.ckpt"})
        if (fs::is_regular_file(p / name)) {
          s.weights = (p / name).string();
          return with_config(std::move(s), config);
        }
      // Not the official names: a folder with exactly one weights file is unambiguous.
      std::vector<fs::path> found;
      for (const auto& f : fs::directory_iterator(p))
        if (f.path().extension() == ".safetensors") found.push_back(f.path());
      if (found.size() != 1)
        throw ModelError("model directory " + path + " has " + std::to_string(found.size()) +
                         " .safetensors files and no model.safetensors, "
                         "model.fp16.safetensors or model.fp16.ckpt: name the file");
      s.weights = found[0].string();
    }
  } else if (fs::is_regular_file(p)) {
    s.weights = p.string();
  } else {
    throw ModelError("model weights not found: " + path);
  }
  return with_config(std::move(s), config);
}

std::shared_ptr<const Hunyuan3DDiT> shared_dit(const CheckpointSource& source) {
  const std::string key = nn::canonical_path(source.weights) + "|" +
                          nn::canonical_path(source.config) + "|" + source.section + "|" +
                          std::string(storage_name(source.storage)) + "|" +
                          device_name(source.device);
  return nn::shared_model<Hunyuan3DDiT>(key, [&] {
    const DiTConfig cfg = DiTConfig::from_file(source.config, source.section);
    return Hunyuan3DDiT::load(cfg, source.weights, DiTOptions{source.storage, source.device});
  });
}

std::shared_ptr<const ShapeDenoiser> shared_denoiser(const CheckpointSource& source) {
  const std::string section = nn::read_config_file(source.config, source.section).dump();
  if (!DiT21Config::describes(section)) return shared_dit(source);
  const std::string key = nn::canonical_path(source.weights) + "|" +
                          nn::canonical_path(source.config) + "|" + source.section + "|" +
                          std::string(storage_name(source.storage)) + "|" +
                          device_name(source.device);
  return nn::shared_model<HunyuanDiTPlain>(key, [&] {
    DiT21Config cfg;
    try {
      cfg = DiT21Config::from_json(section);
    } catch (const ModelError& e) {
      throw ModelError(source.config + " [" + source.section + "]: " + e.what());
    }
    WeightMap w = WeightMap::for_submodel(SafetensorsFile::open(source.weights), kDiTPrefix);
    return HunyuanDiTPlain::load(cfg, w, {source.storage, source.device});
  });
}

std::shared_ptr<const Hunyuan3DDiT> shared_random_dit(const DiTConfig& config, std::uint64_t seed) {
  nlohmann::json j{{"in_channels", config.in_channels},
                   {"context_in_dim", config.context_in_dim},
                   {"hidden_size", config.hidden_size},
                   {"mlp_ratio", config.mlp_ratio},
                   {"num_heads", config.num_heads},
                   {"depth", config.depth},
                   {"depth_single_blocks", config.depth_single_blocks},
                   {"axes_dim", config.axes_dim},
                   {"qkv_bias", config.qkv_bias},
                   {"guidance_embed", config.guidance_embed},
                   {"time_factor", config.time_factor}};
  const std::string key = "random|" + j.dump() + "|" + std::to_string(seed);
  return nn::shared_model<Hunyuan3DDiT>(key, [&] { return Hunyuan3DDiT::random(config, seed); });
}

std::optional<CheckpointContents> inspect_checkpoint(const std::string& path,
                                                     const std::string& config) {
  CheckpointContents c;
  std::string weights = path;
  try {
    const CheckpointSource src = resolve_checkpoint(path, config);
    weights = src.weights;
    c.config = src.config;
  } catch (const std::exception&) {
    if (!fs::is_regular_file(path)) return std::nullopt;  // a file without a config is fine
    c.config = config;
  }
  try {
    const auto file = SafetensorsFile::open(weights);
    const std::string vae = std::string(kVaePrefix) + ".";
    const std::string conditioner = std::string(kConditionerPrefix) + ".";
    for (const auto& t : file->tensors()) {
      c.has_vae = c.has_vae || t.name.starts_with(vae);
      c.has_conditioner = c.has_conditioner || t.name.starts_with(conditioner);
    }
  } catch (const std::exception& e) {
    spdlog::debug("{} not inspected: {}", weights, e.what());
    return std::nullopt;
  }
  return c;
}

namespace {

// Whether the config file has a top-level `section` (false for an unreadable file: the loader
// that reads it reports why).
bool has_section(const std::string& config, std::string_view section) {
  try {
    const nlohmann::json j = nn::read_config_file(config);
    return j.contains(section);
  } catch (const ModelError&) {
    return false;
  }
}

}  // namespace

std::optional<ShapeSchedulerConfig> scheduler_of(const std::string& config) {
  const nlohmann::json j = nn::read_config_file(config);
  if (!j.contains(kSchedulerSection)) return std::nullopt;
  const nlohmann::json& sec = j[kSchedulerSection];
  const std::string where = config + " [" + std::string(kSchedulerSection) + "]";
  if (!sec.is_object() || !sec.contains("target") || !sec["target"].is_string())
    throw ModelError(where + ": expected {target: ..., params: {...}}");
  const std::string target = sec["target"].get<std::string>();
  const std::string cls = target.substr(target.rfind('.') + 1);
  ShapeSchedulerConfig s;
  nn::ConfigReader r(nn::section_params(sec, where), where);
  r.read("num_train_timesteps", s.num_train_timesteps);
  if (cls == "ConsistencyFlowMatchEulerDiscreteScheduler") {
    s.kind = ScheduleKind::kConsistency;
    r.read("pcm_timesteps", s.pcm_timesteps);
  } else if (cls == "FlowMatchEulerDiscreteScheduler") {
    r.read("shift", s.shift);
    bool dynamic = false;
    r.read("use_dynamic_shifting", dynamic);
    if (dynamic) throw ModelError(where + ": use_dynamic_shifting is not implemented");
  } else {
    throw ModelError(where + ": scheduler " + target +
                     " is not implemented (FlowMatchEulerDiscreteScheduler or "
                     "ConsistencyFlowMatchEulerDiscreteScheduler)");
  }
  r.finish();
  return s;
}

std::string conditioner_section_of(const std::string& config) {
  return has_section(config, kConditionerPrefix) ? std::string(kConditionerPrefix) : "";
}

std::shared_ptr<const ShapeVAE> shared_shape_vae(const CheckpointSource& source) {
  std::string section = source.section;
  if (section.empty() && has_section(source.config, kVaePrefix)) section = kVaePrefix;
  const std::string key =
      nn::canonical_path(source.weights) + "|" + nn::canonical_path(source.config) + "|" + section +
      "|" + std::string(storage_name(source.storage)) + "|" + device_name(source.device);
  return nn::shared_model<ShapeVAE>(key, [&] {
    ShapeVAE vae = ShapeVAE::load(ShapeVAEConfig::from_file(source.config, section), source.weights,
                                  source.storage);
    vae.set_device(source.device);
    return vae;
  });
}

}  // namespace gen3d::models
