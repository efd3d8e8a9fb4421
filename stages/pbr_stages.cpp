// PBR stages: the baked metallic-roughness texture put on the textured mesh, and a lit render of
// the result for the report.

#include <tbb/parallel_for.h>

#include "mesh/pbr.h"
#include "render/shading.h"
#include "render/texture_tiles.h"
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
                             "the baked metallic-roughness texture: R metallic, G roughness "
                             "(with materials, theirs stacked)")
        .output<mesh::Mesh>("mesh", "the mesh with its metallic-roughness texture");
  }
  void run(StageContext& ctx) const override {
    auto m = ctx.in<mesh::Mesh>("mesh");
    auto mr = ctx.in<image::Image>("texture");
    if (!m->has_uvs()) throw std::runtime_error("the mesh has no UVs for the texture");
    auto out = std::make_shared<mesh::Mesh>(*m);
    const image::Image gltf = mesh::gltf_metallic_roughness(*mr);
    if (!m->has_materials() || m->shared_atlas) {
      if (m->has_materials())
        throw std::runtime_error(
            "the mesh's materials share one atlas; a baked texture covers them once it is a "
            "single-material mesh (take the mesh from inpaint_texture)");
      out->pbr = mesh::MetallicRoughness{};
      out->pbr.texture = std::make_shared<const image::Image>(gltf);
      ctx.out("mesh", std::move(out));
      return;
    }
    // A texture per material, baked as their stacked tiles (render/texture_tiles.h).
    std::vector<image::Image> tiles = render::split_tiles(gltf);
    if (tiles.size() != out->materials.size())
      throw std::runtime_error("the metallic-roughness texture has " +
                               std::to_string(tiles.size()) + " tiles for " +
                               std::to_string(out->materials.size()) +
                               " materials (bake it on the mesh that inpaint_texture took)");
    for (size_t k = 0; k < tiles.size(); ++k) {
      out->materials[k].pbr = mesh::MetallicRoughness{};
      out->materials[k].pbr.texture = std::make_shared<const image::Image>(std::move(tiles[k]));
    }
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
