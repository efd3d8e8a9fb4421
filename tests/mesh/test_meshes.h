#pragma once
// Small meshes built in code for the mesh tests.

#include <cmath>
#include <memory>

#include "mesh/mesh.h"

namespace gen3d::mesh::testing {

// Unit cube with 8 welded corners, 12 CCW-outward triangles and a 6-chart UV layout (one UV
// island per face, so every cube edge is a UV seam) plus a 4x4 RGB texture.
inline Mesh textured_cube() {
  Mesh m;
  m.positions = {{0, 0, 0}, {1, 0, 0}, {1, 1, 0}, {0, 1, 0},
                 {0, 0, 1}, {1, 0, 1}, {1, 1, 1}, {0, 1, 1}};
  const uint32_t quads[6][4] = {{0, 3, 2, 1}, {4, 5, 6, 7}, {0, 1, 5, 4},
                                {2, 3, 7, 6}, {1, 2, 6, 5}, {0, 4, 7, 3}};
  for (int q = 0; q < 6; ++q) {
    const float u0 = (q % 3) / 3.0f, v0 = (q / 3) / 2.0f, du = 1 / 3.0f - 0.01f, dv = 0.49f;
    const uint32_t base = uint32_t(m.uvs.size());
    m.uvs.push_back({u0, v0});
    m.uvs.push_back({u0 + du, v0});
    m.uvs.push_back({u0 + du, v0 + dv});
    m.uvs.push_back({u0, v0 + dv});
    const auto* c = quads[q];
    m.faces.push_back({c[0], c[1], c[2]});
    m.faces.push_back({c[0], c[2], c[3]});
    m.uv_faces.push_back({base, base + 1, base + 2});
    m.uv_faces.push_back({base, base + 2, base + 3});
  }
  auto tex = std::make_shared<image::Image>(4, 4, 3);
  for (int y = 0; y < 4; ++y)
    for (int x = 0; x < 4; ++x) {
      float* p = tex->at(x, y);
      p[0] = x / 3.0f;
      p[1] = y / 3.0f;
      p[2] = 0.2f;
    }
  m.texture = tex;
  return m;
}

// UV sphere (lat-long grid) of the given resolution, welded, without UVs.
inline Mesh uv_sphere(int rings, int segments, float radius = 1.0f) {
  Mesh m;
  m.positions.push_back({0, radius, 0});
  for (int r = 1; r < rings; ++r) {
    const float th = float(M_PI) * r / rings;
    for (int s = 0; s < segments; ++s) {
      const float ph = 2 * float(M_PI) * s / segments;
      m.positions.push_back({radius * std::sin(th) * std::cos(ph), radius * std::cos(th),
                             -radius * std::sin(th) * std::sin(ph)});
    }
  }
  m.positions.push_back({0, -radius, 0});
  const uint32_t south = uint32_t(m.positions.size() - 1);
  auto ring = [&](int r, int s) { return uint32_t(1 + (r - 1) * segments + (s % segments)); };
  for (int s = 0; s < segments; ++s) m.faces.push_back({0, ring(1, s), ring(1, s + 1)});
  for (int r = 1; r < rings - 1; ++r)
    for (int s = 0; s < segments; ++s) {
      m.faces.push_back({ring(r, s), ring(r + 1, s), ring(r + 1, s + 1)});
      m.faces.push_back({ring(r, s), ring(r + 1, s + 1), ring(r, s + 1)});
    }
  for (int s = 0; s < segments; ++s)
    m.faces.push_back({ring(rings - 1, s), south, ring(rings - 1, s + 1)});
  return m;
}

// A thin pipe along z (radius 0.05, length 2) tessellated as CAD exporters do: 2 x `segments`
// slivers from end to end, no caps.
inline Mesh sliver_pipe(int segments = 256) {
  Mesh m;
  const uint32_t n = uint32_t(segments);
  for (int end = 0; end < 2; ++end)
    for (uint32_t i = 0; i < n; ++i) {
      const double a = 2 * M_PI * i / n;
      m.positions.push_back(
          {float(0.05 * std::cos(a)), float(0.05 * std::sin(a)), float(2.0 * end - 1.0)});
    }
  for (uint32_t i = 0; i < n; ++i) {
    const uint32_t j = (i + 1) % n;
    m.faces.push_back({i, j, n + j});
    m.faces.push_back({i, n + j, n + i});
  }
  return m;
}

}  // namespace gen3d::mesh::testing
