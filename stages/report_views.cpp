#include "stages/report_views.h"

#include <memory>

#include <tbb/parallel_for.h>

#include "render/maps.h"
#include "render/rasterizer.h"
#include "render/surface_fill.h"

namespace gen3d::stages {

ImageList render_texel_sources(const mesh::Mesh& textured, const std::vector<uint8_t>& sources,
                               const render::ViewSet& views, int size) {
  if (!textured.texture || !textured.has_uvs() || textured.has_materials()) return {};
  const int t = textured.texture->width;
  if (textured.texture->height != t || sources.size() != static_cast<size_t>(t) * t) return {};
  mesh::Mesh m = textured;
  m.texture = std::make_shared<image::Image>(render::source_colors(sources, t));
  ImageList out(views.size());
  tbb::parallel_for(size_t{0}, views.size(), [&](size_t v) {
    out[v] = render::albedo_map(m, render::rasterize(m, views[v].camera, size, size));
  });
  return out;
}

}  // namespace gen3d::stages
