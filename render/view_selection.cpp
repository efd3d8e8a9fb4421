#include "render/view_selection.h"

#include <oneapi/tbb/parallel_for.h>

#include <algorithm>
#include <cmath>
#include <string>

#include "render/error.h"

namespace gen3d::render {

ViewSet hunyuan21_candidates(double distance, double ortho_scale) {
  ViewSet set = ViewSet::hunyuan6(distance, ortho_scale);
  // Hunyuan3DPaintConfig.__init__ appends, per azimuth, +20 then -20 (textureGenPipeline.py).
  for (int azim = 0; azim < 360; azim += 30) {
    for (double elev : {20.0, -20.0}) {
      View v;
      v.camera.elev = elev;
      v.camera.azim = azim;
      v.camera.distance = distance;
      v.camera.ortho_scale = ortho_scale;
      v.weight = 0.01;
      set.views.push_back(v);
    }
  }
  return set;
}

std::vector<float> face_areas(std::span<const mesh::Vec3> positions,
                              std::span<const mesh::Tri> faces) {
  std::vector<float> out(faces.size());
  for (size_t f = 0; f < faces.size(); ++f) {
    const mesh::Tri& t = faces[f];
    for (uint32_t v : t)
      if (v >= positions.size())
        throw RenderError("face_areas: face " + std::to_string(f) + " uses vertex " +
                          std::to_string(v) + " but there are only " +
                          std::to_string(positions.size()) + " vertices");
    const mesh::Vec3 &p0 = positions[t[0]], &p1 = positions[t[1]], &p2 = positions[t[2]];
    // torch.norm(torch.cross(v1 - v0, v2 - v0), dim=-1) * 0.5 on float32 tensors
    // (MeshRender.get_face_areas). torch's CPU kernels contract both to fused multiply-adds:
    // cross_k = fma(a_i, b_j, -(a_j * b_i)) and |c|^2 = fma(c2, c2, fma(c1, c1, c0 * c0)). With
    // them the golden set's areas are bit-exact (504 of 504), without them 364 (the collinear
    // faces then come out 0, not ~1e-11). std::fma is exact whatever -ffp-contract says.
    const float a[3] = {p1[0] - p0[0], p1[1] - p0[1], p1[2] - p0[2]};
    const float b[3] = {p2[0] - p0[0], p2[1] - p0[1], p2[2] - p0[2]};
    const float c0 = std::fma(a[1], b[2], -(a[2] * b[1]));
    const float c1 = std::fma(a[2], b[0], -(a[0] * b[2]));
    const float c2 = std::fma(a[0], b[1], -(a[1] * b[0]));
    out[f] = std::sqrt(std::fma(c2, c2, std::fma(c1, c1, c0 * c0))) * 0.5f;
  }
  return out;
}

std::vector<uint32_t> visible_faces(std::span<const int32_t> face_ids, size_t face_count) {
  // One byte per face id (0 = background): a pass over the pixels, then one over the faces.
  std::vector<uint8_t> seen(face_count + 1, 0);
  const uint64_t limit = face_count;
  bool bad = false;
  for (int32_t id : face_ids) {
    const uint64_t u = static_cast<uint32_t>(id);
    if (u > limit || id < 0) {
      bad = true;
      break;
    }
    seen[u] = 1;
  }
  if (bad) {
    for (int32_t id : face_ids)
      if (id < 0 || static_cast<uint64_t>(id) > limit)
        throw RenderError("visible_faces: face id " + std::to_string(id) + " outside 0.." +
                          std::to_string(face_count));
  }
  std::vector<uint32_t> out;
  for (size_t f = 1; f <= face_count; ++f)
    if (seen[f]) out.push_back(static_cast<uint32_t>(f - 1));
  return out;
}

ViewSelection select_views(std::span<const float> areas,
                           std::span<const std::vector<uint32_t>> visible,
                           const ViewSelectionOptions& options) {
  const size_t face_count = areas.size(), count = visible.size();
  if (!(options.threshold >= 0.0))
    throw RenderError("select_views: threshold must be >= 0, got " +
                      std::to_string(options.threshold));
  double total = 0.0;
  for (float a : areas) total += a;
  if (!(total > 0.0) || !std::isfinite(total))
    throw RenderError("select_views: the faces' total area is " + std::to_string(total) +
                      " (expected positive and finite)");
  // The reference divides float32 areas by their float32 sum and adds the shares of each set in
  // float32 (numpy, in Python-set order); shares and sums in float64 here differ from it by
  // rounding only (1.5e-9 on the golden set). So only candidates whose gains lie within that
  // rounding of each other can be ordered differently: an exact tie here (a mirror-symmetric mesh)
  // goes to the lower index, where the reference's float32 sums may break it either way.
  std::vector<double> share(face_count);
  for (size_t f = 0; f < face_count; ++f) share[f] = static_cast<double>(areas[f]) / total;

  // Each candidate's faces once (the reference holds them as Python sets).
  std::vector<std::vector<uint32_t>> faces(count);
  for (size_t c = 0; c < count; ++c) {
    faces[c].assign(visible[c].begin(), visible[c].end());
    std::sort(faces[c].begin(), faces[c].end());
    faces[c].erase(std::unique(faces[c].begin(), faces[c].end()), faces[c].end());
    if (!faces[c].empty() && faces[c].back() >= face_count)
      throw RenderError("select_views: candidate " + std::to_string(c) + " shows face " +
                        std::to_string(faces[c].back()) + " but there are only " +
                        std::to_string(face_count) + " faces");
  }

  ViewSelection out;
  std::vector<uint8_t> covered(face_count, 0), taken(count, 0);
  const auto take = [&](size_t c) {
    out.selected.push_back(c);
    taken[c] = 1;
    for (uint32_t f : faces[c]) covered[f] = 1;
  };
  // bake_view_selection: `for idx in range(min(6, max_selected_view_num))` (pipeline_utils.py).
  const size_t fixed = std::min({options.fixed_views, options.max_views, count});
  for (size_t c = 0; c < fixed; ++c) take(c);

  while (out.selected.size() < options.max_views) {
    std::vector<double> row(count, -1.0);
    double best = 0.0;  // the reference starts at max_inc = 0 with max_idx = -1
    size_t best_index = count;
    for (size_t c = 0; c < count; ++c) {
      if (taken[c]) continue;
      double gain = 0.0;
      for (uint32_t f : faces[c])
        if (!covered[f]) gain += share[f];
      row[c] = gain;
      if (gain > best) {  // strict: the first of equal gains wins
        best = gain;
        best_index = c;
      }
    }
    out.gains.push_back(std::move(row));
    if (best_index == count || !(best > options.threshold)) break;
    take(best_index);
  }
  for (size_t f = 0; f < face_count; ++f)
    if (covered[f]) out.covered += share[f];
  return out;
}

std::vector<std::vector<uint32_t>> candidate_visible_faces(const mesh::Mesh& mesh,
                                                           uint64_t fingerprint,
                                                           const ViewSet& candidates, int size,
                                                           RasterCache& cache, size_t render_last) {
  std::vector<std::vector<uint32_t>> out(candidates.size());
  const auto count = [&](size_t c) {
    auto raster = cache.get(fingerprint, mesh, candidates[c].camera, size, size);
    out[c] = visible_faces(raster->face_id, mesh.faces.size());
  };
  const size_t last = std::min(render_last, candidates.size());
  tbb::parallel_for(last, candidates.size(), count);
  tbb::parallel_for(size_t{0}, last, count);
  return out;
}

ViewSet selected_views(const ViewSet& candidates, const ViewSelection& selection) {
  ViewSet out;
  for (size_t c : selection.selected) {
    if (c >= candidates.size())
      throw RenderError("selected_views: candidate " + std::to_string(c) + " of " +
                        std::to_string(candidates.size()));
    out.views.push_back(candidates[c]);
  }
  return out;
}

}  // namespace gen3d::render
