#include "mesh/normalize.h"

#include <algorithm>
#include <cmath>
#include <string>

#include "mesh/error.h"

namespace gen3d::mesh {
namespace {

Vec3 to_internal(const Vec3& p, bool axes) {
  return axes ? Vec3{-p[0], p[2], -p[1]} : p;
}
Vec3 from_internal(const Vec3& p, bool axes) {
  return axes ? Vec3{-p[0], -p[2], p[1]} : p;
}

}  // namespace

Vec3 NormalizeTransform::apply(const Vec3& p) const {
  const Vec3 q = to_internal(p, texgen_axes);
  // Two float32 operations per component, in the reference's order: (p - c) * m.
  return {(q[0] - center[0]) * multiplier, (q[1] - center[1]) * multiplier,
          (q[2] - center[2]) * multiplier};
}

Vec3 NormalizeTransform::invert(const Vec3& q) const {
  Vec3 p;
  for (int i = 0; i < 3; ++i) p[i] = float(double(q[i]) / double(multiplier) + double(center[i]));
  return from_internal(p, texgen_axes);
}

Vec3 NormalizeTransform::apply_direction(const Vec3& n) const {
  return to_internal(n, texgen_axes);
}
Vec3 NormalizeTransform::invert_direction(const Vec3& n) const {
  return from_internal(n, texgen_axes);
}

NormalizeTransform fit_normalization(const Mesh& mesh, const NormalizeOptions& options) {
  if (mesh.positions.empty()) throw MeshError("normalize: the mesh has no vertices");
  if (!(options.scale_factor > 0.0) || !std::isfinite(options.scale_factor)) {
    throw MeshError("normalize: scale_factor must be positive, got " +
                    std::to_string(options.scale_factor));
  }
  // Only vertices used by faces count, as in the reference (its loader drops unused vertices).
  std::vector<char> used(mesh.positions.size(), mesh.faces.empty() ? 1 : 0);
  for (const Tri& f : mesh.faces)
    for (uint32_t v : f) {
      if (v >= used.size()) throw MeshError("normalize: a face index is out of range");
      used[v] = 1;
    }
  NormalizeTransform t;
  t.texgen_axes = options.texgen_axes;
  t.flip_v = options.flip_v;
  if (options.auto_center) {
    Vec3 lo{INFINITY, INFINITY, INFINITY}, hi{-INFINITY, -INFINITY, -INFINITY};
    for (size_t v = 0; v < mesh.positions.size(); ++v) {
      if (!used[v]) continue;
      const Vec3 q = to_internal(mesh.positions[v], t.texgen_axes);
      for (int i = 0; i < 3; ++i) {
        lo[i] = std::min(lo[i], q[i]);
        hi[i] = std::max(hi[i], q[i]);
      }
    }
    for (int i = 0; i < 3; ++i) t.center[i] = (hi[i] + lo[i]) / 2.0f;
  }
  float max_dist = 0.0f;
  for (size_t v = 0; v < mesh.positions.size(); ++v) {
    if (!used[v]) continue;
    const Vec3 q = to_internal(mesh.positions[v], t.texgen_axes);
    const float d[3] = {q[0] - t.center[0], q[1] - t.center[1], q[2] - t.center[2]};
    max_dist = std::max(max_dist, std::sqrt(d[0] * d[0] + d[1] * d[1] + d[2] * d[2]));
  }
  t.scale = max_dist * 2.0f;
  if (!(t.scale > 0.0f) || !std::isfinite(t.scale)) {
    throw MeshError("normalize: the mesh has zero or non-finite extent");
  }
  t.multiplier_f64 = options.scale_factor / double(t.scale);
  t.multiplier = float(t.multiplier_f64);
  return t;
}

void apply_normalization(Mesh& mesh, const NormalizeTransform& t) {
  for (Vec3& p : mesh.positions) p = t.apply(p);
  for (Vec3& n : mesh.normals) n = t.apply_direction(n);
  if (t.flip_v)
    for (Vec2& uv : mesh.uvs) uv[1] = 1.0f - uv[1];
}

void invert_normalization(Mesh& mesh, const NormalizeTransform& t) {
  for (Vec3& p : mesh.positions) p = t.invert(p);
  for (Vec3& n : mesh.normals) n = t.invert_direction(n);
  if (t.flip_v)
    for (Vec2& uv : mesh.uvs) uv[1] = 1.0f - uv[1];
}

NormalizeTransform normalize_mesh(Mesh& mesh, const NormalizeOptions& options) {
  const NormalizeTransform t = fit_normalization(mesh, options);
  apply_normalization(mesh, t);
  return t;
}

}  // namespace gen3d::mesh
