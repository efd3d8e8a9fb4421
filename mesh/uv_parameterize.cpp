// Parameterization: each chart flattened on its own (planar projection for flat charts, LSCM for
// curved ones, planar again when LSCM folds), then normalized to UV area == 3D area and rotated
// to its minimum-area bounding box. Charts are independent, so callers run this in parallel.
#include <algorithm>
#include <numeric>

#include <Eigen/Sparse>
#include <Eigen/SparseCholesky>

#include "mesh/uv_unwrap_internal.h"

namespace gen3d::mesh::unwrap_detail {
namespace {

// Largest linear scale-up normalize_chart applies (UV area to 3D area).
constexpr double kMaxAreaScale = 16.0;
// Weight of the pull of each vertex towards its planar position in charts of several pieces
// (relative to the conformal energy of the faces, both in squared lengths).
constexpr double kPieceHold = 1e-6;
// Largest self-overlap bitmap (texels) per chart.
constexpr double kMaxOverlapTexels = 16.0 * 1024 * 1024;

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
  // A piece hanging on by a vertex, or not at all, is free to turn, shrink or collapse to a
  // point at zero conformal energy: where there are several edge-connected pieces, a faint pull
  // towards the planar positions (kPieceHold per vertex against the faces' conformal energy)
  // decides what the faces leave free and nothing else.
  bool several_pieces = false;
  {
    std::vector<uint32_t> root(c.faces.size());
    std::iota(root.begin(), root.end(), 0u);
    auto find = [&](uint32_t i) {
      while (root[i] != i) i = root[i] = root[root[i]];
      return i;
    };
    std::vector<std::pair<uint64_t, uint32_t>> edges;  // (local edge key, face)
    edges.reserve(3 * c.faces.size());
    for (uint32_t i = 0; i < c.faces.size(); ++i) {
      if (!(t.area[c.faces[i]] > 0)) continue;
      for (int k = 0; k < 3; ++k) {
        const uint32_t a = std::min(c.tris[i][k], c.tris[i][(k + 1) % 3]),
                       b = std::max(c.tris[i][k], c.tris[i][(k + 1) % 3]);
        edges.push_back({(uint64_t(a) << 32) | b, i});
      }
    }
    std::sort(edges.begin(), edges.end());
    for (size_t i = 1; i < edges.size(); ++i)
      if (edges[i].first == edges[i - 1].first)
        root[find(edges[i].second)] = find(edges[i - 1].second);
    uint32_t pieces = 0;
    for (uint32_t i = 0; i < c.faces.size(); ++i) pieces += t.area[c.faces[i]] > 0 && find(i) == i;
    if (pieces == 0) return false;
    several_pieces = pieces > 1;
  }
  // Vertices of zero-area faces only appear in no equation: they stay at their planar position
  // (left free they would make the system singular and land anywhere).
  std::vector<char> used(nv, 0);
  for (size_t i = 0; i < c.faces.size(); ++i)
    if (t.area[c.faces[i]] > 0)
      for (uint32_t lv : c.tris[i]) used[lv] = 1;
  std::vector<int> var(nv);  // unknown index of local vertex (u at 2i, v at 2i+1), -1 if pinned
  int nfree = 0;
  for (size_t i = 0; i < nv; ++i) var[i] = (i == p0 || i == p1 || !used[i]) ? -1 : nfree++;
  const std::vector<D2> planar = c.uv;
  auto pin_of = [&](size_t i) { return planar[i]; };

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
  Eigen::SparseMatrix<double> AtA = A.transpose() * A;
  Eigen::VectorXd Atb = A.transpose() * rhs;
  if (several_pieces) {
    for (size_t i = 0; i < nv; ++i) {
      if (var[i] < 0) continue;
      for (int k = 0; k < 2; ++k) {
        AtA.coeffRef(2 * var[i] + k, 2 * var[i] + k) += kPieceHold;
        Atb[2 * var[i] + k] += kPieceHold * (k ? planar[i].y : planar[i].x);
      }
    }
  }
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
    // Bounded: a chart whose UV area all but vanished would otherwise blow up to any size.
    const double s = std::min(std::sqrt(c.area3d / uv_area), kMaxAreaScale);
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
// True when two faces of the chart cover the same texel centre at `scale` texels per unit, i.e.
// the chart overlaps itself (a fold that is not a local flip). Call after normalize_chart.
bool self_overlaps(const Chart& c, double scale, std::vector<uint8_t>& buf) {
  double umax = 0, vmax = 0;
  for (const D2& p : c.uv) umax = std::max(umax, p.x), vmax = std::max(vmax, p.y);
  // Judged at a coarser scale when the chart would need a bitmap over kMaxOverlapTexels: bounded
  // memory, and a chart that large is far bigger than any texel anyway.
  const double texels = (umax * scale + 1.0) * (vmax * scale + 1.0);
  if (!std::isfinite(texels)) return false;
  if (texels > kMaxOverlapTexels) scale *= std::sqrt(kMaxOverlapTexels / texels);
  const int w = int(std::ceil(umax * scale + 1.0)), h = int(std::ceil(vmax * scale + 1.0));
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

// Faces whose neighbours all lie at zero UV distance (a whole chart of degenerate faces) or a
// chart far larger in UV than in 3D (a solve gone wrong) fall back to planar projection.
bool extent_is_sane(const Chart& c, const Mesh& m) {
  double lo[3] = {1e300, 1e300, 1e300}, hi[3] = {-1e300, -1e300, -1e300};
  for (uint32_t v : c.verts)
    for (int a = 0; a < 3; ++a)
      lo[a] = std::min(lo[a], double(m.positions[v][a])),
      hi[a] = std::max(hi[a], double(m.positions[v][a]));
  const double diag3 =
      std::sqrt((hi[0] - lo[0]) * (hi[0] - lo[0]) + (hi[1] - lo[1]) * (hi[1] - lo[1]) +
                (hi[2] - lo[2]) * (hi[2] - lo[2]));
  double umax = 0, vmax = 0;
  for (const D2& p : c.uv) {
    if (!std::isfinite(p.x) || !std::isfinite(p.y)) return false;
    umax = std::max(umax, p.x), vmax = std::max(vmax, p.y);
  }
  return std::hypot(umax, vmax) <= kMaxAreaScale * diag3 + 1e-12;
}

// True when faces holding more than kCollapsedShare of the chart's 3D area keep under
// kCollapsedRatio of their 3D area in UV (after normalize_chart): an LSCM solve that crushed part
// of the chart (slivers, pieces joined by a thread) or a projection seen edge-on. Such faces
// would get almost no texels; their footprint is a needle that only wastes atlas.
constexpr double kCollapsedRatio = 1.0 / 16;
constexpr double kCollapsedShare = 0.02;
bool collapsed(const Chart& c, const Topology& t) {
  double crushed = 0;
  for (size_t i = 0; i < c.faces.size(); ++i) {
    const double a3 = t.area[c.faces[i]];
    if (!(a3 > 0)) continue;
    const auto& tr = c.tris[i];
    const double a2 = 0.5 * std::abs(cross2(c.uv[tr[0]], c.uv[tr[1]], c.uv[tr[2]]));
    if (a2 < kCollapsedRatio * a3) crushed += a3;
  }
  return crushed > kCollapsedShare * c.area3d;
}

}  // namespace

void parameterize_chart(Chart& c, const Mesh& m, const Topology& t, const UnwrapOptions& opt,
                        bool lscm_allowed, double overlap_scale, std::vector<uint32_t>& local_index,
                        std::vector<uint8_t>& scratch) {
  // Local vertices by welded position, so vertices split only for normals or old UVs share one
  // UV and LSCM sees one connected surface.
  c.tris.resize(c.faces.size());
  c.verts.clear();
  c.area3d = 0;
  for (size_t i = 0; i < c.faces.size(); ++i) {
    c.area3d += t.area[c.faces[i]];
    for (int k = 0; k < 3; ++k) {
      const uint32_t v = t.weld[m.faces[c.faces[i]][k]];
      if (local_index[v] == kNone) {
        local_index[v] = uint32_t(c.verts.size());
        c.verts.push_back(v);
      }
      c.tris[i][k] = local_index[v];
    }
  }
  for (uint32_t v : c.verts) local_index[v] = kNone;
  const double cos_flat = std::cos(double(opt.flat_angle_deg) * M_PI / 180.0);
  const D3 n = chart_normal(c, t);
  planar_projection(c, m, n);
  bool flat = true;
  for (uint32_t f : c.faces) flat &= t.area[f] <= 0 || dot(t.normal[f], n) >= cos_flat;
  c.lscm = false;
  if (!flat && lscm_allowed) {
    const std::vector<D2> planar = c.uv;
    if (lscm(c, m, t)) {
      // LSCM may come out mirrored as a whole; a partial fold means it is not usable.
      std::vector<uint32_t> bad = folded_faces(c, t);
      if (!bad.empty() && bad.size() == c.faces.size()) {
        for (D2& p : c.uv) p.x = -p.x;
        bad = folded_faces(c, t);
      }
      c.lscm = bad.empty();
    }
    if (c.lscm) {
      normalize_chart(c);
      if (!extent_is_sane(c, m) || collapsed(c, t)) c.lscm = false;
    }
    if (!c.lscm) c.uv = planar;
  }
  c.needs_split = false;
  // One triangle cannot fold over or overlap itself, and splitting it cannot help: a sliver whose
  // normal is noise may look folded, and re-splitting it would never end.
  const bool splittable = c.faces.size() > 1;
  if (!c.lscm) {
    if (splittable && !folded_faces(c, t).empty()) {
      c.needs_split = true;
      return;
    }
    normalize_chart(c);
    if (splittable && collapsed(c, t)) {
      c.needs_split = true;
      return;
    }
  }
  // A chart longer than the atlas at about the final scale (a long pipe unrolled, a strip) would
  // cap the density of the whole atlas: split it like a folded one. Unless most of it lies in
  // faces that long themselves (a pipe of slivers from end to end): no split can shorten those,
  // and splitting down to single slivers only leaves the packer hundreds of needles to place.
  if (c.faces.size() > 1) {
    double umax = 0, vmax = 0;
    for (const D2& p : c.uv) umax = std::max(umax, p.x), vmax = std::max(vmax, p.y);
    const double atlas = opt.texture_size / overlap_scale;  // the atlas side in UV units
    if (std::max(umax, vmax) > atlas) {
      double in_long_faces = 0;
      for (size_t i = 0; i < c.faces.size(); ++i) {
        const auto& tr = c.tris[i];
        double extent = 0;
        for (int k = 0; k < 3; ++k) {
          const D2 &a = c.uv[tr[k]], &b = c.uv[tr[(k + 1) % 3]];
          extent = std::max({extent, std::abs(a.x - b.x), std::abs(a.y - b.y)});
        }
        if (extent > atlas) in_long_faces += t.area[c.faces[i]];
      }
      if (in_long_faces <= 0.5 * c.area3d) {
        c.needs_split = true;
        return;
      }
    }
  }
  if (splittable && self_overlaps(c, overlap_scale, scratch)) {
    bool fixed = false;
    if (c.lscm) {  // planar projection may not fold where LSCM did
      planar_projection(c, m, n);
      c.lscm = false;
      if (folded_faces(c, t).empty()) {
        normalize_chart(c);
        fixed = !self_overlaps(c, overlap_scale, scratch);
      }
    }
    c.needs_split = !fixed;
  }
}

}  // namespace gen3d::mesh::unwrap_detail
