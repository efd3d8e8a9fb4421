#include "models/shape/shape_models.h"

#include <array>
#include <filesystem>
#include <vector>

#include "models/core/error.h"

namespace gen3d::models {

namespace {

namespace fs = std::filesystem;

constexpr std::string_view kHy2 = "tencent/Hunyuan3D-2";
constexpr std::string_view kMini = "tencent/Hunyuan3D-2mini";
constexpr std::string_view kMv = "tencent/Hunyuan3D-2mv";
constexpr std::string_view kTurboVae = "hunyuan3d-vae-v2-0-turbo";
constexpr std::string_view kMiniTurboVae = "hunyuan3d-vae-v2-mini-turbo";

constexpr std::array kModels = {
    ShapeModelInfo{"hunyuan3d-dit-v2-0", kHy2, "2.0", "shape", ""},
    ShapeModelInfo{"hunyuan3d-dit-v2-0-fast", kHy2, "fast", "shape-fast", ""},
    ShapeModelInfo{"hunyuan3d-dit-v2-0-turbo", kHy2, "turbo", "shape-turbo", kTurboVae},
    ShapeModelInfo{"hunyuan3d-dit-v2-1", "tencent/Hunyuan3D-2.1", "2.1", "shape-2.1", ""},
    ShapeModelInfo{"hunyuan3d-dit-v2-mini", kMini, "mini", "shape-mini", ""},
    ShapeModelInfo{"hunyuan3d-dit-v2-mini-fast", kMini, "mini-fast", "shape-mini-fast", ""},
    ShapeModelInfo{"hunyuan3d-dit-v2-mini-turbo", kMini, "mini-turbo", "shape-mini-turbo",
                   kMiniTurboVae},
    ShapeModelInfo{"hunyuan3d-dit-v2-mv", kMv, "mv", "shape-mv", ""},
    ShapeModelInfo{"hunyuan3d-dit-v2-mv-fast", kMv, "mv-fast", "shape-mv-fast", ""},
    ShapeModelInfo{"hunyuan3d-dit-v2-mv-turbo", kMv, "mv-turbo", "shape-mv-turbo", kTurboVae},
};

constexpr std::array kVaes = {
    ShapeVaeInfo{"hunyuan3d-vae-v2-0", kHy2, "shape-vae"},
    ShapeVaeInfo{kTurboVae, kHy2, "shape-vae-turbo"},
    ShapeVaeInfo{"hunyuan3d-vae-v2-mini", kMini, "shape-vae-mini"},
    ShapeVaeInfo{kMiniTurboVae, kMini, "shape-vae-mini-turbo"},
};

// `dir` and its sub-folders, where a published folder may sit.
std::vector<fs::path> search_roots(const fs::path& dir) {
  std::vector<fs::path> roots{dir};
  std::error_code ec;
  for (const auto& e : fs::directory_iterator(dir, ec))
    if (e.is_directory()) roots.push_back(e.path());
  return roots;
}

}  // namespace

std::span<const ShapeModelInfo> shape_models() {
  return kModels;
}

const ShapeModelInfo* find_shape_model_info(std::string_view folder_name) {
  for (const ShapeModelInfo& m : kModels)
    if (m.folder == folder_name) return &m;
  return nullptr;
}

std::span<const ShapeVaeInfo> shape_vaes() {
  return kVaes;
}

const ShapeVaeInfo* find_shape_vae_info(std::string_view folder_name) {
  for (const ShapeVaeInfo& v : kVaes)
    if (v.folder == folder_name) return &v;
  return nullptr;
}

std::string find_shape_model(const std::string& models_dir, std::string_view name) {
  if (!fs::is_directory(models_dir)) throw ModelError("models folder not found: " + models_dir);
  std::string_view folder = name;
  for (const ShapeModelInfo& m : kModels)
    if (m.name == name) folder = m.folder;
  std::string present;
  for (const fs::path& root : search_roots(models_dir)) {
    if (fs::is_directory(root / folder)) return (root / folder).string();
    std::error_code ec;
    for (const auto& e : fs::directory_iterator(root, ec))
      if (e.is_directory() && find_shape_model_info(e.path().filename().string()))
        present += (present.empty() ? "" : ", ") + fs::relative(e.path(), models_dir).string();
  }
  std::string names;
  for (const ShapeModelInfo& m : kModels)
    names += std::string(names.empty() ? "" : ", ") + std::string(m.name);
  throw ModelError("no shape model \"" + std::string(name) + "\" in " + models_dir +
                   " (a published folder name or one of: " + names +
                   "); shape folders there: " + (present.empty() ? "none" : present));
}

std::string find_turbo_vae(const std::string& dit_dir) {
  fs::path dir = fs::path(dit_dir).lexically_normal();
  if (dir.filename().empty()) dir = dir.parent_path();
  const ShapeModelInfo* info = find_shape_model_info(dir.filename().string());
  if (!info || info->turbo_vae.empty()) return "";
  const fs::path parent = dir.parent_path();
  std::vector<fs::path> roots{parent};
  if (parent.has_parent_path()) {
    const auto more = search_roots(parent.parent_path());
    roots.insert(roots.end(), more.begin(), more.end());
  }
  for (const fs::path& root : roots)
    if (fs::is_directory(root / info->turbo_vae)) return (root / info->turbo_vae).string();
  return "";
}

}  // namespace gen3d::models
