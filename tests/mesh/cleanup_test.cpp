#include "mesh/cleanup.h"

#include <gtest/gtest.h>

#include "mesh/error.h"
#include "test_meshes.h"

namespace gen3d::mesh {
namespace {

// Translated copy of `m` appended to `out` (faces and UVs re-indexed).
void append(Mesh& out, const Mesh& m, float dx) {
  const uint32_t v0 = uint32_t(out.positions.size()), t0 = uint32_t(out.uvs.size());
  for (Vec3 p : m.positions) out.positions.push_back({p[0] + dx, p[1], p[2]});
  for (Tri f : m.faces) out.faces.push_back({f[0] + v0, f[1] + v0, f[2] + v0});
  if (m.has_uvs()) {
    out.uvs.insert(out.uvs.end(), m.uvs.begin(), m.uvs.end());
    for (Tri f : m.uv_faces) out.uv_faces.push_back({f[0] + t0, f[1] + t0, f[2] + t0});
  } else {  // one shared UV, so the combined mesh keeps a UV per corner
    out.uvs.push_back({0.5f, 0.5f});
    for (size_t f = 0; f < m.faces.size(); ++f) out.uv_faces.push_back({t0, t0, t0});
  }
}

TEST(Cleanup, CleanMeshIsUnchanged) {
  const Mesh cube = testing::textured_cube();
  CleanupReport rep;
  const Mesh out = cleanup(cube, {}, &rep);
  EXPECT_EQ(out.positions, cube.positions);
  EXPECT_EQ(out.faces, cube.faces);
  EXPECT_EQ(out.uvs, cube.uvs);
  EXPECT_EQ(out.uv_faces, cube.uv_faces);
  EXPECT_EQ(rep.degenerate_faces + rep.duplicate_faces + rep.unreferenced_vertices, 0u);
}

TEST(Cleanup, RemovesDegenerateAndDuplicateFaces) {
  Mesh m = testing::textured_cube();
  m.faces.push_back({0, 0, 1});  // repeated index
  m.uv_faces.push_back({0, 0, 1});
  m.positions.push_back({0.5f, 0, 0});  // collinear with 0 and 1: zero area
  m.faces.push_back({0, 1, 8});
  m.uv_faces.push_back({0, 1, 2});
  m.faces.push_back({m.faces[0][2], m.faces[0][1], m.faces[0][0]});  // reversed duplicate
  m.uv_faces.push_back(m.uv_faces[0]);
  CleanupReport rep;
  const Mesh out = cleanup(m, {}, &rep);
  EXPECT_EQ(rep.degenerate_faces, 2u);
  EXPECT_EQ(rep.duplicate_faces, 1u);
  EXPECT_EQ(rep.unreferenced_vertices, 1u);  // the collinear helper vertex
  EXPECT_EQ(out.faces.size(), 12u);
  EXPECT_EQ(out.positions.size(), 8u);
}

TEST(Cleanup, AreaThresholdCatchesSlivers) {
  Mesh m;
  m.positions = {{0, 0, 0}, {1, 0, 0}, {0, 1, 0}, {0.5f, 1e-4f, 0}};
  m.faces = {{0, 1, 2}, {0, 3, 1}};
  CleanupOptions o;
  o.degenerate_area = 1e-3f;
  EXPECT_EQ(cleanup(m, o).faces.size(), 1u);
  o.degenerate_area = 0.0f;
  EXPECT_EQ(cleanup(m, o).faces.size(), 2u);
}

TEST(Cleanup, MergesCoincidentVerticesWithinDistance) {
  // Two triangles sharing an edge whose copies differ by 1e-6.
  Mesh m;
  m.positions = {{0, 0, 0}, {1, 0, 0}, {0, 1, 0}, {1e-6f, 1, 0}, {1, 1e-6f, 0}, {1, 1, 0}};
  m.faces = {{0, 1, 2}, {4, 5, 3}};
  EXPECT_EQ(count_components(m), 2u);
  CleanupOptions o;
  o.merge_distance = 1e-5f;
  CleanupReport rep;
  const Mesh out = cleanup(m, o, &rep);
  EXPECT_EQ(rep.merged_vertices, 2u);
  EXPECT_EQ(out.positions.size(), 4u);
  EXPECT_EQ(count_components(out), 1u);
  o.merge_distance = 1e-7f;  // too small: nothing merges
  EXPECT_EQ(cleanup(m, o).positions.size(), 6u);
}

TEST(Cleanup, RemovesSmallFloatingComponents) {
  Mesh m;
  append(m, testing::uv_sphere(16, 32), 0.0f);  // 960 faces
  append(m, testing::textured_cube(), 5.0f);    // 12 faces, floating
  ASSERT_EQ(count_components(m), 2u);
  CleanupOptions o;
  o.min_component_faces = 0.05;
  CleanupReport rep;
  const Mesh out = cleanup(m, o, &rep);
  EXPECT_EQ(rep.removed_components, 1u);
  EXPECT_EQ(rep.component_faces, 12u);
  EXPECT_EQ(out.faces.size(), m.faces.size() - 12);
  EXPECT_EQ(count_components(out), 1u);
  for (const Vec3& p : out.positions) EXPECT_LT(p[0], 2.0f);  // the cube at x = 5 is gone
  EXPECT_EQ(out.uv_faces.size(), out.faces.size());
  for (const Tri& t : out.uv_faces)
    for (uint32_t i : t) EXPECT_LT(i, out.uvs.size());
}

TEST(Cleanup, AreaFractionKeepsLargestEvenIfFewerFaces) {
  Mesh m;
  append(m, testing::textured_cube(), 0.0f);  // area 6, 12 faces
  Mesh tiny = testing::uv_sphere(8, 8, 0.01f);
  append(m, tiny, 3.0f);  // many faces, tiny area
  CleanupOptions o;
  o.min_component_area = 0.01;
  const Mesh out = cleanup(m, o);
  EXPECT_EQ(out.faces.size(), 12u);
}

TEST(Cleanup, RejectsOutOfRangeIndices) {
  Mesh m = testing::textured_cube();
  m.faces[0][0] = 100;
  EXPECT_THROW(cleanup(m), MeshError);
}

}  // namespace
}  // namespace gen3d::mesh
