// views_from_mesh: albedo renders of a textured mesh as the view images (texture transfer,
// re-baking).

#include <string>

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

class ViewsFromMesh final : public pipeline::Stage {
 public:
  StageContract contract() const override {
    return StageContract("views_from_mesh",
                         "Albedo renders of a textured mesh from every view, placed as the target "
                         "is (its normalization transform) or normalized on its own.")
        .input<render::ViewSet>("views")
        .input<mesh::Mesh>("mesh", "the textured source mesh, in its input frame")
        .optional_input<mesh::NormalizeTransform>(
            "transform", "the target's normalization, applied to the source mesh")
        .output<ImageList>("images", "RGB, one per view")
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
    render::RasterCache& cache = raster_cache(ctx);
    const uint64_t fingerprint = source.fingerprint();
    auto images = std::make_shared<ImageList>(views->size());
    tbb::parallel_for(size_t{0}, views->size(), [&](size_t v) {
      auto span = ctx.span("view " + std::to_string(v));
      auto raster = cache.get(fingerprint, source, (*views)[v].camera, size, size);
      (*images)[v] = render::albedo_map(source, *raster);
    });
    report_cache(ctx, cache);
    report_view_images(ctx, *images);
    ctx.out("images", std::move(images));
  }
};

}  // namespace

void register_views_from_mesh(pipeline::Registry& registry) {
  registry.add<ViewsFromMesh>();
}

}  // namespace gen3d::stages
