// inpaint_texture: fills the texels no view painted, and puts the texture on the mesh.

#include <algorithm>
#include <stdexcept>

#include <spdlog/spdlog.h>
#include <tbb/parallel_for.h>

#include "image/composite.h"
#include "render/texture_inpaint.h"
#include "render/texture_tiles.h"
#include "stages/register.h"
#include "stages/shared.h"
#include "stages/types.h"

namespace gen3d::stages {
namespace {

using pipeline::Range;
using pipeline::StageContext;
using pipeline::StageContract;

// With the fill done upstream, the fill's parameters belong to that node: one set here would be
// silently ignored, so it is refused with the name of the place it moved to.
void check_fill_upstream(const render::InpaintOptions& options) {
  const render::InpaintOptions defaults;
  std::string moved;
  if (options.fill != "none")
    moved = "fill: set the fill_surface node's method (--set fill.method=" + options.fill + ")";
  else if (options.vertex_inpaint != defaults.vertex_inpaint)
    moved = "vertex_inpaint: set the fill_surface node's method to none (--set fill.method=none)";
  else if (options.symmetry != defaults.symmetry)
    moved = "symmetry: set it on the fill_surface node (--set fill.symmetry=" +
            std::string(options.symmetry ? "true" : "false") + ")";
  else if (options.max_iterations != defaults.max_iterations)
    moved = "max_iterations: set it on the fill_surface node (--set fill.max_iterations=" +
            std::to_string(options.max_iterations) + ")";
  if (!moved.empty())
    throw std::invalid_argument(
        "the surface fill comes from the `filled` input (a fill_surface node, `fill` in the "
        "shipped configs), so this node's fill parameters do not apply: " +
        moved);
  if (options.method != "charts")
    throw std::invalid_argument(
        "the `filled` input needs method charts; the reference method does its own vertex "
        "inpainting (leave `filled` unconnected)");
}

class InpaintTexture final : public pipeline::Stage {
 public:
  StageContract contract() const override {
    return StageContract("inpaint_texture",
                         "Fill unpainted texels: vertex propagation, then image inpainting inside "
                         "the charts, gutter dilation and a background fill.")
        .semantics_version(5)  // 3: the fill input, a faster fill; 4: sources only in the report;
                               // 5: a texture per material
        .input<mesh::Mesh>("mesh", "normalized, with UVs")
        .input<render::MergeResult>("merged")
        .optional_input<render::SurfaceFillResult>(
            "filled",
            "the surface fill done beforehand by a fill_surface node (then `fill` is none and "
            "the fill's parameters are set on that node)")
        .output<mesh::Mesh>("mesh",
                            "the mesh with its new base-colour texture (one per material, when "
                            "it has materials)")
        .output<image::Image>("texture", "the texture; with materials, theirs stacked")
        .output<render::InpaintReport>("report")
        .choice("method", "charts", {"charts", "reference"},
                "charts: only inside the charts (fast); reference: whole image, as the reference")
        .choice("algorithm", "ns", {"ns", "telea"}, "OpenCV inpainting algorithm")
        .param<double>("radius", 3.0, Range{1.0, 64.0}, "OpenCV inpainting radius (texels)")
        .param<int>("gutter", 4, Range{0, 64}, "texels dilated around the charts")
        .param<bool>("vertex_inpaint", true, "propagate colours over the mesh first")
        .choice("fill", "propagate", {"propagate", "harmonic", "none"},
                "charts: unseen surface by breadth-first vertex propagation, or by a smooth "
                "harmonic fill on the welded mesh (continuous across seams, low frequencies only); "
                "none: no fill here (done by the fill_surface node on the `filled` input)")
        .param<bool>("symmetry", true,
                     "harmonic: unseen texels whose mirror image across a detected symmetry plane "
                     "was seen take that colour")
        .param<int>("max_iterations", 400, Range{1, 100000}, "harmonic: solver iteration cap");
  }
  void run(StageContext& ctx) const override {
    auto m = ctx.in<mesh::Mesh>("mesh");
    auto merged = ctx.in<render::MergeResult>("merged");
    render::InpaintOptions options;
    options.method = ctx.param<std::string>("method");
    options.algorithm = ctx.param<std::string>("algorithm");
    options.radius = ctx.param<double>("radius");
    options.gutter = ctx.param<int>("gutter");
    options.vertex_inpaint = ctx.param<bool>("vertex_inpaint");
    options.fill = ctx.param<std::string>("fill");
    options.symmetry = ctx.param<bool>("symmetry");
    options.max_iterations = ctx.param<int>("max_iterations");
    const bool upstream = ctx.has_input("filled");
    if (upstream) check_fill_upstream(options);
    std::shared_ptr<const render::Raster> uv;
    if (options.method == "charts" && !upstream)
      uv = raster_cache(ctx).get_uv(*m, merged->texture.width, merged->texture.height);
    auto report = std::make_shared<render::InpaintReport>();
    image::Image composed = merged->texture.channels == 3
                                ? image::Image()
                                : image::composite_over(merged->texture, 0, 0, 0);
    const bool own = !composed.pixels.empty();
    const image::Image& rgb = own ? composed : merged->texture;
    auto texture = std::make_shared<image::Image>(
        upstream ? render::inpaint_texture(own ? std::move(composed) : rgb, merged->trust_mask,
                                           *ctx.in<render::SurfaceFillResult>("filled"), options,
                                           report.get())
                 : render::inpaint_texture(*m, rgb, merged->trust_mask, uv.get(), options,
                                           report.get()));
    auto textured = std::make_shared<mesh::Mesh>(*m);
    textured->colors.clear();
    textured->pbr = {};  // the material is the new one: what the input's said no longer applies
    if (m->has_materials() && !m->shared_atlas) {
      // A texture per material (render/texture_tiles.h): the tiles of the stacked texture.
      std::vector<image::Image> tiles = render::split_tiles(*texture);
      if (tiles.size() != textured->materials.size())
        throw std::runtime_error("the texture has " + std::to_string(tiles.size()) + " tiles for " +
                                 std::to_string(textured->materials.size()) + " materials");
      for (size_t k = 0; k < tiles.size(); ++k) {
        mesh::Material& mat = textured->materials[k];
        mat.texture = std::make_shared<const image::Image>(std::move(tiles[k]));
        mat.base_color = {1, 1, 1, 1};
        mat.pbr = {};
      }
      spdlog::info("{}: {} materials, a {} x {} texture each", ctx.node_id(), tiles.size(),
                   texture->width, texture->width);
    } else {
      textured->texture = texture;  // the new texture covers every face: one material now
      textured->materials.clear();
      textured->face_materials.clear();
      textured->shared_atlas = false;
    }
    ctx.out("mesh", std::move(textured));
    ctx.out("texture", std::move(texture));
    if (options.fill == "harmonic") {
      ctx.gauge("inpaint.mirrored_texels", static_cast<double>(report->mirrored_texels));
      ctx.gauge("inpaint.mirrored_vertices", static_cast<double>(report->mirrored_vertices));
      ctx.gauge("inpaint.symmetry_found", report->symmetry_found ? 1.0 : 0.0);
      ctx.gauge("inpaint.symmetry_error", report->symmetry_error);
      ctx.gauge("inpaint.fill_iterations", report->fill_iterations);
      spdlog::info(
          "{}: symmetry plane {} (error {:.4f} of the diagonal), {} texels and {} vertices "
          "mirrored, harmonic fill in {} iterations",
          ctx.node_id(), report->symmetry_found ? "found" : "not found", report->symmetry_error,
          report->mirrored_texels, report->mirrored_vertices, report->fill_iterations);
    }
    ctx.out("report", std::move(report));
  }
};

}  // namespace

void register_inpaint_texture(pipeline::Registry& registry) {
  registry.add<InpaintTexture>();
}

}  // namespace gen3d::stages
