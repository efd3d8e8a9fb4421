#pragma once
// Distances between two surfaces given as vertex sets (marching-cubes meshes of the same field at
// the same resolution): the symmetric Chamfer distance (the mean of the two mean nearest-neighbour
// distances) and the Hausdorff distance (the largest nearest-neighbour distance either way), in
// the units of the coordinates. Brute force: meant for test meshes of a few thousand vertices.

#include <algorithm>
#include <cmath>
#include <limits>
#include <vector>

#include "mesh/mesh.h"

namespace gen3d::test {

struct MeshDistance {
  double chamfer = 0.0;
  double hausdorff = 0.0;
};

inline MeshDistance mesh_distance(const std::vector<mesh::Vec3>& a,
                                  const std::vector<mesh::Vec3>& b) {
  MeshDistance d;
  if (a.empty() || b.empty()) {
    d.chamfer = d.hausdorff = std::numeric_limits<double>::infinity();
    return d;
  }
  auto one_way = [&d](const std::vector<mesh::Vec3>& p, const std::vector<mesh::Vec3>& q) {
    double sum = 0.0;
    for (const auto& x : p) {
      double best = std::numeric_limits<double>::infinity();
      for (const auto& y : q) {
        const double dx = x[0] - y[0], dy = x[1] - y[1], dz = x[2] - y[2];
        best = std::min(best, dx * dx + dy * dy + dz * dz);
      }
      best = std::sqrt(best);
      sum += best;
      d.hausdorff = std::max(d.hausdorff, best);
    }
    return sum / static_cast<double>(p.size());
  };
  d.chamfer = 0.5 * (one_way(a, b) + one_way(b, a));
  return d;
}

// The diagonal of the axis-aligned bounding box of a vertex set (0 when empty).
inline double bbox_diagonal(const std::vector<mesh::Vec3>& v) {
  if (v.empty()) return 0.0;
  mesh::Vec3 lo = v.front(), hi = v.front();
  for (const auto& p : v)
    for (int k = 0; k < 3; ++k) {
      lo[k] = std::min(lo[k], p[k]);
      hi[k] = std::max(hi[k], p[k]);
    }
  double s = 0.0;
  for (int k = 0; k < 3; ++k) s += static_cast<double>(hi[k] - lo[k]) * (hi[k] - lo[k]);
  return std::sqrt(s);
}

}  // namespace gen3d::test
