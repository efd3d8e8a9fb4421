// fill_surface: colours the chart texels no view painted from the seen surface (the expensive part
// of inpainting), so that inpaint_texture's own parameters can change without redoing it.

#include <spdlog/spdlog.h>

#include "image/composite.h"
#include "render/surface_fill.h"
#include "render/texture_inpaint.h"
#include "stages/register.h"
#include "stages/shared.h"
#include "stages/types.h"

namespace gen3d::stages {
namespace {

using pipeline::Range;
using pipeline::StageContext;
using pipeline::StageContract;

class FillSurface final : public pipeline::Stage {
 public:
  StageContract contract() const override {
    return StageContract("fill_surface",
                         "Fill the chart texels no view painted from the seen surface, on the "
                         "welded mesh; inpaint_texture (its input `filled`) finishes the texture.")
        .semantics_version(2)  // 2: the mesh's own UVs (input `authored`)
        .input<mesh::Mesh>("mesh", "normalized, with UVs")
        .input<render::MergeResult>("merged")
        .optional_input<mesh::Mesh>(
            "authored",
            "the same mesh before uv_unwrap gave it a new atlas: where its own UVs map several "
            "points onto one texel (mirrored halves, a texture repeated on every face, tiles), an "
            "unseen point takes the colour seen at another")
        .output<render::SurfaceFillResult>("filled",
                                           "the texels it filled, their colours and sources")
        .choice("method", "harmonic", {"harmonic", "propagate", "none"},
                "harmonic: symmetry mirror, then a smooth harmonic fill on the welded mesh "
                "(continuous across seams, low frequencies only); propagate: breadth-first vertex "
                "propagation; none: nothing (image inpainting fills the charts)")
        .param<bool>("symmetry", true,
                     "harmonic: unseen texels whose mirror image across a detected symmetry plane "
                     "was seen take that colour")
        .param<bool>("shared_uvs", true,
                     "harmonic and propagate: first, what the `authored` mesh's UVs share (when "
                     "it is connected)")
        .param<int>("max_iterations", 400, Range{1, 100000}, "harmonic: solver iteration cap");
  }
  void run(StageContext& ctx) const override {
    auto m = ctx.in<mesh::Mesh>("mesh");
    auto merged = ctx.in<render::MergeResult>("merged");
    // One tile per material, stacked (render/texture_tiles.h): the merge's size says it all.
    const int width = merged->texture.width, height = merged->texture.height;
    render::InpaintOptions options;
    options.fill = ctx.param<std::string>("method");
    options.symmetry = ctx.param<bool>("symmetry");
    options.max_iterations = ctx.param<int>("max_iterations");
    const auto uv = raster_cache(ctx).get_uv(*m, width, height);
    std::shared_ptr<const mesh::Mesh> authored;
    if (ctx.has_input("authored") && options.fill != "none" && ctx.param<bool>("shared_uvs")) {
      authored = ctx.in<mesh::Mesh>("authored");
      if (!authored->has_uvs()) {
        authored.reset();  // nothing authored, nothing shared
      } else if (!render::faces_correspond(*m, *authored)) {
        // Another mesh (simplified, say) says nothing about these texels.
        spdlog::warn(
            "{}: the authored mesh's UVs are not used: its faces differ from the mesh's (connect "
            "the mesh that uv_unwrap took)",
            ctx.node_id());
        authored.reset();
      }
    }
    const image::Image rgb = merged->texture.channels == 3
                                 ? image::Image()
                                 : image::composite_over(merged->texture, 0, 0, 0);
    auto filled = std::make_shared<render::SurfaceFillResult>(
        render::fill_unseen_surface(*m, rgb.pixels.empty() ? merged->texture : rgb,
                                    merged->trust_mask, *uv, options, authored.get()));
    if (options.fill != "none")
      ctx.gauge("inpaint.shared_texels", static_cast<double>(filled->shared_texels));
    if (options.fill == "propagate" && authored)
      spdlog::info("{}: {} texels from the mesh's own UVs", ctx.node_id(), filled->shared_texels);
    if (options.fill == "harmonic") {
      ctx.gauge("inpaint.mirrored_texels", static_cast<double>(filled->mirrored_texels));
      ctx.gauge("inpaint.mirrored_vertices", static_cast<double>(filled->mirrored_vertices));
      ctx.gauge("inpaint.symmetry_found", filled->symmetry_found ? 1.0 : 0.0);
      ctx.gauge("inpaint.symmetry_error", filled->symmetry_error);
      ctx.gauge("inpaint.fill_iterations", filled->fill_iterations);
      spdlog::info(
          "{}: {} texels from the mesh's own UVs, symmetry plane {} (error {:.4f} of the "
          "diagonal), {} texels and {} vertices mirrored, harmonic fill in {} iterations, {} "
          "texels filled",
          ctx.node_id(), filled->shared_texels, filled->symmetry_found ? "found" : "not found",
          filled->symmetry_error, filled->mirrored_texels, filled->mirrored_vertices,
          filled->fill_iterations, filled->texels.size());
    }
    ctx.out("filled", std::move(filled));
  }
};

}  // namespace

void register_fill_surface(pipeline::Registry& registry) {
  registry.add<FillSurface>();
}

}  // namespace gen3d::stages
