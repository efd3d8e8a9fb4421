#pragma once
// The texture space a mesh is baked into. A mesh with materials gives each material a texture of
// its own (mesh/mesh.h), addressed through the face UVs modulo 1 as glTF's default REPEAT sampler
// does: UVs may leave [0, 1], and faces of different materials may share UV space. A bake works on
// one image holding every material's square tile, stacked top to bottom (material k at rows
// [k t, (k + 1) t) of a t-wide image), and splits it into the materials' textures at the end. A
// mesh without materials, or whose materials share an atlas, is one tile.

#include <cmath>
#include <cstddef>
#include <cstdint>
#include <vector>

#include "image/image.h"
#include "mesh/mesh.h"

namespace gen3d::render {

// How many tiles the mesh's texture space has: one per material (at least one), or one when the
// materials share an atlas (Mesh::shared_atlas).
int texture_tiles(const mesh::Mesh& mesh);

// Throws RenderError (naming `fn`) unless every face has a material of the mesh's list, when it has
// materials.
void check_face_tiles(const char* fn, const mesh::Mesh& mesh);

// The tile of face f: its material, 0 without materials or with a shared atlas.
inline uint32_t face_tile(const mesh::Mesh& mesh, size_t f) {
  return mesh.has_materials() && !mesh.shared_atlas ? mesh.face_materials[f] : 0u;
}

// Up to this many tiles keep the configured texture size each; more are shrunk (tile_size).
inline constexpr int kFullSizeTiles = 4;

// The side of each tile for a configured texture size: the configured size while there are at
// most kFullSizeTiles tiles; beyond, halved (down to 16) until the tiles together hold no more
// texels than kFullSizeTiles textures of the configured size, so memory stays bounded however
// many materials a mesh has.
int tile_size(int texture_size, int tiles);

// A UV coordinate taken modulo 1 where it leaves [0, 1]; inside (1 included) it is unchanged.
inline float wrap_uv(float t) {
  return t >= 0.0f && t <= 1.0f ? t : t - std::floor(t);
}

// The tiles of a stacked image (width w, height a multiple of w), top to bottom, each w x w.
// Throws RenderError when the height is not a multiple of the width.
std::vector<image::Image> split_tiles(const image::Image& stacked);

}  // namespace gen3d::render
