#pragma once
// Seeded synthetic meshes for the render tests.

#include <cmath>
#include <random>
#include <utility>

#include "mesh/mesh.h"

namespace gen3d::render::testing {

// A closed, bumpy UV sphere of radius ~0.5 around the origin, CCW-outward in the renderer's
// internal frame, with per-vertex UVs (uv_faces == faces). rings x segments quads.
inline mesh::Mesh bumpy_sphere(int rings, int segments, uint32_t seed = 7) {
  std::mt19937 rng(seed);
  std::uniform_real_distribution<float> bump(-0.03f, 0.03f);
  mesh::Mesh m;
  for (int r = 0; r <= rings; ++r) {
    const float th = static_cast<float>(M_PI) * r / rings;
    for (int s = 0; s <= segments; ++s) {
      const float ph = 2.0f * static_cast<float>(M_PI) * s / segments;
      const float rad = 0.5f + ((r == 0 || r == rings || s == segments) ? 0.0f : bump(rng));
      m.positions.push_back({rad * std::sin(th) * std::cos(ph), rad * std::sin(th) * std::sin(ph),
                             rad * std::cos(th)});
      m.uvs.push_back({0.02f + 0.96f * s / segments, 0.98f - 0.96f * r / rings});
    }
  }
  const auto id = [&](int r, int s) { return static_cast<uint32_t>(r * (segments + 1) + s); };
  for (int r = 0; r < rings; ++r) {
    for (int s = 0; s < segments; ++s) {
      if (r > 0) m.faces.push_back({id(r, s), id(r + 1, s), id(r, s + 1)});
      if (r < rings - 1) m.faces.push_back({id(r, s + 1), id(r + 1, s), id(r + 1, s + 1)});
    }
  }
  m.uv_faces = m.faces;
  return m;
}

// The mesh as the reference's loader leaves a CCW-outward input mesh: its axis change is a
// reflection, so in the internal frame the winding is inward (README Q8). Swapping two corners of
// every face gives the same orientation for a mesh built directly in the internal frame.
inline mesh::Mesh as_loaded(mesh::Mesh m) {
  for (auto& f : m.faces) std::swap(f[1], f[2]);
  for (auto& f : m.uv_faces) std::swap(f[1], f[2]);
  return m;
}

// Random triangle soup inside the view volume (overlapping, intersecting, all orientations).
inline mesh::Mesh triangle_soup(int count, uint32_t seed) {
  std::mt19937 rng(seed);
  std::uniform_real_distribution<float> c(-0.62f, 0.62f);
  std::uniform_real_distribution<float> d(-0.15f, 0.15f);
  mesh::Mesh m;
  for (int i = 0; i < count; ++i) {
    const mesh::Vec3 o = {c(rng), c(rng), c(rng)};
    for (int k = 0; k < 3; ++k)
      m.positions.push_back({o[0] + d(rng), o[1] + d(rng), o[2] + d(rng)});
    const uint32_t b = static_cast<uint32_t>(3 * i);
    m.faces.push_back({b, b + 1, b + 2});
  }
  return m;
}

}  // namespace gen3d::render::testing
