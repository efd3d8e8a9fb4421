#pragma once
// Shared types of the UV unwrapper's stages (not a public header): segmentation (uv_segment.cpp)
// grows charts over the face graph, parameterization (uv_parameterize.cpp) flattens each chart,
// packing (uv_pack.cpp) places the flattened charts in the atlas; uv_unwrap.cpp runs them in turn.

#include <algorithm>
#include <array>
#include <cmath>
#include <cstddef>
#include <cstdint>
#include <functional>
#include <limits>
#include <vector>

#include "mesh/mesh.h"
#include "mesh/uv_unwrap.h"

namespace gen3d::mesh::unwrap_detail {

constexpr uint32_t kNone = std::numeric_limits<uint32_t>::max();

struct D2 {
  double x = 0, y = 0;
};
struct D3 {
  double x = 0, y = 0, z = 0;
};
inline D3 sub(const D3& a, const D3& b) {
  return {a.x - b.x, a.y - b.y, a.z - b.z};
}
inline D3 add(const D3& a, const D3& b) {
  return {a.x + b.x, a.y + b.y, a.z + b.z};
}
inline D3 scaled(const D3& a, double s) {
  return {a.x * s, a.y * s, a.z * s};
}
inline D3 cross(const D3& a, const D3& b) {
  return {a.y * b.z - a.z * b.y, a.z * b.x - a.x * b.z, a.x * b.y - a.y * b.x};
}
inline double dot(const D3& a, const D3& b) {
  return a.x * b.x + a.y * b.y + a.z * b.z;
}
inline double norm(const D3& a) {
  return std::sqrt(dot(a, a));
}
inline D3 normalized_or(const D3& a, const D3& fallback) {
  const double l = norm(a);
  return l > 0 ? D3{a.x / l, a.y / l, a.z / l} : fallback;
}
inline D3 to_d3(const Vec3& p) {
  return {p[0], p[1], p[2]};
}
inline double cross2(const D2& a, const D2& b, const D2& c) {
  return (b.x - a.x) * (c.y - a.y) - (b.y - a.y) * (c.x - a.x);
}

// Per-face geometry and edge adjacency of the input. Adjacency is by vertex *position*: exporters
// split vertices along hard edges and UV seams (every facet of a flat-shaded CAD part is its own
// island by index), and charts must be able to grow across those edges.
struct Topology {
  std::vector<uint32_t> weld;                  // per vertex: first vertex at the same position
  std::vector<D3> normal;                      // unit normal (zero for degenerate faces)
  std::vector<D3> smooth_normal;               // normal averaged over nearby faces (segmentation)
  std::vector<double> area;                    // 3D area
  std::vector<std::array<uint32_t, 3>> nb;     // face across edge k (k: corner k -> k+1)
  std::vector<std::array<float, 3>> edge_len;  // length of edge k
};

// ---- segmentation (uv_segment.cpp) ----

Topology build_topology(const Mesh& m, int smoothing);

// Grows charts over `faces` (seeds tried in that order; growth stays inside faces with
// in_set[f] != 0), assigning chart ids from next_chart on. Charts stop at max_faces (0: no limit).
void grow_charts(const Topology& t, const std::vector<uint32_t>& faces,
                 const std::vector<char>& in_set, double cos_max, size_t max_faces,
                 const UnwrapOptions& opt, std::vector<uint32_t>& chart_of, uint32_t& next_chart);

// Splits a chart's faces in two halves across their principal axis, then makes every connected
// piece of each half a chart.
void split_chart(const Mesh& m, const Topology& t, const std::vector<uint32_t>& faces,
                 std::vector<char>& in_set, std::vector<uint32_t>& chart_of, uint32_t& next_chart);

// Moves faces whose neighbours across two or three edges lie in one other chart there.
void smooth_chart_borders(const Topology& t, double cos_max, int passes,
                          std::vector<uint32_t>& chart_of, uint32_t nchart);

// Merges neighbouring charts (sharing an edge, or only a vertex within a narrower cone) whose
// union stays within a normal cone of `cos_max`, cheapest merges first (small, well-connected,
// coplanar first). Charts under `small_area` (3D units: a few texels at the expected density)
// merge across creases and wider corners. Returns the number of merges; chart ids are left sparse.
size_t merge_charts(const Mesh& m, const Topology& t, double cos_max, double small_area,
                    const UnwrapOptions& opt, std::vector<uint32_t>& chart_of, uint32_t nchart);

// Merges thin charts (twice their area over their boundary under `thin_width`, 3D units: strips
// whose gutter takes more atlas than they do, like the side faces of a plate or a flange's rim)
// into the neighbour they share the longest border with, across any crease: LSCM unfolds a strip
// about its hinge without distortion. Chart ids are left sparse. Returns the number of merges.
size_t merge_strips(const Topology& t, double thin_width, const UnwrapOptions& opt,
                    std::vector<uint32_t>& chart_of);

// Dense chart ids in order of first face. Returns the chart count.
uint32_t renumber_charts(std::vector<uint32_t>& chart_of);

// Moves zero-area faces out of charts without area into a chart sharing a vertex with them, then
// renumbers densely. Returns the chart count.
uint32_t attach_degenerate_faces(const Mesh& m, const Topology& t, std::vector<uint32_t>& chart_of);

// Gives every connected piece of a chart its own dense id. Returns the new chart count.
uint32_t split_disconnected(const Topology& t, std::vector<uint32_t>& chart_of);

// ---- parameterization (uv_parameterize.cpp) ----

struct Chart {
  std::vector<uint32_t> faces;
  std::vector<uint32_t> verts;                // global (welded) vertex of each local vertex
  std::vector<std::array<uint32_t, 3>> tris;  // local corners per face
  std::vector<D2> uv;                         // per local vertex, in 3D length units
  double area3d = 0;
  bool lscm = false;
  bool needs_split = false;  // folds or overlaps itself in every parameterization
};

// Builds the chart's local vertices from its faces and flattens it: planar projection if flat,
// else LSCM (falling back to planar), then normalizes (UV area = 3D area, minimum-area bounding
// box, landscape, at the origin). Sets needs_split when no parameterization is usable.
// `local_index` is scratch of one entry per mesh vertex, all kNone on entry and on return.
void parameterize_chart(Chart& c, const Mesh& m, const Topology& t, const UnwrapOptions& opt,
                        bool lscm_allowed, double overlap_scale, std::vector<uint32_t>& local_index,
                        std::vector<uint8_t>& scratch);

// ---- packing (uv_pack.cpp) ----

struct Placement {
  int x = 0, y = 0;  // atlas texel of the footprint's corner
  int orient = 0;    // quarter turns
};

struct PackResult {
  std::vector<Placement> place;
  double scale = 0;            // texels per 3D unit
  int gutter = 0;              // gutter actually kept (the requested one unless reduced)
  int passes = 0;              // packing attempts
  double requested_scale = 0;  // the first scale tried: what the density target asked for
  bool grid_fallback = false;  // charts placed in a uniform grid (more charts than texels)
  double grid_cell = 0;        // grid cell size in atlas UV units (grid_fallback only)
};

// Places the charts without overlap in a texture_size square, keeping `gutter` free texels
// around each; the scale (texels per 3D unit) is the largest found that fits, searched within
// the time budget. Never fails: when the charts do not fit, density (then gutter) goes down.
PackResult pack_atlas(const std::vector<Chart>& charts, double total_area, const UnwrapOptions& opt,
                      const std::function<double()>& elapsed);

// Writes the atlas UVs (in [0, 1]) of the chart's local vertices under the packing.
void write_chart_uvs(const Chart& c, const PackResult& pack, size_t chart_index, int texture_size,
                     Vec2* out);

// ---- rasterization shared by packing and diagnostics ----

// Calls fn(x, y) for every texel (within [0, w) x [0, h)) whose centre lies inside the triangle,
// with the top-left rule so a centre on an edge shared by two faces goes to exactly one of them.
// Zero-area triangles cover nothing.
template <class Fn>
void raster_texel_centres(D2 p0, D2 p1, D2 p2, int w, int h, Fn&& fn) {
  D2 p[3] = {p0, p1, p2};
  const double area = cross2(p[0], p[1], p[2]);
  if (!(area != 0) || !std::isfinite(area)) return;
  if (area < 0) std::swap(p[1], p[2]);
  auto owns_edge = [](const D2& a, const D2& b) {  // CCW, y up: "left" edges go down
    const double dx = b.x - a.x, dy = b.y - a.y;
    return dy < 0 || (dy == 0 && dx > 0);
  };
  const bool own[3] = {owns_edge(p[1], p[2]), owns_edge(p[2], p[0]), owns_edge(p[0], p[1])};
  const int x0 = std::max(0, int(std::ceil(std::min({p[0].x, p[1].x, p[2].x}) - 0.5)));
  const int x1 = std::min(w - 1, int(std::floor(std::max({p[0].x, p[1].x, p[2].x}) - 0.5)));
  const int y0 = std::max(0, int(std::ceil(std::min({p[0].y, p[1].y, p[2].y}) - 0.5)));
  const int y1 = std::min(h - 1, int(std::floor(std::max({p[0].y, p[1].y, p[2].y}) - 0.5)));
  for (int y = y0; y <= y1; ++y)
    for (int x = x0; x <= x1; ++x) {
      const D2 c = {x + 0.5, y + 0.5};
      const double e[3] = {cross2(p[1], p[2], c), cross2(p[2], p[0], c), cross2(p[0], p[1], c)};
      bool inside = true;
      for (int k = 0; k < 3 && inside; ++k) inside = e[k] > 0 || (e[k] == 0 && own[k]);
      if (inside) fn(x, y);
    }
}

}  // namespace gen3d::mesh::unwrap_detail
