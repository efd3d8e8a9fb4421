#include "stages/report_views.h"

#include <memory>

#include <tbb/parallel_for.h>

#include "render/maps.h"
#include "render/rasterizer.h"
#include "render/surface_fill.h"
#include "render/texture_tiles.h"

namespace gen3d::stages {

ImageList render_texel_sources(const mesh::Mesh& textured, const std::vector<uint8_t>& sources,
                               const render::ViewSet& views, int size) {
  if (!textured.has_uvs()) return {};
  mesh::Mesh m = textured;
  if (!textured.has_materials()) {
    if (!textured.texture) return {};
    const int t = textured.texture->width;
    if (textured.texture->height != t || sources.size() != static_cast<size_t>(t) * t) return {};
    m.texture = std::make_shared<image::Image>(render::source_colors(sources, t));
  } else {
    // A texture per material, their sources stacked as the bake's tiles (render/texture_tiles.h).
    const auto& first = textured.materials.front().texture;
    if (!first) return {};
    const int t = first->width;
    if (sources.size() != static_cast<size_t>(t) * t * textured.materials.size()) return {};
    std::vector<image::Image> tiles = render::split_tiles(render::source_colors(sources, t));
    for (size_t k = 0; k < tiles.size(); ++k)
      m.materials[k].texture = std::make_shared<image::Image>(std::move(tiles[k]));
  }
  ImageList out(views.size());
  tbb::parallel_for(size_t{0}, views.size(), [&](size_t v) {
    out[v] = render::albedo_map(m, render::rasterize(m, views[v].camera, size, size));
  });
  return out;
}

}  // namespace gen3d::stages
