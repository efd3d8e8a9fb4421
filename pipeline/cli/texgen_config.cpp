#include "pipeline/cli/texgen_config.h"

#include <algorithm>
#include <filesystem>
#include <map>

#include <fmt/format.h>
#include <spdlog/spdlog.h>

#include "pipeline/error.h"

namespace gen3d::cli {

namespace fs = std::filesystem;
using nlohmann::json;
using pipeline::ConfigError;

namespace {

// The official six views by name (hunyuan6 order).
const std::map<std::string, int> kViewNames = {{"front", 0}, {"right", 1}, {"back", 2},
                                               {"left", 3},  {"top", 4},   {"bottom", 5}};

json* find_node(json& doc, const std::string& id) {
  for (json& n : doc["nodes"])
    if (n["id"] == id) return &n;
  throw ConfigError(fmt::format("the texgen config has no node \"{}\"", id));
}

// Removes nodes and every input that refers to them.
void remove_nodes(json& doc, const std::vector<std::string>& ids) {
  json kept = json::array();
  for (json& n : doc["nodes"]) {
    if (std::find(ids.begin(), ids.end(), n["id"].get<std::string>()) != ids.end()) continue;
    if (n.contains("inputs")) {
      json inputs = json::object();
      for (auto& [port, from] : n["inputs"].items()) {
        const std::string src = from.get<std::string>();
        const std::string node = src.substr(0, src.find('.'));
        if (std::find(ids.begin(), ids.end(), node) == ids.end()) inputs[port] = from;
      }
      n["inputs"] = inputs;
    }
    kept.push_back(n);
  }
  doc["nodes"] = kept;
}

}  // namespace

// --models DIR: the official model folder's paint (or turbo) and delight models drive the
// multiview images and the delighting.
static void wire_models(json& doc, const TextureOptions& o, const std::string& front) {
  if (front.empty())
    throw ConfigError("--models needs --image: the reference the paint model follows");
  if (!o.views_dir.empty() || !o.source_mesh.empty())
    throw ConfigError("--models makes the view images: drop --views / --source-mesh");
  const fs::path root(o.models_dir);
  if (!fs::is_directory(root)) throw ConfigError("--models: folder not found: " + o.models_dir);
  const fs::path paint = root / (o.turbo ? "hunyuan3d-paint-v2-0-turbo" : "hunyuan3d-paint-v2-0");
  if (!fs::is_directory(paint))
    throw ConfigError("--models: " + o.models_dir + " has no " + paint.filename().string() +
                      "/ folder");
  json& multiview = *find_node(doc, "multiview");
  multiview["params"]["source"] = "model";
  multiview["params"]["model"] = paint.string();
  multiview["params"]["turbo"] = o.turbo;
  const fs::path delight = root / "hunyuan3d-delight-v2-0";
  if (fs::is_directory(delight)) {
    json& node = *find_node(doc, "delight");
    node["params"]["method"] = "model";
    node["params"]["model"] = delight.string();
  } else {
    spdlog::warn("--models: {} has no hunyuan3d-delight-v2-0/ folder: classical delighting",
                 o.models_dir);
  }
}

pipeline::PipelineConfig build_texgen_config(const TextureOptions& o) {
  json doc = json::parse(default_texgen_json());
  json& vars = doc["vars"];
  vars["mesh"] = o.mesh;
  vars["out"] = o.output;
  if (o.texture_size > 0) vars["texture_size"] = o.texture_size;
  if (o.render_size > 0) vars["render_size"] = o.render_size;
  if (o.faces >= 0) vars["faces"] = o.faces;

  if (o.turbo && o.models_dir.empty())
    throw ConfigError("--turbo selects the turbo paint model: it needs --models DIR");
  if (!o.models_dir.empty() && o.images.empty())
    throw ConfigError("--models needs --image: the reference the paint model follows");
  const int sources = !o.images.empty() + !o.views_dir.empty() + !o.source_mesh.empty();
  if (sources == 0)
    throw ConfigError("gen3d texture needs view images: give --image, --views or --source-mesh");
  if (!o.views_dir.empty() && !o.source_mesh.empty())
    throw ConfigError("--views and --source-mesh are two sources of views: give one");

  // Reference images: the first bare path is the front view; VIEW=PATH puts one on a view.
  std::string front;
  json extra_images = json::array(), extra_views = json::array();
  for (const std::string& item : o.images) {
    const auto eq = item.find('=');
    std::string view = eq == std::string::npos ? "" : item.substr(0, eq);
    const std::string path = eq == std::string::npos ? item : item.substr(eq + 1);
    if (view.empty() && front.empty()) {
      front = path;
      continue;
    }
    if (view.empty())
      throw ConfigError(
          fmt::format("--image {}: a second image needs a view (e.g. back={})", item, path));
    int index = -1;
    if (kViewNames.count(view))
      index = kViewNames.at(view);
    else if (std::all_of(view.begin(), view.end(), ::isdigit))
      index = std::stoi(view);
    if (index < 0)
      throw ConfigError(
          fmt::format("--image {}: unknown view \"{}\" (front, right, back, left, top, "
                      "bottom or an index)",
                      item, view));
    if (index == 0 && front.empty()) {
      front = path;
      continue;
    }
    extra_images.push_back(path);
    extra_views.push_back(index);
  }
  if (!o.images.empty() && front.empty())
    throw ConfigError("--image: the front view needs an image (a bare path or front=PATH)");

  if (front.empty()) {
    remove_nodes(doc, {"image", "background", "recenter", "delight"});
    doc["vars"].erase("image");
  } else {
    doc["vars"]["image"] = front;
  }
  if (!o.source_mesh.empty()) {
    json source = {{"id", "source"}, {"stage", "load_mesh"}, {"params", {{"path", o.source_mesh}}}};
    doc["nodes"].insert(doc["nodes"].begin(), source);
  }
  // Looked up last: the edits above rebuild the node array.
  json& multiview = *find_node(doc, "multiview");
  multiview["params"]["extra_images"] = extra_images;
  multiview["params"]["extra_views"] = extra_views;
  if (!o.views_dir.empty()) {
    multiview["params"]["source"] = "files";
    multiview["params"]["dir"] = o.views_dir;
  } else if (!o.source_mesh.empty()) {
    multiview["params"]["source"] = "render";
    multiview["inputs"]["source_mesh"] = "source.mesh";
    multiview["inputs"]["transform"] = "normalize.transform";
    // A transfer can be checked: the new texture's views against the source's.
    doc["nodes"].push_back(
        {{"id", "psnr"},
         {"stage", "texture_psnr"},
         {"inputs",
          {{"mesh", "inpaint.mesh"}, {"views", "views.views"}, {"images", "multiview.images"}}},
         {"params", {{"resolution", "$render_size"}}}});
  }
  if (!o.models_dir.empty()) wire_models(doc, o, front);
  if (o.reunwrap) (*find_node(doc, "uv"))["params"]["keep_existing"] = false;
  return pipeline::parse_config(doc, "gen3d texture (assets/pipelines/texgen.json)");
}

}  // namespace gen3d::cli
