// Render stages: cameras, per-view normal/position maps, back-projection into UV space, merge.
// Every stage takes its rasters from the run's shared cache, so a pose is rasterized once.

#include <spdlog/spdlog.h>
#include <tbb/parallel_for.h>
#include <algorithm>
#include <cmath>

#include "render/maps.h"
#include "render/rasterizer.h"
#include "render/texture_tiles.h"
#include "stages/register.h"
#include "stages/shared.h"
#include "stages/types.h"

namespace gen3d::stages {
namespace {

using pipeline::Range;
using pipeline::StageContext;
using pipeline::StageContract;

class CameraViews final : public pipeline::Stage {
 public:
  StageContract contract() const override {
    return StageContract("camera_views",
                         "The camera poses (and merge weights) of a multi-view set.")
        .cache_policy(pipeline::CachePolicy::Never)
        .output<render::ViewSet>("views")
        .choice("preset", "hunyuan6", {"hunyuan6", "custom"},
                "hunyuan6: the official 6 views; custom: the lists below")
        .param<std::vector<double>>("elevations", std::vector<double>{}, "custom: degrees")
        .param<std::vector<double>>("azimuths", std::vector<double>{}, "custom: degrees")
        .param<std::vector<double>>("weights", std::vector<double>{},
                                    "custom: merge weight per view (empty: all 1)")
        .param<double>("distance", 1.45, Range{0.1, 100.0}, "camera distance from the origin")
        .param<double>("ortho_scale", 1.2, Range{0.01, 100.0}, "orthographic view width");
  }
  void check(const pipeline::ParamMap& p, std::vector<std::string>& problems) const override {
    if (std::get<std::string>(p.at("preset")) != "custom") return;
    const auto& e = std::get<std::vector<double>>(p.at("elevations"));
    const auto& a = std::get<std::vector<double>>(p.at("azimuths"));
    const auto& w = std::get<std::vector<double>>(p.at("weights"));
    if (e.empty() || e.size() != a.size() || (!w.empty() && w.size() != e.size()))
      problems.push_back(
          "custom views need as many elevations as azimuths (and weights, if any), "
          "at least one");
    // Merge weights scale a view's share of each texel: a negative one would subtract colour.
    for (double x : w)
      if (!(x >= 0.0 && std::isfinite(x))) {
        problems.push_back("weights must be finite and >= 0, got " + std::to_string(x));
        break;
      }
  }
  void run(StageContext& ctx) const override {
    const double distance = ctx.param<double>("distance");
    const double ortho = ctx.param<double>("ortho_scale");
    auto views = std::make_shared<render::ViewSet>();
    if (ctx.param<std::string>("preset") == "hunyuan6") {
      *views = render::ViewSet::hunyuan6(distance, ortho);
    } else {
      const auto e = ctx.param<std::vector<double>>("elevations");
      const auto a = ctx.param<std::vector<double>>("azimuths");
      const auto w = ctx.param<std::vector<double>>("weights");
      for (size_t i = 0; i < e.size(); ++i) {
        render::View v;
        v.camera.elev = e[i];
        v.camera.azim = a[i];
        v.camera.distance = distance;
        v.camera.ortho_scale = ortho;
        v.weight = w.empty() ? 1.0 : w[i];
        views->views.push_back(v);
      }
    }
    ctx.out("views", std::move(views));
  }
};

// Shared body of the per-view map stages: one cached raster per view, views in parallel.
template <class MakeMap>
void render_views(StageContext& ctx, MakeMap&& make) {
  auto m = ctx.in<mesh::Mesh>("mesh");
  auto views = ctx.in<render::ViewSet>("views");
  const int size = ctx.param<int>("resolution");
  render::RasterCache& cache = raster_cache(ctx);
  const uint64_t fingerprint = m->fingerprint();
  auto out = std::make_shared<ImageList>(views->size());
  tbb::parallel_for(size_t{0}, views->size(), [&](size_t v) {
    auto span = ctx.span("view " + std::to_string(v));
    auto raster = cache.get(fingerprint, *m, (*views)[v].camera, size, size);
    (*out)[v] = make(*m, *raster);
  });
  report_cache(ctx, cache);
  ctx.out("maps", std::move(out));
}

StageContract map_contract(const char* name, const char* doc) {
  return StageContract(name, doc)
      .input<mesh::Mesh>("mesh", "normalized (normalize_mesh)")
      .input<render::ViewSet>("views")
      .output<ImageList>("maps", "one RGB map per view, white background")
      .param<int>("resolution", 2048, Range{16, 16384}, "square render size in pixels");
}

class RenderNormals final : public pipeline::Stage {
 public:
  StageContract contract() const override {
    return map_contract("render_normals",
                        "Normal map per view, encoded (n + 1) / 2 as texgen does.");
  }
  void run(StageContext& ctx) const override {
    render_views(
        ctx, [](const mesh::Mesh& m, const render::Raster& r) { return render::normal_map(m, r); });
  }
};

class RenderPositions final : public pipeline::Stage {
 public:
  StageContract contract() const override {
    return map_contract("render_positions",
                        "Position map per view, 0.5 - p / 1.15 as texgen does.");
  }
  void run(StageContext& ctx) const override {
    render_views(ctx, [](const mesh::Mesh& m, const render::Raster& r) {
      return render::position_map(m, r);
    });
  }
};

// What the textured result looks like: its base colour rendered from each view (for the report,
// so a user sees the result without opening a viewer).
class RenderAlbedo final : public pipeline::Stage {
 public:
  StageContract contract() const override {
    return map_contract("render_albedo",
                        "Base-colour render of a textured mesh per view, on white: the result as "
                        "a viewer shows it without lighting.");
  }
  void run(StageContext& ctx) const override {
    render_views(
        ctx, [](const mesh::Mesh& m, const render::Raster& r) { return render::albedo_map(m, r); });
  }
};

class BakeViews final : public pipeline::Stage {
 public:
  StageContract contract() const override {
    return StageContract("bake_views", "Project every view image into UV space.")
        .semantics_version(2)  // 2: a map per material, UVs repeating
        .input<mesh::Mesh>("mesh", "normalized, with UVs")
        .input<render::ViewSet>("views")
        .input<ImageList>("images", "one per view; an empty image contributes nothing")
        .output<BakeList>("bakes", "per view: texture and cosine map in UV space")
        .choice("method", "gather", {"gather", "reference"},
                "gather: per texel, hole-free; reference: the reference's pixel splat")
        .param<int>("texture_size", 2048, Range{16, 16384},
                    "UV map size; a mesh with materials has a map this size per material (fewer "
                    "texels each past 4 materials), stacked")
        .param<int>("render_size", 2048, Range{16, 16384},
                    "the configured render size (sets the edge erosion window, as the reference)")
        .param<double>("angle_threshold", 75.0, Range{0.0, 90.0},
                       "degrees; more oblique pixels do not count")
        .optional_input<ReferenceFit>("fit",
                                      "how exactly the images were registered (views_from_"
                                      "reference): an exact fit needs only a narrow edge window")
        .param<double>("registered_iou", 0.97, Range{0.0, 1.0},
                       "with the fit input: a silhouette IoU from which the images count as "
                       "exactly registered")
        .param<int>("registered_window", 1, Range{0, 64},
                    "edge erosion/dilation half-size for exactly registered images, when "
                    "narrower than the reference's window (from render_size), which guards "
                    "against misregistration");
  }
  void run(StageContext& ctx) const override {
    auto m = ctx.in<mesh::Mesh>("mesh");
    auto views = ctx.in<render::ViewSet>("views");
    auto images = ctx.in<ImageList>("images");
    if (!m->has_uvs()) throw std::runtime_error("the mesh has no UVs (add a uv_unwrap node)");
    if (images->size() != views->size())
      throw std::runtime_error("got " + std::to_string(images->size()) + " images for " +
                               std::to_string(views->size()) + " views");
    const bool gather = ctx.param<std::string>("method") == "gather";
    // One texture per material (render/texture_tiles.h): their tiles stacked in one map.
    const int tiles = render::texture_tiles(*m);
    const int tex = render::tile_size(ctx.param<int>("texture_size"), tiles);
    // An exactly registered reference (a render or photo of this mesh) lands on the silhouette
    // and its depth edges to the pixel: the reference's wide window would only throw away
    // seen texels there.
    int window = -1;
    if (ctx.has_input("fit") &&
        ctx.in<ReferenceFit>("fit")->iou >= ctx.param<double>("registered_iou"))
      window = std::min(ctx.param<int>("registered_window"),
                        render::bake_kernel_half_size(ctx.param<int>("render_size")));
    ctx.gauge("bake.edge_window",
              static_cast<double>(render::bake_edge_window(ctx.param<int>("render_size"), window)));
    render::RasterCache& cache = raster_cache(ctx);
    const uint64_t fingerprint = m->fingerprint();
    std::shared_ptr<const render::Raster> uv_raster;
    if (gather) uv_raster = cache.get_uv(*m, tex, tex * tiles);

    auto out = std::make_shared<BakeList>(views->size());
    tbb::parallel_for(size_t{0}, views->size(), [&](size_t v) {
      const image::Image& image = (*images)[v];
      if (image.empty()) return;
      auto span = ctx.span("view " + std::to_string(v));
      const render::Camera& cam = (*views)[v].camera;
      auto raster = cache.get(fingerprint, *m, cam, image.width, image.height);
      if (gather) {
        render::GatherOptions o;
        o.angle_threshold = ctx.param<double>("angle_threshold");
        o.render_size = ctx.param<int>("render_size");
        o.edge_window = window;
        (*out)[v] = render::gather(*m, *uv_raster, *raster, cam, image, o);
      } else {
        render::BakeOptions o;
        o.texture_size = tex;
        o.render_size = ctx.param<int>("render_size");
        o.edge_window = window;
        o.angle_threshold = ctx.param<double>("angle_threshold");
        (*out)[v] = render::back_project(*m, *raster, cam, image, o);
      }
    });
    report_cache(ctx, cache);
    ctx.out("bakes", std::move(out));
  }
};

class MergeViews final : public pipeline::Stage {
 public:
  StageContract contract() const override {
    return StageContract(
               "merge_views",
               "Blend the per-view bakes by weight x cos^exp (the reference's fast merge).")
        .input<BakeList>("bakes")
        .input<render::ViewSet>("views", "for the merge weights")
        .output<render::MergeResult>("merged", "texture, weight and trust mask")
        .param<double>("bake_exp", 4.0, Range{0.0, 64.0}, "exponent on the view cosine");
  }
  void run(StageContext& ctx) const override {
    auto bakes = ctx.in<BakeList>("bakes");
    auto views = ctx.in<render::ViewSet>("views");
    std::vector<image::Image> textures, weights;
    std::vector<size_t> index;
    for (size_t v = 0; v < bakes->size() && v < views->size(); ++v) {
      const render::BackProjection& b = (*bakes)[v];
      if (b.texture.empty()) continue;
      textures.push_back(b.texture);
      weights.push_back(render::bake_weight(b.cos, (*views)[v].weight,
                                            static_cast<float>(ctx.param<double>("bake_exp"))));
      index.push_back(v);
    }
    if (textures.empty()) throw std::runtime_error("no view produced a bake: nothing to merge");
    auto merged = std::make_shared<render::MergeResult>(render::merge_fast(textures, weights));
    for (size_t k = 0; k < merged->views.size(); ++k) {
      const auto& s = merged->views[k];
      if (s.skipped)
        spdlog::info("{}: view {} skipped ({:.1f}% of its texels already painted)", ctx.node_id(),
                     index[k], 100.0 * s.ratio);
      ctx.count("merge.views_skipped", s.skipped ? 1.0 : 0.0);
    }
    ctx.out("merged", std::move(merged));
  }
};

}  // namespace

void register_render_stages(pipeline::Registry& registry) {
  registry.add<CameraViews>();
  registry.add<RenderNormals>();
  registry.add<RenderPositions>();
  registry.add<RenderAlbedo>();
  registry.add<BakeViews>();
  registry.add<MergeViews>();
}

}  // namespace gen3d::stages
