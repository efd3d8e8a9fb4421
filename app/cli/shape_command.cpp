#include "app/cli/shape_command.h"

#include <algorithm>
#include <filesystem>
#include <optional>

#include <fmt/format.h>
#include <spdlog/spdlog.h>

#include "app/cli/registry.h"
#include "app/cli/shipped_configs.h"
#include "models/nn/config_reader.h"
#include "models/shape/checkpoints.h"
#include "models/shape/dinov2.h"
#include "models/shape/multiview.h"
#include "models/shape/shape_models.h"
#include "pipeline/config.h"
#include "pipeline/error.h"
#include "pipeline/graph.h"

namespace gen3d::app::cli {

namespace fs = std::filesystem;

namespace {

std::string view_names() {
  std::string s;
  for (const std::string_view v : models::kMultiviewNames)
    s += (s.empty() ? "" : ", ") + std::string(v);
  return s;
}

// Whether the conditioner `config` [section] describes is a multiview one; nullopt when the config
// cannot say (none given, or not readable here: the stage reports it then).
std::optional<bool> conditioner_is_multiview(const std::string& config,
                                             const std::string& section) {
  if (config.empty()) return std::nullopt;
  try {
    return models::ImageEncoderConfig::from_file(config, section).multiview;
  } catch (const std::exception& e) {
    spdlog::debug("shape: conditioner kind not read from {}: {}", config, e.what());
    return std::nullopt;
  }
}

}  // namespace

std::string set_shape_images(const std::vector<std::string>& items, ShapeOptions& o) {
  for (const std::string& item : items) {
    const auto eq = item.find('=');
    const std::string view = eq == std::string::npos ? "" : item.substr(0, eq);
    // A path with '=' in it stays a path unless what stands before is a plain word.
    const bool named = !view.empty() && std::all_of(view.begin(), view.end(), [](char c) {
      return (c >= 'a' && c <= 'z') || (c >= 'A' && c <= 'Z');
    });
    if (!named) {
      if (!o.image.empty())
        return fmt::format(
            "--image {}: one image without a view name; a multiview model takes named views "
            "(--image front=A.png --image left=B.png ...)",
            item);
      o.image = item;
      continue;
    }
    if (!models::multiview_index(view))
      return fmt::format("--image {}: unknown view \"{}\" (a multiview model's views: {})", item,
                         view, view_names());
    if (o.views.count(view))
      return fmt::format("--image {}: the {} view is given twice", item, view);
    o.views[view] = item.substr(eq + 1);
  }
  if (!o.image.empty() && !o.views.empty())
    return fmt::format(
        "--image {} has no view name beside named views: name every view (front={}) for a "
        "multiview model, or give one image without names for a single-image model",
        o.image, o.image);
  return "";
}

std::string resolve_shape_defaults(ShapeOptions& o) {
  const bool multiview = !o.views.empty();
  const bool image = !o.image.empty() || multiview;
  if (!o.image.empty() && multiview)
    return "--image PATH and --image VIEW=PATH do not mix: name every view, or give one image";
  if (image && (!o.cond.empty() || !o.cond_name.empty()))
    return "--image and --cond/--cond-name are exclusive: condition on an image (--image) or on "
           "precomputed condition tokens (--cond), not both";
  if (!image &&
      (!o.conditioner.empty() || !o.conditioner_config.empty() || !o.conditioner_section.empty()))
    return "--conditioner, --conditioner-config and --conditioner-section need --image";

  if (!o.models.empty()) {
    if (o.model.empty())
      return "--models needs --model: a short name (turbo, fast, 2.0, ...) or a folder name";
    if (!fs::exists(o.model)) {
      try {
        o.model = models::find_shape_model(o.models, o.model);
      } catch (const std::exception& e) {
        return e.what();
      }
    }
  }
  std::optional<models::CheckpointContents> model;
  if (!o.model.empty()) model = models::inspect_checkpoint(o.model);
  if (model && !model->config.empty()) {
    // The step-distilled models run few steps with their turbo VAE and FlashVDM decoding
    // (examples/fast_shape_gen_with_flashvdm.py: 5 steps, enable_flashvdm()).
    std::optional<models::ShapeSchedulerConfig> sched;
    try {
      sched = models::scheduler_of(model->config);
    } catch (const std::exception& e) {
      return e.what();
    }
    if (sched && sched->kind == models::ScheduleKind::kConsistency) {
      if (o.steps < 0) o.steps = kTurboSteps;
      if (o.vae.empty())
        if (const std::string turbo = models::find_turbo_vae(o.model); !turbo.empty()) {
          o.vae = turbo;
          if (o.method.empty()) o.method = "flashvdm";
          spdlog::info("shape: {} runs with the turbo VAE {} ({} decoding)", o.model, turbo,
                       o.method);
        }
    }
  }
  if (o.vae.empty() && model && model->has_vae) o.vae = o.model;
  // The latents the VAE decodes: its num_latents (2.0: 3072, 2.1: 4096) unless given.
  if (o.latent_tokens < 0 && model && model->has_vae && !model->config.empty()) {
    try {
      const auto vae = models::nn::read_config_file(model->config, models::kVaePrefix);
      const auto& p = vae.contains("params") ? vae["params"] : vae;
      if (p.contains("num_latents") && p["num_latents"].is_number_integer())
        o.latent_tokens = p["num_latents"].get<int>();
    } catch (const std::exception& e) {
      spdlog::debug("shape: latent count not read from {}: {}", model->config, e.what());
    }
  }
  if (!image) return "";

  std::string config = o.conditioner_config;
  if (!o.conditioner.empty()) {
    if (config.empty())
      if (const auto c = models::inspect_checkpoint(o.conditioner)) config = c->config;
  } else if (model && model->has_conditioner) {
    o.conditioner = o.model;  // combined checkpoint: the conditioner sits next to the DiT
    if (config.empty()) config = model->config;
  } else if (model) {
    return fmt::format(
        "--model {} holds no conditioner.* weights: pass --conditioner FILE (a DINOv2 checkpoint "
        "whose hidden size is the DiT's context_in_dim)",
        o.model);
  }
  if (o.conditioner.empty()) return "";  // the pipeline's own conditioner variables stay
  o.conditioner_config = config;         // "" = config.json / config.yaml next to the weights
  if (o.conditioner_section.empty())
    o.conditioner_section = config.empty() ? std::string(models::kConditionerPrefix)
                                           : models::conditioner_section_of(config);
  // Named views need DinoImageEncoderMV (Hunyuan3D-2mv) and one image DinoImageEncoder: say so
  // now rather than after the other nodes have loaded.
  const std::string who = o.model.empty() ? o.conditioner : o.model;
  if (const auto mv = conditioner_is_multiview(config, o.conditioner_section)) {
    if (multiview && !*mv)
      return fmt::format(
          "named views (--image VIEW=PATH) need a multiview model (Hunyuan3D-2mv: --model "
          "mv, mv-fast or mv-turbo); {} conditions on a single image: give one --image PATH",
          who);
    if (!multiview && *mv)
      return fmt::format(
          "{} is a multiview model (Hunyuan3D-2mv): name its views, e.g. --image front=A.png "
          "--image left=B.png (views: {})",
          who, view_names());
  }
  return "";
}

std::string shape_config(const ShapeOptions& o) {
  if (!o.config.empty()) return o.config;
  if (!o.views.empty()) return kShapeMultiviewConfig;
  return o.image.empty() ? kShapeCondConfig : kShapeImageConfig;
}

std::vector<std::string> shape_sets(const ShapeOptions& o) {
  std::vector<std::string> s;
  auto str = [&](const char* var, const std::string& v) {
    if (!v.empty()) s.push_back(fmt::format("{}={}", var, v));
  };
  auto num = [&](const char* var, auto v, auto unset) {
    if (v != unset) s.push_back(fmt::format("{}={}", var, v));
  };
  str("cond", o.cond);
  str("cond_name", o.cond_name);
  str("image", o.image);
  for (const auto& [view, path] : o.views) str(view.c_str(), path);
  str("conditioner", o.conditioner);
  if (!o.conditioner.empty()) {
    // Always set with a conditioner: the pipeline's defaults describe its own checkpoint.
    s.push_back("conditioner_config=" + o.conditioner_config);
    s.push_back("conditioner_section=" + o.conditioner_section);
  } else {
    str("conditioner_config", o.conditioner_config);
    str("conditioner_section", o.conditioner_section);
  }
  str("model", o.model);
  str("vae", o.vae);
  str("out", o.output);
  str("method", o.method);
  str("cache", o.cache);
  str("precision", o.precision);
  str("device", o.device);
  num("steps", o.steps, -1);
  if (o.guidance > -1e8) s.push_back(fmt::format("guidance={}", o.guidance));
  num("seed", o.seed, -1);
  num("resolution", o.resolution, -1);
  num("min_resolution", o.min_resolution, -1);
  num("num_chunks", o.num_chunks, -1);
  num("max_faces", o.max_faces, -1);
  num("latent_tokens", o.latent_tokens, -1);
  s.insert(s.end(), o.run.sets.begin(), o.run.sets.end());
  return s;
}

pipeline::PipelineConfig shape_pipeline_config(const ShapeOptions& o) {
  pipeline::PipelineConfig cfg;
  if (!o.config.empty()) {
    if (!fs::is_regular_file(o.config))
      throw pipeline::ConfigError("shape: pipeline config not found: " + o.config);
    cfg = pipeline::load_config(o.config);
  } else {
    cfg = shipped_config(!o.views.empty()  ? "multiview_to_shape"
                         : o.image.empty() ? "shapegen"
                                           : "image_to_shape",
                         "gen3d shape");
  }
  pipeline::apply_overrides(cfg, shape_sets(o));
  if (!o.views.empty()) {
    // The views not given: their load_image nodes go, and with them the (optional) inputs of
    // encode_views they fed.
    for (const std::string_view view : models::kMultiviewNames) {
      const std::string id(view);
      if (o.views.count(id)) continue;
      const auto node = std::find_if(cfg.nodes.begin(), cfg.nodes.end(), [&](const auto& n) {
        return n.id == id && n.stage == "load_image";
      });
      if (node == cfg.nodes.end()) continue;
      cfg.nodes.erase(node);
      for (auto& n : cfg.nodes)
        std::erase_if(n.inputs, [&](const auto& in) { return in.second.starts_with(id + "."); });
    }
  }
  return cfg;
}

pipeline::Graph shape_graph(const ShapeOptions& o) {
  pipeline::Graph graph = pipeline::build_graph(shape_pipeline_config(o), cli_registry());
  if (graph.name.empty()) graph.name = shape_config(o);
  return graph;
}

int cmd_shape(const ShapeOptions& options) {
  ShapeOptions o = options;
  if (const std::string problem = resolve_shape_defaults(o); !problem.empty()) {
    spdlog::error("shape: {}", problem);
    return 2;
  }
  if (o.views.empty() && !o.image.empty() && o.config.empty() && o.model.empty() &&
      o.conditioner.empty() && o.run.sets.empty())
    spdlog::warn(
        "shape: --image without --model or --conditioner runs {} with its own defaults, small "
        "test checkpoints whose widths do not chain; pass --model with an official model folder",
        kShapeImageConfig);
  if (o.dump) {
    const pipeline::PipelineConfig cfg = shape_pipeline_config(o);
    pipeline::build_graph(cfg, cli_registry());  // validated, as a run would be
    fmt::print("{}\n", cfg.to_json().dump(2));
    return 0;
  }
  return run_graph(shape_graph(o), o.run);
}

}  // namespace gen3d::app::cli
