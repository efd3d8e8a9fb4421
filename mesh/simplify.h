#pragma once
// Mesh decimation through meshoptimizer (quadric edge collapse), keeping UV seams intact.

#include <cstddef>

#include "mesh/mesh.h"

namespace gen3d::mesh {

struct SimplifyOptions {
  // Target number of faces; 0 means use target_ratio instead.
  size_t target_faces = 0;
  // Target as a fraction of the input face count, used when target_faces is 0.
  float target_ratio = 0.5f;
  // Largest geometric error allowed, relative to the mesh extent (meshopt target_error). The
  // default does not limit: the face target decides. Smaller values may stop above the target.
  float max_error = 1.0f;
  // Do not move vertices on open borders (holes, mesh edges).
  bool lock_border = false;
  // When the mesh has UVs, vertices are split at UV seams and the seams are kept: a seam vertex
  // only collapses along its seam, so no UV chart bleeds into another.
  bool preserve_uv_seams = true;
};

struct SimplifyReport {
  size_t input_faces = 0;
  size_t output_faces = 0;
  float relative_error = 0.0f;  // meshopt's resulting error, relative to the extent
};

// Returns the simplified mesh. Positions stay welded, UVs keep their own index buffer, colours are
// kept per vertex, normals are dropped (recompute them), texture is shared. Unused vertices and UVs
// are removed. Throws MeshError on invalid input.
Mesh simplify(const Mesh& mesh, const SimplifyOptions& options = {},
              SimplifyReport* report = nullptr);

}  // namespace gen3d::mesh
