// PBR stages: the baked metallic-roughness texture put on the textured mesh, and a lit render of
// the result for the report.

#include <tbb/parallel_for.h>

#include "mesh/pbr.h"
#include "render/shading.h"
#include "stages/register.h"
#include "stages/shared.h"
#include "stages/types.h"

namespace gen3d::stages {
namespace {

using pipeline::Range;
using pipeline::StageContext;
using pipeline::StageContract;

class AttachMetallicRoughness final : public pipeline::Stage {
 public:
  StageContract contract() const override {
    return StageContract("attach_metallic_roughness",
                         "Give a textured mesh a metallic-roughness texture baked from "
                         "Hunyuan3D-2.1-style views (metallic in R, roughness in G), stored as "
                         "glTF keeps it (roughness in G, metallic in B).")
        .input<mesh::Mesh>("mesh", "the textured mesh (inpaint_texture's), on the same atlas")
        .input<image::Image>("texture",
                             "the baked metallic-roughness texture: R metallic, G roughness")
        .output<mesh::Mesh>("mesh", "the mesh with its metallic-roughness texture");
  }
  void run(StageContext& ctx) const override {
    auto m = ctx.in<mesh::Mesh>("mesh");
    auto mr = ctx.in<image::Image>("texture");
    if (!m->has_uvs()) throw std::runtime_error("the mesh has no UVs for the texture");
    if (m->has_materials())
      throw std::runtime_error(
          "the mesh has several materials; a baked texture covers a single-material mesh (take "
          "the mesh from inpaint_texture)");
    auto out = std::make_shared<mesh::Mesh>(*m);
    out->pbr = mesh::MetallicRoughness{};
    out->pbr.texture = std::make_shared<const image::Image>(mesh::gltf_metallic_roughness(*mr));
    ctx.out("mesh", std::move(out));
  }
};

// Like render_albedo, with light: what the metallic-roughness texture does to the surface.
class RenderShaded final : public pipeline::Stage {
 public:
  StageContract contract() const override {
    return StageContract("render_shaded",
                         "Lit render of a textured (PBR) mesh per view on white: base colour, "
                         "metallic and roughness under one fixed light (GGX specular, Lambert "
                         "diffuse), for the report.")
        .input<mesh::Mesh>("mesh", "normalized, textured")
        .input<render::ViewSet>("views")
        .output<ImageList>("maps", "one RGB render per view, white background")
        .param<int>("resolution", 2048, Range{16, 16384}, "square render size in pixels");
  }
  void run(StageContext& ctx) const override {
    auto m = ctx.in<mesh::Mesh>("mesh");
    auto views = ctx.in<render::ViewSet>("views");
    const int size = ctx.param<int>("resolution");
    render::RasterCache& cache = raster_cache(ctx);
    const uint64_t fingerprint = m->fingerprint();
    auto out = std::make_shared<ImageList>(views->size());
    tbb::parallel_for(size_t{0}, views->size(), [&](size_t v) {
      auto span = ctx.span("view " + std::to_string(v));
      const render::Camera& cam = (*views)[v].camera;
      (*out)[v] = render::shaded_map(*m, *cache.get(fingerprint, *m, cam, size, size), cam);
    });
    report_cache(ctx, cache);
    ctx.out("maps", std::move(out));
  }
};

}  // namespace

void register_pbr_stages(pipeline::Registry& registry) {
  registry.add<AttachMetallicRoughness>();
  registry.add<RenderShaded>();
}

}  // namespace gen3d::stages
