#include "render/surface_fill.h"

#include <algorithm>
#include <array>
#include <atomic>
#include <cmath>
#include <functional>
#include <limits>
#include <numeric>
#include <optional>
#include <unordered_map>

#include <spdlog/spdlog.h>
#include <tbb/blocked_range.h>
#include <tbb/parallel_for.h>
#include <tbb/parallel_reduce.h>
#include <tbb/parallel_sort.h>
#include <tbb/task_group.h>
#include <Eigen/Eigenvalues>
#include <Eigen/IterativeLinearSolvers>
#include <Eigen/SparseCore>

namespace gen3d::render {
namespace {

using Eigen::Vector3d;

Vector3d vec(const mesh::Vec3& p) {
  return {p[0], p[1], p[2]};
}

Vector3d reflect(const Vector3d& p, const SymmetryPlane& plane) {
  const Vector3d n = vec(plane.normal), c = vec(plane.point);
  return p - 2.0 * (p - c).dot(n) * n;
}

// Barycentric weights of the point of triangle abc nearest to p (by regions, Ericson's method).
Vector3d closest_barycentric(const Vector3d& p, const Vector3d& a, const Vector3d& b,
                             const Vector3d& c) {
  const Vector3d ab = b - a, ac = c - a, ap = p - a;
  const double d1 = ab.dot(ap), d2 = ac.dot(ap);
  if (d1 <= 0 && d2 <= 0) return {1, 0, 0};
  const Vector3d bp = p - b;
  const double d3 = ab.dot(bp), d4 = ac.dot(bp);
  if (d3 >= 0 && d4 <= d3) return {0, 1, 0};
  const double vc = d1 * d4 - d3 * d2;
  if (vc <= 0 && d1 >= 0 && d3 <= 0) {
    const double t = d1 / (d1 - d3);
    return {1 - t, t, 0};
  }
  const Vector3d cp = p - c;
  const double d5 = ab.dot(cp), d6 = ac.dot(cp);
  if (d6 >= 0 && d5 <= d6) return {0, 0, 1};
  const double vb = d5 * d2 - d1 * d6;
  if (vb <= 0 && d2 >= 0 && d6 <= 0) {
    const double t = d2 / (d2 - d6);
    return {1 - t, 0, t};
  }
  const double va = d3 * d6 - d5 * d4;
  if (va <= 0 && (d4 - d3) >= 0 && (d5 - d6) >= 0) {
    const double t = (d4 - d3) / ((d4 - d3) + (d5 - d6));
    return {0, 1 - t, t};
  }
  const double denom = 1.0 / (va + vb + vc);
  return {1 - (vb + vc) * denom, vb * denom, vc * denom};
}

// A uniform grid of cells keyed by their integer coordinates.
struct CellKey {
  double cell = 1;
  Vector3d origin = Vector3d::Zero();
  int64_t coord(double v, int axis) const {
    return static_cast<int64_t>(std::floor((v - origin[axis]) / cell));
  }
  static uint64_t key(int64_t x, int64_t y, int64_t z) {
    return (static_cast<uint64_t>(x & 0x1FFFFF) << 42) |
           (static_cast<uint64_t>(y & 0x1FFFFF) << 21) | static_cast<uint64_t>(z & 0x1FFFFF);
  }
};

struct Bounds {
  Vector3d lo, hi;
  double diagonal() const { return (hi - lo).norm(); }
};

Bounds bounds_of(const mesh::Mesh& mesh) {
  Bounds b{Vector3d::Constant(1e30), Vector3d::Constant(-1e30)};
  for (const auto& p : mesh.positions) {
    b.lo = b.lo.cwiseMin(vec(p));
    b.hi = b.hi.cwiseMax(vec(p));
  }
  return b;
}

// Points on triangle abc no farther than `step` apart, its corners and edges included: rows
// parallel to its shortest edge, stepped from the opposite corner, so a long sliver gets a few
// points per step of its length (its bounding box can be the whole mesh's).
template <class Visit>
void points_on_triangle(const Vector3d& a, const Vector3d& b, const Vector3d& c, double step,
                        Visit&& visit) {
  const Vector3d corner[3] = {a, b, c};
  int apex = 0;
  double shortest = std::numeric_limits<double>::infinity();
  for (int k = 0; k < 3; ++k) {
    const double len = (corner[(k + 1) % 3] - corner[(k + 2) % 3]).norm();
    if (len < shortest) shortest = len, apex = k;
  }
  const Vector3d& o = corner[apex];
  const Vector3d u = corner[(apex + 1) % 3] - o, v = corner[(apex + 2) % 3] - o;
  const int rows = std::max(1, static_cast<int>(std::ceil(std::max(u.norm(), v.norm()) / step)));
  for (int i = 0; i <= rows; ++i) {
    const double t = static_cast<double>(i) / rows;
    const int across = static_cast<int>(std::ceil(t * shortest / step));
    for (int j = 0; j <= across; ++j) {
      const double w = across ? static_cast<double>(j) / across : 0.0;
      visit(Vector3d(o + t * ((1 - w) * u + w * v)));
    }
  }
}

// The mesh's triangles hashed into the cells (diag / 64) they pass through.
class FaceGrid {
 public:
  struct Hit {
    int64_t face = -1;  // -1: none within reach
    double distance = 0;
    Vector3d bary = Vector3d::Zero();
  };
  explicit FaceGrid(const mesh::Mesh& mesh) : mesh_(mesh) {
    const Bounds box = bounds_of(mesh);
    if (mesh.faces.empty() || !(box.diagonal() > 0)) return;  // empty: nothing is ever near
    grid_.cell = box.diagonal() / 64.0;
    grid_.origin = box.lo;
    std::vector<uint64_t> keys;
    for (size_t f = 0; f < mesh.faces.size(); ++f) {
      const Vector3d a = vec(mesh.positions[mesh.faces[f][0]]),
                     b = vec(mesh.positions[mesh.faces[f][1]]),
                     c = vec(mesh.positions[mesh.faces[f][2]]);
      const Vector3d lo = a.cwiseMin(b).cwiseMin(c), hi = a.cwiseMax(b).cwiseMax(c);
      int64_t span[3][2];
      int64_t boxed = 1;
      for (int k = 0; k < 3; ++k) {
        span[k][0] = grid_.coord(lo[k], k);
        span[k][1] = grid_.coord(hi[k], k);
        boxed *= span[k][1] - span[k][0] + 1;
      }
      keys.clear();
      if (boxed <= 27) {  // a small triangle: every cell of its box
        for (int64_t x = span[0][0]; x <= span[0][1]; ++x)
          for (int64_t y = span[1][0]; y <= span[1][1]; ++y)
            for (int64_t z = span[2][0]; z <= span[2][1]; ++z)
              keys.push_back(CellKey::key(x, y, z));
      } else {  // a large one: the cells of points a third of a cell apart on it, not its box
        points_on_triangle(a, b, c, grid_.cell / 3.0, [&](const Vector3d& q) {
          keys.push_back(
              CellKey::key(grid_.coord(q[0], 0), grid_.coord(q[1], 1), grid_.coord(q[2], 2)));
        });
        std::sort(keys.begin(), keys.end());
        keys.erase(std::unique(keys.begin(), keys.end()), keys.end());
      }
      for (uint64_t key : keys) cells_[key].push_back(static_cast<uint32_t>(f));
    }
  }
  double cell() const { return grid_.cell; }
  // The nearest triangle that `accept(face)` takes, nearer than `reach` (at most two cells: the
  // search covers the 3 x 3 x 3 cells around p). The own cell goes first; once the best distance
  // is under one cell, a cell whose box is farther than it is passed over: a nearer triangle has
  // its nearest point in a nearer cell, which lists it.
  template <class Accept>
  Hit nearest(const Vector3d& p, double reach, Accept&& accept) const {
    Hit hit;
    hit.distance = reach;
    const int64_t cx = grid_.coord(p[0], 0), cy = grid_.coord(p[1], 1), cz = grid_.coord(p[2], 2);
    const Vector3d local =
        (p - grid_.origin) / grid_.cell - Vector3d(static_cast<double>(cx), static_cast<double>(cy),
                                                   static_cast<double>(cz));  // in [0, 1)^3
    for (int n = 0; n < 27; ++n) {
      // n = 0 is the own cell; then the 26 neighbours.
      const int o = n == 0 ? 13 : (n <= 13 ? n - 1 : n);
      const int ox = o / 9 - 1, oy = o / 3 % 3 - 1, oz = o % 3 - 1;
      if (n > 0 && hit.distance <= grid_.cell) {
        double gap2 = 0;
        const int off[3] = {ox, oy, oz};
        for (int k = 0; k < 3; ++k) {
          const double g = off[k] < 0 ? local[k] : off[k] > 0 ? 1.0 - local[k] : 0.0;
          gap2 += g * g;
        }
        if (gap2 * grid_.cell * grid_.cell >= hit.distance * hit.distance) continue;
      }
      const auto it = cells_.find(CellKey::key(cx + ox, cy + oy, cz + oz));
      if (it == cells_.end()) continue;
      for (uint32_t f : it->second) {
        if (!accept(f)) continue;
        const Vector3d a = vec(mesh_.positions[mesh_.faces[f][0]]),
                       b = vec(mesh_.positions[mesh_.faces[f][1]]),
                       c = vec(mesh_.positions[mesh_.faces[f][2]]);
        const Vector3d w = closest_barycentric(p, a, b, c);
        const double d = (p - (w[0] * a + w[1] * b + w[2] * c)).norm();
        if (d < hit.distance) hit = {f, d, w};
      }
    }
    return hit;
  }

