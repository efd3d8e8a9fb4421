#pragma once
// Splitting vertices along UV seams, for consumers that need one UV per vertex (glTF, the texgen
// reference renderer).

#include <cstdint>
#include <vector>

#include "mesh/mesh.h"

namespace gen3d::mesh {

// Returns a mesh where every vertex has exactly one UV: one output vertex per distinct
// (position index, uv index) corner pair, numbered in order of first use by the faces. Afterwards
// uvs.size() == positions.size() and uv_faces == faces. Normals and colours are copied from the
// source vertex; the texture is shared. `source_vertex`, when given, receives the source position
// index of every output vertex. A mesh without UVs is returned unchanged.
Mesh split_uv_seams(const Mesh& mesh, std::vector<uint32_t>* source_vertex = nullptr);

}  // namespace gen3d::mesh
