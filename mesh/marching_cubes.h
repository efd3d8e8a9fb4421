#pragma once
// Marching cubes on a vertex grid of scalar values (specs/volume-decoding.md 7.1-7.4).
// Corner "inside" iff value - level > 0; one welded vertex per crossed grid edge (linear
// interpolation in index space); triangles counter-clockwise seen from outside (normals point
// from value > level to value < level, positive signed volume for a positive-inside blob).
// Cubes with a NaN corner (unqueried vertices of banded decoders) are skipped. The case table
// is built at start-up from the standard corner / edge numbering: each cube face resolves its
// crossings on its own (inside corners separated on ambiguous faces), so neighbouring cubes
// always agree and the surface is watertight on closed fields. Corners exactly at the level
// (t = 0) give one position on several edges; those duplicates are merged (spec 7.4).

#include <array>
#include <cstddef>
#include <cstdint>

#include "mesh/mesh.h"

namespace gen3d::mesh {

// How index-space vertices u (0..r per axis, r = cells) map to world coordinates.
enum class VertexMapping {
  kReferenceGrid,     // bbox_min + u / (r + 1) * size   (spec default: the reference's R+1 quirk)
  kExact,             // bbox_min + u / r * size         (geometrically correct)
  kReferenceRequest,  // bbox_min + u / (R_req + 1) * size  (bit-parity with the requested R)
};

struct MarchingCubesOptions {
  float level = 0.0f;                                     // iso value (mc_level)
  VertexMapping mapping = VertexMapping::kReferenceGrid;  // index -> world
  int requested_resolution = 0;                           // R_req for kReferenceRequest
  Vec3 bbox_min{-1.01f, -1.01f, -1.01f};                  // grid box
  Vec3 bbox_max{1.01f, 1.01f, 1.01f};
};

// values[(i * ny + j) * nz + k] is vertex (i, j, k) (i <-> x, k fastest); at least 2 per axis.
struct GridView {
  const float* values = nullptr;
  std::int64_t nx = 0, ny = 0, nz = 0;
};

struct MarchingCubesReport {
  std::size_t skipped_cubes = 0;    // cubes with a NaN corner
  bool no_surface = false;          // level outside the finite value range, or no face at all
  std::size_t merged_vertices = 0;  // duplicate positions merged (corners exactly at the level)
};

// Throws MeshError on an invalid grid or options. No surface: an empty mesh (report says why).
Mesh marching_cubes(const GridView& grid, const MarchingCubesOptions& options = {},
                    MarchingCubesReport* report = nullptr);

// Case table access for tests: triangles of a cube configuration (bit c = corner c inside,
// standard numbering) as triples of edge ids 0..11; returns the triangle count.
int marching_cubes_case(int config, std::array<std::array<std::int8_t, 3>, 12>& tris);

// Signed volume of a closed mesh (positive for outward-facing counter-clockwise triangles).
double signed_volume(const Mesh& mesh);

}  // namespace gen3d::mesh
