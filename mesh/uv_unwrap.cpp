// uv_unwrap: segmentation (sequential, deterministic) -> per-chart parameterization (parallel,
// each chart independent) -> packing (sequential placement, parallel search). Parallel parts
// write only to their own chart's slot and reductions break ties by index, so results do not
// depend on the thread count.
#include "mesh/uv_unwrap.h"

#include <algorithm>
#include <bit>
#include <chrono>
#include <cmath>
#include <limits>
#include <numeric>
#include <queue>
#include <string>

#include <spdlog/spdlog.h>
#include <tbb/enumerable_thread_specific.h>
#include <tbb/parallel_for.h>
#include <tbb/parallel_reduce.h>
#include <Eigen/Sparse>
#include <Eigen/SparseCholesky>

#include "mesh/error.h"

namespace gen3d::mesh {
namespace {

using Clock = std::chrono::steady_clock;
constexpr uint32_t kNone = std::numeric_limits<uint32_t>::max();

struct D2 {
  double x = 0, y = 0;
};
struct D3 {
  double x = 0, y = 0, z = 0;
};
D3 sub(const D3& a, const D3& b) {
  return {a.x - b.x, a.y - b.y, a.z - b.z};
}
D3 cross(const D3& a, const D3& b) {
  return {a.y * b.z - a.z * b.y, a.z * b.x - a.x * b.z, a.x * b.y - a.y * b.x};
}
double dot(const D3& a, const D3& b) {
  return a.x * b.x + a.y * b.y + a.z * b.z;
}
double norm(const D3& a) {
  return std::sqrt(dot(a, a));
}
D3 to_d3(const Vec3& p) {
  return {p[0], p[1], p[2]};
}
double cross2(const D2& a, const D2& b, const D2& c) {
  return (b.x - a.x) * (c.y - a.y) - (b.y - a.y) * (c.x - a.x);
}

// Per-face geometry and edge adjacency of the input.
struct Topology {
  std::vector<D3> normal;                      // unit normal (zero for degenerate faces)
  std::vector<D3> smooth_normal;               // normal averaged over nearby faces (segmentation)
  std::vector<double> area;                    // 3D area
  std::vector<std::array<uint32_t, 3>> nb;     // face across edge k (k: corner k -> k+1)
  std::vector<std::array<float, 3>> edge_len;  // length of edge k
};

Topology build_topology(const Mesh& m, int smoothing) {
  const size_t nf = m.faces.size();
  Topology t;
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
      uint32_t a = m.faces[f][k], b = m.faces[f][(k + 1) % 3];
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
  // in_set marks the half a face belongs to (1 or 2); pieces are flood-filled within a half.
  for (size_t i = 0; i < proj.size(); ++i) in_set[proj[i].second] = i < proj.size() / 2 ? 1 : 2;
  std::vector<uint32_t> stack;
  for (const auto& [key, seed] : proj) {
    (void)key;
    if (chart_of[seed] != kNone) continue;
    const uint32_t chart = next_chart++;
    chart_of[seed] = chart;
    stack.assign(1, seed);
    while (!stack.empty()) {
      const uint32_t f = stack.back();
      stack.pop_back();
      for (uint32_t g : t.nb[f])
        if (g != kNone && in_set[g] == in_set[seed] && chart_of[g] == kNone) {
          chart_of[g] = chart;
          stack.push_back(g);
        }
    }
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

struct Chart {
  std::vector<uint32_t> faces;
  std::vector<uint32_t> verts;                // global vertex of each local vertex
  std::vector<std::array<uint32_t, 3>> tris;  // local corners per face
  std::vector<D2> uv;                         // per local vertex, in 3D length units
  double area3d = 0;
  bool lscm = false;
  std::vector<uint32_t> bad_faces;  // faces that fold in every parameterization
};

D3 chart_normal(const Chart& c, const Topology& t) {
  D3 s{};
  for (uint32_t f : c.faces)
    s = {s.x + t.normal[f].x * t.area[f], s.y + t.normal[f].y * t.area[f],
         s.z + t.normal[f].z * t.area[f]};
  const double l = norm(s);
  return l > 0 ? D3{s.x / l, s.y / l, s.z / l} : D3{0, 0, 1};
}

void planar_projection(Chart& c, const Mesh& m, const D3& n) {
  // Tangent from the axis least aligned with n, so the basis is fixed by n alone.
  const D3 axis = std::abs(n.x) <= std::abs(n.y) && std::abs(n.x) <= std::abs(n.z)
                      ? D3{1, 0, 0}
                      : (std::abs(n.y) <= std::abs(n.z) ? D3{0, 1, 0} : D3{0, 0, 1});
  D3 tu = cross(axis, n);
  const double l = norm(tu);
  tu = {tu.x / l, tu.y / l, tu.z / l};
  const D3 tv = cross(n, tu);  // (tu, tv, n) right-handed: CCW faces stay CCW
  c.uv.resize(c.verts.size());
  for (size_t i = 0; i < c.verts.size(); ++i) {
    const D3 p = to_d3(m.positions[c.verts[i]]);
    c.uv[i] = {dot(p, tu), dot(p, tv)};
  }
}

// Faces (chart-local indices) whose UV triangle is folded (non-positive area) while their 3D
// triangle is not degenerate.
std::vector<uint32_t> folded_faces(const Chart& c, const Topology& t) {
  std::vector<uint32_t> out;
  for (size_t i = 0; i < c.faces.size(); ++i) {
    if (t.area[c.faces[i]] <= 0) continue;
    const auto& tr = c.tris[i];
    if (!(cross2(c.uv[tr[0]], c.uv[tr[1]], c.uv[tr[2]]) > 0)) out.push_back(uint32_t(i));
  }
  return out;
}

// Least-squares conformal map (Levy et al. 2002) with the two farthest-apart vertices pinned at
// their planar-projection positions. Returns false when the solve fails.
bool lscm(Chart& c, const Mesh& m, const Topology& t) {
  const size_t nv = c.verts.size();
  if (nv < 3) return false;
  // Pins: the vertex farthest from vertex 0, then the one farthest from that (in the planar map).
  auto farthest = [&](size_t from) {
    size_t best = from;
    double bd = -1;
    for (size_t i = 0; i < nv; ++i) {
      const double d = std::hypot(c.uv[i].x - c.uv[from].x, c.uv[i].y - c.uv[from].y);
      if (d > bd) bd = d, best = i;
    }
    return best;
  };
  const size_t p0 = farthest(0), p1 = farthest(p0);
  if (p0 == p1) return false;
  std::vector<int> var(nv);  // unknown index of local vertex (u at 2i, v at 2i+1), -1 if pinned
  int nfree = 0;
  for (size_t i = 0; i < nv; ++i) var[i] = (i == p0 || i == p1) ? -1 : nfree++;
  const D2 pin[2] = {c.uv[p0], c.uv[p1]};
  auto pin_of = [&](size_t i) { return i == p0 ? pin[0] : pin[1]; };

  std::vector<Eigen::Triplet<double>> trip;
  trip.reserve(c.faces.size() * 12);
  std::vector<double> rhs_rows;
  rhs_rows.reserve(c.faces.size() * 2);
  int row = 0;
  for (size_t i = 0; i < c.faces.size(); ++i) {
    const uint32_t f = c.faces[i];
    if (t.area[f] <= 0) continue;
    const auto& tr = c.tris[i];
    // Triangle in its own orthonormal frame.
    const D3 a = to_d3(m.positions[c.verts[tr[0]]]), b = to_d3(m.positions[c.verts[tr[1]]]),
             cc = to_d3(m.positions[c.verts[tr[2]]]);
    const D3 e1 = sub(b, a), e2 = sub(cc, a);
    const double l1 = norm(e1);
    if (!(l1 > 0)) continue;
    const D3 x = {e1.x / l1, e1.y / l1, e1.z / l1};
    const D3 y = cross(t.normal[f], x);
    const D2 q[3] = {{0, 0}, {l1, 0}, {dot(e2, x), dot(e2, y)}};
    const double w = 1.0 / std::sqrt(2.0 * t.area[f]);
    // W_j = q_{j+2} - q_{j+1} (as complex numbers).
    double wr[3], wi[3];
    for (int j = 0; j < 3; ++j) {
      wr[j] = (q[(j + 2) % 3].x - q[(j + 1) % 3].x) * w;
      wi[j] = (q[(j + 2) % 3].y - q[(j + 1) % 3].y) * w;
    }
    // Re(sum W_j U_j) = sum wr u - wi v;  Im = sum wi u + wr v.
    double r0 = 0, r1 = 0;
    for (int j = 0; j < 3; ++j) {
      const size_t lv = tr[j];
      if (var[lv] < 0) {
        const D2 p = pin_of(lv);
        r0 -= wr[j] * p.x - wi[j] * p.y;
        r1 -= wi[j] * p.x + wr[j] * p.y;
      } else {
        trip.emplace_back(row, 2 * var[lv], wr[j]);
        trip.emplace_back(row, 2 * var[lv] + 1, -wi[j]);
        trip.emplace_back(row + 1, 2 * var[lv], wi[j]);
        trip.emplace_back(row + 1, 2 * var[lv] + 1, wr[j]);
      }
    }
    rhs_rows.push_back(r0);
    rhs_rows.push_back(r1);
    row += 2;
  }
  if (nfree == 0) return true;
  Eigen::SparseMatrix<double> A(row, 2 * nfree);
  A.setFromTriplets(trip.begin(), trip.end());
  const Eigen::Map<const Eigen::VectorXd> rhs(rhs_rows.data(), row);
  const Eigen::SparseMatrix<double> AtA = A.transpose() * A;
  const Eigen::VectorXd Atb = A.transpose() * rhs;
  Eigen::SimplicialLDLT<Eigen::SparseMatrix<double>> solver(AtA);
  if (solver.info() != Eigen::Success) return false;
  const Eigen::VectorXd x = solver.solve(Atb);
  if (solver.info() != Eigen::Success || !x.allFinite()) return false;
  for (size_t i = 0; i < nv; ++i)
    if (var[i] >= 0) c.uv[i] = {x[2 * var[i]], x[2 * var[i] + 1]};
  return true;
}

// Rescales to UV area == 3D area, rotates to the minimum-area bounding rectangle (landscape), and
// moves the minimum corner to the origin.
void normalize_chart(Chart& c) {
  double uv_area = 0;
  for (const auto& tr : c.tris)
    uv_area += 0.5 * std::abs(cross2(c.uv[tr[0]], c.uv[tr[1]], c.uv[tr[2]]));
  if (uv_area > 0 && c.area3d > 0) {
    const double s = std::sqrt(c.area3d / uv_area);
    for (D2& p : c.uv) p = {p.x * s, p.y * s};
  }
  // Convex hull (monotone chain) of the chart's UVs.
  std::vector<D2> pts = c.uv;
  std::sort(pts.begin(), pts.end(),
            [](const D2& a, const D2& b) { return a.x != b.x ? a.x < b.x : a.y < b.y; });
  std::vector<D2> hull(2 * pts.size());
  size_t k = 0;
  for (size_t i = 0; i < pts.size(); ++i) {
    while (k >= 2 && cross2(hull[k - 2], hull[k - 1], pts[i]) <= 0) --k;
    hull[k++] = pts[i];
  }
  for (size_t i = pts.size() - 1, lo = k + 1; i-- > 0;) {
    while (k >= lo && cross2(hull[k - 2], hull[k - 1], pts[i]) <= 0) --k;
    hull[k++] = pts[i];
  }
  hull.resize(k > 1 ? k - 1 : k);
  double best_area = std::numeric_limits<double>::infinity(), best_c = 1, best_s = 0;
  for (size_t i = 0; i < hull.size(); ++i) {
    const D2& a = hull[i];
    const D2& b = hull[(i + 1) % hull.size()];
    const double len = std::hypot(b.x - a.x, b.y - a.y);
    if (!(len > 0)) continue;
    const double cs = (b.x - a.x) / len, sn = (b.y - a.y) / len;
    double x0 = 1e300, x1 = -1e300, y0 = 1e300, y1 = -1e300;
    for (const D2& p : hull) {
      const double x = p.x * cs + p.y * sn, y = -p.x * sn + p.y * cs;
      x0 = std::min(x0, x), x1 = std::max(x1, x), y0 = std::min(y0, y), y1 = std::max(y1, y);
    }
    const double area = (x1 - x0) * (y1 - y0);
    if (area < best_area * (1 - 1e-9)) {
      best_area = area, best_c = cs, best_s = sn;
      if (y1 - y0 > x1 - x0) {  // keep the long side horizontal: rotate a further 90 degrees
        const double c2 = -best_s, s2 = best_c;
        best_c = c2, best_s = s2;
      }
    }
  }
  double x0 = 1e300, y0 = 1e300;
  for (D2& p : c.uv) {
    p = {p.x * best_c + p.y * best_s, -p.x * best_s + p.y * best_c};
    x0 = std::min(x0, p.x), y0 = std::min(y0, p.y);
  }
  for (D2& p : c.uv) p = {p.x - x0, p.y - y0};
}

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

// True when two faces of the chart cover the same texel centre at `scale` texels per unit, i.e.
// the chart overlaps itself (a fold that is not a local flip). Call after normalize_chart.
bool self_overlaps(const Chart& c, double scale, std::vector<uint8_t>& buf) {
  double umax = 0, vmax = 0;
  for (const D2& p : c.uv) umax = std::max(umax, p.x), vmax = std::max(vmax, p.y);
  const int w = int(std::ceil(umax * scale + 1.0)), h = int(std::ceil(vmax * scale + 1.0));
  if (double(w) * h > 1e8) return false;  // far larger than any atlas: nothing to learn
  buf.assign(size_t(w) * h, 0);
  bool overlap = false;
  for (const auto& tr : c.tris) {
    auto at = [&](int k) { return D2{c.uv[tr[k]].x * scale + 0.5, c.uv[tr[k]].y * scale + 0.5}; };
    raster_texel_centres(at(0), at(1), at(2), w, h, [&](int x, int y) {
      uint8_t& b = buf[size_t(y) * w + x];
      overlap |= b != 0;
      b = 1;
    });
    if (overlap) return true;
  }
  return false;
}

// ---- packing ----

// One orientation of a chart's conservative footprint, as column profiles for skyline packing.
struct Profile {
  int w = 0;                       // raw width in texels
  int top_max = 0;                 // highest covered row
  std::vector<int> bottom, top;    // per raw column: lowest / highest covered row (-1 if empty)
  std::vector<int> dbottom, dtop;  // per dilated column (w + 2 gutter): bottom - g / top + g
};

// A chart's footprint at one scale in the four 90-degree orientations (all keep UV winding).
struct Footprint {
  int w0 = 0, h0 = 0;  // bitmap size in orientation 0
  Profile orient[4];
};

// Texel-space position of chart point q (orientation-0 texel coordinates) in orientation r.
D2 orient_point(D2 q, int r, int w0, int h0) {
  switch (r) {
    case 1:
      return {h0 - q.y, q.x};
    case 2:
      return {w0 - q.x, h0 - q.y};
    case 3:
      return {q.y, w0 - q.x};
    default:
      return q;
  }
}

// Does the triangle (texel units) overlap the unit square [x, x+1] x [y, y+1]? Separating axes:
// the square's axes (caller's bounding box) and the triangle's three edge normals.
bool tri_overlaps_texel(const D2 p[3], double orient, int x, int y) {
  for (int e = 0; e < 3; ++e) {
    const D2& a = p[e];
    const D2& b = p[(e + 1) % 3];
    // Inside of edge a->b is where orient * cross(b - a, q - a) >= 0; the square is outside if
    // its most-inside corner is still outside.
    const double nx = -(b.y - a.y) * orient, ny = (b.x - a.x) * orient;
    const double cx = nx > 0 ? x + 1 : x, cy = ny > 0 ? y + 1 : y;
    if (nx * (cx - a.x) + ny * (cy - a.y) < -1e-9) return false;
  }
  return true;
}

void finish_profile(Profile& p, int gutter) {
  p.top_max = *std::max_element(p.top.begin(), p.top.end());
  p.dbottom.assign(p.w + 2 * gutter, std::numeric_limits<int>::max());
  p.dtop.assign(p.w + 2 * gutter, std::numeric_limits<int>::min());
  for (int x = 0; x < p.w; ++x) {
    if (p.bottom[x] < 0) continue;
    for (int d = 0; d <= 2 * gutter; ++d) {
      p.dbottom[x + d] = std::min(p.dbottom[x + d], p.bottom[x] - gutter);
      p.dtop[x + d] = std::max(p.dtop[x + d], p.top[x] + gutter);
    }
  }
}

// Chart texel coordinates: uv * scale + 0.5, so the chart starts half a texel into its box.
Footprint rasterize_footprint(const Chart& c, double scale, int gutter, bool all_orientations,
                              std::vector<uint8_t>& bitmap) {
  double umax = 0, vmax = 0;
  for (const D2& p : c.uv) umax = std::max(umax, p.x), vmax = std::max(vmax, p.y);
  Footprint fp;
  const int w = fp.w0 = int(std::ceil(umax * scale + 1.0));
  const int h = fp.h0 = int(std::ceil(vmax * scale + 1.0));
  bitmap.assign(size_t(w) * h, 0);
  for (const auto& tr : c.tris) {
    D2 p[3];
    for (int k = 0; k < 3; ++k) p[k] = {c.uv[tr[k]].x * scale + 0.5, c.uv[tr[k]].y * scale + 0.5};
    const double orient = cross2(p[0], p[1], p[2]) >= 0 ? 1.0 : -1.0;
    const int x0 = std::max(0, int(std::floor(std::min({p[0].x, p[1].x, p[2].x}))));
    const int x1 = std::min(w - 1, int(std::floor(std::max({p[0].x, p[1].x, p[2].x}))));
    const int y0 = std::max(0, int(std::floor(std::min({p[0].y, p[1].y, p[2].y}))));
    const int y1 = std::min(h - 1, int(std::floor(std::max({p[0].y, p[1].y, p[2].y}))));
    for (int y = y0; y <= y1; ++y)
      for (int x = x0; x <= x1; ++x) {
        uint8_t& b = bitmap[size_t(y) * w + x];
        if (!b && tri_overlaps_texel(p, orient, x, y)) b = 1;
      }
  }
  // Column extents (orientations 0 and 2) and row extents (1 and 3) of the bitmap.
  std::vector<int> cmin(w, -1), cmax(w, -1), rmin(h, -1), rmax(h, -1);
  for (int y = 0; y < h; ++y)
    for (int x = 0; x < w; ++x)
      if (bitmap[size_t(y) * w + x]) {
        if (cmin[x] < 0) cmin[x] = y;
        cmax[x] = y;
        if (rmin[y] < 0) rmin[y] = x;
        rmax[y] = x;
      }
  const int nor = all_orientations ? 4 : 1;
  for (int r = 0; r < nor; ++r) {
    Profile& p = fp.orient[r];
    p.w = (r % 2) ? h : w;
    p.bottom.assign(p.w, -1);
    p.top.assign(p.w, -1);
    for (int X = 0; X < p.w; ++X) {
      int lo = -1, hi = -1;
      switch (r) {
        case 0:
          lo = cmin[X], hi = cmax[X];
          break;
        case 1:
          lo = rmin[h - 1 - X], hi = rmax[h - 1 - X];
          break;  // (x,y) -> (h-1-y, x)
        case 2:   // (x,y) -> (w-1-x, h-1-y)
          if (cmin[w - 1 - X] >= 0) lo = h - 1 - cmax[w - 1 - X], hi = h - 1 - cmin[w - 1 - X];
          break;
        case 3:  // (x,y) -> (y, w-1-x)
          if (rmin[X] >= 0) lo = w - 1 - rmax[X], hi = w - 1 - rmin[X];
          break;
      }
      p.bottom[X] = lo;
      p.top[X] = hi;
    }
    finish_profile(p, gutter);
  }
  return fp;
}

// Placement score = resulting top + kWasteWeight * mean free texels left under the chart: mostly
// bottom-left, but a slightly higher spot that leaves no hole wins (measured on 1.glb: +1-2%).
constexpr double kWasteWeight = 0.5;
// Candidate x positions are tried every kXStride texels (measured on 1.glb: half the time for
// the same utilization as every texel).
constexpr int kXStride = 2;
struct Placement {
  int x = 0, y = 0;
  int orient = 0;
};

// Texels taken by placed charts, per atlas column as a bitset over rows (each chart column is
// recorded as its [bottom, top] interval), plus the free runs ("holes") under the skyline per
// column, so hole searches can start at the first hole large enough or be skipped.
class Occupancy {
 public:
  // Rows below 0 are free (a chart's gutter may hang off the strip), so a run starting at row 0
  // counts `below` extra rows: the deepest a gutter can reach.
  Occupancy(int width, int rows, int below)
      : below_(below),
        words_((rows + 63) / 64),
        bits_(size_t(width) * words_, 0),
        max_hole_(width, 0),
        sky_(width, 0),
        runs_(width) {}
  int rows() const { return words_ * 64; }

  // Longest free run under the skyline in column c.
  int max_hole(int c) const { return max_hole_[c]; }

  // Highest occupied row of column c within [lo, hi], or -1.
  int highest(int c, int lo, int hi) const {
    lo = std::max(lo, 0);
    hi = std::min(hi, rows() - 1);
    if (lo > hi) return -1;
    const uint64_t* col = &bits_[size_t(c) * words_];
    for (int w = hi >> 6; w >= (lo >> 6); --w) {
      uint64_t m = col[w];
      if (w == (hi >> 6) && (hi & 63) != 63) m &= (uint64_t(1) << ((hi & 63) + 1)) - 1;
      if (w == (lo >> 6)) m &= ~uint64_t(0) << (lo & 63);
      if (m) return w * 64 + 63 - std::countl_zero(m);
    }
    return -1;
  }

  // Start of the lowest free run of column c at least `len` rows long: a hole under the skyline
  // or else the open space above it.
  int lowest_run(int c, int len) const {
    for (const Run& r : runs_[c])
      if (r.len >= len) return r.from;
    return sky_[c] == 0 ? -below_ : sky_[c];
  }

  void fill(int c, int lo, int hi) {
    uint64_t* col = &bits_[size_t(c) * words_];
    for (int r = lo; r <= hi; ++r) col[r >> 6] |= uint64_t(1) << (r & 63);
  }

  // Recomputes the free runs of column c below its skyline `sky`.
  void update_holes(int c, int sky) {
    const uint64_t* col = &bits_[size_t(c) * words_];
    sky_[c] = sky;
    runs_[c].clear();
    int best = 0, start = -below_;  // the run starting at row 0 extends below the strip
    bool free_run = true;
    for (int r = 0; r < sky; ++r) {
      const uint64_t w = col[r >> 6];
      if ((r & 63) == 0 && w == ~uint64_t(0) && r + 64 <= sky) {  // a full word: skip it
        if (free_run) runs_[c].push_back({start, r - start}), best = std::max(best, r - start);
        free_run = false;
        r += 63;
        continue;
      }
      const bool occupied = (w >> (r & 63)) & 1;
      if (occupied && free_run) {
        if (r > start) runs_[c].push_back({start, r - start}), best = std::max(best, r - start);
        free_run = false;
      } else if (!occupied && !free_run) {
        start = r;
        free_run = true;
      }
    }
    max_hole_[c] = best;  // a run still open at `sky` is bounded by row sky-1, which is occupied
  }

 private:
  struct Run {
    int from, len;
  };
  int below_;
  int words_;
  std::vector<uint64_t> bits_;
  std::vector<int> max_hole_;           // longest free run under the skyline, per column
  std::vector<int> sky_;                // skyline per column, as last given to update_holes
  std::vector<std::vector<Run>> runs_;  // free runs under the skyline, bottom to top
};

// Packs the charts' footprints into a strip `width` wide; returns the strip height used (INT_MAX
// when it overflows) and fills `place`. Charts are placed in `order`. Each goes where its score
// is lowest: its top row plus a share of the free texels it leaves under it (skyline placement),
// or its top row when it fits entirely below the skyline, in a hole left under earlier charts.
int pack_charts(const std::vector<Footprint>& fp, int orientations,
                const std::vector<uint32_t>& order, int width, int gutter,
                std::vector<Placement>& place) {
  constexpr int kNoneRow = std::numeric_limits<int>::max();
  std::vector<int> sky(width, 0);  // first free row above the placed charts, per column
  Occupancy occ(width, 4 * width, gutter);
  int height = 0;
  place.assign(fp.size(), {});
  struct Best {
    long waste = std::numeric_limits<long>::max();
    int top = std::numeric_limits<int>::max(), x = 0, y = 0, orient = 0;
  };
  auto better = [](const Best& a, const Best& b) {  // total order: thread-count independent
    if (a.top != b.top) return a.top < b.top;       // `top` holds the score
    if (a.waste != b.waste) return a.waste < b.waste;
    if (a.orient != b.orient) return a.orient < b.orient;
    return a.x < b.x;
  };
  for (uint32_t ci : order) {
    Best best;
    for (int r = 0; r < orientations; ++r) {
      const Profile& f = fp[ci].orient[r];
      if (f.w > width) continue;
      const int dw = f.w + 2 * gutter;
      const int bound = best.top;  // candidates scoring above the best so far are skipped
      const Best found = tbb::parallel_reduce(
          tbb::blocked_range<int>(0, width - f.w + 1, 64), Best{},
          [&](const tbb::blocked_range<int>& range, Best acc) {
            for (int x = range.begin(); x < range.end(); ++x) {
              if (x % kXStride != 0 && x != width - f.w) continue;
              // Pruning only drops candidates strictly worse than one already kept, so the result
              // does not depend on how the range is split. Scores are >= y + top_max.
              const int limit = std::min(bound, acc.top) - f.top_max;
              int y = 0, critical = -1;  // dilated column that sets y
              for (int d = 0; d < dw && y <= limit; ++d) {
                const int col = x - gutter + d;
                if (col < 0 || col >= width || f.dbottom[d] == kNoneRow) continue;
                if (sky[col] - f.dbottom[d] > y) y = sky[col] - f.dbottom[d], critical = d;
              }
              if (y <= limit) {
                long waste = 0;  // free texels left between the skyline and the chart bottom
                for (int d = 0; d < f.w; ++d)
                  if (f.bottom[d] >= 0) waste += y + f.bottom[d] - sky[x + d];
                const Best cand{waste, y + f.top_max + int(kWasteWeight * double(waste) / f.w), x,
                                y, r};
                if (better(cand, acc)) acc = cand;
              }
              // Any lower position puts the critical column's interval under its skyline, so that
              // column needs a free run at least as long as the interval.
              if (critical < 0) continue;
              const int ccol = x - gutter + critical;
              const int clen = f.dtop[critical] - f.dbottom[critical] + 1;
              if (occ.max_hole(ccol) < clen) continue;
              // Lowest y below the skyline position where the dilated footprint meets no
              // occupied texel: raise y past the highest blocker, column by column, until a full
              // sweep finds none.
              const int stop = std::min(y, std::min(bound, acc.top) - f.top_max + 1);
              // Nothing fits below the critical column's lowest long-enough run.
              int yh = std::max(0, occ.lowest_run(ccol, clen) - f.dbottom[critical]);
              bool moved = true;
              while (moved && yh < stop) {
                moved = false;
                for (int d = 0; d < dw && yh < stop; ++d) {
                  const int col = x - gutter + d;
                  if (col < 0 || col >= width || f.dbottom[d] == kNoneRow) continue;
                  const int o = occ.highest(col, yh + f.dbottom[d], yh + f.dtop[d]);
                  if (o >= 0) yh = o - f.dbottom[d] + 1, moved = true;
                }
              }
              if (!moved && yh < stop) {
                const Best cand{0, yh + f.top_max, x, yh, r};
                if (better(cand, acc)) acc = cand;
              }
            }
            return acc;
          },
          [&](const Best& a, const Best& b) { return better(a, b) ? a : b; });
      if (better(found, best)) best = found;
    }
    if (best.top == std::numeric_limits<int>::max()) return std::numeric_limits<int>::max();
    const Profile& f = fp[ci].orient[best.orient];
    if (best.y + f.top_max >= occ.rows()) return std::numeric_limits<int>::max();
    for (int c = 0; c < f.w; ++c) {
      if (f.bottom[c] < 0) continue;
      const int col = best.x + c;
      occ.fill(col, best.y + f.bottom[c], best.y + f.top[c]);
      sky[col] = std::max(sky[col], best.y + f.top[c] + 1);
      occ.update_holes(col, sky[col]);
    }
    height = std::max(height, best.y + f.top_max + 1);
    place[ci] = {best.x, best.y, best.orient};
  }
  return height;
}

}  // namespace

UnwrapResult uv_unwrap(const Mesh& mesh, const UnwrapOptions& opt) {
  const auto t0 = Clock::now();
  auto elapsed = [&] { return std::chrono::duration<double>(Clock::now() - t0).count(); };
  if (mesh.faces.empty()) throw MeshError("uv_unwrap: the mesh has no faces");
  if (opt.texture_size < 16 || opt.texture_size > 65536) {
    throw MeshError("uv_unwrap: texture_size must be in [16, 65536], got " +
                    std::to_string(opt.texture_size));
  }
  if (opt.gutter < 0 || opt.gutter > opt.texture_size / 4) {
    throw MeshError("uv_unwrap: gutter must be in [0, texture_size/4], got " +
                    std::to_string(opt.gutter));
  }
  for (const Tri& f : mesh.faces)
    for (uint32_t v : f)
      if (v >= mesh.positions.size()) throw MeshError("uv_unwrap: a face index is out of range");
  for (const Vec3& p : mesh.positions)
    if (!std::isfinite(p[0]) || !std::isfinite(p[1]) || !std::isfinite(p[2]))
      throw MeshError("uv_unwrap: the mesh has non-finite positions");

  const size_t nf = mesh.faces.size();
  const Topology topo = build_topology(mesh, std::clamp(opt.normal_smoothing, 0, 100));
  spdlog::debug("uv_unwrap: topology {:.3f} s", elapsed());

  // 1. Segmentation, then parameterization. A chart that folds or overlaps itself in every
  // parameterization is split in two across its principal axis, repeatedly; after 16 rounds the
  // remaining faces become single-face charts, which cannot fold, so this always ends.
  std::vector<uint32_t> chart_of(nf, kNone);
  uint32_t nchart = 0;
  std::vector<char> in_set(nf, 1);
  const double cos_max =
      std::cos(std::clamp(double(opt.max_chart_angle_deg), 1.0, 89.0) * M_PI / 180.0);
  std::vector<Chart> charts;
  tbb::enumerable_thread_specific<std::vector<uint32_t>> local_index(
      [&] { return std::vector<uint32_t>(mesh.positions.size(), kNone); });
  const double cos_flat = std::cos(double(opt.flat_angle_deg) * M_PI / 180.0);
  // Self-overlap is judged at about the final texel size, the only scale where it matters.
  double total_area = 0;
  for (double a : topo.area) total_area += a;
  if (!(total_area > 0)) throw MeshError("uv_unwrap: the mesh has zero surface area");
  const double est_scale =
      std::sqrt(0.85 * double(opt.texture_size) * opt.texture_size / total_area);
  tbb::enumerable_thread_specific<std::vector<uint8_t>> overlap_buf;
  std::vector<std::vector<uint32_t>> pending = {std::vector<uint32_t>(nf)};  // face groups to grow
  std::iota(pending[0].begin(), pending[0].end(), 0u);
  for (int round = 0; !pending.empty(); ++round) {
    const uint32_t first = nchart;
    if (round == 0) {
      grow_charts(topo, pending[0], in_set, cos_max, opt.max_chart_faces, opt, chart_of, nchart);
      std::fill(in_set.begin(), in_set.end(), 0);
      smooth_chart_borders(topo, cos_max, 4, chart_of, nchart);
      nchart = split_disconnected(topo, chart_of);
    } else {
      for (const auto& group : pending) {
        if (round >= 16) {
          for (uint32_t f : group) chart_of[f] = nchart++;
        } else {
          split_chart(mesh, topo, group, in_set, chart_of, nchart);
        }
      }
    }
    charts.resize(nchart);
    for (const auto& group : pending)
      for (uint32_t f : group) charts[chart_of[f]].faces.push_back(f);
    pending.clear();
    const bool lscm_allowed = opt.use_lscm && elapsed() < 0.5 * opt.max_seconds;
    tbb::parallel_for(first, nchart, [&](uint32_t ci) {
      Chart& c = charts[ci];
      std::vector<uint32_t>& li = local_index.local();
      c.tris.resize(c.faces.size());
      for (size_t i = 0; i < c.faces.size(); ++i) {
        c.area3d += topo.area[c.faces[i]];
        for (int k = 0; k < 3; ++k) {
          const uint32_t v = mesh.faces[c.faces[i]][k];
          if (li[v] == kNone) {
            li[v] = uint32_t(c.verts.size());
            c.verts.push_back(v);
          }
          c.tris[i][k] = li[v];
        }
      }
      for (uint32_t v : c.verts) li[v] = kNone;
      const D3 n = chart_normal(c, topo);
      planar_projection(c, mesh, n);
      bool flat = true;
      for (uint32_t f : c.faces) flat &= topo.area[f] <= 0 || dot(topo.normal[f], n) >= cos_flat;
      if (!flat && lscm_allowed) {
        const std::vector<D2> planar = c.uv;
        if (lscm(c, mesh, topo)) {
          // LSCM may come out mirrored as a whole; a partial fold means it is not usable.
          std::vector<uint32_t> bad = folded_faces(c, topo);
          if (!bad.empty() && bad.size() == c.faces.size()) {
            for (D2& p : c.uv) p.x = -p.x;
            bad = folded_faces(c, topo);
          }
          c.lscm = bad.empty();
        }
        if (!c.lscm) c.uv = planar;
      }
      if (!c.lscm) c.bad_faces = folded_faces(c, topo);
      if (c.bad_faces.empty()) {
        normalize_chart(c);
        std::vector<uint8_t>& buf = overlap_buf.local();
        if (self_overlaps(c, est_scale, buf)) {
          bool fixed = false;
          if (c.lscm) {  // planar projection may not fold where LSCM did
            planar_projection(c, mesh, n);
            c.lscm = false;
            if (folded_faces(c, topo).empty()) {
              normalize_chart(c);
              fixed = !self_overlaps(c, est_scale, buf);
            }
          }
          if (!fixed) c.bad_faces = {0};  // split the whole chart in the next round
        }
      }
    });
    size_t split = 0;
    for (uint32_t ci = first; ci < nchart; ++ci) {
      Chart& c = charts[ci];
      if (c.bad_faces.empty()) continue;
      ++split;
      for (uint32_t f : c.faces) chart_of[f] = kNone;
      pending.push_back(std::move(c.faces));
      c = Chart{};
    }
    spdlog::debug("uv_unwrap: round {}: charts {}..{}, {} split, {:.3f} s", round, first, nchart,
                  split, elapsed());
  }
  // Drop emptied charts and renumber densely, keeping order.
  {
    std::vector<Chart> kept;
    std::vector<uint32_t> renum(charts.size(), kNone);
    for (uint32_t ci = 0; ci < charts.size(); ++ci)
      if (!charts[ci].faces.empty())
        renum[ci] = uint32_t(kept.size()), kept.push_back(std::move(charts[ci]));
    charts = std::move(kept);
    for (uint32_t f = 0; f < nf; ++f) chart_of[f] = renum[chart_of[f]];
  }

  // 2. Packing: find the largest scale (texels per unit) whose layout fits the square.
  const int W = opt.texture_size, g = opt.gutter;
  // Every chart takes at least one texel plus its gutter, whatever the scale.
  if (double(charts.size()) * (g + 1) * (g + 1) > double(W) * W) {
    throw MeshError("uv_unwrap: " + std::to_string(charts.size()) + " charts cannot fit a " +
                    std::to_string(W) + " texture with gutter " + std::to_string(g));
  }
  // Start from 60% of the square: about what the packer reaches on real meshes.
  double scale = std::sqrt(0.6 * double(W) * W / total_area);
  std::vector<uint32_t> order(charts.size());
  std::vector<Footprint> fp(charts.size());
  const int orientations = opt.rotate_charts ? 4 : 1;
  std::vector<Placement> place, best_place;
  double best_scale = 0;
  int passes = 0;
  double lo_fail = std::numeric_limits<double>::infinity();  // smallest scale known not to fit
  while (true) {
    ++passes;
    const double t_raster = elapsed();
    tbb::enumerable_thread_specific<std::vector<uint8_t>> bitmaps;
    fp.assign(charts.size(), {});
    tbb::parallel_for(size_t(0), charts.size(), [&](size_t ci) {
      fp[ci] = rasterize_footprint(charts[ci], scale, g, opt.rotate_charts, bitmaps.local());
    });
    // Tallest first (then widest), the classic order for skyline packing; holes left under
    // overhangs are filled by later, smaller charts.
    const double t_pack = elapsed();
    std::iota(order.begin(), order.end(), 0u);
    std::sort(order.begin(), order.end(), [&](uint32_t a, uint32_t b) {
      if (fp[a].h0 != fp[b].h0) return fp[a].h0 > fp[b].h0;
      if (fp[a].w0 != fp[b].w0) return fp[a].w0 > fp[b].w0;
      return a < b;
    });
    const int height = pack_charts(fp, orientations, order, W, g, place);
    spdlog::debug(
        "uv_unwrap: pack pass {} scale {:.2f}: height {} (raster {:.3f} s, place {:.3f} s)", passes,
        scale, height, t_pack - t_raster, elapsed() - t_pack);
    const bool fits = height <= W;
    if (fits && scale > best_scale) best_scale = scale, best_place = place;
    if (!fits) lo_fail = std::min(lo_fail, scale);
    if (best_scale > 0 && elapsed() > opt.max_seconds) break;
    if (passes > 60) break;
    bool converged = false;
    double next = scale;
    if (fits) {
      // Grow towards the square, but stay below a scale that already failed.
      const double fill = double(height) / W;
      next = scale * std::min(1.25, std::sqrt(1.0 / std::max(fill, 1e-3)) * 0.995);
      if (next >= lo_fail) next = 0.5 * (scale + lo_fail);
      converged = fill > 0.99 || next / scale < 1.01;  // 1% in scale is 2% in utilization
    } else {
      const double over = height == std::numeric_limits<int>::max() ? 4.0 : double(height) / W;
      next = scale * std::max(0.5, std::min(0.98, std::sqrt(1.0 / over) * 0.99));
      if (best_scale > 0) next = std::max(next, 0.5 * (best_scale + scale));
      converged = best_scale > 0 && scale / best_scale < 1.01;
    }
    if (best_scale > 0 && (converged || passes >= 8)) break;
    scale = next;
  }
  if (!(best_scale > 0)) {
    throw MeshError("uv_unwrap: " + std::to_string(charts.size()) + " charts do not fit a " +
                    std::to_string(W) + " texture with gutter " + std::to_string(g));
  }
  scale = best_scale;

  // 3. Output UVs: one per (chart, vertex), in chart order then local vertex order.
  UnwrapResult res;
  res.mesh = mesh;
  res.mesh.uvs.clear();
  res.mesh.uv_faces.assign(nf, {});
  std::vector<uint32_t> uv_base(charts.size() + 1, 0);
  for (size_t ci = 0; ci < charts.size(); ++ci)
    uv_base[ci + 1] = uv_base[ci] + uint32_t(charts[ci].verts.size());
  res.mesh.uvs.resize(uv_base.back());
  tbb::parallel_for(size_t(0), charts.size(), [&](size_t ci) {
    const Chart& c = charts[ci];
    const Placement& p = best_place[ci];
    double umax = 0, vmax = 0;
    for (const D2& q : c.uv) umax = std::max(umax, q.x), vmax = std::max(vmax, q.y);
    const int w0 = int(std::ceil(umax * scale + 1.0)), h0 = int(std::ceil(vmax * scale + 1.0));
    for (size_t i = 0; i < c.verts.size(); ++i) {
      const D2 r =
          orient_point({c.uv[i].x * scale + 0.5, c.uv[i].y * scale + 0.5}, p.orient, w0, h0);
      res.mesh.uvs[uv_base[ci] + i] = {float((p.x + r.x) / W), float((p.y + r.y) / W)};
    }
    for (size_t i = 0; i < c.faces.size(); ++i)
      for (int k = 0; k < 3; ++k) res.mesh.uv_faces[c.faces[i]][k] = uv_base[ci] + c.tris[i][k];
  });
  res.face_chart = chart_of;

  // 4. Metrics.
  UnwrapMetrics& mt = res.metrics;
  mt.charts = charts.size();
  for (const Chart& c : charts) mt.lscm_charts += c.lscm;
  mt.texels_per_unit = scale;
  mt.pack_passes = passes;
  double uv_total = 0, area_dist = 0, angle_dist = 0;
  for (size_t f = 0; f < nf; ++f) {
    const Vec2& a = res.mesh.uvs[res.mesh.uv_faces[f][0]];
    const Vec2& b = res.mesh.uvs[res.mesh.uv_faces[f][1]];
    const Vec2& c = res.mesh.uvs[res.mesh.uv_faces[f][2]];
    uv_total += 0.5 * std::abs(cross2({a[0], a[1]}, {b[0], b[1]}, {c[0], c[1]}));
  }
  for (size_t f = 0; f < nf; ++f) {
    const double A = topo.area[f];
    if (!(A > 0)) continue;
    const Tri& tr = mesh.faces[f];
    const D3 p0 = to_d3(mesh.positions[tr[0]]);
    const D3 e1 = sub(to_d3(mesh.positions[tr[1]]), p0), e2 = sub(to_d3(mesh.positions[tr[2]]), p0);
    const double l1 = norm(e1);
    const D3 x = {e1.x / l1, e1.y / l1, e1.z / l1};
    const D3 y = cross(topo.normal[f], x);
    const double q1x = l1, q2x = dot(e2, x), q2y = dot(e2, y);  // 3D triangle in its plane
    const Vec2& u0 = res.mesh.uvs[res.mesh.uv_faces[f][0]];
    const Vec2& u1 = res.mesh.uvs[res.mesh.uv_faces[f][1]];
    const Vec2& u2 = res.mesh.uvs[res.mesh.uv_faces[f][2]];
    const double du1 = (u1[0] - u0[0]) * W, dv1 = (u1[1] - u0[1]) * W;
    const double du2 = (u2[0] - u0[0]) * W, dv2 = (u2[1] - u0[1]) * W;
    // Jacobian J = [du1 du2; dv1 dv2] * inv([q1x q2x; 0 q2y]), in texels per unit.
    const double inv00 = 1 / q1x, inv01 = -q2x / (q1x * q2y), inv11 = 1 / q2y;
    const double j00 = du1 * inv00, j01 = du1 * inv01 + du2 * inv11;
    const double j10 = dv1 * inv00, j11 = dv1 * inv01 + dv2 * inv11;
    const double fro = j00 * j00 + j01 * j01 + j10 * j10 + j11 * j11;
    const double det = j00 * j11 - j01 * j10;
    const double disc = std::sqrt(std::max(0.0, fro * fro - 4 * det * det));
    const double s1 = std::sqrt(0.5 * (fro + disc)),
                 s2 = std::sqrt(std::max(0.0, 0.5 * (fro - disc)));
    const double w = A / total_area;
    angle_dist += w * (s2 > 0 ? s1 / s2 - 1 : 1e3);
    const double share = std::abs(det) * A / (uv_total * W * W);  // this face's UV area share
    area_dist += w * (share > 0 ? std::abs(std::log(share / w)) : 10.0);
  }
  mt.utilization = uv_total;
  mt.area_distortion = area_dist;
  mt.angle_distortion = angle_dist;
  for (size_t f = 0; f < nf; ++f)
    for (int k = 0; k < 3; ++k) {
      const uint32_t gnb = topo.nb[f][k];
      if (gnb != kNone && gnb > f && chart_of[gnb] != chart_of[f])
        mt.seam_length += topo.edge_len[f][k];
    }
  mt.seconds = elapsed();
  if (mt.seconds > opt.max_seconds) {
    spdlog::warn("uv_unwrap: took {:.2f} s, over the {:.2f} s budget", mt.seconds, opt.max_seconds);
  }
  return res;
}

// ---- check_uvs ----

UvCheckResult check_uvs(const Mesh& mesh, int texture_size) {
  if (texture_size < 1 || texture_size > 65536) {
    throw MeshError("check_uvs: texture_size must be in [1, 65536]");
  }
  UvCheckResult r;
  if (!mesh.has_uvs()) return r;
  if (mesh.uv_faces.size() != mesh.faces.size()) {
    throw MeshError("check_uvs: uv_faces and faces differ in length");
  }
  for (const Vec2& t : mesh.uvs)
    for (float x : t) r.out_of_range += !(x >= 0.0f && x <= 1.0f);
  const int T = texture_size;
  std::vector<uint8_t> count(size_t(T) * T, 0);
  for (const Tri& f : mesh.uv_faces) {
    D2 p[3];
    for (int k = 0; k < 3; ++k) {
      if (f[k] >= mesh.uvs.size()) throw MeshError("check_uvs: a uv index is out of range");
      p[k] = {double(mesh.uvs[f[k]][0]) * T, double(mesh.uvs[f[k]][1]) * T};
    }
    if (cross2(p[0], p[1], p[2]) == 0) {
      ++r.degenerate_faces;
      continue;
    }
    raster_texel_centres(p[0], p[1], p[2], T, T, [&](int x, int y) {
      uint8_t& n = count[size_t(y) * T + x];
      if (n < 255) ++n;
    });
  }
  for (uint8_t n : count) {
    r.covered_texels += n > 0;
    r.overlapping_texels += n > 1;
  }
  r.overlap_fraction = r.covered_texels ? double(r.overlapping_texels) / r.covered_texels : 0.0;
  return r;
}

}  // namespace gen3d::mesh
