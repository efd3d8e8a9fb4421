#include "render/texture_tiles.h"

#include <algorithm>
#include <string>

#include "render/error.h"

namespace gen3d::render {

int texture_tiles(const mesh::Mesh& mesh) {
  return mesh.has_materials() && !mesh.shared_atlas
             ? std::max<int>(1, static_cast<int>(mesh.materials.size()))
             : 1;
}

int tile_size(int texture_size, int tiles) {
  int t = texture_size;
  const double budget = double(kFullSizeTiles) * texture_size * texture_size;
  while (t > 16 && double(tiles) * t * t > budget) t /= 2;
  return t;
}

void check_face_tiles(const char* fn, const mesh::Mesh& mesh) {
  if (!mesh.has_materials() || mesh.shared_atlas) return;
  if (mesh.face_materials.size() != mesh.faces.size())
    throw RenderError(std::string(fn) + ": face_materials has " +
                      std::to_string(mesh.face_materials.size()) + " entries for " +
                      std::to_string(mesh.faces.size()) + " faces");
  const size_t tiles = static_cast<size_t>(texture_tiles(mesh));
  for (uint32_t m : mesh.face_materials)
    if (m >= tiles)
      throw RenderError(std::string(fn) + ": a face uses material " + std::to_string(m) + " of " +
                        std::to_string(tiles));
}

std::vector<image::Image> split_tiles(const image::Image& stacked) {
  const int w = stacked.width;
  if (w <= 0 || stacked.height % w != 0)
    throw RenderError("split_tiles: a " + std::to_string(stacked.width) + " x " +
                      std::to_string(stacked.height) + " image is not a stack of square tiles");
  const int tiles = stacked.height / w;
  const size_t n = static_cast<size_t>(w) * w * static_cast<size_t>(stacked.channels);
  std::vector<image::Image> out;
  out.reserve(static_cast<size_t>(tiles));
  for (int k = 0; k < tiles; ++k) {
    image::Image tile;
    tile.width = tile.height = w;
    tile.channels = stacked.channels;
    const auto begin = stacked.pixels.begin() + static_cast<std::ptrdiff_t>(n * k);
    tile.pixels.assign(begin, begin + static_cast<std::ptrdiff_t>(n));
    out.push_back(std::move(tile));
  }
  return out;
}

}  // namespace gen3d::render
