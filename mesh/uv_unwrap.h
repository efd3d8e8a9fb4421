#pragma once
// Automatic UV atlas generation (our own, no xatlas): charts grown by normal deviation, each
// parameterized (planar projection or LSCM), packed without overlap into a square texture.
//
// Pipeline: face adjacency (by welded position) -> region growing over (smoothed) normals with a
// seam-length cost -> merging of neighbouring charts within the normal cone -> strips a few
// texels wide (a plate's sides, a flange's rim) joined across their crease to the chart they share
// a long edge with -> per chart: planar projection if flat, else LSCM (Eigen sparse LDLT), falling
// back to planar when it folds or crushes faces; a chart that still folds or overlaps itself gives
// back the strips it joined, or is split in two across its principal axis, repeatedly -> charts
// rotated to their minimum-area bounding box -> packing: conservative texel footprints (covered
// runs per column, so the inside of a ring stays free) placed in four orientations at a bounded
// set of candidate positions, on the skyline or into holes under it, with `gutter` free texels
// around every chart; the scale (texels per unit) is searched so the layout just fits the square,
// and lowered (then the gutter) when it cannot.
// Stages: uv_segment.cpp, uv_parameterize.cpp, uv_pack.cpp; uv_unwrap.cpp runs them.

#include <cstddef>
#include <cstdint>
#include <vector>

#include "mesh/mesh.h"

namespace gen3d::mesh {

struct UnwrapOptions {
  // Atlas resolution in texels (square); gutter and packing are measured in its texels.
  int texture_size = 2048;
  // Minimum number of empty texels between two charts (protects against bleeding when baking and
  // mip-mapping).
  int gutter = 4;
  // Largest angle (degrees) between a face normal and its chart's mean normal while growing.
  // Larger gives fewer, larger charts (better packing) with more distortion to undo by LSCM.
  float max_chart_angle_deg = 80.0f;
  // Rounds of neighbour averaging of face normals before segmentation (0 = raw normals). Smoother
  // normals give fewer charts with straighter borders on noisy (e.g. generated) meshes.
  int normal_smoothing = 2;
  // Growth order weights: normal deviation vs. boundary length (compact charts, short seams).
  float normal_weight = 1.0f;
  float seam_weight = 1.5f;
  // Charts stop growing at this many faces (0 = no limit). The LSCM solve grows faster than
  // linearly with a chart's size (a 1M-face sphere in 5 charts took 40 s): the default bounds it.
  size_t max_chart_faces = 16384;
  // Solve least-squares conformal maps for curved charts (planar projection is used for flat
  // charts, when LSCM folds a chart, and after half of max_seconds).
  bool use_lscm = true;
  // Charts whose normals all lie within this angle (degrees) of their mean are treated as flat.
  float flat_angle_deg = 5.0f;
  // Merge neighbouring charts whose union stays within max_chart_angle_deg (coplanar pieces of CAD
  // parts, slivers along bevels): fewer charts, shorter seams, denser packing.
  bool merge_charts = true;
  // Texel density to aim for (texels per 3D unit); 0 picks the largest that fits. When the charts
  // do not fit at this density (or, with 0, not even at one texel each with the gutter), the
  // density goes down (then the gutter) until they do, with one warning; the metrics report what
  // was used.
  double texels_per_unit = 0.0;
  // Try the four 90-degree rotations of each chart while packing (denser atlas, slower packing).
  bool rotate_charts = true;
  // Wall-clock budget. Past half of it LSCM is skipped; packing stops refining the scale once it is
  // spent (it always finishes with a valid, non-overlapping layout).
  double max_seconds = 10.0;
};

struct UnwrapMetrics {
  size_t charts = 0;              // number of charts
  size_t lscm_charts = 0;         // charts parameterized by LSCM (the rest are planar)
  double utilization = 0.0;       // UV area of all faces / atlas area (gutters count as unused)
  double area_distortion = 0.0;   // area-weighted mean |log(uv area share / 3D area share)|
  double angle_distortion = 0.0;  // area-weighted mean of (sigma_max / sigma_min - 1) per face
  double seam_length = 0.0;       // 3D length of edges whose two faces lie in different charts
  double texels_per_unit = 0.0;   // packing scale: texels per 3D length unit
  double requested_texels_per_unit = 0.0;  // options.texels_per_unit, or the first scale tried
  // The layout did not fit as asked: density below the requested one (without one: below half
  // of what the surface area allows), gutter reduced, or the uniform-grid fallback.
  bool density_reduced = false;
  int gutter = 0;            // gutter kept in texels (options.gutter unless reduced)
  size_t merged_charts = 0;  // charts removed by merging
  int pack_passes = 0;       // packing attempts made to find the scale
  double seconds = 0.0;      // wall time of the whole unwrap
};

struct UnwrapResult {
  Mesh mesh;  // input with new uvs / uv_faces (positions and faces untouched); the textures that
              // mapped through the old UVs are dropped, face materials kept, sharing the atlas
              // (Mesh::shared_atlas)
  std::vector<uint32_t> face_chart;  // chart id of every face
  UnwrapMetrics metrics;
};

// Unwraps the mesh. Deterministic: the same input and options give the same UVs whatever the
// number of threads. Throws MeshError on invalid meshes; never fails for lack of atlas space.
UnwrapResult uv_unwrap(const Mesh& mesh, const UnwrapOptions& options = {});

// Diagnostics of existing UVs as textures read them: each material has a texture of its own
// (mesh.h; one for all with Mesh::shared_atlas), addressed through the UVs modulo 1 (glTF's
// REPEAT), so UVs may leave [0, 1] and materials may share UV space; what must not happen is two
// faces of one material on the same texel. Every material is rasterized at texture_size x
// texture_size (texel centres, top-left fill rule, so faces that merely share an edge do not count
// as overlapping), each face moved by whole repeats into [0, 1) and the part that crosses the
// texture's edge wrapped to the other side.
struct UvMaterialCheck {
  size_t faces = 0;               // faces of this material
  size_t covered_texels = 0;      // texels of its texture covered by at least one face
  size_t overlapping_texels = 0;  // texels covered by two or more of its faces
  double overlap_fraction = 0.0;  // overlapping / covered
};
struct UvCheckResult {
  size_t covered_texels = 0;      // summed over the materials
  size_t overlapping_texels = 0;  // summed over the materials
  double overlap_fraction = 0.0;  // overlapping / covered
  size_t out_of_range = 0;        // UV coordinates outside [0, 1] (they repeat)
  size_t non_finite = 0;          // UV coordinates that are NaN or infinite
  size_t degenerate_faces = 0;    // faces with zero UV area
  // Faces whose UVs span more than one repeat of the texture (a u or v extent above 1): the
  // texture repeats across the face itself, so no texture can be baked into it. Not rasterized.
  size_t wide_faces = 0;
  // One entry per material (a single one for a mesh without materials), in material order.
  std::vector<UvMaterialCheck> materials;
  // The material with the largest overlap fraction (-1 when nothing is covered).
  int worst_material = -1;
  // The check ended early, at the first material whose overlap fraction exceeds stop_above: the
  // materials after it are left unmeasured (their counts 0).
  bool stopped = false;
};
// stop_above < 1: stop at the first material that overlaps more than that, enough to refuse the
// UVs (a tiled layout covers its texture many times over: 0.25 s of 2048 rasters on the spider).
UvCheckResult check_uvs(const Mesh& mesh, int texture_size, double stop_above = 1.0);

}  // namespace gen3d::mesh
