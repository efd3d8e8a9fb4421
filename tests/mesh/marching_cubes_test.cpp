// Marching cubes: case table consistency, watertightness and winding on closed fields, welding,
// NaN skipping, vertex mappings, no-surface cases.

#include <gtest/gtest.h>

#include <algorithm>
#include <cmath>
#include <functional>
#include <map>
#include <random>

#include "mesh/error.h"
#include "mesh/marching_cubes.h"

namespace gen3d::mesh {
namespace {

using i64 = std::int64_t;

struct Grid {
  i64 n = 0;
  std::vector<float> v;
  GridView view() const { return {v.data(), n, n, n}; }
};

// Samples f on the (r+1)^3 grid over [-1.01, 1.01]^3 (positive inside).
Grid sample(int r, const std::function<double(double, double, double)>& f) {
  Grid g;
  g.n = r + 1;
  g.v.resize(static_cast<std::size_t>(g.n * g.n * g.n));
  for (i64 i = 0; i < g.n; ++i)
    for (i64 j = 0; j < g.n; ++j)
      for (i64 k = 0; k < g.n; ++k) {
        const double s = 2.02 / r;
        g.v[static_cast<std::size_t>((i * g.n + j) * g.n + k)] =
            static_cast<float>(f(-1.01 + i * s, -1.01 + j * s, -1.01 + k * s));
      }
  return g;
}

// Every undirected edge is used by exactly two faces, once in each direction.
void expect_closed_and_consistent(const Mesh& m, const std::string& what) {
  std::map<std::pair<std::uint32_t, std::uint32_t>, int> directed;
  for (const Tri& f : m.faces)
    for (int s = 0; s < 3; ++s) ++directed[{f[s], f[(s + 1) % 3]}];
  i64 bad = 0;
  for (const auto& [e, c] : directed) {
    const auto it = directed.find({e.second, e.first});
    if (c != 1 || it == directed.end() || it->second != 1) ++bad;
  }
  EXPECT_EQ(bad, 0) << what;
  // Welded: no two vertices at the same position.
  std::map<std::array<float, 3>, int> seen;
  for (const Vec3& p : m.positions) ++seen[p];
  EXPECT_EQ(seen.size(), m.positions.size()) << what;
}

TEST(MarchingCubes, CaseTableBasics) {
  std::array<std::array<std::int8_t, 3>, 12> tris{};
  EXPECT_EQ(marching_cubes_case(0, tris), 0);
  EXPECT_EQ(marching_cubes_case(255, tris), 0);
  EXPECT_EQ(marching_cubes_case(1, tris), 1);
  int total = 0;
  for (int c = 0; c < 256; ++c) {
    const int n = marching_cubes_case(c, tris);
    EXPECT_LE(n, 12);
    total += n;
  }
  EXPECT_GT(total, 0);
  EXPECT_THROW(marching_cubes_case(256, tris), MeshError);
}

TEST(MarchingCubes, RandomFieldsAreWatertightAndOriented) {
  std::mt19937 rng(11);
  std::normal_distribution<float> nd(0.0f, 1.0f);
  for (int trial = 0; trial < 200; ++trial) {
    Grid g;
    g.n = 9;
    g.v.resize(9 * 9 * 9);
    for (i64 i = 0; i < 9; ++i)
      for (i64 j = 0; j < 9; ++j)
        for (i64 k = 0; k < 9; ++k) {
          const bool border = i == 0 || j == 0 || k == 0 || i == 8 || j == 8 || k == 8;
          g.v[static_cast<std::size_t>((i * 9 + j) * 9 + k)] = border ? -1.0f : nd(rng);
        }
    const Mesh m = marching_cubes(g.view());
    expect_closed_and_consistent(m, "trial " + std::to_string(trial));
    if (!m.faces.empty()) {
      EXPECT_GT(signed_volume(m), 0.0) << trial;
    }
  }
}

TEST(MarchingCubes, SphereTorusBoxClosedPositiveVolume) {
  const std::vector<std::pair<std::string, std::function<double(double, double, double)>>> fields =
      {{"sphere",
        [](double x, double y, double z) { return 0.5 - std::sqrt(x * x + y * y + z * z); }},
       {"torus",
        [](double x, double y, double z) {
          const double q = std::sqrt(x * x + z * z) - 0.55;
          return 0.18 - std::sqrt(q * q + y * y);
        }},
       {"box", [](double x, double y, double z) {
          return 0.4 - std::max(std::abs(x), std::max(std::abs(y), std::abs(z)));
        }}};
  for (const auto& [name, f] : fields) {
    const Grid g = sample(48, f);
    MarchingCubesOptions o;
    o.mapping = VertexMapping::kExact;
    const Mesh m = marching_cubes(g.view(), o);
    ASSERT_FALSE(m.faces.empty()) << name;
    expect_closed_and_consistent(m, name);
    EXPECT_GT(signed_volume(m), 0.0) << name;
  }
  // Sphere volume close to 4/3 pi r^3 with the exact mapping.
  const Grid g = sample(
      96, [](double x, double y, double z) { return 0.5 - std::sqrt(x * x + y * y + z * z); });
  MarchingCubesOptions o;
  o.mapping = VertexMapping::kExact;
  EXPECT_NEAR(signed_volume(marching_cubes(g.view(), o)), 4.0 / 3.0 * M_PI * 0.125, 3e-3);
}

TEST(MarchingCubes, VertexMappingsAreAffine) {
  const Grid g = sample(
      20, [](double x, double y, double z) { return 0.5 - std::sqrt(x * x + y * y + z * z); });
  MarchingCubesOptions exact, grid, req;
  exact.mapping = VertexMapping::kExact;
  grid.mapping = VertexMapping::kReferenceGrid;
  req.mapping = VertexMapping::kReferenceRequest;
  req.requested_resolution = 24;
  const Mesh a = marching_cubes(g.view(), exact), b = marching_cubes(g.view(), grid),
             c = marching_cubes(g.view(), req);
  ASSERT_EQ(a.positions.size(), b.positions.size());
  ASSERT_EQ(a.positions.size(), c.positions.size());
  for (std::size_t v = 0; v < a.positions.size(); ++v)
    for (int d = 0; d < 3; ++d) {
      const double u = (a.positions[v][d] + 1.01) / 2.02 * 20;  // index units
      EXPECT_NEAR(b.positions[v][d], -1.01 + u / 21 * 2.02, 1e-5);
      EXPECT_NEAR(c.positions[v][d], -1.01 + u / 25 * 2.02, 1e-5);
    }
  req.requested_resolution = 0;
  EXPECT_THROW(marching_cubes(g.view(), req), MeshError);
}

TEST(MarchingCubes, NaNCornersSkipTheirCubes) {
  Grid g = sample(
      32, [](double x, double y, double z) { return 0.5 - std::sqrt(x * x + y * y + z * z); });
  const Mesh full = marching_cubes(g.view());
  // Blank a slab of vertices: the cubes touching it disappear, the rest is unchanged.
  for (i64 j = 0; j < g.n; ++j)
    for (i64 k = 0; k < g.n; ++k) g.v[static_cast<std::size_t>((16 * g.n + j) * g.n + k)] = NAN;
  MarchingCubesReport rep;
  const Mesh cut = marching_cubes(g.view(), {}, &rep);
  EXPECT_EQ(rep.skipped_cubes, static_cast<std::size_t>(2 * 32 * 32));
  EXPECT_LT(cut.faces.size(), full.faces.size());
  EXPECT_GT(cut.faces.size(), 0u);
  for (const Vec3& p : cut.positions)
    for (float c : p) EXPECT_TRUE(std::isfinite(c));
  // No unreferenced vertices.
  std::vector<int> used(cut.positions.size(), 0);
  for (const Tri& f : cut.faces)
    for (auto v : f) used[v] = 1;
  EXPECT_EQ(std::count(used.begin(), used.end(), 0), 0);
}

TEST(MarchingCubes, CornersExactlyAtTheLevelAreMergedOnce) {
  // Values on a coarse integer lattice: many corners equal the level exactly.
  const Grid g = sample(20, [](double x, double y, double z) {
    return std::round(4.0 * (0.6 - std::abs(x) - std::abs(y) - std::abs(z)));
  });
  MarchingCubesReport rep;
  const Mesh m = marching_cubes(g.view(), {}, &rep);
  ASSERT_FALSE(m.faces.empty());
  EXPECT_GT(rep.merged_vertices, 0u);
  std::map<std::array<float, 3>, int> seen;
  for (const Vec3& p : m.positions) ++seen[p];
  EXPECT_EQ(seen.size(), m.positions.size());
  for (const Tri& f : m.faces)
    for (auto v : f) ASSERT_LT(v, m.positions.size());
}

TEST(MarchingCubes, NoSurfaceAndBadInput) {
  const Grid g = sample(8, [](double, double, double) { return 1.0; });
  MarchingCubesReport rep;
  EXPECT_TRUE(marching_cubes(g.view(), {}, &rep).faces.empty());
  EXPECT_TRUE(rep.no_surface);
  EXPECT_THROW(marching_cubes(GridView{g.v.data(), 1, 9, 9}), MeshError);
  EXPECT_THROW(marching_cubes(GridView{nullptr, 9, 9, 9}), MeshError);
  MarchingCubesOptions o;
  o.level = NAN;
  EXPECT_THROW(marching_cubes(g.view(), o), MeshError);
}

}  // namespace
}  // namespace gen3d::mesh
