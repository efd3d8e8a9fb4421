// views_from_mesh: albedo renders of a textured mesh as the view images (texture transfer,
// re-baking).

#include <algorithm>
#include <string>
#include <vector>

#include <tbb/parallel_for.h>

#include "mesh/normalize.h"
#include "render/maps.h"
#include "render/view_images.h"
#include "stages/register.h"
#include "stages/shared.h"
#include "stages/types.h"

namespace gen3d::stages {
namespace {

using pipeline::Range;
using pipeline::StageContext;
using pipeline::StageContract;

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
        iou[v] = render::mask_iou(
            render::silhouette_mask(*raster),
            render::silhouette_mask(*cache.get(target_fingerprint, *target, camera, size, size)));
    });
    auto fit = target ? view_fit(ctx, iou) : std::make_shared<ReferenceFit>();
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
