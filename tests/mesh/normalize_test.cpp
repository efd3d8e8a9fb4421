#include "mesh/normalize.h"

#include <gtest/gtest.h>

#include <cmath>

#include "mesh/error.h"
#include "test_meshes.h"

namespace gen3d::mesh {
namespace {

TEST(Normalize, BoundingSphereAndAxes) {
  Mesh m = testing::textured_cube();
  for (Vec3& p : m.positions) p = {p[0] * 2 + 3, p[1] - 7, p[2] * 0.5f};
  const Mesh before = m;
  const NormalizeTransform t = normalize_mesh(m);
  float max_r = 0;
  Vec3 lo{1e9f, 1e9f, 1e9f}, hi{-1e9f, -1e9f, -1e9f};
  for (const Vec3& p : m.positions) {
    max_r = std::max(max_r, std::sqrt(p[0] * p[0] + p[1] * p[1] + p[2] * p[2]));
    for (int i = 0; i < 3; ++i) lo[i] = std::min(lo[i], p[i]), hi[i] = std::max(hi[i], p[i]);
  }
  EXPECT_NEAR(max_r, 0.575f, 1e-6f);
  for (int i = 0; i < 3; ++i) EXPECT_NEAR(lo[i] + hi[i], 0.0f, 1e-6f);
  // Internal = (-x, z, -y): the input x extent (2) maps to internal x, input z (0.5) to internal y.
  EXPECT_NEAR((hi[0] - lo[0]) / (hi[1] - lo[1]), 2.0f / 0.5f, 1e-5f);
  EXPECT_NEAR((hi[0] - lo[0]) / (hi[2] - lo[2]), 2.0f / 1.0f, 1e-5f);
  // Input corner with the largest x goes to the most negative internal x.
  EXPECT_LT(m.positions[1][0], 0.0f);
  for (size_t i = 0; i < m.uvs.size(); ++i) EXPECT_EQ(m.uvs[i][1], 1.0f - before.uvs[i][1]);
  EXPECT_EQ(m.faces, before.faces);
  EXPECT_GT(t.multiplier, 0.0f);
}

TEST(Normalize, InverseRestoresFrame) {
  Mesh m = testing::uv_sphere(12, 24, 3.0f);
  for (Vec3& p : m.positions) p = {p[0] + 10, p[1] * 2 - 4, p[2] + 1};
  m.normals.assign(m.positions.size(), Vec3{0, 1, 0});
  const Mesh before = m;
  const NormalizeTransform t = normalize_mesh(m);
  EXPECT_EQ(m.normals[0], (Vec3{0, 0, -1}));  // direction (0,1,0) -> internal (0, 0, -1)
  invert_normalization(m, t);
  for (size_t v = 0; v < m.positions.size(); ++v)
    for (int i = 0; i < 3; ++i) EXPECT_NEAR(m.positions[v][i], before.positions[v][i], 2e-6f);
  EXPECT_EQ(m.normals, before.normals);
}

TEST(Normalize, OptionsDisableSteps) {
  Mesh m = testing::textured_cube();
  const Mesh before = m;
  NormalizeOptions o;
  o.texgen_axes = false;
  o.flip_v = false;
  o.auto_center = false;
  o.scale_factor = 2.0;
  const NormalizeTransform t = normalize_mesh(m, o);
  EXPECT_EQ(t.center, (Vec3{0, 0, 0}));
  EXPECT_EQ(m.uvs, before.uvs);
  // Farthest corner from the origin is (1,1,1) at distance sqrt(3): scale = 2 sqrt(3).
  EXPECT_NEAR(t.scale, 2 * std::sqrt(3.0f), 1e-6f);
  EXPECT_NEAR(m.positions[6][0], 1.0f / std::sqrt(3.0f), 1e-6f);
}

TEST(Normalize, RejectsDegenerateInput) {
  Mesh empty;
  EXPECT_THROW(normalize_mesh(empty), MeshError);
  Mesh point;
  point.positions = {{1, 1, 1}, {1, 1, 1}, {1, 1, 1}};
  point.faces = {{0, 1, 2}};
  EXPECT_THROW(normalize_mesh(point), MeshError);
}

}  // namespace
}  // namespace gen3d::mesh
