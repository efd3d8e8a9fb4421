#include "mesh/uv_unwrap.h"

#include <gtest/gtest.h>

#include <cmath>
#include <map>
#include <set>

#include <tbb/global_control.h>

#include "mesh/error.h"
#include "mesh/io.h"
#include "support/paths.h"
#include "test_meshes.h"

namespace gen3d::mesh {
namespace {

// Texels (x + y * T) that the UV triangle touches at all (conservative), computed independently of
// the implementation: a texel is touched when no separating axis exists between it and the
// triangle.
std::vector<int> touched_texels(const Vec2 (&uv)[3], int T) {
  double p[3][2];
  for (int k = 0; k < 3; ++k) p[k][0] = uv[k][0] * T, p[k][1] = uv[k][1] * T;
  const double area =
      (p[1][0] - p[0][0]) * (p[2][1] - p[0][1]) - (p[1][1] - p[0][1]) * (p[2][0] - p[0][0]);
  std::vector<int> out;
  const int x0 = std::max(0, int(std::floor(std::min({p[0][0], p[1][0], p[2][0]}))));
  const int x1 = std::min(T - 1, int(std::floor(std::max({p[0][0], p[1][0], p[2][0]}))));
  const int y0 = std::max(0, int(std::floor(std::min({p[0][1], p[1][1], p[2][1]}))));
  const int y1 = std::min(T - 1, int(std::floor(std::max({p[0][1], p[1][1], p[2][1]}))));
  for (int y = y0; y <= y1; ++y)
    for (int x = x0; x <= x1; ++x) {
      bool separated = false;
      for (int e = 0; e < 3 && !separated; ++e) {
        const double* a = p[e];
        const double* b = p[(e + 1) % 3];
        // Outward normal of edge a->b for a triangle of sign(area).
        const double nx = (b[1] - a[1]) * (area > 0 ? 1 : -1),
                     ny = -(b[0] - a[0]) * (area > 0 ? 1 : -1);
        double best = 1e300;  // smallest projection of the square's corners on the normal
        for (int cx = 0; cx <= 1; ++cx)
          for (int cy = 0; cy <= 1; ++cy)
            best = std::min(best, nx * (x + cx - a[0]) + ny * (y + cy - a[1]));
        separated = best > 1e-9;
      }
      if (!separated) out.push_back(y * T + x);
    }
  return out;
}

struct Separation {
  size_t clashes = 0;    // texels touched by two charts
  size_t too_close = 0;  // texel pairs of different charts within `gutter` texels (Chebyshev)
};

// Rasterizes every chart conservatively and measures how they touch each other.
Separation separation(const UnwrapResult& r, int T, int gutter) {
  Separation s;
  std::vector<int> owner(size_t(T) * T, -1);
  for (size_t f = 0; f < r.mesh.faces.size(); ++f) {
    const Vec2 uv[3] = {r.mesh.uvs[r.mesh.uv_faces[f][0]], r.mesh.uvs[r.mesh.uv_faces[f][1]],
                        r.mesh.uvs[r.mesh.uv_faces[f][2]]};
    for (int t : touched_texels(uv, T)) {
      int& o = owner[t];
      if (o >= 0 && o != int(r.face_chart[f])) ++s.clashes;
      o = int(r.face_chart[f]);
    }
  }
  for (int y = 0; y < T; ++y)
    for (int x = 0; x < T; ++x) {
      const int o = owner[y * T + x];
      if (o < 0) continue;
      for (int dy = -gutter; dy <= gutter; ++dy)
        for (int dx = -gutter; dx <= gutter; ++dx) {
          const int xx = x + dx, yy = y + dy;
          if (xx < 0 || yy < 0 || xx >= T || yy >= T) continue;
          const int q = owner[yy * T + xx];
          s.too_close += q >= 0 && q != o;
        }
    }
  return s;
}

void expect_charts_separated(const UnwrapResult& r, int T, int gutter) {
  const Separation s = separation(r, T, gutter);
  EXPECT_EQ(s.clashes, 0u) << "texels touched by two charts";
  EXPECT_EQ(s.too_close, 0u) << "charts closer than the gutter";
}

void expect_valid_atlas(const Mesh& in, const UnwrapResult& r) {
  ASSERT_EQ(r.mesh.positions, in.positions);
  ASSERT_EQ(r.mesh.faces, in.faces);
  ASSERT_EQ(r.mesh.uv_faces.size(), in.faces.size());
  ASSERT_EQ(r.face_chart.size(), in.faces.size());
  for (const Tri& t : r.mesh.uv_faces)
    for (uint32_t i : t) ASSERT_LT(i, r.mesh.uvs.size());
  for (const Vec2& uv : r.mesh.uvs) {
    EXPECT_GE(uv[0], 0.0f);
    EXPECT_LE(uv[0], 1.0f);
    EXPECT_GE(uv[1], 0.0f);
    EXPECT_LE(uv[1], 1.0f);
  }
  std::set<uint32_t> charts(r.face_chart.begin(), r.face_chart.end());
  EXPECT_EQ(charts.size(), r.metrics.charts);
  // Every face gets a proper, non-folded UV triangle (CCW like its 3D winding).
  for (size_t f = 0; f < in.faces.size(); ++f) {
    const Vec2& a = r.mesh.uvs[r.mesh.uv_faces[f][0]];
    const Vec2& b = r.mesh.uvs[r.mesh.uv_faces[f][1]];
    const Vec2& c = r.mesh.uvs[r.mesh.uv_faces[f][2]];
    const double area = (double(b[0]) - a[0]) * (double(c[1]) - a[1]) -
                        (double(b[1]) - a[1]) * (double(c[0]) - a[0]);
    EXPECT_GT(area, 0.0) << "face " << f;
  }
}

// A bumpy sphere: curved enough to need LSCM and several charts.
Mesh bumpy_sphere(int rings, int segments) {
  Mesh m = testing::uv_sphere(rings, segments);
  for (Vec3& p : m.positions) {
    const float s = 1.0f + 0.15f * std::sin(5 * p[0]) * std::cos(4 * p[1]) * std::sin(3 * p[2]);
    p = {p[0] * s, p[1] * s, p[2] * s};
  }
  return m;
}

TEST(UvUnwrap, CubeGetsOneFlatChartPerSide) {
  Mesh cube = testing::textured_cube();
  cube.uvs.clear();
  cube.uv_faces.clear();
  UnwrapOptions o;
  o.texture_size = 256;
  o.gutter = 4;
  const UnwrapResult r = uv_unwrap(cube, o);
  expect_valid_atlas(cube, r);
  EXPECT_EQ(r.metrics.charts, 6u);
  EXPECT_EQ(r.metrics.lscm_charts, 0u);
  EXPECT_NEAR(r.metrics.angle_distortion, 0.0, 1e-4);
  EXPECT_NEAR(r.metrics.area_distortion, 0.0, 1e-4);
  EXPECT_NEAR(r.metrics.seam_length, 12.0, 1e-4);  // every cube edge
  expect_charts_separated(r, o.texture_size, o.gutter);
}

TEST(UvUnwrap, CurvedMeshIsValidSeparatedAndDense) {
  const Mesh m = bumpy_sphere(48, 96);
  UnwrapOptions o;
  o.texture_size = 512;
  o.gutter = 2;
  const UnwrapResult r = uv_unwrap(m, o);
  expect_valid_atlas(m, r);
  expect_charts_separated(r, o.texture_size, o.gutter);
  EXPECT_GT(r.metrics.charts, 1u);
  EXPECT_GT(r.metrics.lscm_charts, 0u);
  EXPECT_GT(r.metrics.utilization, 0.5);
  EXPECT_LT(r.metrics.utilization, 1.0);
  EXPECT_LT(r.metrics.angle_distortion, 0.2);
  const UvCheckResult chk = check_uvs(r.mesh, o.texture_size);
  EXPECT_EQ(chk.overlapping_texels, 0u);
  EXPECT_EQ(chk.out_of_range, 0u);
  EXPECT_NEAR(double(chk.covered_texels) / (512.0 * 512.0), r.metrics.utilization, 0.03);
}

TEST(UvUnwrap, RealCharacterMeshPacksDensely) {
  // 3.7k-face character from the assimp corpus: many small curved parts.
  const Mesh m = load_mesh(test::data_dir() + "/mesh/meshes-assimp/OBJ/WusonOBJ.obj");
  UnwrapOptions o;
  o.texture_size = 1024;
  o.gutter = 4;
  const UnwrapResult r = uv_unwrap(m, o);
  expect_valid_atlas(m, r);
  expect_charts_separated(r, o.texture_size, o.gutter);
  EXPECT_GE(r.metrics.utilization, 0.6);
  EXPECT_EQ(check_uvs(r.mesh, o.texture_size).out_of_range, 0u);
}

TEST(UvUnwrap, DeterministicAcrossThreadCounts) {
  const Mesh m = bumpy_sphere(40, 80);
  UnwrapOptions o;
  o.texture_size = 1024;
  UnwrapResult one, many;
  {
    tbb::global_control gc(tbb::global_control::max_allowed_parallelism, 1);
    one = uv_unwrap(m, o);
  }
  {
    tbb::global_control gc(tbb::global_control::max_allowed_parallelism, 8);
    many = uv_unwrap(m, o);
  }
  EXPECT_EQ(one.mesh.uvs, many.mesh.uvs);
  EXPECT_EQ(one.mesh.uv_faces, many.mesh.uv_faces);
  EXPECT_EQ(one.face_chart, many.face_chart);
}

TEST(UvUnwrap, SeparationCheckCatchesOverlappingCharts) {
  // Guards the checker itself: move one chart onto another and it must complain.
  Mesh cube = testing::textured_cube();
  cube.uvs.clear();
  cube.uv_faces.clear();
  UnwrapOptions o;
  o.texture_size = 128;
  UnwrapResult r = uv_unwrap(cube, o);
  // Shift chart 1's UVs by the offset between the first UV of chart 0 and of chart 1.
  std::map<uint32_t, Vec2> first_uv;
  for (size_t f = 0; f < r.mesh.faces.size(); ++f)
    first_uv.try_emplace(r.face_chart[f], r.mesh.uvs[r.mesh.uv_faces[f][0]]);
  const Vec2 d = {first_uv[0][0] - first_uv[1][0], first_uv[0][1] - first_uv[1][1]};
  std::set<uint32_t> moved;
  for (size_t f = 0; f < r.mesh.faces.size(); ++f)
    if (r.face_chart[f] == 1)
      for (uint32_t t : r.mesh.uv_faces[f])
        if (moved.insert(t).second)
          r.mesh.uvs[t] = {r.mesh.uvs[t][0] + d[0], r.mesh.uvs[t][1] + d[1]};
  const Separation s = separation(r, o.texture_size, o.gutter);
  EXPECT_GT(s.clashes, 0u);
  EXPECT_GT(s.too_close, 0u);
}

TEST(UvUnwrap, ZeroTimeBudgetStillGivesValidAtlas) {
  const Mesh m = bumpy_sphere(24, 48);
  UnwrapOptions o;
  o.texture_size = 512;
  o.max_seconds = 0.0;  // LSCM skipped, packing stops at its first fitting layout
  const UnwrapResult r = uv_unwrap(m, o);
  expect_valid_atlas(m, r);
  EXPECT_EQ(r.metrics.lscm_charts, 0u);
  expect_charts_separated(r, o.texture_size, o.gutter);
}

TEST(UvUnwrap, HandlesDegenerateAndNonManifoldFaces) {
  Mesh m = testing::uv_sphere(12, 24);
  m.faces.push_back({0, 0, 1});      // repeated vertex: zero area
  m.faces.push_back(m.faces[5]);     // duplicate face: non-manifold edges
  m.positions.push_back({3, 3, 3});  // a separate floating triangle
  m.positions.push_back({4, 3, 3});
  m.positions.push_back({3, 4, 3});
  const uint32_t n = uint32_t(m.positions.size());
  m.faces.push_back({n - 3, n - 2, n - 1});
  UnwrapOptions o;
  o.texture_size = 256;
  const UnwrapResult r = uv_unwrap(m, o);
  ASSERT_EQ(r.mesh.uv_faces.size(), m.faces.size());
  expect_charts_separated(r, o.texture_size, o.gutter);
}

TEST(UvUnwrap, RejectsBadOptionsAndMeshesButNotTooManyCharts) {
  const Mesh m = testing::uv_sphere(8, 16);
  UnwrapOptions o;
  o.texture_size = 0;
  EXPECT_THROW(uv_unwrap(m, o), MeshError);
  o = {};
  o.gutter = -1;
  EXPECT_THROW(uv_unwrap(m, o), MeshError);
  EXPECT_THROW(uv_unwrap(Mesh{}), MeshError);
  // More charts than a tiny texture can hold with the gutter.
  Mesh many;
  for (int i = 0; i < 400; ++i) {  // 400 separate triangles
    const float x = float(i);
    const uint32_t b = uint32_t(many.positions.size());
    many.positions.push_back({x, 0, 0});
    many.positions.push_back({x + 0.5f, 0, 0});
    many.positions.push_back({x, 0.5f, 0});
    many.faces.push_back({b, b + 1, b + 2});
  }
  // Too many charts for a tiny texture with the gutter is not an error any more: density and
  // gutter go down until they fit.
  o = {};
  o.texture_size = 64;
  o.gutter = 4;
  const UnwrapResult r = uv_unwrap(many, o);
  EXPECT_TRUE(r.metrics.density_reduced);
  expect_valid_atlas(many, r);
  EXPECT_EQ(check_uvs(r.mesh, 256).overlapping_texels, 0u);
}

TEST(CheckUvs, DetectsOverlapAndOutOfRange) {
  Mesh m;
  m.positions = {{0, 0, 0}, {1, 0, 0}, {0, 1, 0}, {1, 1, 0}};
  m.faces = {{0, 1, 2}, {1, 3, 2}};
  // Two faces sharing an edge: no overlap.
  m.uvs = {{0.1f, 0.1f}, {0.9f, 0.1f}, {0.1f, 0.9f}, {0.9f, 0.9f}};
  m.uv_faces = {{0, 1, 2}, {1, 3, 2}};
  UvCheckResult r = check_uvs(m, 64);
  EXPECT_EQ(r.overlapping_texels, 0u);
  EXPECT_GT(r.covered_texels, 0u);
  EXPECT_EQ(r.out_of_range, 0u);
  const size_t covered = r.covered_texels;
  ASSERT_EQ(r.materials.size(), 1u);
  EXPECT_EQ(r.materials[0].faces, 2u);
  EXPECT_EQ(r.worst_material, 0);
  // Both faces on the same UV triangle: everything overlaps.
  m.uv_faces = {{0, 1, 2}, {0, 1, 2}};
  r = check_uvs(m, 64);
  EXPECT_EQ(r.overlapping_texels, r.covered_texels);
  EXPECT_DOUBLE_EQ(r.overlap_fraction, 1.0);
  // The same square two repeats to the right and one down: UVs repeat, nothing overlaps.
  m.uvs = {{2.1f, -0.9f}, {2.9f, -0.9f}, {2.1f, -0.1f}, {2.9f, -0.1f}};
  m.uv_faces = {{0, 1, 2}, {1, 3, 2}};
  r = check_uvs(m, 64);
  EXPECT_EQ(r.out_of_range, 8u);
  EXPECT_EQ(r.overlapping_texels, 0u);
  EXPECT_EQ(r.covered_texels, covered);
  Mesh none;  // no UVs: nothing to report
  EXPECT_EQ(check_uvs(none, 64).covered_texels, 0u);
}

// Two triangles, each 0.4 wide: `shift` moves the second one along u.
Mesh two_triangles(float shift) {
  Mesh m;
  m.positions = {{0, 0, 0}, {1, 0, 0}, {0, 1, 0}, {2, 0, 0}, {3, 0, 0}, {2, 1, 0}};
  m.faces = {{0, 1, 2}, {3, 4, 5}};
  m.uvs = {{0.1f, 0.1f},         {0.5f, 0.1f},         {0.1f, 0.5f},
           {0.1f + shift, 0.1f}, {0.5f + shift, 0.1f}, {0.1f + shift, 0.5f}};
  m.uv_faces = {{0, 1, 2}, {3, 4, 5}};
  return m;
}

TEST(CheckUvs, UvsRepeatAcrossTheTexturesEdge) {
  // The second triangle spans u 0.8 .. 1.2: its part past u = 1 reads u 0 .. 0.2, where the first
  // one lies (u 0.1 .. 0.5): they overlap there, modulo 1.
  UvCheckResult r = check_uvs(two_triangles(0.7f), 128);
  EXPECT_GT(r.overlapping_texels, 0u);
  EXPECT_EQ(r.out_of_range, 1u);
  // Moved up by 0.45 (v 0.55 .. 0.95) it crosses the edge beside the first one, not over it.
  Mesh apart = two_triangles(0.7f);
  for (size_t i = 3; i < 6; ++i) apart.uvs[i][1] += 0.45f;
  r = check_uvs(apart, 128);
  EXPECT_EQ(r.overlapping_texels, 0u);
  // All of it is covered, the wrapped part too: as much as the same triangle inside [0, 1].
  const size_t inside = check_uvs(two_triangles(0.45f), 128).covered_texels;
  EXPECT_NEAR(double(r.covered_texels), double(inside), 0.02 * inside);
  // A whole repeat further on, the same.
  for (size_t i = 3; i < 6; ++i) apart.uvs[i][0] -= 3.0f;
  EXPECT_EQ(check_uvs(apart, 128).overlapping_texels, 0u);
  EXPECT_NEAR(double(check_uvs(apart, 128).covered_texels), double(inside), 0.02 * inside);
}

TEST(CheckUvs, OverlapIsPerMaterial) {
  // Both triangles on the same UVs: they overlap in one texture, not in two.
  Mesh m = two_triangles(0.0f);
  EXPECT_DOUBLE_EQ(check_uvs(m, 64).overlap_fraction, 1.0);
  m.materials = {Material{"a", nullptr, {1, 1, 1, 1}}, Material{"b", nullptr, {1, 1, 1, 1}}};
  m.face_materials = {0, 1};
  UvCheckResult r = check_uvs(m, 64);
  EXPECT_EQ(r.overlapping_texels, 0u);
  ASSERT_EQ(r.materials.size(), 2u);
  EXPECT_EQ(r.materials[0].covered_texels, r.materials[1].covered_texels);
  EXPECT_EQ(r.covered_texels, 2 * r.materials[0].covered_texels);
  m.face_materials = {1, 1};
  r = check_uvs(m, 64);
  EXPECT_EQ(r.worst_material, 1);
  EXPECT_EQ(r.materials[0].faces, 0u);
  EXPECT_DOUBLE_EQ(r.materials[1].overlap_fraction, 1.0);
  EXPECT_FALSE(r.stopped);
  // Enough to refuse them: the first material past stop_above ends the check.
  m.faces.push_back({0, 1, 2});
  m.uv_faces.push_back({0, 1, 2});
  m.face_materials = {0, 0, 1};
  r = check_uvs(m, 64, 0.05);
  EXPECT_TRUE(r.stopped);
  EXPECT_EQ(r.worst_material, 0);
  EXPECT_EQ(r.materials[1].faces, 1u);
  EXPECT_EQ(r.materials[1].covered_texels, 0u) << "not measured";
  EXPECT_FALSE(check_uvs(m, 64).stopped);
  EXPECT_GT(check_uvs(m, 64).materials[1].covered_texels, 0u);
}

TEST(CheckUvs, FacesSpanningMoreThanARepeatAreReported) {
  Mesh m = two_triangles(0.0f);
  m.uvs[4] = {1.6f, 0.1f};  // the second triangle: u 0.1 .. 1.6
  const UvCheckResult r = check_uvs(m, 64);
  EXPECT_EQ(r.wide_faces, 1u);
  EXPECT_EQ(r.non_finite, 0u);
  m.uvs[4] = {NAN, 0.1f};
  EXPECT_EQ(check_uvs(m, 64).non_finite, 1u);
}

}  // namespace
}  // namespace gen3d::mesh
