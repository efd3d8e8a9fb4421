#include "models/model_registry.h"

#include <filesystem>
#include <map>
#include <mutex>
#include <vector>

#include <nlohmann/json.hpp>

#include "models/error.h"

namespace gen3d::models {

namespace {

namespace fs = std::filesystem;

struct Entry {
  std::once_flag once;
  std::shared_ptr<const Hunyuan3DDiT> model;
};

struct Registry {
  std::mutex mutex;
  std::map<std::string, std::shared_ptr<Entry>> entries;
};

Registry& registry() {
  static Registry r;
  return r;
}

template <class Load>
std::shared_ptr<const Hunyuan3DDiT> get_or_load(const std::string& key, Load load) {
  std::shared_ptr<Entry> e;
  {
    std::lock_guard lock(registry().mutex);
    auto& slot = registry().entries[key];
    if (!slot) slot = std::make_shared<Entry>();
    e = slot;
  }
  // A throwing load leaves the flag unset: the next caller retries (and sees the error again).
  std::call_once(e->once, [&] { e->model = std::make_shared<const Hunyuan3DDiT>(load()); });
  return e->model;
}

std::string canonical(const std::string& p) {
  std::error_code ec;
  const fs::path c = fs::weakly_canonical(p, ec);
  return ec ? p : c.string();
}

}  // namespace

DiTSource resolve_dit_source(const std::string& path, const std::string& config) {
  DiTSource s;
  const fs::path p(path);
  if (fs::is_directory(p)) {
    for (const char* name : {"model.fp16.safetensors", "model.safetensors"})
      if (fs::is_regular_file(p / name)) {
        s.weights = (p / name).string();
        break;
      }
    if (s.weights.empty()) {
      std::vector<fs::path> found;
      for (const auto& f : fs::directory_iterator(p))
        if (f.path().extension() == ".safetensors") found.push_back(f.path());
      if (found.size() != 1)
        throw ModelError("model directory " + path + " has " + std::to_string(found.size()) +
                         " .safetensors files and no model.fp16.safetensors: name the file");
      s.weights = found[0].string();
    }
  } else if (fs::is_regular_file(p)) {
    s.weights = p.string();
  } else {
    throw ModelError("model weights not found: " + path);
  }
  if (!config.empty()) {
    s.config = config;
  } else {
    const fs::path dir = fs::path(s.weights).parent_path();
    s.config = (dir / "config.json").string();
    if (!fs::is_regular_file(s.config)) {
      const bool yaml = fs::is_regular_file(dir / "config.yaml");
      throw ModelError(
          "no config.json next to " + s.weights +
          (yaml ? " (config.yaml is not read: convert it to JSON)" : ": pass the config path"));
    }
  }
  if (!fs::is_regular_file(s.config)) throw ModelError("model config not found: " + s.config);
  return s;
}

std::shared_ptr<const Hunyuan3DDiT> shared_dit(const DiTSource& source) {
  const std::string key = "dit|" + canonical(source.weights) + "|" + canonical(source.config) +
                          "|" + source.section + "|" +
                          (source.storage == WeightStorage::kF16 ? "f16" : "f32");
  return get_or_load(key, [&] {
    const DiTConfig cfg = DiTConfig::from_file(source.config, source.section);
    return Hunyuan3DDiT::load(cfg, source.weights, DiTOptions{source.storage});
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
  return get_or_load(key, [&] { return Hunyuan3DDiT::random(config, seed); });
}

std::size_t shared_model_count() {
  std::lock_guard lock(registry().mutex);
  std::size_t n = 0;
  for (const auto& [k, e] : registry().entries)
    if (e->model) ++n;
  return n;
}

void clear_shared_models() {
  std::lock_guard lock(registry().mutex);
  registry().entries.clear();
}

}  // namespace gen3d::models