 private:
  const mesh::Mesh& mesh_;
  CellKey grid_;
  std::unordered_map<uint64_t, std::vector<uint32_t>> cells_;
};

// A 128^3 bit grid over the mesh's bounds (grown by `margin`) marking boxes; `any` tells whether
// a box touches a marked cell. Conservative: a box that meets a marked one always answers true.
class CoarseGrid {
 public:
  static constexpr int kN = 128;
  CoarseGrid(const Bounds& box, double margin)
      : lo_(box.lo - Vector3d::Constant(margin)),
        cell_(std::max((box.hi - box.lo).maxCoeff() + 2 * margin, 1e-12) / kN),
        bits_(static_cast<size_t>(kN) * kN * kN / 64, 0) {}
  void mark(const Vector3d& lo, const Vector3d& hi) {
    int a[3], b[3];
    if (!range(lo, hi, a, b)) return;
    for (int x = a[0]; x <= b[0]; ++x)
      for (int y = a[1]; y <= b[1]; ++y)
        for (int z = a[2]; z <= b[2]; ++z) {
          const size_t i = (static_cast<size_t>(x) * kN + y) * kN + z;
          bits_[i >> 6] |= uint64_t{1} << (i & 63);
        }
  }
  // A triangle: its box when that is a few cells, else boxes around points on it (a long sliver's
  // box can be the whole grid). Still conservative: every cell within half a cell of it is marked.
  void mark_triangle(const Vector3d& a, const Vector3d& b, const Vector3d& c) {
    const Vector3d lo = a.cwiseMin(b).cwiseMin(c), hi = a.cwiseMax(b).cwiseMax(c);
    if (small(lo, hi)) return mark(lo, hi);
    const Vector3d half = Vector3d::Constant(0.5 * cell_);
    points_on_triangle(a, b, c, 0.5 * cell_, [&](const Vector3d& q) { mark(q - half, q + half); });
  }
  // Whether a marked cell lies within `margin` of triangle abc (conservative, as `any`).
  bool any_near_triangle(const Vector3d& a, const Vector3d& b, const Vector3d& c,
                         double margin) const {
    const Vector3d lo = a.cwiseMin(b).cwiseMin(c), hi = a.cwiseMax(b).cwiseMax(c);
    const Vector3d m = Vector3d::Constant(margin);
    if (small(lo - m, hi + m)) return any(lo - m, hi + m);
    const Vector3d grow = Vector3d::Constant(margin + 0.5 * cell_);
    bool found = false;
    points_on_triangle(a, b, c, 0.5 * cell_,
                       [&](const Vector3d& q) { found = found || any(q - grow, q + grow); });
    return found;
  }
  bool any(const Vector3d& lo, const Vector3d& hi) const {
    int a[3], b[3];
    if (!range(lo, hi, a, b)) return false;
    for (int x = a[0]; x <= b[0]; ++x)
      for (int y = a[1]; y <= b[1]; ++y)
        for (int z = a[2]; z <= b[2]; ++z) {
          const size_t i = (static_cast<size_t>(x) * kN + y) * kN + z;
          if (bits_[i >> 6] >> (i & 63) & 1) return true;
        }
    return false;
  }

