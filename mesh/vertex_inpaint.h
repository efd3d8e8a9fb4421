#pragma once
// Vertex inpainting: colour the UV vertices that no view painted from their painted neighbours
// over mesh connectivity, then write them back into the texture. This is the reference texgen's
// `uv_inpaint` first step, reproduced rule for rule (texel rounding, directed adjacency, in-place
// sweeps, termination counter) so its output matches the reference exactly.

#include <cstdint>
#include <vector>

#include "mesh/mesh.h"

namespace gen3d::mesh {

struct VertexInpaintStats {
  size_t known_vertices = 0;      // UV vertices painted by the views
  size_t filled_vertices = 0;     // UV vertices coloured by propagation
  size_t unreached_vertices = 0;  // still uncoloured (no painted vertex in their component)
  int sweeps = 0;
};

// texture: T x T x C (C = 3 or 4), the merged bake; mask: T x T, non-zero where the texture is
// trusted. Both are updated in place: every coloured UV vertex is written to its texel and marked.
// The mesh needs UVs. A UV vertex is one entry of mesh.uvs (seams split UV vertices, as xatlas
// does); its position, for the distance weights, is that of the first corner that uses it.
// `v_flipped`: the UVs hold 1 - v (the renderer's convention, see mesh/normalize.h); the original v
// is then recovered in float32 first, as the reference's get_mesh does before inpainting.
VertexInpaintStats vertex_inpaint(const Mesh& mesh, image::Image& texture,
                                  std::vector<uint8_t>& mask, bool v_flipped = false);

// The texel a UV (original v, up) lands on, as the reference computes it: (1 - v) and both
// products in float64, rounded half to even. Returns {row, col}.
std::array<int, 2> uv_to_texel(const Vec2& uv, int texture_size);

}  // namespace gen3d::mesh
