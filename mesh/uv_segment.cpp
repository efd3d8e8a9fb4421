// Segmentation: face adjacency (by welded position), chart growing over smoothed normals with a
// seam-length cost, border smoothing, and merging of neighbouring charts within a normal cone.
// Sequential and ordered by face / chart index, so the result does not depend on threads.
#include <algorithm>
#include <numeric>
#include <queue>

#include <tbb/parallel_for.h>

#include "mesh/uv_unwrap_internal.h"

namespace gen3d::mesh::unwrap_detail {
namespace {

// Per vertex, the lowest-index vertex with exactly the same position.
std::vector<uint32_t> weld_positions(const Mesh& m) {
  const size_t nv = m.positions.size();
  std::vector<uint32_t> order(nv);
  std::iota(order.begin(), order.end(), 0u);
  auto less = [&](uint32_t a, uint32_t b) {
    const Vec3& p = m.positions[a];
    const Vec3& q = m.positions[b];
    if (p[0] != q[0]) return p[0] < q[0];
    if (p[1] != q[1]) return p[1] < q[1];
    if (p[2] != q[2]) return p[2] < q[2];
    return a < b;
  };
  std::sort(order.begin(), order.end(), less);
  std::vector<uint32_t> weld(nv);
  for (size_t i = 0; i < nv;) {
    size_t j = i;
    while (j < nv && m.positions[order[j]] == m.positions[order[i]]) weld[order[j++]] = order[i];
    i = j;
  }
  return weld;
}

}  // namespace

Topology build_topology(const Mesh& m, int smoothing) {
  const size_t nf = m.faces.size();
  Topology t;
  t.weld = weld_positions(m);
  t.normal.resize(nf);
  t.area.resize(nf);
  t.nb.assign(nf, {kNone, kNone, kNone});
  t.edge_len.resize(nf);
  tbb::parallel_for(size_t(0), nf, [&](size_t f) {
    const D3 a = to_d3(m.positions[m.faces[f][0]]), b = to_d3(m.positions[m.faces[f][1]]),
             c = to_d3(m.positions[m.faces[f][2]]);
    const D3 n = cross(sub(b, a), sub(c, a));
    const double len = norm(n);
    t.area[f] = 0.5 * len;
    t.normal[f] = len > 0 ? D3{n.x / len, n.y / len, n.z / len} : D3{};
    t.edge_len[f] = {float(norm(sub(b, a))), float(norm(sub(c, b))), float(norm(sub(a, c)))};
  });
  // Sort half-edges by undirected key; an edge with exactly two faces is an adjacency, anything
  // else (border, non-manifold) is a boundary.
  struct HalfEdge {
    uint64_t key;
    uint32_t face;
    uint32_t k;
  };
  std::vector<HalfEdge> he(nf * 3);
  for (uint32_t f = 0; f < nf; ++f)
    for (uint32_t k = 0; k < 3; ++k) {
      uint32_t a = t.weld[m.faces[f][k]], b = t.weld[m.faces[f][(k + 1) % 3]];
      if (a > b) std::swap(a, b);
      he[3 * f + k] = {(uint64_t(a) << 32) | b, f, k};
    }
  std::sort(he.begin(), he.end(), [](const HalfEdge& x, const HalfEdge& y) {
    return x.key != y.key ? x.key < y.key : (x.face != y.face ? x.face < y.face : x.k < y.k);
  });
  for (size_t i = 0; i < he.size();) {
    size_t j = i;
    while (j < he.size() && he[j].key == he[i].key) ++j;
    if (j - i == 2 && he[i].face != he[i + 1].face) {
      t.nb[he[i].face][he[i].k] = he[i + 1].face;
      t.nb[he[i + 1].face][he[i + 1].k] = he[i].face;
    }
    i = j;
  }
  // Segmentation looks at smoothed normals: per-face noise otherwise makes chart borders jagged
  // (every face near the cone limit flips in or out), which wastes atlas space. Averaging stops at
  // sharp edges (over 40 degrees) so real creases, like a cube's, stay chart borders.
  const double cos_sharp = std::cos(40.0 * M_PI / 180.0);
  std::vector<D3> cur(nf), next(nf);
  for (size_t f = 0; f < nf; ++f)
    cur[f] = {t.normal[f].x * t.area[f], t.normal[f].y * t.area[f], t.normal[f].z * t.area[f]};
  for (int it = 0; it < smoothing; ++it) {
    tbb::parallel_for(size_t(0), nf, [&](size_t f) {
      D3 s = cur[f];
      for (uint32_t g : t.nb[f])
        if (g != kNone && dot(t.normal[f], t.normal[g]) >= cos_sharp)
          s = {s.x + cur[g].x, s.y + cur[g].y, s.z + cur[g].z};
      next[f] = s;
    });
    std::swap(cur, next);
  }
  t.smooth_normal.resize(nf);
  for (size_t f = 0; f < nf; ++f) {
    const double l = norm(cur[f]);
    t.smooth_normal[f] = l > 0 ? D3{cur[f].x / l, cur[f].y / l, cur[f].z / l} : t.normal[f];
  }
  return t;
}

// Grows charts over `faces` (seeds tried in that order; growth stays inside faces with
// in_set[f] != 0), assigning chart ids from next_chart on. Charts stop at max_faces (0: no limit).
void grow_charts(const Topology& t, const std::vector<uint32_t>& faces,
                 const std::vector<char>& in_set, double cos_max, size_t max_faces,
                 const UnwrapOptions& opt, std::vector<uint32_t>& chart_of, uint32_t& next_chart) {
  struct Item {
    double cost;
    uint32_t face;
    bool operator>(const Item& o) const { return cost != o.cost ? cost > o.cost : face > o.face; }
  };
  std::priority_queue<Item, std::vector<Item>, std::greater<Item>> pq;
  auto cost_of = [&](uint32_t f, uint32_t chart, const D3& n) {
    const double dev = t.area[f] > 0 ? 1.0 - dot(t.smooth_normal[f], n) : 0.0;
    double shared = 0, perim = 0;
    for (int k = 0; k < 3; ++k) {
      perim += t.edge_len[f][k];
      if (t.nb[f][k] != kNone && chart_of[t.nb[f][k]] == chart) shared += t.edge_len[f][k];
    }
    const double seam = perim > 0 ? (perim - 2 * shared) / perim : 0.0;  // in [-1, 1]
    return opt.normal_weight * dev + opt.seam_weight * 0.5 * (seam + 1.0);
  };
  for (uint32_t seed : faces) {
    if (!in_set[seed] || chart_of[seed] != kNone) continue;
    const uint32_t chart = next_chart++;
    D3 sum{};
    size_t count = 0;
    auto add = [&](uint32_t f) {
      chart_of[f] = chart;
      ++count;
      sum = {sum.x + t.smooth_normal[f].x * t.area[f], sum.y + t.smooth_normal[f].y * t.area[f],
             sum.z + t.smooth_normal[f].z * t.area[f]};
    };
    auto mean_normal = [&] {
      const double l = norm(sum);
      return l > 0 ? D3{sum.x / l, sum.y / l, sum.z / l} : t.smooth_normal[seed];
    };
    auto push_neighbours = [&](uint32_t f, const D3& n) {
      for (int k = 0; k < 3; ++k) {
        const uint32_t g = t.nb[f][k];
        if (g != kNone && in_set[g] && chart_of[g] == kNone) pq.push({cost_of(g, chart, n), g});
      }
    };
    add(seed);
    push_neighbours(seed, mean_normal());
    while (!pq.empty()) {
      const Item it = pq.top();
      pq.pop();
      if (chart_of[it.face] != kNone) continue;
      if (max_faces > 0 && count >= max_faces) break;
      const D3 n = mean_normal();
      // Degenerate faces join any neighbour: alone they would each cost a gutter-sized chart.
      if (t.area[it.face] > 0 && dot(t.smooth_normal[it.face], n) < cos_max) continue;
      const double c = cost_of(it.face, chart, n);
      if (c > it.cost + 1e-9) {  // the chart changed since this entry was queued
        pq.push({c, it.face});
        continue;
      }
      add(it.face);
      push_neighbours(it.face, mean_normal());
    }
    pq = {};
  }
}

// Splits a chart's faces in two halves across their principal axis (median of centroid
// projections, ties by face index), then makes every connected piece of each half a chart.
void split_chart(const Mesh& m, const Topology& t, const std::vector<uint32_t>& faces,
                 std::vector<char>& in_set, std::vector<uint32_t>& chart_of, uint32_t& next_chart) {
  std::vector<D3> cen(faces.size());
  D3 mean{};
  for (size_t i = 0; i < faces.size(); ++i) {
    D3 c{};
    for (uint32_t v : m.faces[faces[i]])
      c = {c.x + m.positions[v][0], c.y + m.positions[v][1], c.z + m.positions[v][2]};
    cen[i] = {c.x / 3, c.y / 3, c.z / 3};
    mean = {mean.x + cen[i].x, mean.y + cen[i].y, mean.z + cen[i].z};
  }
  const double n = double(faces.size());
  mean = {mean.x / n, mean.y / n, mean.z / n};
  double cov[3][3] = {};
  for (const D3& c : cen) {
    const double d[3] = {c.x - mean.x, c.y - mean.y, c.z - mean.z};
    for (int a = 0; a < 3; ++a)
      for (int b = 0; b < 3; ++b) cov[a][b] += d[a] * d[b];
  }
  double axis[3] = {1, 0.7, 0.3};  // power iteration from a fixed start: deterministic
  for (int it = 0; it < 32; ++it) {
    double nx[3] = {};
    for (int a = 0; a < 3; ++a)
      for (int b = 0; b < 3; ++b) nx[a] += cov[a][b] * axis[b];
    const double l = std::sqrt(nx[0] * nx[0] + nx[1] * nx[1] + nx[2] * nx[2]);
    if (!(l > 0)) break;
    for (int a = 0; a < 3; ++a) axis[a] = nx[a] / l;
  }
  std::vector<std::pair<double, uint32_t>> proj(faces.size());
  for (size_t i = 0; i < faces.size(); ++i)
    proj[i] = {cen[i].x * axis[0] + cen[i].y * axis[1] + cen[i].z * axis[2], faces[i]};
  std::sort(proj.begin(), proj.end());
  // in_set marks the half a face belongs to (1 or 2). Pieces are the faces of a half connected
  // through shared (welded) vertices: charts merged across cracks have no shared edges, and
  // splitting them by edges would shatter them into their patches.
  for (size_t i = 0; i < proj.size(); ++i) in_set[proj[i].second] = i < proj.size() / 2 ? 1 : 2;
  std::vector<uint32_t> root(faces.size());
  std::iota(root.begin(), root.end(), 0u);
  auto find = [&](uint32_t i) {
    while (root[i] != i) i = root[i] = root[root[i]];
    return i;
  };
  std::vector<std::pair<uint32_t, uint32_t>> corner;  // (welded vertex, index in proj)
  corner.reserve(3 * proj.size());
  for (uint32_t i = 0; i < proj.size(); ++i)
    for (uint32_t v : m.faces[proj[i].second]) corner.push_back({t.weld[v], i});
  std::sort(corner.begin(), corner.end());
  for (size_t i = 0; i < corner.size();) {
    size_t j = i;
    while (j < corner.size() && corner[j].first == corner[i].first) ++j;
    for (size_t a = i + 1; a < j; ++a) {
      const uint32_t fa = corner[i].second, fb = corner[a].second;
      if (in_set[proj[fa].second] == in_set[proj[fb].second]) root[find(fb)] = find(fa);
    }
    // Faces of the other half at this vertex join through their own first face.
    for (size_t a = i + 1; a < j; ++a) {
      const uint32_t fa = corner[a].second;
      for (size_t b = a + 1; b < j; ++b) {
        const uint32_t fb = corner[b].second;
        if (in_set[proj[fa].second] == in_set[proj[fb].second] &&
            in_set[proj[fa].second] != in_set[proj[corner[i].second].second]) {
          root[find(fb)] = find(fa);
          break;
        }
      }
    }
    i = j;
  }
  std::vector<uint32_t> piece_chart(proj.size(), kNone);
  for (uint32_t i = 0; i < proj.size(); ++i) {
    const uint32_t r = find(i);
    if (piece_chart[r] == kNone) piece_chart[r] = next_chart++;
    chart_of[proj[i].second] = piece_chart[r];
  }
  for (uint32_t f : faces) in_set[f] = 0;
}

// Region growing on noisy normals leaves saw-tooth chart borders, which waste atlas space and
// lengthen seams. A face whose neighbours across two or three edges all belong to one other chart
// moves there (if it fits that chart's cone). Sequential, in face order: deterministic.
void smooth_chart_borders(const Topology& t, double cos_max, int passes,
                          std::vector<uint32_t>& chart_of, uint32_t nchart) {
  const size_t nf = chart_of.size();
  std::vector<D3> sum(nchart, D3{});
  for (size_t f = 0; f < nf; ++f) {
    D3& s = sum[chart_of[f]];
    s = {s.x + t.normal[f].x * t.area[f], s.y + t.normal[f].y * t.area[f],
         s.z + t.normal[f].z * t.area[f]};
  }
  for (int pass = 0; pass < passes; ++pass) {
    size_t moved = 0;
    for (uint32_t f = 0; f < nf; ++f) {
      const uint32_t own = chart_of[f];
      uint32_t other = kNone;
      int count = 0;
      for (uint32_t g : t.nb[f]) {
        if (g == kNone || chart_of[g] == own) continue;
        if (other == kNone || chart_of[g] == other) {
          other = chart_of[g];
          ++count;
        }
      }
      if (count < 2) continue;
      const D3& s = sum[other];
      const double l = norm(s);
      if (t.area[f] > 0 && l > 0 && dot(t.normal[f], D3{s.x / l, s.y / l, s.z / l}) < cos_max) {
        continue;
      }
      const D3 w = {t.normal[f].x * t.area[f], t.normal[f].y * t.area[f],
                    t.normal[f].z * t.area[f]};
      sum[own] = {sum[own].x - w.x, sum[own].y - w.y, sum[own].z - w.z};
      sum[other] = {sum[other].x + w.x, sum[other].y + w.y, sum[other].z + w.z};
      chart_of[f] = other;
      ++moved;
    }
    if (moved == 0) break;
  }
}

// Gives every connected piece of a chart its own id (moving faces can disconnect a chart, and
// LSCM needs one connected piece). Returns the new chart count.
uint32_t split_disconnected(const Topology& t, std::vector<uint32_t>& chart_of) {
  const size_t nf = chart_of.size();
  std::vector<uint32_t> out(nf, kNone), stack;
  uint32_t next = 0;
  for (uint32_t seed = 0; seed < nf; ++seed) {
    if (out[seed] != kNone) continue;
    out[seed] = next;
    stack.assign(1, seed);
    while (!stack.empty()) {
      const uint32_t f = stack.back();
      stack.pop_back();
      for (uint32_t g : t.nb[f])
        if (g != kNone && out[g] == kNone && chart_of[g] == chart_of[seed]) {
          out[g] = next;
          stack.push_back(g);
        }
    }
    ++next;
  }
  chart_of = std::move(out);
  return next;
}

// Chart merging, after xatlas's idea of growing charts over faces whose normal stays close to the
// chart's and then merging charts: greedy region growing leaves seams between charts that could be
// one (a CAD part's planar regions cut by growth order, slivers along bevels). Each chart keeps a
// normal cone (axis, half-angle); the cone of a union is bounded from the two cones, so checking a
// merge costs O(1) and the bound is the distortion limit (planar stretch grows as 1 / cos).
size_t merge_charts(const Mesh& m, const Topology& t, double cos_max, double small_area,
                    const UnwrapOptions& opt, std::vector<uint32_t>& chart_of, uint32_t nchart) {
  struct Stats {
    D3 normal_sum;     // area-weighted sum of face normals
    D3 axis;           // cone axis (normalized normal_sum)
    double half = 0;   // cone half-angle (radians) bounding every face normal
    double area = 0;   // 3D area
    double perim = 0;  // boundary length (seams and mesh borders)
    size_t faces = 0;
    uint32_t version = 0;
    std::vector<std::pair<uint32_t, double>> adj;  // neighbour chart, shared edge length
  };
  const size_t nf = chart_of.size();
  const double max_angle = std::acos(std::clamp(cos_max, -1.0, 1.0));
  const double flat_angle = std::clamp(double(opt.flat_angle_deg), 0.0, 89.0) * M_PI / 180.0;
  // Charts whose mean normals differ by more than the normal-smoothing crease angle (40 degrees)
  // meet at a crease.
  const double crease_angle = 40.0 * M_PI / 180.0;
  // Planar projection over a cone of 25 degrees stretches by at most 1 / cos(25) = 1.10.
  const double corner_angle = std::min(max_angle, std::max(flat_angle, 25.0 * M_PI / 180.0));
  // A chart of a few texels may stretch more (1 / cos(50) = 1.56): nobody sees it, everybody
  // sees the atlas space its gutter costs.
  const double tiny_corner_angle = std::min(max_angle, std::max(corner_angle, 50.0 * M_PI / 180.0));
  std::vector<Stats> st(nchart);
  for (size_t f = 0; f < nf; ++f) {
    Stats& s = st[chart_of[f]];
    s.normal_sum = add(s.normal_sum, scaled(t.smooth_normal[f], t.area[f]));
    s.area += t.area[f];
    ++s.faces;
  }
  for (Stats& s : st) s.axis = normalized_or(s.normal_sum, D3{});
  auto angle = [](const D3& a, const D3& b) { return std::acos(std::clamp(dot(a, b), -1.0, 1.0)); };
  for (size_t f = 0; f < nf; ++f) {
    Stats& s = st[chart_of[f]];
    if (t.area[f] > 0 && norm(s.axis) > 0)
      s.half = std::max(s.half, angle(t.smooth_normal[f], s.axis));
  }
  struct Shared {
    uint32_t a, b;
    double len;
  };
  std::vector<Shared> shared;
  for (uint32_t f = 0; f < nf; ++f)
    for (int k = 0; k < 3; ++k) {
      const uint32_t g = t.nb[f][k], cf = chart_of[f];
      if (g != kNone && chart_of[g] == cf) continue;
      st[cf].perim += t.edge_len[f][k];
      if (g != kNone && cf < chart_of[g]) shared.push_back({cf, chart_of[g], t.edge_len[f][k]});
    }
  // Charts that only meet at vertices (CAD tessellations leave cracks and T-junctions between
  // patches, so neighbouring patches share corners but no edge) become candidates with a zero
  // shared length.
  {
    std::vector<std::pair<uint32_t, uint32_t>> corner;  // (welded vertex, chart)
    corner.reserve(3 * nf);
    for (uint32_t f = 0; f < nf; ++f)
      for (uint32_t v : m.faces[f]) corner.push_back({t.weld[v], chart_of[f]});
    std::sort(corner.begin(), corner.end());
    corner.erase(std::unique(corner.begin(), corner.end()), corner.end());
    for (size_t i = 0; i < corner.size();) {
      size_t j = i;
      while (j < corner.size() && corner[j].first == corner[i].first) ++j;
      for (size_t a = i; a < j && j - i <= 16; ++a)  // a bounded fan: hubs add nothing useful
        for (size_t b = a + 1; b < j; ++b)
          shared.push_back({corner[a].second, corner[b].second, 0.0});
      i = j;
    }
  }
  std::sort(shared.begin(), shared.end(),
            [](const Shared& x, const Shared& y) { return x.a != y.a ? x.a < y.a : x.b < y.b; });
  for (size_t i = 0; i < shared.size();) {
    size_t j = i;
    double len = 0;
    while (j < shared.size() && shared[j].a == shared[i].a && shared[j].b == shared[i].b)
      len += shared[j++].len;
    st[shared[i].a].adj.push_back({shared[i].b, len});
    st[shared[i].b].adj.push_back({shared[i].a, len});
    i = j;
  }
  std::vector<uint32_t> parent(nchart);
  std::iota(parent.begin(), parent.end(), 0u);
  auto find = [&](uint32_t c) {
    while (parent[c] != c) c = parent[c] = parent[parent[c]];
    return c;
  };
  // Cone of the union of two charts: the new axis plus the farther of the two cones around it.
  auto merged_cone = [&](const Stats& a, const Stats& b, D3& axis) {
    axis = normalized_or(add(a.normal_sum, b.normal_sum), D3{});
    double half = 0;
    for (const Stats* s : {&a, &b})
      if (norm(s->axis) > 0) half = std::max(half, angle(axis, s->axis) + s->half);
    return half;
  };
  struct Candidate {
    double cost;
    uint32_t a, b, va, vb;
    bool operator>(const Candidate& o) const {
      if (cost != o.cost) return cost > o.cost;
      return a != o.a ? a > o.a : b > o.b;
    }
  };
  std::priority_queue<Candidate, std::vector<Candidate>, std::greater<Candidate>> heap;
  // Cost: normal deviation of the union plus how little of the smaller chart's boundary is shared
  // (long shared borders remove long seams and make rounder charts); slivers rank first.
  auto consider = [&](uint32_t a, uint32_t b, double len) {
    if (a == b) return;
    const Stats& sa = st[a];
    const Stats& sb = st[b];
    if (opt.max_chart_faces > 0 && sa.faces + sb.faces > opt.max_chart_faces) return;
    D3 axis;
    const double half = merged_cone(sa, sb, axis);
    if (half > max_angle) return;
    // Near-coplanar neighbours only: a crease between two charts (a box's edges) stays a seam.
    // A sliver (under 5% of its neighbour's area) or a chart of a few texels (its gutter would
    // take more room than itself) is absorbed across any crease the cone allows.
    const double smaller = std::min(sa.area, sb.area);
    const bool tiny = smaller < small_area;
    const bool sliver = tiny || smaller < 0.05 * std::max(sa.area, sb.area);
    if (!sliver && norm(sa.axis) > 0 && norm(sb.axis) > 0 && angle(sa.axis, sb.axis) > crease_angle)
      return;
    const double min_perim = std::max(std::min(sa.perim, sb.perim), 1e-30);
    const double seam = 1.0 - std::min(1.0, len / min_perim);
    // Curved unions must share a real border: joined at a corner they make arms that pack badly,
    // and pieces without a shared edge are flattened by projection (LSCM needs one connected
    // piece), so their cone must stay narrow. Coplanar ones flatten exactly whatever their shape.
    if (len <= 0 ? half > (tiny ? tiny_corner_angle : corner_angle)
                 : (!tiny && half > flat_angle && seam > 0.9))
      return;
    const double cost = opt.normal_weight * (1.0 - std::cos(half)) + opt.seam_weight * seam;
    heap.push({cost, std::min(a, b), std::max(a, b), st[std::min(a, b)].version,
               st[std::max(a, b)].version});
  };
  for (uint32_t a = 0; a < nchart; ++a)
    for (const auto& [b, len] : st[a].adj)
      if (a < b) consider(a, b, len);
  size_t merges = 0;
  while (!heap.empty()) {
    const Candidate c = heap.top();
    heap.pop();
    if (find(c.a) != c.a || find(c.b) != c.b) continue;                // one side was merged away
    if (st[c.a].version != c.va || st[c.b].version != c.vb) continue;  // re-queued since
    // Keep the larger adjacency list, append the other, then re-aggregate by current root.
    uint32_t keep = c.a, gone = c.b;
    if (st[keep].adj.size() < st[gone].adj.size()) std::swap(keep, gone);
    Stats& k = st[keep];
    Stats& g = st[gone];
    double shared_len = 0;
    for (const auto& [n, len] : k.adj)
      if (find(n) == gone) shared_len += len;
    D3 axis;
    k.half = merged_cone(k, g, axis);
    k.axis = axis;
    k.normal_sum = add(k.normal_sum, g.normal_sum);
    k.area += g.area;
    k.perim = std::max(0.0, k.perim + g.perim - 2 * shared_len);
    k.faces += g.faces;
    k.adj.insert(k.adj.end(), g.adj.begin(), g.adj.end());
    g.adj = {};
    parent[gone] = keep;
    ++k.version;
    ++merges;
    for (auto& [n, len] : k.adj) n = find(n);
    std::sort(k.adj.begin(), k.adj.end());
    std::vector<std::pair<uint32_t, double>> merged;
    for (const auto& [n, len] : k.adj) {
      if (n == keep) continue;
      if (!merged.empty() && merged.back().first == n)
        merged.back().second += len;
      else
        merged.push_back({n, len});
    }
    k.adj = std::move(merged);
    for (const auto& [n, len] : k.adj) consider(keep, n, len);
  }
  for (uint32_t& c : chart_of) c = find(c);
  return merges;
}

size_t merge_strips(const Topology& t, double thin_width, const UnwrapOptions& opt,
                    std::vector<uint32_t>& chart_of) {
  const size_t nf = chart_of.size();
  uint32_t nchart = 0;
  for (uint32_t c : chart_of) nchart = std::max(nchart, c + 1);
  std::vector<double> area(nchart, 0.0), perim(nchart, 0.0);
  std::vector<size_t> faces(nchart, 0);
  std::vector<D3> normal(nchart);
  struct Shared {
    uint32_t a, b;
    double len;
  };
  std::vector<Shared> shared;
  for (uint32_t f = 0; f < nf; ++f) {
    const uint32_t cf = chart_of[f];
    area[cf] += t.area[f];
    normal[cf] = add(normal[cf], scaled(t.normal[f], t.area[f]));
    ++faces[cf];
    for (int k = 0; k < 3; ++k) {
      const uint32_t g = t.nb[f][k];
      if (g != kNone && chart_of[g] == cf) continue;
      perim[cf] += t.edge_len[f][k];
      if (g != kNone) shared.push_back({cf, chart_of[g], t.edge_len[f][k]});
    }
  }
  std::sort(shared.begin(), shared.end(),
            [](const Shared& x, const Shared& y) { return x.a != y.a ? x.a < y.a : x.b < y.b; });
  // Flat charts (every normal within the flat angle of the mean): a strip hinged on one unfolds
  // without distortion. Curved targets (organic meshes) fold too often to be worth the solve.
  const double cos_flat =
      std::cos(std::clamp(double(opt.flat_angle_deg), 0.0, 89.0) * M_PI / 180.0);
  std::vector<char> flat(nchart, 1);
  for (uint32_t f = 0; f < nf; ++f) {
    const uint32_t c = chart_of[f];
    if (t.area[f] > 0 && dot(t.normal[f], normalized_or(normal[c], D3{})) < cos_flat) flat[c] = 0;
  }
  // Per thin chart, the neighbour it shares the longest border with (ties: the lower id).
  auto thin = [&](uint32_t c) { return area[c] > 0 && 2 * area[c] < thin_width * perim[c]; };
  const double crease_cos = std::cos(40.0 * M_PI / 180.0);
  std::vector<uint32_t> target(nchart, kNone);
  std::vector<double> target_len(nchart, 0.0);
  for (size_t i = 0; i < shared.size();) {
    size_t j = i;
    double len = 0;
    while (j < shared.size() && shared[j].a == shared[i].a && shared[j].b == shared[i].b)
      len += shared[j++].len;
    const uint32_t a = shared[i].a, b = shared[i].b;
    i = j;
    // A long side, not a corner: unfolding about a short hinge would swing the strip wide.
    if (!thin(a) || !(len >= 0.3 * perim[a]) || !(area[b] > 0) || !flat[b]) continue;
    // Across a crease only (mean normals over 40 degrees apart, the normal merge's crease
    // angle: a plate's side, a flange's rim); on a smooth surface the normal merge decides.
    const D3 na = normalized_or(normal[a], D3{}), nb = normalized_or(normal[b], D3{});
    if (dot(na, nb) > crease_cos) continue;
    if (len > target_len[a]) target_len[a] = len, target[a] = b;
  }
  // Thinnest first, into the neighbour's current chart; a chart never grows past the face limit.
  std::vector<uint32_t> order;
  for (uint32_t c = 0; c < nchart; ++c)
    if (target[c] != kNone) order.push_back(c);
  std::sort(order.begin(), order.end(), [&](uint32_t x, uint32_t y) {
    const double wx = area[x] / perim[x], wy = area[y] / perim[y];
    return wx != wy ? wx < wy : x < y;
  });
  std::vector<uint32_t> parent(nchart);
  std::iota(parent.begin(), parent.end(), 0u);
  auto find = [&](uint32_t c) {
    while (parent[c] != c) c = parent[c] = parent[parent[c]];
    return c;
  };
  size_t merges = 0;
  for (uint32_t c : order) {
    const uint32_t a = find(c), b = find(target[c]);
    if (a == b) continue;
    if (opt.max_chart_faces > 0 && faces[a] + faces[b] > opt.max_chart_faces) continue;
    parent[a] = b;
    faces[b] += faces[a];
    ++merges;
  }
  for (uint32_t& c : chart_of) c = find(c);
  return merges;
}

uint32_t renumber_charts(std::vector<uint32_t>& chart_of) {
  uint32_t next = 0;
  std::vector<uint32_t> id(chart_of.size(), kNone);
  for (uint32_t& c : chart_of) {
    if (id[c] == kNone) id[c] = next++;
    c = id[c];
  }
  return next;
}

// A chart of zero-area faces only would cost a gutter-sized box in the atlas for nothing (CAD
// exports carry thousands of them, filling T-junctions). Each such face joins the lowest-numbered
// chart with area that shares a vertex with it, found through chains of zero-area faces; there
// its UVs come out as a zero-area triangle on or next to that chart's own.
uint32_t attach_degenerate_faces(const Mesh& m, const Topology& t,
                                 std::vector<uint32_t>& chart_of) {
  const size_t nf = chart_of.size();
  uint32_t nchart = renumber_charts(chart_of);
  std::vector<double> chart_area(nchart, 0.0);
  for (size_t f = 0; f < nf; ++f) chart_area[chart_of[f]] += t.area[f];
  std::vector<uint32_t> lonely;  // faces of zero-area charts
  for (uint32_t f = 0; f < nf; ++f)
    if (!(chart_area[chart_of[f]] > 0)) lonely.push_back(f);
  if (lonely.empty()) return nchart;
  // Per welded vertex, the lowest chart with area around it (kNone when none).
  std::vector<uint32_t> vertex_chart(m.positions.size(), kNone);
  for (uint32_t f = 0; f < nf; ++f)
    if (chart_area[chart_of[f]] > 0)
      for (uint32_t v : m.faces[f])
        vertex_chart[t.weld[v]] = std::min(vertex_chart[t.weld[v]], chart_of[f]);
  // Chains of zero-area faces: each pass reaches one face further; bounded.
  for (int pass = 0; pass < 8 && !lonely.empty(); ++pass) {
    std::vector<uint32_t> left;
    std::vector<std::pair<uint32_t, uint32_t>> found;  // applied after the pass: order-independent
    for (uint32_t f : lonely) {
      uint32_t best = kNone;
      for (uint32_t v : m.faces[f]) best = std::min(best, vertex_chart[t.weld[v]]);
      if (best == kNone)
        left.push_back(f);
      else
        found.push_back({f, best});
    }
    if (found.empty()) break;
    for (const auto& [f, c] : found) {
      chart_of[f] = c;
      for (uint32_t v : m.faces[f]) vertex_chart[t.weld[v]] = std::min(vertex_chart[t.weld[v]], c);
    }
    lonely = std::move(left);
  }
  // What is left touches no chart with area (zero-area faces on their own): faces sharing a
  // vertex share one chart, so a cluster of them costs one box, not one each.
  std::vector<uint32_t> vertex_cluster(m.positions.size(), kNone);
  for (uint32_t f : lonely) {
    uint32_t c = chart_of[f];
    for (uint32_t v : m.faces[f]) c = std::min(c, vertex_cluster[t.weld[v]]);
    chart_of[f] = c;
    for (uint32_t v : m.faces[f]) vertex_cluster[t.weld[v]] = c;
  }
  return renumber_charts(chart_of);
}

}  // namespace gen3d::mesh::unwrap_detail
