// views_from_mesh: albedo renders of a textured mesh as the view images (texture transfer,
// re-baking).

#include <algorithm>
#include <string>
#include <vector>

#include <spdlog/spdlog.h>
#include <tbb/parallel_for.h>

#include "mesh/normalize.h"
#include "render/maps.h"
#include "stages/register.h"
#include "stages/shared.h"
#include "stages/types.h"

namespace gen3d::stages {
namespace {

using pipeline::Range;
using pipeline::StageContext;
using pipeline::StageContract;

// Intersection over union of the covered pixels of two rasters of one size (1 when both are
// empty: nothing to misplace).
double silhouette_iou(const render::Raster& a, const render::Raster& b) {
  size_t both = 0, either = 0;
  for (size_t i = 0; i < a.pixel_count(); ++i) {
    const bool x = a.face_id[i] != 0, y = b.face_id[i] != 0;
    both += x && y;
    either += x || y;
  }
  return either ? static_cast<double>(both) / static_cast<double>(either) : 1.0;
}

class ViewsFromMesh final : public pipeline::Stage {
 public:
  StageContract contract() const override {
    return StageContract("views_from_mesh",
                         "Albedo renders of a textured mesh from every view, placed as the target "
                         "is (its normalization transform) or normalized on its own.")
        .semantics_version(2)  // 2: the target input and the fit output
        .input<render::ViewSet>("views")
        .input<mesh::Mesh>("mesh", "the textured source mesh, in its input frame")
        .optional_input<mesh::NormalizeTransform>(
            "transform", "the target's normalization, applied to the source mesh")
        .optional_input<mesh::Mesh>("target",
                                    "the normalized mesh the views will be baked onto: its "
                                    "silhouettes measure how exactly the renders land on it")
        .output<ImageList>("images", "RGB, one per view")
        .output<ReferenceFit>("fit",
                              "the lowest silhouette IoU of source and target over the views (0 "
                              "without a target): how exactly the renders land, for the bake's "
                              "edge window")
        .param<int>("resolution", 2048, Range{16, 16384}, "view image size");
  }
  void run(StageContext& ctx) const override {
    auto views = ctx.in<render::ViewSet>("views");
    const int size = ctx.param<int>("resolution");
    mesh::Mesh source = *ctx.in<mesh::Mesh>("mesh");
    if (ctx.has_input("transform"))
      mesh::apply_normalization(source, *ctx.in<mesh::NormalizeTransform>("transform"));
    else
      mesh::normalize_mesh(source);
    const mesh::Mesh* target =
        ctx.has_input("target") ? ctx.in<mesh::Mesh>("target").get() : nullptr;
    render::RasterCache& cache = raster_cache(ctx);
    const uint64_t fingerprint = source.fingerprint();
    const uint64_t target_fingerprint = target ? target->fingerprint() : 0;
    auto images = std::make_shared<ImageList>(views->size());
    std::vector<double> iou(views->size(), 0.0);
    tbb::parallel_for(size_t{0}, views->size(), [&](size_t v) {
      auto span = ctx.span("view " + std::to_string(v));
      const render::Camera& camera = (*views)[v].camera;
      auto raster = cache.get(fingerprint, source, camera, size, size);
      (*images)[v] = render::albedo_map(source, *raster);
      // The target's raster is the one its bake will look up (same pose and size).
      if (target)
        iou[v] =
            silhouette_iou(*raster, *cache.get(target_fingerprint, *target, camera, size, size));
    });
    auto fit = std::make_shared<ReferenceFit>();
    if (target && !iou.empty()) {
      fit->iou = *std::min_element(iou.begin(), iou.end());
      for (size_t v = 0; v < iou.size(); ++v)
        ctx.gauge("multiview.fit_view" + std::to_string(v) + ".iou", iou[v]);
      spdlog::info("{}: the source's renders cover the target's silhouettes at IoU {:.4f} or more",
                   ctx.node_id(), fit->iou);
    }
    report_cache(ctx, cache);
    report_view_images(ctx, *images);
    ctx.out("images", std::move(images));
    ctx.out("fit", std::move(fit));
  }
};

}  // namespace

void register_views_from_mesh(pipeline::Registry& registry) {
  registry.add<ViewsFromMesh>();
}

}  // namespace gen3d::stages