 private:
  // At most 27 cells.
  bool small(const Vector3d& lo, const Vector3d& hi) const {
    double cells = 1;
    for (int k = 0; k < 3; ++k)
      cells *= std::floor((hi[k] - lo_[k]) / cell_) - std::floor((lo[k] - lo_[k]) / cell_) + 1;
    return cells <= 27;
  }
  // The cells a box covers, clamped to the grid (false: it misses the grid).
  bool range(const Vector3d& lo, const Vector3d& hi, int* a, int* b) const {
    for (int k = 0; k < 3; ++k) {
      const double l = std::floor((lo[k] - lo_[k]) / cell_),
                   h = std::floor((hi[k] - lo_[k]) / cell_);
      if (h < 0 || l >= kN) return false;
      a[k] = static_cast<int>(std::max(l, 0.0));
      b[k] = static_cast<int>(std::min(h, double{kN - 1}));
    }
    return true;
  }
  Vector3d lo_;
  double cell_;
  std::vector<uint64_t> bits_;
};

// Weld equal positions: welded index per vertex and the number of welded vertices.
std::vector<uint32_t> weld_positions(const mesh::Mesh& mesh, size_t& count) {
  std::vector<uint32_t> order(mesh.positions.size());
  std::iota(order.begin(), order.end(), 0u);
  std::sort(order.begin(), order.end(), [&](uint32_t a, uint32_t b) {
    return mesh.positions[a] < mesh.positions[b] ||
           (mesh.positions[a] == mesh.positions[b] && a < b);
  });
  std::vector<uint32_t> weld(mesh.positions.size());
  count = 0;
  for (size_t i = 0; i < order.size(); ++i) {
    if (i == 0 || mesh.positions[order[i]] != mesh.positions[order[i - 1]]) ++count;
    weld[order[i]] = static_cast<uint32_t>(count - 1);
  }
  return weld;
}

// The fill's graph node of each face corner (3 per face): equal positions are welded, so the fill
// crosses UV seams, but not across materials: a material boundary is where a mesh's author put a
// change of surface, so colour does not diffuse over it. `material` gets each node's material.
std::vector<uint32_t> corner_nodes(const mesh::Mesh& mesh, size_t& count,
                                   std::vector<uint32_t>& material) {
  size_t welded = 0;
  const std::vector<uint32_t> weld = weld_positions(mesh, welded);
  std::vector<uint32_t> node(mesh.faces.size() * 3);
  if (!mesh.has_materials()) {
    for (size_t c = 0; c < node.size(); ++c) node[c] = weld[mesh.faces[c / 3][c % 3]];
    count = welded;
    material.assign(welded, 0);
    return node;
  }
  // A welded vertex whose faces all have one material stays one node; one on a material boundary
  // gets a node per material (numbered after the welded ones, in corner order).
  constexpr uint32_t kNone = std::numeric_limits<uint32_t>::max();
  material.assign(welded, kNone);
  std::vector<uint8_t> mixed(welded, 0);
  for (size_t c = 0; c < node.size(); ++c) {
    const uint32_t w = weld[mesh.faces[c / 3][c % 3]], m = mesh.face_materials[c / 3];
    if (material[w] == kNone) material[w] = m;
    mixed[w] |= material[w] != m;
  }
  for (uint32_t& m : material)
    if (m == kNone) m = 0;  // a position no face uses
  count = welded;
  std::unordered_map<uint64_t, uint32_t> split;
  for (size_t c = 0; c < node.size(); ++c) {
    const uint32_t w = weld[mesh.faces[c / 3][c % 3]], m = mesh.face_materials[c / 3];
    if (!mixed[w] || m == material[w]) {
      node[c] = w;
      continue;
    }
    const auto [it, added] = split.try_emplace(uint64_t{m} << 32 | w, static_cast<uint32_t>(count));
    if (added) {
      ++count;
      material.push_back(m);
    }
    node[c] = it->second;
  }
  return node;
}

// The candidate planes with their errors. A plane certain to score worse than both `tolerance` and
// the best plane so far (more than half its samples lie farther) is dropped as soon as that is
// certain, with an infinite error: it can be neither accepted nor the best.
std::vector<SymmetryPlane> symmetry_candidates(const mesh::Mesh& mesh, const FaceGrid& faces,
                                               double tolerance) {
  std::vector<SymmetryPlane> out;
  if (mesh.faces.empty()) return out;
  const Bounds box = bounds_of(mesh);
  const double diag = box.diagonal();
  if (!(diag > 0)) return out;
  // Area centroid and covariance.
  double total = 0;
  Vector3d centroid = Vector3d::Zero();
  std::vector<double> area(mesh.faces.size());
  for (size_t f = 0; f < mesh.faces.size(); ++f) {
    const Vector3d a = vec(mesh.positions[mesh.faces[f][0]]),
                   b = vec(mesh.positions[mesh.faces[f][1]]),
                   c = vec(mesh.positions[mesh.faces[f][2]]);
    area[f] = 0.5 * (b - a).cross(c - a).norm();
    total += area[f];
    centroid += area[f] * (a + b + c) / 3.0;
  }
  if (!(total > 0)) return out;
  centroid /= total;
  Eigen::Matrix3d cov = Eigen::Matrix3d::Zero();
  for (size_t f = 0; f < mesh.faces.size(); ++f)
    for (int k = 0; k < 3; ++k) {
      const Vector3d d = vec(mesh.positions[mesh.faces[f][k]]) - centroid;
      cov += area[f] / 3.0 * d * d.transpose();
    }
  std::vector<Vector3d> normals = {Vector3d::UnitX(), Vector3d::UnitY(), Vector3d::UnitZ()};
  Eigen::SelfAdjointEigenSolver<Eigen::Matrix3d> eig(cov);
  for (int k = 0; k < 3; ++k) {
    const Vector3d n = eig.eigenvectors().col(k).normalized();
    bool dup = false;
    for (const auto& m : normals) dup |= std::fabs(m.dot(n)) > 0.999;
    if (!dup) normals.push_back(n);
  }

  // "Far" is two cells away.
  const auto distance_to_surface = [&](const Vector3d& p) {
    return faces.nearest(p, 2.0 * faces.cell(), [](size_t) { return true; }).distance;
  };
  // Area-weighted surface samples: a deterministic low-discrepancy walk over the faces.
  constexpr int kSamples = 2048;
  std::vector<Vector3d> samples;
  {
    double acc = 0;
    const double step = total / kSamples;
    double next = step * 0.5;
    uint32_t r = 1;
    for (size_t f = 0; f < mesh.faces.size() && samples.size() < kSamples; ++f) {
      acc += area[f];
      while (next < acc && samples.size() < kSamples) {
        r = r * 1664525u + 1013904223u;
        double u = (r >> 8) / double(1 << 24);
        r = r * 1664525u + 1013904223u;
        double v = (r >> 8) / double(1 << 24);
        if (u + v > 1) u = 1 - u, v = 1 - v;
        const Vector3d a = vec(mesh.positions[mesh.faces[f][0]]),
                       b = vec(mesh.positions[mesh.faces[f][1]]),
                       c = vec(mesh.positions[mesh.faces[f][2]]);
        samples.push_back(a + u * (b - a) + v * (c - a));
        next += step;
      }
    }
  }
  double best = std::numeric_limits<double>::infinity();
  for (const Vector3d& n : normals) {
    SymmetryPlane plane;
    plane.normal = {static_cast<float>(n[0]), static_cast<float>(n[1]), static_cast<float>(n[2])};
    plane.point = {static_cast<float>(centroid[0]), static_cast<float>(centroid[1]),
                   static_cast<float>(centroid[2])};
    // The median is the (size / 2 + 1)-th smallest distance: it lies beyond `bound` once
    // size - size / 2 distances do.
    std::vector<double> d(samples.size());
    const double bound = std::max(tolerance, best) * diag * (1.0 + 1e-9);
    const size_t needed = d.size() - d.size() / 2;
    size_t done = 0, beyond = 0;
    while (done < d.size() && beyond < needed) {
      const size_t end = std::min(d.size(), done + 256);
      tbb::parallel_for(done, end,
                        [&](size_t k) { d[k] = distance_to_surface(reflect(samples[k], plane)); });
      for (size_t k = done; k < end; ++k) beyond += d[k] > bound;
      done = end;
    }
    if (beyond >= needed) {
      plane.error = std::numeric_limits<double>::infinity();
    } else {
      std::nth_element(d.begin(), d.begin() + d.size() / 2, d.end());
      plane.error = d[d.size() / 2] / diag;
      best = std::min(best, plane.error);
    }
    out.push_back(plane);
  }
  return out;
}

}  // namespace

image::Image source_colors(const std::vector<uint8_t>& sources, int size) {
  if (size <= 0 || sources.empty() || sources.size() % (static_cast<size_t>(size) * size) != 0)
    return image::Image();
  static const float kColors[7][3] = {
      {0.0f, 0.0f, 0.0f},   {0.2f, 0.75f, 0.3f}, {0.25f, 0.45f, 0.95f}, {0.95f, 0.6f, 0.15f},
      {0.9f, 0.15f, 0.15f}, {0.5f, 0.5f, 0.5f},  {0.1f, 0.8f, 0.85f}};
  image::Image out(size, static_cast<int>(sources.size() / static_cast<size_t>(size)), 3);
  tbb::parallel_for(size_t{0}, sources.size(), [&](size_t i) {
    std::copy_n(kColors[std::min<uint8_t>(sources[i], 6)], 3, out.pixels.begin() + i * 3);
  });
  return out;
}

SymmetryPlane detect_symmetry(const mesh::Mesh& mesh, double tolerance) {
  SymmetryPlane best;
  const FaceGrid faces(mesh);
  for (const SymmetryPlane& p : symmetry_candidates(mesh, faces, tolerance))
    if (!best.found || p.error < best.error) {
      best = p;
      best.found = true;
    }
  best.found = best.found && best.error <= tolerance;
  return best;
}

void fill_surface(const mesh::Mesh& mesh, image::Image& tex, std::vector<uint8_t>& known,
                  const Raster& uv, std::vector<uint8_t>& source, const SurfaceFillOptions& options,
                  SurfaceFillReport* report) {
  SurfaceFillReport r;
  const size_t texels = known.size();
  const auto position = [&](size_t i) {
    const mesh::Tri& f = mesh.faces[static_cast<size_t>(uv.face_id[i] - 1)];
    Vector3d p = Vector3d::Zero();
    for (int k = 0; k < 3; ++k) p += double(uv.bary[i * 3 + k]) * vec(mesh.positions[f[k]]);
    return p;
  };
  const auto face_normal = [&](size_t face) {
    const mesh::Tri& f = mesh.faces[face];
    const Vector3d a = vec(mesh.positions[f[0]]);
    return (vec(mesh.positions[f[1]]) - a).cross(vec(mesh.positions[f[2]]) - a).normalized();
  };

  // The symmetry planes depend on the mesh alone: they are sought while step 0 runs.
  std::vector<SymmetryPlane> candidates;
  std::optional<FaceGrid> faces;
  tbb::task_group mesh_work;
  if (options.symmetry)
    mesh_work.run([&] {
      faces.emplace(mesh);
      candidates = symmetry_candidates(mesh, *faces, options.symmetry_tolerance);
    });

  // 0. Near the seen surface (the texels a bake leaves out at silhouette edges and grazing angles):
  // the nearest seen colours of the same material, ring by ring inside the charts, as local as
  // image inpainting.
  const auto material_at = [&](size_t i) {
    return mesh.has_materials() ? mesh.face_materials[static_cast<size_t>(uv.face_id[i] - 1)] : 0u;
  };
  {
    const int w = tex.width, h = tex.height;
    const int rings = std::max(2, w / 128);
    std::vector<uint32_t> ring, next_ring;
    std::vector<uint8_t> queued(texels, 0);
    const auto push_neighbours = [&](size_t i, std::vector<uint32_t>& out) {
      const int x = static_cast<int>(i % w), y = static_cast<int>(i / w);
      for (int dy = -1; dy <= 1; ++dy)
        for (int dx = -1; dx <= 1; ++dx) {
          const int nx = x + dx, ny = y + dy;
          if (nx < 0 || ny < 0 || nx >= w || ny >= h) continue;
          const size_t j = static_cast<size_t>(ny) * w + nx;
          if (known[j] || queued[j] || !uv.face_id[j] || material_at(j) != material_at(i)) continue;
          queued[j] = 1;
          out.push_back(static_cast<uint32_t>(j));
        }
    };
    // The first ring, row by row in parallel: the unknown chart texels next to a known one.
    {
      std::vector<std::vector<uint32_t>> rows(static_cast<size_t>(h));
      tbb::parallel_for(0, h, [&](int y) {
        for (int x = 0; x < w; ++x) {
          const size_t i = static_cast<size_t>(y) * w + x;
          if (known[i] || !uv.face_id[i]) continue;
          bool next_to_known = false;
          for (int dy = -1; dy <= 1 && !next_to_known; ++dy)
            for (int dx = -1; dx <= 1; ++dx) {
              const int nx = x + dx, ny = y + dy;
              if (nx < 0 || ny < 0 || nx >= w || ny >= h) continue;
              const size_t j = static_cast<size_t>(ny) * w + nx;
              if (known[j] && uv.face_id[j] && material_at(j) == material_at(i)) {
                next_to_known = true;
                break;
              }
            }
          if (!next_to_known) continue;
          queued[i] = 1;
          rows[static_cast<size_t>(y)].push_back(static_cast<uint32_t>(i));
        }
      });
      for (const auto& row : rows) ring.insert(ring.end(), row.begin(), row.end());
    }
    std::vector<float> colors;
    for (int pass = 0; pass < rings && !ring.empty(); ++pass) {
      colors.assign(ring.size() * 3, 0.0f);
      tbb::parallel_for(size_t{0}, ring.size(), [&](size_t k) {
        const int x = static_cast<int>(ring[k] % w), y = static_cast<int>(ring[k] / w);
        int n = 0;
        for (int dy = -1; dy <= 1; ++dy)
          for (int dx = -1; dx <= 1; ++dx) {
            const int nx = x + dx, ny = y + dy;
            if (nx < 0 || ny < 0 || nx >= w || ny >= h) continue;
            const size_t j = static_cast<size_t>(ny) * w + nx;
            if (!known[j] || !uv.face_id[j] || material_at(j) != material_at(ring[k])) continue;
            for (int c = 0; c < 3; ++c) colors[k * 3 + c] += tex.pixels[j * 3 + c];
            ++n;
          }
        for (int c = 0; c < 3; ++c) colors[k * 3 + c] /= static_cast<float>(std::max(n, 1));
      });
      next_ring.clear();
      for (size_t k = 0; k < ring.size(); ++k) {
        for (int c = 0; c < 3; ++c) tex.pixels[size_t{ring[k]} * 3 + c] = colors[k * 3 + c];
        known[ring[k]] = 1;
        source[ring[k]] = static_cast<uint8_t>(TexelSource::inpainted);
        ++r.near_texels;
      }
      for (uint32_t i : ring) push_neighbours(i, next_ring);
      ring.swap(next_ring);
    }
  }
  // 1. Mirror: an unknown chart texel whose mirror image lies on a painted texel takes its colour.
  // Of the planes within tolerance (a box has three), the one that recovers the most texels wins.
  if (options.symmetry) {
    // Per face: whether it holds unknown (bit 0) and painted (bit 1) chart texels. A face's bit is
    // set once (atomically) and read often, so the rows are scanned in parallel.
    std::vector<uint8_t> holds(mesh.faces.size(), 0);
    const auto [chart, painted] = tbb::parallel_reduce(
        tbb::blocked_range<size_t>(0, texels), std::pair<size_t, size_t>{0, 0},
        [&](const tbb::blocked_range<size_t>& range, std::pair<size_t, size_t> n) {
          for (size_t i = range.begin(); i < range.end(); ++i) {
            if (!uv.face_id[i]) continue;
            ++n.first;
            n.second += known[i] != 0;
            const uint8_t bit = known[i] ? 2 : 1;
            std::atomic_ref<uint8_t> h(holds[static_cast<size_t>(uv.face_id[i] - 1)]);
            if (!(h.load(std::memory_order_relaxed) & bit))
              h.fetch_or(bit, std::memory_order_relaxed);
          }
          return n;
        },
        [](std::pair<size_t, size_t> a, std::pair<size_t, size_t> b) {
          return std::pair<size_t, size_t>{a.first + b.first, a.second + b.second};
        });
    std::vector<SymmetryPlane> planes;
    mesh_work.wait();
    for (const SymmetryPlane& p : candidates) {
      if (!r.plane.found || p.error < r.plane.error) r.plane = p, r.plane.found = true;
      if (p.error <= options.symmetry_tolerance) planes.push_back(p);
    }
    r.plane.found = false;
    if (!planes.empty() && painted > 0 && painted < chart) {
      double area = 0;
      for (size_t f = 0; f < mesh.faces.size(); ++f) {
        const mesh::Tri& t = mesh.faces[f];
        const Vector3d a = vec(mesh.positions[t[0]]);
        area += 0.5 * (vec(mesh.positions[t[1]]) - a).cross(vec(mesh.positions[t[2]]) - a).norm();
      }
      const double spacing = std::sqrt(area / static_cast<double>(chart));
      const Bounds box = bounds_of(mesh);
      // Most unknown texels' mirror images fall where nothing was seen (the back mirrors onto
      // the back): whole faces are turned away first, on a coarse grid of the faces holding
      // painted texels, so only the few faces near a painted mirror image are looked at per texel.
      const double margin = spacing * 1.01 + 1e-6 * box.diagonal();
      CoarseGrid coarse(box, margin);
      for (size_t f = 0; f < mesh.faces.size(); ++f)
        if (holds[f] & 2)
          coarse.mark_triangle(vec(mesh.positions[mesh.faces[f][0]]),
                               vec(mesh.positions[mesh.faces[f][1]]),
                               vec(mesh.positions[mesh.faces[f][2]]));
      // Per face with unknown texels, one bit per plane: its mirror image is near a painted face.
      std::vector<uint8_t> near_painted(mesh.faces.size(), 0);
      tbb::parallel_for(size_t{0}, mesh.faces.size(), [&](size_t f) {
        if (!(holds[f] & 1)) return;
        for (size_t p = 0; p < planes.size(); ++p) {
          const auto q = [&](int k) {
            return reflect(vec(mesh.positions[mesh.faces[f][k]]), planes[p]);
          };
          if (coarse.any_near_triangle(q(0), q(1), q(2), margin))
            near_painted[f] |= static_cast<uint8_t>(1u << p);
        }
      });
      // The painted faces near one of those mirror images: only their texels are hashed.
      CoarseGrid reached(box, margin);
      for (size_t f = 0; f < mesh.faces.size(); ++f) {
        if (!near_painted[f]) continue;
        for (size_t p = 0; p < planes.size(); ++p) {
          if (!(near_painted[f] >> p & 1)) continue;
          const auto q = [&](int k) {
            return reflect(vec(mesh.positions[mesh.faces[f][k]]), planes[p]);
          };
          reached.mark_triangle(q(0), q(1), q(2));
        }
      }
      std::vector<uint8_t> needed(mesh.faces.size(), 0);
      tbb::parallel_for(size_t{0}, mesh.faces.size(), [&](size_t f) {
        needed[f] = (holds[f] & 2) &&
                    reached.any_near_triangle(vec(mesh.positions[mesh.faces[f][0]]),
                                              vec(mesh.positions[mesh.faces[f][1]]),
                                              vec(mesh.positions[mesh.faces[f][2]]), margin);
      });

      // Painted texels in cells of two texel spacings, sorted by cell; a mirror image looks for
      // the nearest within one spacing, so at most 2 x 2 x 2 cells.
      CellKey grid;
      grid.cell = 2.0 * spacing;
      grid.origin = box.lo - Vector3d::Constant(grid.cell);
      std::vector<Eigen::Vector3f> normal(mesh.faces.size());
      for (size_t f = 0; f < mesh.faces.size(); ++f) normal[f] = face_normal(f).cast<float>();
      // A painted texel: its cell, its index and its position, sorted by cell, then index.
      struct Hashed {
        uint64_t first;
        uint32_t second;
        Eigen::Vector3f where;
        bool operator<(const Hashed& o) const {
          return first < o.first || (first == o.first && second < o.second);
        }
      };
      // Both lists in texel order: gathered per row in parallel, then joined.
      std::vector<Hashed> hashed;
      std::vector<uint32_t> unknown;
      {
        const size_t w = static_cast<size_t>(tex.width);
        std::vector<std::vector<uint32_t>> painted_rows(texels / w), unknown_rows(texels / w);
        tbb::parallel_for(size_t{0}, texels / w, [&](size_t y) {
          for (size_t i = y * w; i < (y + 1) * w; ++i) {
            if (!uv.face_id[i]) continue;
            const size_t f = static_cast<size_t>(uv.face_id[i] - 1);
            if (known[i]) {
              if (needed[f]) painted_rows[y].push_back(static_cast<uint32_t>(i));
            } else if (near_painted[f]) {
              unknown_rows[y].push_back(static_cast<uint32_t>(i));
            }
          }
        });
        for (size_t y = 0; y < painted_rows.size(); ++y) {
          for (uint32_t i : painted_rows[y]) hashed.push_back({0, i, Eigen::Vector3f::Zero()});
          unknown.insert(unknown.end(), unknown_rows[y].begin(), unknown_rows[y].end());
        }
      }
      tbb::parallel_for(size_t{0}, hashed.size(), [&](size_t k) {
        Hashed& h = hashed[k];
        h.where = position(h.second).cast<float>();
        h.first = CellKey::key(grid.coord(h.where[0], 0), grid.coord(h.where[1], 1),
                               grid.coord(h.where[2], 2));
      });
      std::vector<Eigen::Vector3f> unknown_where(unknown.size());
      tbb::parallel_for(size_t{0}, unknown.size(),
                        [&](size_t k) { unknown_where[k] = position(unknown[k]).cast<float>(); });
      // (cell, index) pairs are unique: any sort gives this one order.
      tbb::parallel_sort(hashed.begin(), hashed.end());
      std::unordered_map<uint64_t, std::pair<uint32_t, uint32_t>> cell_range;
      // Occupied cells also in a bit set, so the many mirror images that fall where nothing was
      // seen are turned away without a hash-map lookup.
      std::vector<uint64_t> occupied(1 << 18, 0);
      const auto bit = [](uint64_t key) {
        return static_cast<uint32_t>((key * 0x9E3779B97F4A7C15ull) >> 40);  // 24 bits
      };
      for (size_t k = 0; k < hashed.size();) {
        size_t e = k;
        while (e < hashed.size() && hashed[e].first == hashed[k].first) ++e;
        cell_range[hashed[k].first] = {static_cast<uint32_t>(k), static_cast<uint32_t>(e)};
        const uint32_t b = bit(hashed[k].first);
        occupied[b >> 6] |= uint64_t{1} << (b & 63);
        k = e;
      }
      const auto maybe_occupied = [&](uint64_t key) {
        const uint32_t b = bit(key);
        return (occupied[b >> 6] >> (b & 63)) & 1;
      };
      // The painted texel nearest to the mirror image of unknown texel u (facing the same way),
      // or -1.
      const auto mirror_of = [&](size_t u, const SymmetryPlane& plane) -> int64_t {
        const uint32_t i = unknown[u];
        const Vector3d n = vec(plane.normal);
        const Vector3d q = reflect(unknown_where[u].cast<double>(), plane);
        const Vector3d m = normal[static_cast<size_t>(uv.face_id[i] - 1)].cast<double>();
        const Eigen::Vector3f qn = (m - 2.0 * m.dot(n) * n).cast<float>();
        const Eigen::Vector3f qf = q.cast<float>();
        int64_t lo[3], hi[3];
        for (int k = 0; k < 3; ++k) {
          lo[k] = grid.coord(q[k] - spacing, k);
          hi[k] = grid.coord(q[k] + spacing, k);
        }
        float best = static_cast<float>(spacing * spacing);
        const float close = static_cast<float>(0.25 * spacing * spacing);
        // Most mirror images find a texel within half a spacing in their own cell: look there
        // first, then in every cell within one spacing.
        const uint64_t own_key =
            CellKey::key(grid.coord(q[0], 0), grid.coord(q[1], 1), grid.coord(q[2], 2));
        if (const auto own = maybe_occupied(own_key) ? cell_range.find(own_key) : cell_range.end();
            own != cell_range.end())
          for (uint32_t k = own->second.first; k < own->second.second; ++k) {
            const uint32_t j = hashed[k].second;
            if ((hashed[k].where - qf).squaredNorm() < close &&
                normal[static_cast<size_t>(uv.face_id[j] - 1)].dot(qn) > 0)
              return j;
          }
        int64_t pick = -1;
        for (int64_t x = lo[0]; x <= hi[0]; ++x)
          for (int64_t y = lo[1]; y <= hi[1]; ++y)
            for (int64_t z = lo[2]; z <= hi[2]; ++z) {
              const uint64_t key = CellKey::key(x, y, z);
              if (!maybe_occupied(key)) continue;
              const auto it = cell_range.find(key);
              if (it == cell_range.end()) continue;
              for (uint32_t k = it->second.first; k < it->second.second; ++k) {
                const uint32_t j = hashed[k].second;
                const float d = (hashed[k].where - qf).squaredNorm();
                if (d >= best) continue;
                if (normal[static_cast<size_t>(uv.face_id[j] - 1)].dot(qn) <= 0)
                  continue;  // the other side of a thin part
                best = d;
                pick = j;
                if (d < close) return pick;  // near enough: no need for the nearest
              }
            }
        return pick;
      };
      const auto face_of = [&](uint32_t i) { return static_cast<size_t>(uv.face_id[i] - 1); };
      size_t best_gain = 0, best = 0;
      const size_t stride = std::max<size_t>(1, unknown.size() / 20000);
      for (size_t p = 0; p < planes.size(); ++p) {
        const size_t gain = tbb::parallel_reduce(
            tbb::blocked_range<size_t>(0, (unknown.size() + stride - 1) / stride), size_t{0},
            [&](const tbb::blocked_range<size_t>& range, size_t n) {
              for (size_t s = range.begin(); s < range.end(); ++s) {
                const size_t u = s * stride;
                n += (near_painted[face_of(unknown[u])] >> p & 1) && mirror_of(u, planes[p]) >= 0;
              }
              return n;
            },
            std::plus<size_t>());
        if (gain > best_gain) best_gain = gain, best = p, r.plane = planes[p], r.plane.found = true;
      }
      if (r.plane.found) {
        std::vector<int64_t> found(unknown.size());
        tbb::parallel_for(size_t{0}, unknown.size(), [&](size_t k) {
          found[k] = (near_painted[face_of(unknown[k])] >> best & 1) ? mirror_of(k, r.plane) : -1;
        });
        for (size_t k = 0; k < unknown.size(); ++k) {
          if (found[k] < 0) continue;
          const size_t i = unknown[k], j = static_cast<size_t>(found[k]);
          for (int c = 0; c < 3; ++c) tex.pixels[i * 3 + c] = tex.pixels[j * 3 + c];
          known[i] = 1;
          source[i] = static_cast<uint8_t>(TexelSource::mirrored);
          ++r.mirrored_texels;
        }
      }
    }
  }
  // 2. Seen colour per welded vertex: every known chart texel adds its colour to its face's
  // corners with its barycentric weights (so a low-poly face seen only inside still gives its
  // corners a colour), which also averages away detail smaller than the faces.
  size_t nv = 0;
  std::vector<uint32_t> node_material;
  const std::vector<uint32_t> node = corner_nodes(mesh, nv, node_material);
  std::vector<Vector3d> color(nv, Vector3d::Zero());
  std::vector<double> weight(nv, 0.0);
  {
    // Per face, per corner: the weighted colour and weight of its known texels, summed in
    // parallel over fixed blocks of rows (so the sums do not depend on the thread count), then
    // added to the welded corners block by block, face by face.
    struct FaceSum {
      uint32_t face;
      std::array<Vector3d, 3> color;
      std::array<double, 3> weight;
    };
    const size_t w = static_cast<size_t>(tex.width), rows = texels / w;
    constexpr size_t kRowsPerBlock = 64;
    std::vector<std::vector<FaceSum>> blocks((rows + kRowsPerBlock - 1) / kRowsPerBlock);
    tbb::parallel_for(size_t{0}, blocks.size(), [&](size_t b) {
      std::vector<FaceSum>& sums = blocks[b];
      std::unordered_map<uint32_t, uint32_t> slot;
      const size_t end = std::min(rows, (b + 1) * kRowsPerBlock) * w;
      for (size_t i = b * kRowsPerBlock * w; i < end; ++i) {
        if (!uv.face_id[i] || !known[i]) continue;
        const uint32_t face = static_cast<uint32_t>(uv.face_id[i] - 1);
        const auto [it, added] = slot.try_emplace(face, static_cast<uint32_t>(sums.size()));
        if (added)
          sums.push_back({face, {Vector3d::Zero(), Vector3d::Zero(), Vector3d::Zero()}, {}});
        FaceSum& s = sums[it->second];
        const float* c = tex.pixels.data() + i * 3;
        for (int k = 0; k < 3; ++k) {
          const double bk = uv.bary[i * 3 + k];
          s.color[k] += bk * Vector3d(c[0], c[1], c[2]);
          s.weight[k] += bk;
        }
      }
    });
    for (const auto& sums : blocks)
      for (const FaceSum& s : sums) {
        for (size_t k = 0; k < 3; ++k) {
          color[node[s.face * 3 + k]] += s.color[k];
          weight[node[s.face * 3 + k]] += s.weight[k];
        }
      }
  }
  std::vector<uint8_t> seen(nv, 0);
  std::vector<uint8_t> from_mirror(nv, 0);  // seen through the vertex mirror (step 3b)
  for (size_t p = 0; p < nv; ++p)
    if (weight[p] > 1e-3) {
      color[p] /= weight[p];
      seen[p] = 1;
      ++r.seen_vertices;
    }
  std::vector<std::vector<uint32_t>> adjacent(nv);
  for (size_t f = 0; f < mesh.faces.size(); ++f)
    for (size_t k = 0; k < 3; ++k) {
      const uint32_t a = node[f * 3 + k], b = node[f * 3 + (k + 1) % 3];
      if (a == b) continue;
      adjacent[a].push_back(b);
      adjacent[b].push_back(a);
    }
  for (auto& a : adjacent) {
    std::sort(a.begin(), a.end());
    a.erase(std::unique(a.begin(), a.end()), a.end());
  }

  // 3. Low frequencies only: the seen colours are smoothed among seen neighbours before they
  // become the boundary, so a small dark feature does not set the colour of a whole side.
  for (int pass = 0; pass < options.smoothing_passes; ++pass) {
    std::vector<Vector3d> next = color;
    for (size_t p = 0; p < nv; ++p) {
      if (!seen[p]) continue;
      Vector3d sum = Vector3d::Zero();
      int n = 0;
      for (uint32_t q : adjacent[p])
        if (seen[q]) sum += color[q], ++n;
      if (n > 0) next[p] = 0.5 * color[p] + 0.5 * sum / n;
    }
    color.swap(next);
  }
  // 3b. Mirror, low frequencies only: an unseen vertex whose mirror image lies on seen surface
  // (within diag / 64, facing the mirrored way) takes the smoothed seen colour there and joins the
  // fill's fixed boundary. The texel mirror above copies detail, but only within a texel of
  // painted texels; the two sides of an object seldom carry the same detail, but they do carry
  // the same colours.
  if (r.plane.found) {
    std::vector<Vector3d> where(nv), normal(nv, Vector3d::Zero());
    for (size_t f = 0; f < mesh.faces.size(); ++f) {
      const mesh::Tri& t = mesh.faces[f];
      const Vector3d a = vec(mesh.positions[t[0]]);
      const Vector3d n = (vec(mesh.positions[t[1]]) - a).cross(vec(mesh.positions[t[2]]) - a);
      for (size_t k = 0; k < 3; ++k) {
        where[node[f * 3 + k]] = vec(mesh.positions[t[k]]);
        normal[node[f * 3 + k]] += n;
      }
    }
    // The faces with a seen corner, their unit normals, and a coarse grid of their boxes that
    // turns away the many mirror images falling where nothing was seen.
    const double reach = faces->cell();
    std::vector<uint8_t> usable(mesh.faces.size(), 0);
    std::vector<Vector3d> unit_normal(mesh.faces.size());
    CoarseGrid near_seen(bounds_of(mesh), reach);
    for (size_t f = 0; f < mesh.faces.size(); ++f) {
      for (size_t k = 0; k < 3; ++k) usable[f] |= seen[node[f * 3 + k]];
      if (!usable[f]) continue;
      unit_normal[f] = face_normal(f);
      near_seen.mark_triangle(vec(mesh.positions[mesh.faces[f][0]]),
                              vec(mesh.positions[mesh.faces[f][1]]),
                              vec(mesh.positions[mesh.faces[f][2]]));
    }
    const Vector3d pn = vec(r.plane.normal);
    std::vector<uint8_t> mirrored(nv, 0);
    std::vector<Vector3d> mirror_color(nv);
    tbb::parallel_for(size_t{0}, nv, [&](size_t p) {
      if (seen[p]) return;
      const Vector3d q = reflect(where[p], r.plane);
      if (!near_seen.any(q - Vector3d::Constant(reach), q + Vector3d::Constant(reach))) return;
      const Vector3d qn = normal[p] - 2.0 * normal[p].dot(pn) * pn;
      const auto hit = faces->nearest(q, reach, [&](size_t f) {
        return usable[f] && unit_normal[f].dot(qn) > 0;  // NaN for a degenerate face: false
      });
      if (hit.face < 0) return;
      Vector3d sum = Vector3d::Zero();
      double w = 0;
      for (size_t k = 0; k < 3; ++k) {
        const uint32_t c = node[static_cast<size_t>(hit.face) * 3 + k];
        if (!seen[c]) continue;
        sum += (hit.bary[k] + 1e-3) * color[c];
        w += hit.bary[k] + 1e-3;
      }
      mirror_color[p] = sum / w;
      mirrored[p] = 1;
    });
    for (size_t p = 0; p < nv; ++p)
      if (mirrored[p])
        color[p] = mirror_color[p], seen[p] = from_mirror[p] = 1, ++r.mirrored_vertices;
  }
  // 4. Harmonic fill of the unseen vertices (uniform graph Laplacian, seen vertices fixed), started
  // from a breadth-first propagation; parts with no seen vertex get the seen mean colour.
  std::vector<uint8_t> reached = seen;
  std::vector<uint32_t> frontier;
  for (size_t p = 0; p < nv; ++p)
    if (seen[p]) frontier.push_back(static_cast<uint32_t>(p));
  std::vector<uint32_t> next;
  std::vector<uint8_t> in_layer(nv, 0);
  while (!frontier.empty()) {
    next.clear();
    for (uint32_t p : frontier)
      for (uint32_t q : adjacent[p])
        if (!reached[q] && !in_layer[q]) {
          in_layer[q] = 1;
          next.push_back(q);
        }
    // Each new vertex takes the mean of its neighbours reached in earlier layers.
    for (uint32_t q : next) {
      Vector3d sum = Vector3d::Zero();
      int n = 0;
      for (uint32_t s : adjacent[q])
        if (reached[s]) sum += color[s], ++n;
      if (n > 0) color[q] = sum / n;
    }
    for (uint32_t q : next) reached[q] = 1, in_layer[q] = 0;
    frontier.swap(next);
  }
  // Parts no seen vertex reaches: the seen mean of their material, else of the whole mesh.
  const size_t materials = std::max<size_t>(1, mesh.materials.size());
  std::vector<Vector3d> material_mean(materials + 1, Vector3d::Zero());
  std::vector<size_t> material_seen(materials + 1, 0);
  for (size_t p = 0; p < nv; ++p)
    if (seen[p]) {
      const size_t m = std::min<size_t>(node_material[p], materials - 1);
      material_mean[m] += color[p], ++material_seen[m];
      material_mean[materials] += color[p], ++material_seen[materials];
    }
  for (size_t m = 0; m <= materials; ++m)
    if (material_seen[m] > 0) material_mean[m] /= static_cast<double>(material_seen[m]);
  std::vector<int64_t> unknown_index(nv, -1);
  std::vector<uint32_t> unknowns;
  for (size_t p = 0; p < nv; ++p) {
    if (seen[p]) continue;
    if (!reached[p]) {
      const size_t m = std::min<size_t>(node_material[p], materials - 1);
      color[p] = material_mean[material_seen[m] > 0 ? m : materials];
      ++r.unreached_vertices;
      continue;
    }
    unknown_index[p] = static_cast<int64_t>(unknowns.size());
    unknowns.push_back(static_cast<uint32_t>(p));
  }
  r.solved_vertices = unknowns.size();
  if (!unknowns.empty() && r.seen_vertices > 0) {
    const auto n = static_cast<Eigen::Index>(unknowns.size());
    std::vector<Eigen::Triplet<double>> triplets;
    Eigen::MatrixXd b = Eigen::MatrixXd::Zero(n, 3), x0(n, 3);
    for (Eigen::Index i = 0; i < n; ++i) {
      const uint32_t p = unknowns[static_cast<size_t>(i)];
      triplets.emplace_back(i, i, static_cast<double>(adjacent[p].size()));
      for (uint32_t q : adjacent[p]) {
        if (unknown_index[q] >= 0)
          triplets.emplace_back(i, unknown_index[q], -1.0);
        else
          b.row(i) += color[q].transpose();
      }
      x0.row(i) = color[p].transpose();
    }
    Eigen::SparseMatrix<double> a(n, n);
    a.setFromTriplets(triplets.begin(), triplets.end());
    // One solve per colour channel, side by side (each deterministic on its own).
    struct Channel {
      int iterations = 0;
      double error = 0;
      bool converged = true;
    };
    std::array<Channel, 3> channels;
    tbb::parallel_for(0, 3, [&](int c) {
      Eigen::ConjugateGradient<Eigen::SparseMatrix<double>, Eigen::Lower | Eigen::Upper> cg;
      cg.setMaxIterations(options.max_iterations);
      cg.setTolerance(options.tolerance);
      cg.compute(a);
      const Eigen::VectorXd x = cg.solveWithGuess(b.col(c), x0.col(c));
      channels[static_cast<size_t>(c)] = {static_cast<int>(cg.iterations()), cg.error(),
                                          cg.info() == Eigen::Success};
      for (Eigen::Index i = 0; i < n; ++i) color[unknowns[static_cast<size_t>(i)]][c] = x[i];
    });
    for (const Channel& c : channels) {
      r.iterations = std::max(r.iterations, c.iterations);
      r.residual = std::max(r.residual, c.error);
      r.converged &= c.converged;
    }
    if (!r.converged)
      spdlog::warn(
          "surface fill: the harmonic solve stopped at its cap of {} iterations (relative residual "
          "{:.2g} for {} unseen vertices): the fill is smooth but not fully converged",
          options.max_iterations, r.residual, unknowns.size());
  }
  // 5. Unknown chart texels: the vertex colours interpolated over their face. Where those are all
  // seen or mirrored, and some mirrored, the texel counts as mirrored in the source map.
  r.filled_texels = tbb::parallel_reduce(
      tbb::blocked_range<size_t>(0, texels), size_t{0},
      [&](const tbb::blocked_range<size_t>& range, size_t n) {
        for (size_t i = range.begin(); i < range.end(); ++i) {
          if (known[i] || !uv.face_id[i]) continue;
          const size_t f = static_cast<size_t>(uv.face_id[i] - 1);
          bool mirror = false, fixed = true;
          for (size_t k = 0; k < 3; ++k) {
            mirror |= from_mirror[node[f * 3 + k]] != 0;
            fixed &= seen[node[f * 3 + k]] != 0;
          }
          float* q = tex.pixels.data() + i * 3;
          for (int c = 0; c < 3; ++c) {
            double v = 0;
            for (size_t k = 0; k < 3; ++k) v += uv.bary[i * 3 + k] * color[node[f * 3 + k]][c];
            q[c] = static_cast<float>(std::clamp(v, 0.0, 1.0));
          }
          known[i] = 1;
          source[i] =
              static_cast<uint8_t>(mirror && fixed ? TexelSource::mirrored : TexelSource::filled);
          ++n;
        }
        return n;
      },
      std::plus<size_t>());
  if (report) *report = r;
}

}  // namespace gen3d::render
