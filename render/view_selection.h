#pragma once
// Hunyuan3D-2.1's choice of bake views (hy3dpaint/utils/pipeline_utils.py,
// ViewProcessor.bake_view_selection): the six official views are always taken, then, one at a
// time, the candidate that newly covers the largest share of the surface area, while that share
// exceeds a threshold and fewer than `max_views` views are chosen. "Covers" means a face shows in
// the candidate's face-id render (at least one pixel); a face's share is its area over the mesh's.
//
// The greedy rule works on plain data (face areas and the face sets each candidate shows), so it
// can be checked exactly against stored face-id maps; candidate_visible_faces makes those sets
// with gen3d's rasterizer through the raster cache.

#include <cstddef>
#include <cstdint>
#include <span>
#include <vector>

#include "mesh/mesh.h"
#include "render/camera.h"
#include "render/raster_cache.h"

namespace gen3d::render {

// The 30 candidates of Hunyuan3DPaintConfig (hy3dpaint/textureGenPipeline.py): the six official
// views (ViewSet::hunyuan6, weights 1/0.1/0.5/0.1/0.05/0.05), then for azimuth 0, 30, ..., 330 a
// view at elevation +20 followed by one at -20, each of weight 0.01.
ViewSet hunyuan21_candidates(double distance = 1.45, double ortho_scale = 1.2);

// Area of every face, 0.5 * |(p1 - p0) x (p2 - p0)| in float32 as MeshRender.get_face_areas
// computes it (without its leading 0 for the background).
//   positions: V x 3, faces: F x 3 -> F areas. Throws RenderError on an index out of range.
std::vector<float> face_areas(std::span<const mesh::Vec3> positions,
                              std::span<const mesh::Tri> faces);

// The faces a face-id map shows, ascending 0-based face indices.
//   face_ids: any number of pixels, 0 = background, else face index + 1 (Raster::face_id).
// Throws RenderError on an id outside 0..face_count.
std::vector<uint32_t> visible_faces(std::span<const int32_t> face_ids, size_t face_count);

struct ViewSelectionOptions {
  // Most views chosen, the fixed ones included (official: max_num_view, 6 to 9; the demo uses 6,
  // which takes the fixed views only, the Gradio app 8).
  size_t max_views = 8;
  // A greedy step must newly cover more than this share of the total face area (official 0.01).
  double threshold = 0.01;
  // The first candidates, taken without looking at coverage (official 6: the hunyuan6 views).
  size_t fixed_views = 6;
};

struct ViewSelection {
  // Candidate indices in the order taken: min(fixed_views, max_views, C) fixed ones, then the
  // greedy choices.
  std::vector<size_t> selected;
  // One row per greedy iteration that was evaluated (the last one may have stopped the search):
  // every candidate's newly covered share of the area, -1 for candidates already selected. C each.
  std::vector<std::vector<double>> gains;
  // Share of the total area shown by the selected views together.
  double covered = 0.0;
};

// The greedy rule on plain data.
//   areas: F face areas (face_areas), visible: C candidates' visible faces (visible_faces; any
//   order, duplicates allowed). Ties go to the lower index (strict >), as the reference's loop.
// Throws RenderError on a face index >= F or a total area that is not positive and finite.
ViewSelection select_views(std::span<const float> areas,
                           std::span<const std::vector<uint32_t>> visible,
                           const ViewSelectionOptions& options = {});

// Visible faces of each view in `candidates` for `mesh` (normalized, the render library's
// convention), from its size x size rasters taken from `cache`: one rasterization per pose per run,
// reused by any later stage asking for the same pose and size. Views in parallel (oneTBB); each
// raster is released as soon as its faces are counted (the cache keeps what its budget allows).
// The first `render_last` candidates (the fixed views, always chosen) are rendered after the
// others, so the cache's least-recently-used eviction drops them last.
// `fingerprint` is mesh.fingerprint(), computed once by the caller. Returns C sorted face lists.
std::vector<std::vector<uint32_t>> candidate_visible_faces(const mesh::Mesh& mesh,
                                                           uint64_t fingerprint,
                                                           const ViewSet& candidates, int size,
                                                           RasterCache& cache,
                                                           size_t render_last = 0);

// The chosen views of `candidates`, in the order taken, with their cameras and merge weights.
ViewSet selected_views(const ViewSet& candidates, const ViewSelection& selection);

}  // namespace gen3d::render
