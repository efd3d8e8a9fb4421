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

TEST(Cleanup, FaceMaterialsFollowTheirFaces) {
  Mesh m = testing::textured_cube();
  m.materials = {Material{"even", nullptr, {1, 1, 1, 1}}, Material{"odd", nullptr, {0, 0, 0, 1}}};
  for (size_t f = 0; f < m.faces.size(); ++f) m.face_materials.push_back(uint32_t(f % 2));
  m.faces.insert(m.faces.begin(), {0, 0, 1});  // a degenerate face first shifts every other face
  m.uv_faces.insert(m.uv_faces.begin(), {0, 0, 1});
  m.face_materials.insert(m.face_materials.begin(), 1);
  const Mesh out = cleanup(m, {});
  ASSERT_EQ(out.faces.size(), 12u);
  ASSERT_EQ(out.face_materials.size(), 12u);
  for (size_t f = 0; f < out.faces.size(); ++f) EXPECT_EQ(out.face_materials[f], f % 2) << f;
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

namespace gen3d::mesh {
namespace {

Mesh rewound(Mesh m) {
  for (Tri& f : m.faces) std::swap(f[1], f[2]);
  for (Tri& f : m.uv_faces) std::swap(f[1], f[2]);
  return m;
}

double signed_volume(const Mesh& m) {
  double v = 0;
  for (const Tri& f : m.faces) {
    const Vec3 &a = m.positions[f[0]], &b = m.positions[f[1]], &c = m.positions[f[2]];
    v += (a[0] * (b[1] * c[2] - b[2] * c[1]) - a[1] * (b[0] * c[2] - b[2] * c[0]) +
          a[2] * (b[0] * c[1] - b[1] * c[0])) /
         6.0;
  }
  return v;
}

// Inside-out closed parts are rewound (their UV corners with them); right-side-out ones are not.
TEST(Cleanup, InsideOutClosedPartsAreTurnedOutward) {
  const Mesh cube = testing::textured_cube();
  CleanupReport rep;
  const Mesh fixed = cleanup(rewound(cube), {}, &rep);
  EXPECT_EQ(rep.flipped_faces, 12u);
  EXPECT_NEAR(signed_volume(fixed), 1.0, 1e-6);
  EXPECT_EQ(fixed.faces, cube.faces);
  EXPECT_EQ(fixed.uv_faces, cube.uv_faces);

  // Two parts: only the inside-out one turns.
  Mesh two = testing::uv_sphere(8, 12);
  const Mesh inner = rewound(testing::uv_sphere(8, 12, 0.5f));
  const uint32_t base = uint32_t(two.positions.size());
  for (const Vec3& p : inner.positions) two.positions.push_back({p[0] + 3, p[1], p[2]});
  for (const Tri& f : inner.faces) two.faces.push_back({f[0] + base, f[1] + base, f[2] + base});
  const Mesh out = cleanup(two, {}, &rep);
  EXPECT_EQ(rep.flipped_faces, inner.faces.size());
  EXPECT_GT(signed_volume(out), signed_volume(testing::uv_sphere(8, 12)));
}

// An open part turns when its faces clearly point at its centre (a hemisphere wound inward); a
// flat part has no inside and stays as it is.
TEST(Cleanup, OpenPartsTurnOnlyWhenClearlyInsideOut) {
  Mesh dome = testing::uv_sphere(8, 12);
  std::vector<Tri> upper;
  for (const Tri& f : dome.faces)
    if (dome.positions[f[0]][1] + dome.positions[f[1]][1] + dome.positions[f[2]][1] > 0)
      upper.push_back(f);
  dome.faces = upper;
  CleanupReport rep;
  cleanup(dome, {}, &rep);
  EXPECT_EQ(rep.flipped_faces, 0u);
  cleanup(rewound(dome), {}, &rep);
  EXPECT_EQ(rep.flipped_faces, dome.faces.size());

  Mesh quad;
  quad.positions = {{0, 0, 0}, {1, 0, 0}, {1, 1, 0}, {0, 1, 0}};
  quad.faces = {{0, 2, 1}, {0, 3, 2}};  // facing -z
  cleanup(quad, {}, &rep);
  EXPECT_EQ(rep.flipped_faces, 0u);
  CleanupOptions off;
  off.orient_outward = false;
  cleanup(rewound(testing::textured_cube()), off, &rep);
  EXPECT_EQ(rep.flipped_faces, 0u);
}

}  // namespace
}  // namespace gen3d::mesh
