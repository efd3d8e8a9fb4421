#pragma once
// Per-vertex normals, in the two flavours the pipelines need.

#include <vector>

#include "mesh/mesh.h"

namespace gen3d::mesh {

// Area-weighted: each vertex gets the normalized sum of its faces' unnormalized cross products.
// The usual choice for shading and export.
std::vector<Vec3> vertex_normals_area_weighted(const Mesh& mesh);

// The reference texgen renderer's variant: the normalized sum of *unit* face normals, so every
// face counts equally whatever its area; a zero sum gives a zero normal. Map rendering uses this
// for bit-exact parity with the reference.
std::vector<Vec3> vertex_normals_face_mean(const Mesh& mesh);

}  // namespace gen3d::mesh
