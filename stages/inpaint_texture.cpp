// inpaint_texture: fills the texels no view painted, and puts the texture on the mesh.

#include "image/composite.h"
#include "render/texture_inpaint.h"
#include "stages/register.h"
#include "stages/shared.h"
#include "stages/types.h"

namespace gen3d::stages {
namespace {

using pipeline::Range;
using pipeline::StageContext;
using pipeline::StageContract;

class InpaintTexture final : public pipeline::Stage {
 public:
  StageContract contract() const override {
    return StageContract("inpaint_texture",
                         "Fill unpainted texels: vertex propagation, then image inpainting inside "
                         "the charts, gutter dilation and a background fill.")
        .input<mesh::Mesh>("mesh", "normalized, with UVs")
        .input<render::MergeResult>("merged")
        .output<mesh::Mesh>("mesh", "the mesh with its new base-colour texture")
        .output<image::Image>("texture")
        .output<render::InpaintReport>("report")
        .choice("method", "charts", {"charts", "reference"},
                "charts: only inside the charts (fast); reference: whole image, as the reference")
        .choice("algorithm", "ns", {"ns", "telea"}, "OpenCV inpainting algorithm")
        .param<double>("radius", 3.0, Range{1.0, 64.0}, "OpenCV inpainting radius (texels)")
        .param<int>("gutter", 4, Range{0, 64}, "texels dilated around the charts")
        .param<bool>("vertex_inpaint", true, "propagate colours over the mesh first");
  }
  void run(StageContext& ctx) const override {
    auto m = ctx.in<mesh::Mesh>("mesh");
    auto merged = ctx.in<render::MergeResult>("merged");
    const int size = merged->texture.width;
    render::InpaintOptions options;
    options.method = ctx.param<std::string>("method");
    options.algorithm = ctx.param<std::string>("algorithm");
    options.radius = ctx.param<double>("radius");
    options.gutter = ctx.param<int>("gutter");
    options.vertex_inpaint = ctx.param<bool>("vertex_inpaint");
    std::shared_ptr<const render::Raster> uv;
    if (options.method == "charts") uv = raster_cache(ctx).get_uv(*m, size, size);
    auto report = std::make_shared<render::InpaintReport>();
    image::Image rgb = merged->texture;
    if (rgb.channels != 3) rgb = image::composite_over(rgb, 0, 0, 0);
    auto texture = std::make_shared<image::Image>(
        render::inpaint_texture(*m, rgb, merged->trust_mask, uv.get(), options, report.get()));
    auto textured = std::make_shared<mesh::Mesh>(*m);
    textured->texture = texture;  // the new texture covers every face: one material now
    textured->materials.clear();
    textured->face_materials.clear();
    textured->colors.clear();
    ctx.out("mesh", std::move(textured));
    ctx.out("texture", std::move(texture));
    ctx.out("report", std::move(report));
  }
};

}  // namespace

void register_inpaint_texture(pipeline::Registry& registry) {
  registry.add<InpaintTexture>();
}

}  // namespace gen3d::stages
