#include "mesh/normals.h"

#include <algorithm>
#include <cmath>

namespace gen3d::mesh {
namespace {

Vec3 face_cross(const Mesh& m, const Tri& f) {
  const Vec3& a = m.positions[f[0]];
  const Vec3& b = m.positions[f[1]];
  const Vec3& c = m.positions[f[2]];
  const float e1[3] = {b[0] - a[0], b[1] - a[1], b[2] - a[2]};
  const float e2[3] = {c[0] - a[0], c[1] - a[1], c[2] - a[2]};
  return {e1[1] * e2[2] - e1[2] * e2[1], e1[2] * e2[0] - e1[0] * e2[2],
          e1[0] * e2[1] - e1[1] * e2[0]};
}

// Normalizes in place; a zero (or non-finite) length leaves a zero vector, as the reference does.
void normalize_or_zero(Vec3& v) {
  const float len = std::sqrt(v[0] * v[0] + v[1] * v[1] + v[2] * v[2]);
  if (len > 0.0f && std::isfinite(len)) {
    v = {v[0] / len, v[1] / len, v[2] / len};
  } else {
    v = {0.0f, 0.0f, 0.0f};
  }
}

// Unit face normal exactly as the reference texgen renderer gets it from torch on an FMA-capable
// CPU: torch.cross contracts each component to fma(a, b, -(c * d)), F.normalize's norm
// accumulates the squares with fma, then divides. Verified bit-exact against the golden
// vertex_normals_world.npy (shared/golden/texgen).
Vec3 reference_unit_face_normal(const Mesh& m, const Tri& f) {
  const Vec3& a = m.positions[f[0]];
  const Vec3& b = m.positions[f[1]];
  const Vec3& c = m.positions[f[2]];
  const float e1[3] = {b[0] - a[0], b[1] - a[1], b[2] - a[2]};
  const float e2[3] = {c[0] - a[0], c[1] - a[1], c[2] - a[2]};
  const float n[3] = {std::fma(e1[1], e2[2], -(e1[2] * e2[1])),
                      std::fma(e1[2], e2[0], -(e1[0] * e2[2])),
                      std::fma(e1[0], e2[1], -(e1[1] * e2[0]))};
  float sq = n[0] * n[0];
  sq = std::fma(n[1], n[1], sq);
  sq = std::fma(n[2], n[2], sq);
  const float len = std::max(std::sqrt(sq), 1e-12f);  // F.normalize's eps clamp
  return {n[0] / len, n[1] / len, n[2] / len};
}

// The reference's final step (trimesh.util.unitize on the float32 sums): squares in float32, their
// sum, square root and reciprocal in float64, the product rounded back to float32; sums with a
// norm <= 1e-13 give a zero normal.
void unitize_like_reference(Vec3& v) {
  const double sq = static_cast<double>(v[0] * v[0]) + static_cast<double>(v[1] * v[1]) +
                    static_cast<double>(v[2] * v[2]);
  const double norm = std::sqrt(sq);
  if (!(norm > 1e-13) || !std::isfinite(norm)) {
    v = {0.0f, 0.0f, 0.0f};
    return;
  }
  const double inv = 1.0 / norm;
  v = {static_cast<float>(v[0] * inv), static_cast<float>(v[1] * inv),
       static_cast<float>(v[2] * inv)};
}

template <bool kUnitFaces>
std::vector<Vec3> accumulate(const Mesh& mesh) {
  std::vector<Vec3> out(mesh.positions.size(), Vec3{0.0f, 0.0f, 0.0f});
  for (const Tri& f : mesh.faces) {
    Vec3 n;
    if constexpr (kUnitFaces) {
      n = reference_unit_face_normal(mesh, f);
    } else {
      n = face_cross(mesh, f);
    }
    for (uint32_t v : f) {
      out[v][0] += n[0];
      out[v][1] += n[1];
      out[v][2] += n[2];
    }
  }
  for (Vec3& n : out) {
    if constexpr (kUnitFaces) {
      unitize_like_reference(n);
    } else {
      normalize_or_zero(n);
    }
  }
  return out;
}

}  // namespace

std::vector<Vec3> vertex_normals_area_weighted(const Mesh& mesh) {
  return accumulate<false>(mesh);
}

std::vector<Vec3> vertex_normals_face_mean(const Mesh& mesh) {
  return accumulate<true>(mesh);
}

}  // namespace gen3d::mesh
