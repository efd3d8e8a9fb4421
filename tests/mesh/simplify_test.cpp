#include "mesh/simplify.h"

#include <gtest/gtest.h>

#include <cmath>
#include <map>
#include <set>

#include "mesh/error.h"
#include "mesh/io.h"
#include "support/paths.h"
#include "test_meshes.h"

namespace gen3d::mesh {
namespace {

// Sphere with a 2-chart UV layout: upper hemisphere in the left half of the atlas, lower in the
// right half, split along the equator (a UV seam).
Mesh two_chart_sphere() {
  Mesh m = testing::uv_sphere(32, 64);
  for (const Vec3& p : m.positions) {
    m.uvs.push_back({0.25f + 0.2f * p[0], 0.5f + 0.2f * p[2]});  // upper chart copy
    m.uvs.push_back({0.75f + 0.2f * p[0], 0.5f + 0.2f * p[2]});  // lower chart copy
  }
  for (const Tri& f : m.faces) {
    float cy = 0;
    for (uint32_t v : f) cy += m.positions[v][1];
    const uint32_t chart = cy >= 0 ? 0 : 1;
    m.uv_faces.push_back({2 * f[0] + chart, 2 * f[1] + chart, 2 * f[2] + chart});
  }
  return m;
}

TEST(Simplify, ReachesRatioAndStaysConsistent) {
  const Mesh m = testing::uv_sphere(32, 64);
  SimplifyOptions o;
  o.target_ratio = 0.25f;
  SimplifyReport rep;
  const Mesh out = simplify(m, o, &rep);
  EXPECT_EQ(rep.input_faces, m.faces.size());
  EXPECT_EQ(rep.output_faces, out.faces.size());
  EXPECT_LE(out.faces.size(), m.faces.size() / 4 + 2);
  EXPECT_GE(out.faces.size(), m.faces.size() / 5);
  for (const Tri& f : out.faces)
    for (uint32_t v : f) ASSERT_LT(v, out.positions.size());
  // Still a sphere: every kept vertex lies on the unit sphere (vertices are never moved).
  for (const Vec3& p : out.positions)
    EXPECT_NEAR(std::sqrt(p[0] * p[0] + p[1] * p[1] + p[2] * p[2]), 1.0f, 1e-5f);
}

TEST(Simplify, TargetFaceCount) {
  const Mesh m = load_mesh(test::data_dir() + "/mesh/meshes-assimp/OBJ/WusonOBJ.obj");
  SimplifyOptions o;
  o.target_faces = 1000;
  const Mesh out = simplify(m, o);
  EXPECT_LE(out.faces.size(), 1000u);
  EXPECT_GE(out.faces.size(), 800u);
}

TEST(Simplify, UvSeamsArePreserved) {
  const Mesh m = two_chart_sphere();
  SimplifyOptions o;
  o.target_ratio = 0.2f;
  const Mesh out = simplify(m, o);
  ASSERT_TRUE(out.has_uvs());
  ASSERT_LT(out.faces.size(), m.faces.size() / 3);
  // Every face's corners use UVs of one chart only (no face straddles the two islands), and each
  // corner's UV is the one its position had in that chart.
  for (size_t f = 0; f < out.faces.size(); ++f) {
    std::set<int> charts;
    for (int k = 0; k < 3; ++k) {
      const Vec2& uv = out.uvs[out.uv_faces[f][k]];
      const Vec3& p = out.positions[out.faces[f][k]];
      const int chart = uv[0] < 0.5f ? 0 : 1;
      charts.insert(chart);
      EXPECT_NEAR(uv[0], (chart ? 0.75f : 0.25f) + 0.2f * p[0], 1e-6f);
      EXPECT_NEAR(uv[1], 0.5f + 0.2f * p[2], 1e-6f);
    }
    EXPECT_EQ(charts.size(), 1u) << "face " << f;
  }
  // The equator seam keeps vertices on it: some output positions have y == 0.
  size_t equator = 0;
  for (const Vec3& p : out.positions) equator += std::abs(p[1]) < 1e-6f;
  EXPECT_GT(equator, 8u);
}

TEST(Simplify, LockBorderKeepsOpenBoundary) {
  // Hemisphere (open at the equator).
  Mesh m = testing::uv_sphere(32, 64);
  std::vector<Tri> upper;
  for (const Tri& f : m.faces) {
    float cy = 0;
    for (uint32_t v : f) cy += m.positions[v][1];
    if (cy > 0) upper.push_back(f);
  }
  m.faces = upper;
  std::set<Vec3> border_before;
  for (const Vec3& p : m.positions)
    if (std::abs(p[1]) < 1e-6f) border_before.insert(p);
  ASSERT_EQ(border_before.size(), 64u);
  SimplifyOptions o;
  o.target_ratio = 0.1f;
  o.lock_border = true;
  const Mesh out = simplify(m, o);
  std::set<Vec3> border_after;
  for (const Vec3& p : out.positions)
    if (std::abs(p[1]) < 1e-6f) border_after.insert(p);
  EXPECT_EQ(border_after, border_before);
  o.lock_border = false;
  std::set<Vec3> border_free;
  for (const Vec3& p : simplify(m, o).positions)
    if (std::abs(p[1]) < 1e-6f) border_free.insert(p);
  EXPECT_LT(border_free.size(), border_before.size());
}

TEST(Simplify, KeepsTextureAndColours) {
  Mesh m = two_chart_sphere();
  m.texture = std::make_shared<image::Image>(8, 8, 3, 0.5f);
  m.colors.assign(m.positions.size(), {0.1f, 0.2f, 0.3f, 1.0f});
  m.normals.assign(m.positions.size(), {0, 1, 0});
  SimplifyOptions o;
  o.target_ratio = 0.3f;
  const Mesh out = simplify(m, o);
  EXPECT_EQ(out.texture, m.texture);
  ASSERT_EQ(out.colors.size(), out.positions.size());
  for (const Vec4& c : out.colors) EXPECT_EQ(c, (Vec4{0.1f, 0.2f, 0.3f, 1.0f}));
  EXPECT_TRUE(out.normals.empty());  // stale after simplification: recompute
}

TEST(Simplify, KeepsEveryFacesMaterial) {
  Mesh m = two_chart_sphere();
  m.materials = {Material{"top", nullptr, {1, 0, 0, 1}}, Material{"bottom", nullptr, {0, 0, 1, 1}}};
  m.face_materials.resize(m.faces.size());
  for (size_t f = 0; f < m.faces.size(); ++f) {  // material by the face centre's height
    float y = 0;
    for (uint32_t v : m.faces[f]) y += m.positions[v][1];
    m.face_materials[f] = y >= 0 ? 0 : 1;
  }
  SimplifyOptions o;
  o.target_ratio = 0.3f;
  const Mesh out = simplify(m, o);
  ASSERT_EQ(out.face_materials.size(), out.faces.size());
  EXPECT_EQ(out.materials.size(), 2u);
  size_t both[2] = {0, 0};
  for (size_t f = 0; f < out.faces.size(); ++f) {
    float y = 0;
    for (uint32_t v : out.faces[f]) y += out.positions[v][1];
    ++both[out.face_materials[f]];
    // The border between materials is kept, so every face stays on its own side.
    if (std::abs(y) > 1e-4f)
      EXPECT_EQ(out.face_materials[f], y > 0 ? 0u : 1u) << f;
    else
      EXPECT_LT(out.face_materials[f], 2u);
  }
  EXPECT_GT(both[0], 0u);
  EXPECT_GT(both[1], 0u);
}

TEST(Simplify, RejectsBadArguments) {
  SimplifyOptions o;
  o.target_ratio = 0.0f;
  EXPECT_THROW(simplify(testing::uv_sphere(8, 8), o), MeshError);
  EXPECT_THROW(simplify(Mesh{}), MeshError);
}

}  // namespace
}  // namespace gen3d::mesh
