#include "app/cli/texgen_config.h"

#include <algorithm>
#include <filesystem>
#include <map>

#include <fmt/format.h>
#include <spdlog/spdlog.h>

#include "app/cli/shipped_configs.h"
#include "pipeline/error.h"

namespace gen3d::app::cli {

namespace fs = std::filesystem;
using nlohmann::json;
using pipeline::ConfigError;

namespace {

// The official six views by name (hunyuan6 order).
const std::map<std::string, int> kViewNames = {{"front", 0}, {"right", 1}, {"back", 2},
                                               {"left", 3},  {"top", 4},   {"bottom", 5}};

// The --image items: the first bare path (or front=PATH) shows the front view; VIEW=PATH puts
// another image on another view.
struct ReferenceImages {
  std::string front;
  json extra_images = json::array();
  json extra_views = json::array();
};

int view_index(const std::string& item, const std::string& view) {
  if (kViewNames.count(view)) return kViewNames.at(view);
  if (!view.empty() && std::all_of(view.begin(), view.end(), ::isdigit)) return std::stoi(view);
  throw ConfigError(fmt::format(
      "--image {}: unknown view \"{}\" (front, right, back, left, top, bottom or an index)", item,
      view));
}

ReferenceImages parse_reference_images(const std::vector<std::string>& items) {
  ReferenceImages refs;
  for (const std::string& item : items) {
    const auto eq = item.find('=');
    const std::string view = eq == std::string::npos ? "" : item.substr(0, eq);
    const std::string path = eq == std::string::npos ? item : item.substr(eq + 1);
    if (view.empty() && refs.front.empty()) {
      refs.front = path;
      continue;
    }
    if (view.empty())
      throw ConfigError(
          fmt::format("--image {}: a second image needs a view (e.g. back={})", item, path));
    const int index = view_index(item, view);
    if (index == 0 && refs.front.empty()) {
      refs.front = path;
      continue;
    }
    refs.extra_images.push_back(path);
    refs.extra_views.push_back(index);
  }
  if (!items.empty() && refs.front.empty())
    throw ConfigError("--image: the front view needs an image (a bare path or front=PATH)");
  return refs;
}

// Usage errors of the view-image sources, before anything else is looked at.
void check_sources(const TextureOptions& o) {
  if (!o.precision.empty() && o.models_dir.empty())
    throw ConfigError("--precision sets the learned networks' precision: it needs --models DIR");
  if (!o.device.empty() && o.models_dir.empty())
    throw ConfigError("--device says where the learned networks run: it needs --models DIR");
  if (o.turbo && o.models_dir.empty())
    throw ConfigError("--turbo selects the turbo paint model: it needs --models DIR");
  if (!o.paint_version.empty() && o.models_dir.empty())
    throw ConfigError("--paint-version chooses the paint model of --models DIR: it needs --models");
  if (!o.models_dir.empty() && o.images.empty())
    throw ConfigError("--models needs --image: the reference the paint model follows");
  if (o.images.empty() && o.views_dir.empty() && o.source_mesh.empty())
    throw ConfigError("gen3d texture needs view images: give --image, --views or --source-mesh");
  if (!o.views_dir.empty() && !o.source_mesh.empty())
    throw ConfigError("--views and --source-mesh are two sources of views: give one");
  if (!o.mr_views_dir.empty() && o.views_dir.empty())
    throw ConfigError(
        "--mr-views gives the metallic-roughness images beside the albedo images: it needs "
        "--views DIR");
}

// --models DIR: the paint model (or its turbo variant) paints the views; the delight model
// delights the reference when the folder has one, else the classical method does.
void set_model_vars(const TextureOptions& o, json& vars) {
  if (!o.views_dir.empty() || !o.source_mesh.empty())
    throw ConfigError("--models makes the view images: drop --views / --source-mesh");
  const fs::path root(o.models_dir);
  if (!fs::is_directory(root)) throw ConfigError("--models: folder not found: " + o.models_dir);
  const fs::path paint = root / (o.turbo ? "hunyuan3d-paint-v2-0-turbo" : "hunyuan3d-paint-v2-0");
  if (!fs::is_directory(paint))
    throw ConfigError("--models: " + o.models_dir + " has no " + paint.filename().string() +
                      "/ folder");
  vars["paint_model"] = paint.string();
  vars["turbo"] = o.turbo;
  if (!o.precision.empty()) vars["precision"] = o.precision;
  if (!o.device.empty()) vars["device"] = o.device;
  const fs::path delight = root / "hunyuan3d-delight-v2-0";
  if (fs::is_directory(delight)) {
    vars["delight_method"] = "model";
    vars["delight_model"] = delight.string();
  } else {
    spdlog::warn("--models: {} has no hunyuan3d-delight-v2-0/ folder: classical delighting",
                 o.models_dir);
    vars["delight_method"] = "classical";
  }
}

// Which paint model --models runs: 2.1 (PBR) when the folder has hunyuan3d-paintpbr-v2-1/,
// unless --paint-version or --turbo (a 2.0 model) says otherwise.
bool uses_paint21(const TextureOptions& o) {
  const fs::path root(o.models_dir);
  if (!fs::is_directory(root)) throw ConfigError("--models: folder not found: " + o.models_dir);
  const bool has21 = fs::is_directory(root / "hunyuan3d-paintpbr-v2-1");
  if (o.paint_version == "2.1") {
    if (o.turbo)
      throw ConfigError("--turbo is a Hunyuan3D-2.0 paint model: drop --paint-version 2.1");
    if (!has21)
      throw ConfigError("--paint-version 2.1: " + o.models_dir +
                        " has no hunyuan3d-paintpbr-v2-1/");
    return true;
  }
  return o.paint_version.empty() && !o.turbo && has21;
}

// The first of `candidates` (relative to `root`) that exists, or "".
std::string first_existing(const fs::path& root, std::initializer_list<const char*> candidates) {
  for (const char* c : candidates)
    if (fs::exists(root / c)) return (root / c).string();
  return "";
}

// --models DIR with Hunyuan3D-2.1's paint folder: the PBR paint model, its DINOv2-giant, and
// Real-ESRGAN for the views when the folder has its weights.
void set_model21_vars(const TextureOptions& o, json& vars) {
  if (!o.views_dir.empty() || !o.source_mesh.empty())
    throw ConfigError("--models makes the view images: drop --views / --source-mesh");
  const fs::path root(o.models_dir);
  vars["paint_model"] = (root / "hunyuan3d-paintpbr-v2-1").string();
  const std::string dino = first_existing(root, {"dinov2-giant", "facebook/dinov2-giant"});
  if (dino.empty())
    throw ConfigError("--models: " + o.models_dir +
                      " has no dinov2-giant/ (or facebook/dinov2-giant/) folder: the 2.1 paint "
                      "model is conditioned on facebook/dinov2-giant in the transformers layout");
  vars["dino_model"] = dino;
  const std::string sr =
      first_existing(root, {"RealESRGAN_x4plus.pth", "ckpt/RealESRGAN_x4plus.pth"});
  if (sr.empty()) {
    spdlog::warn(
        "--models: {} has no RealESRGAN_x4plus.pth: the views are resized without "
        "super-resolution",
        o.models_dir);
    vars["super_resolution"] = false;
  } else {
    vars["sr_model"] = sr;
  }
  if (!o.precision.empty()) vars["precision"] = o.precision;
  if (!o.device.empty()) vars["device"] = o.device;
}

}  // namespace

TexgenSelection select_texgen_config(const TextureOptions& o) {
  check_sources(o);
  const ReferenceImages refs = parse_reference_images(o.images);

  TexgenSelection s;
  json& vars = s.vars;
  vars["mesh"] = o.mesh;
  vars["out"] = o.output;
  if (o.texture_size > 0) vars["texture_size"] = o.texture_size;
  if (o.render_size > 0) vars["render_size"] = o.render_size;
  if (o.faces >= 0) vars["faces"] = o.faces;
  vars["keep_uvs"] = !o.reunwrap;

  if (!o.models_dir.empty() && uses_paint21(o)) {
    s.config = "texgen_models21";
    vars["image"] = refs.front;
    set_model21_vars(o, vars);
    if (!refs.extra_images.empty())
      spdlog::warn("--models paints every view from the front image: VIEW=PATH images are unused");
    return s;
  }
  if (!o.models_dir.empty()) {
    s.config = "texgen_models";
    vars["image"] = refs.front;
    set_model_vars(o, vars);
    if (!refs.extra_images.empty())
      spdlog::warn("--models paints every view from the front image: VIEW=PATH images are unused");
    return s;
  }
  if (!o.views_dir.empty() || !o.source_mesh.empty()) {
    if (!o.images.empty())
      spdlog::warn("--image is unused: the view images come from {}",
                   o.views_dir.empty() ? "--source-mesh" : "--views");
    if (!o.views_dir.empty()) {
      s.config = o.mr_views_dir.empty() ? "texgen_views" : "texgen_views_pbr";
      vars["views"] = o.views_dir;
      if (!o.mr_views_dir.empty()) vars["mr_views"] = o.mr_views_dir;
    } else {
      s.config = "texgen_transfer";
      vars["source_mesh"] = o.source_mesh;
    }
    return s;
  }
  s.config = "texgen";
  vars["image"] = refs.front;
  vars["extra_images"] = refs.extra_images;
  vars["extra_views"] = refs.extra_views;
  return s;
}

pipeline::PipelineConfig build_texgen_config(const TextureOptions& o) {
  const TexgenSelection selection = select_texgen_config(o);
  return shipped_config(selection.config, "gen3d texture", selection.vars);
}

}  // namespace gen3d::app::cli
