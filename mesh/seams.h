#pragma once
// Splitting vertices along UV seams, for consumers that need one UV per vertex (glTF, the texgen
// reference renderer).

#include <cstdint>
#include <vector>

#include "mesh/mesh.h"

namespace gen3d::mesh {

// Returns a mesh where every vertex has exactly one UV and one material: one output vertex per
// distinct (position index, uv index, face material) corner, numbered in order of first use by the
// faces. Afterwards uvs.size() == positions.size() and uv_faces == faces (with UVs). Normals and
// colours are copied from the source vertex; textures and materials are shared. `source_vertex`,
// when given, receives the source position index of every output vertex. A mesh with neither UVs
// nor several materials is returned unchanged.
Mesh split_uv_seams(const Mesh& mesh, std::vector<uint32_t>* source_vertex = nullptr);

}  // namespace gen3d::mesh
