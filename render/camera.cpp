#include "render/camera.h"

#include <cmath>
#include <numbers>

namespace gen3d::render {
namespace {

using D3 = std::array<double, 3>;

D3 cross(const D3& a, const D3& b) {
  return {a[1] * b[2] - a[2] * b[1], a[2] * b[0] - a[0] * b[2], a[0] * b[1] - a[1] * b[0]};
}

D3 normalized(const D3& v) {
  const double n = std::sqrt(v[0] * v[0] + v[1] * v[1] + v[2] * v[2]);
  return {v[0] / n, v[1] / n, v[2] / n};
}

double radians(double deg) {
  return deg * (std::numbers::pi / 180.0);
}

}  // namespace

Mat4 Camera::model_view() const {
  const double e = radians(-elev);
  const double a = radians(azim + 90.0);
  const D3 c = {distance * std::cos(e) * std::cos(a), distance * std::cos(e) * std::sin(a),
                distance * std::sin(e)};
  const D3 f = normalized({-c[0], -c[1], -c[2]});  // look direction, toward the origin
  const D3 r = normalized(cross(f, D3{0.0, 0.0, 1.0}));
  const D3 u = normalized(cross(r, f));
  const D3 rows[3] = {r, u, {-f[0], -f[1], -f[2]}};
  Mat4 m{};
  for (int i = 0; i < 3; ++i) {
    for (int j = 0; j < 3; ++j) m[i * 4 + j] = static_cast<float>(rows[i][j]);
    const double t = rows[i][0] * c[0] + rows[i][1] * c[1] + rows[i][2] * c[2];
    m[i * 4 + 3] = static_cast<float>(-t);
  }
  m[15] = 1.0f;
  return m;
}

Mat4 Camera::projection() const {
  const double right = ortho_scale * 0.5, left = -ortho_scale * 0.5;
  const double top = right, bottom = left;
  Mat4 m{};
  m[0] = static_cast<float>(2.0 / (right - left));
  m[5] = static_cast<float>(2.0 / (top - bottom));
  m[10] = static_cast<float>(-2.0 / (far_plane - near_plane));
  m[3] = static_cast<float>(-(right + left) / (right - left));
  m[7] = static_cast<float>(-(top + bottom) / (top - bottom));
  m[11] = static_cast<float>(-(far_plane + near_plane) / (far_plane - near_plane));
  m[15] = 1.0f;
  return m;
}

ViewSet ViewSet::hunyuan6(double distance, double ortho_scale) {
  const double azims[6] = {0, 90, 180, 270, 0, 180};
  const double elevs[6] = {0, 0, 0, 0, 90, -90};
  const double weights[6] = {1.0, 0.1, 0.5, 0.1, 0.05, 0.05};
  ViewSet set;
  for (int i = 0; i < 6; ++i) {
    View v;
    v.camera.elev = elevs[i];
    v.camera.azim = azims[i];
    v.camera.distance = distance;
    v.camera.ortho_scale = ortho_scale;
    v.weight = weights[i];
    set.views.push_back(v);
  }
  return set;
}

std::vector<mesh::Vec4> transform_points(const Mat4& m, std::span<const mesh::Vec3> positions) {
  std::vector<mesh::Vec4> out(positions.size());
  for (size_t i = 0; i < positions.size(); ++i) {
    const mesh::Vec3& p = positions[i];
    for (int r = 0; r < 4; ++r) {
      const float* row = &m[r * 4];
      out[i][r] = row[0] * p[0] + row[1] * p[1] + row[2] * p[2] + row[3];
    }
  }
  return out;
}

std::vector<mesh::Vec4> transform_points(const Mat4& m, std::span<const mesh::Vec4> points) {
  std::vector<mesh::Vec4> out(points.size());
  for (size_t i = 0; i < points.size(); ++i) {
    const mesh::Vec4& p = points[i];
    for (int r = 0; r < 4; ++r) {
      const float* row = &m[r * 4];
      out[i][r] = row[0] * p[0] + row[1] * p[1] + row[2] * p[2] + row[3] * p[3];
    }
  }
  return out;
}

std::vector<mesh::Vec4> clip_positions(std::span<const mesh::Vec3> positions,
                                       const Camera& camera) {
  const std::vector<mesh::Vec4> view = transform_points(camera.model_view(), positions);
  return transform_points(camera.projection(), std::span<const mesh::Vec4>(view));
}

}  // namespace gen3d::render
