#pragma once
// Helpers shared by the render and texture stage tests: the registry, error messages, a smooth
// sphere with UVs, flat test pictures, and the stage runs that make a merged bake.

#include <cmath>
#include <memory>
#include <string>
#include <utility>
#include <vector>

#include <nlohmann/json.hpp>

#include "pipeline/stage_runner.h"
#include "render/test_meshes.h"
#include "stages/register.h"
#include "stages/types.h"

namespace gen3d::test {

using Image = stages::ImageList::value_type;

inline const pipeline::Registry& stage_registry() {
  static const pipeline::Registry reg = [] {
    pipeline::Registry r;
    stages::register_all_stages(r);
    return r;
  }();
  return reg;
}

inline pipeline::StageRunner runner(const char* stage) {
  return pipeline::StageRunner(*stage_registry().find(stage));
}

// The message of the exception `f` throws, "" when it throws none.
template <class F>
std::string error_of(F&& f) {
  try {
    f();
  } catch (const std::exception& e) {
    return e.what();
  }
  return "";
}

// The render tests' UV sphere (24 rings, 32 segments, UVs) with its bumps pushed back onto radius
// 0.5, so its normals are smooth; wound as the loader leaves meshes.
inline std::shared_ptr<const mesh::Mesh> smooth_sphere() {
  static const auto m = [] {
    mesh::Mesh s = render::testing::as_loaded(render::testing::bumpy_sphere(24, 32));
    for (auto& p : s.positions) {
      const float r = std::sqrt(p[0] * p[0] + p[1] * p[1] + p[2] * p[2]);
      for (int k = 0; k < 3; ++k) p[k] *= 0.5f / r;
    }
    return std::make_shared<const mesh::Mesh>(std::move(s));
  }();
  return m;
}

struct Rgb {
  float r, g, b;
};
inline constexpr Rgb kRed{1, 0, 0}, kGreen{0, 1, 0}, kBlue{0, 0, 1}, kWhite{1, 1, 1};

// A size x size RGB picture: `left` on its left half, `right` on its right half.
inline Image halves(int size, Rgb left, Rgb right) {
  Image img(size, size, 3);
  for (int y = 0; y < size; ++y)
    for (int x = 0; x < size; ++x) {
      const Rgb& c = 2 * x < size ? left : right;
      float* p = img.at(x, y);
      p[0] = c.r, p[1] = c.g, p[2] = c.b;
    }
  return img;
}
inline Image solid(int size, Rgb colour) {
  return halves(size, colour, colour);
}

inline bool near_rgb(const float* p, Rgb c, float tol = 1e-4f) {
  return std::fabs(p[0] - c.r) <= tol && std::fabs(p[1] - c.g) <= tol &&
         std::fabs(p[2] - c.b) <= tol;
}

// camera_views with custom poses.
inline std::shared_ptr<const render::ViewSet> custom_views(
    const std::vector<double>& elevations, const std::vector<double>& azimuths,
    const std::vector<double>& weights = {}) {
  pipeline::StageRunner r = runner("camera_views");
  r.param("preset", "custom").param("elevations", elevations).param("azimuths", azimuths);
  r.param("weights", weights);
  r.run();
  return r.output<render::ViewSet>("views");
}

// Level views (elevation 0) at these azimuths.
inline std::shared_ptr<const render::ViewSet> level_views(const std::vector<double>& azimuths) {
  return custom_views(std::vector<double>(azimuths.size(), 0.0), azimuths);
}

struct Baked {
  std::shared_ptr<const stages::BakeList> bakes;
  std::shared_ptr<const render::MergeResult> merged;
  double views_skipped = 0;
};

// bake_views then merge_views of `images` onto the smooth sphere, texture and render size `size`.
inline Baked bake_and_merge(std::shared_ptr<const render::ViewSet> views, stages::ImageList images,
                            int size, const std::string& method = "gather", double bake_exp = 4.0) {
  pipeline::StageRunner bake = runner("bake_views");
  bake.input<mesh::Mesh>("mesh", smooth_sphere()).input<render::ViewSet>("views", views);
  bake.input<stages::ImageList>("images", std::move(images));
  bake.param("method", method).param("texture_size", size).param("render_size", size);
  bake.run();
  Baked out;
  out.bakes = bake.output<stages::BakeList>("bakes");
  pipeline::StageRunner merge = runner("merge_views");
  merge.input<stages::BakeList>("bakes", out.bakes).input<render::ViewSet>("views", views);
  merge.param("bake_exp", bake_exp);
  merge.run();
  out.merged = merge.output<render::MergeResult>("merged");
  out.views_skipped = merge.profiler().counter_totals().at("merge.views_skipped");
  return out;
}

struct Inpainted {
  std::shared_ptr<const mesh::Mesh> mesh;
  std::shared_ptr<const Image> texture;
  std::shared_ptr<const render::InpaintReport> report;
};

// inpaint_texture of a merged bake of the smooth sphere.
inline Inpainted inpaint(std::shared_ptr<const render::MergeResult> merged,
                         const nlohmann::json& params = nlohmann::json::object()) {
  pipeline::StageRunner r = runner("inpaint_texture");
  r.input<mesh::Mesh>("mesh", smooth_sphere()).input<render::MergeResult>("merged", merged);
  for (const auto& [name, value] : params.items()) r.param(name, value);
  r.run();
  return {r.output<mesh::Mesh>("mesh"), r.output<Image>("texture"),
          r.output<render::InpaintReport>("report")};
}

// A picture with a gradient so every pixel differs (the networks see structure, not a constant).
inline Image gradient(int size, int channels, float base) {
  Image img(size, size, channels);
  for (int y = 0; y < size; ++y)
    for (int x = 0; x < size; ++x)
      for (int c = 0; c < channels; ++c)
        img.at(x, y)[c] = c == 3 ? 1.0f : base + 0.3f * (x + 2 * y + 5 * c) / (4.0f * size);
  return img;
}

// Position maps with a white (background) border, like rendered maps.
inline Image position_map(int size, float shift) {
  Image img = gradient(size, 3, 0.2f + shift);
  for (int y = 0; y < size; ++y)
    for (int x = 0; x < size; ++x)
      if (x < size / 8 || y < size / 8)
        for (int c = 0; c < 3; ++c) img.at(x, y)[c] = 1.0f;
  return img;
}

// A paint stage's inputs for two level views (front and back): the reference, and 40-px
// normal and position maps.
inline void two_view_paint_inputs(pipeline::StageRunner& r) {
  r.input<render::ViewSet>("views", level_views({0, 180}));
  r.input<Image>("image", gradient(24, 4, 0.4f));
  r.input<stages::ImageList>("normals",
                             stages::ImageList{gradient(40, 3, 0.3f), gradient(40, 3, 0.5f)});
  r.input<stages::ImageList>("positions",
                             stages::ImageList{position_map(40, 0.0f), position_map(40, 0.2f)});
}

}  // namespace gen3d::test
