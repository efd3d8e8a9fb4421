// uv_unwrap on hard-surface (CAD-like) meshes, on layouts that cannot fit as asked, and on meshes
// full of zero-area triangles: chart merging, the density fallback and bounded resources.
#include <gtest/gtest.h>
#include <sys/resource.h>

#include <chrono>
#include <cmath>
#include <memory>
#include <set>

#include <spdlog/sinks/ostream_sink.h>
#include <spdlog/spdlog.h>

#include "mesh/cleanup.h"
#include "mesh/io.h"
#include "mesh/uv_unwrap.h"
#include "support/paths.h"
#include "test_meshes.h"

namespace gen3d::mesh {
namespace {

// Flat-shaded part, as CAD exporters write them: every face has its own three vertices.
void add_face(Mesh& m, const Vec3& a, const Vec3& b, const Vec3& c) {
  const uint32_t base = uint32_t(m.positions.size());
  m.positions.insert(m.positions.end(), {a, b, c});
  m.faces.push_back({base, base + 1, base + 2});
}

void add_quad(Mesh& m, const Vec3& a, const Vec3& b, const Vec3& c, const Vec3& d) {
  add_face(m, a, b, c);
  add_face(m, a, c, d);
}

// Axis-aligned box whose every side is two patches tessellated independently (n x n and
// (n + 1) x (n + 1) quads), as CAD exporters write them: the patches meet along a crack with only
// their corners in common, so no edge joins them. 6 planar regions, 12 patches.
void add_box(Mesh& m, const Vec3& lo, const Vec3& hi, int n) {
  auto lerp = [](float a, float b, float t) { return a + (b - a) * t; };
  for (int axis = 0; axis < 3; ++axis)
    for (int side = 0; side < 2; ++side)
      for (int patch = 0; patch < 2; ++patch) {
        const int u = (axis + 1) % 3, v = (axis + 2) % 3, k = n + patch;
        const float u0 = patch ? 0.5f : 0.0f;
        for (int i = 0; i < k; ++i)
          for (int j = 0; j < k; ++j) {
            auto at = [&](int di, int dj) {
              Vec3 p;
              p[axis] = side ? hi[axis] : lo[axis];
              p[u] = lerp(lo[u], hi[u], u0 + 0.5f * float(i + di) / float(k));
              p[v] = lerp(lo[v], hi[v], float(j + dj) / float(k));
              return p;
            };
            if (side)
              add_quad(m, at(0, 0), at(1, 0), at(1, 1), at(0, 1));
            else
              add_quad(m, at(0, 0), at(0, 1), at(1, 1), at(1, 0));
          }
      }
}

// Faceted cylinder along y (flat-shaded barrel of `segments` facets and two fan caps):
// 4 * segments faces, segments + 2 planar regions.
void add_cylinder(Mesh& m, const Vec3& c, float radius, float height, int segments) {
  auto rim = [&](int s, float y) {
    const float ph = 2 * float(M_PI) * float(s % segments) / float(segments);
    return Vec3{c[0] + radius * std::cos(ph), c[1] + y, c[2] - radius * std::sin(ph)};
  };
  const Vec3 top{c[0], c[1] + height, c[2]}, bottom = c;
  for (int s = 0; s < segments; ++s) {
    add_quad(m, rim(s, 0), rim(s + 1, 0), rim(s + 1, height), rim(s, height));
    add_face(m, top, rim(s, height), rim(s + 1, height));
    add_face(m, bottom, rim(s + 1, 0), rim(s, 0));
  }
}

// Boxes and cylinders side by side: 20 boxes (120 planar regions) and 12 cylinders of 24 facets
// (312 planar regions).
Mesh cad_like_mesh(size_t* planar_regions) {
  Mesh m;
  for (int i = 0; i < 20; ++i) {
    const float x = float(i % 5) * 3, z = float(i / 5) * 3;
    add_box(m, {x, 0, z}, {x + 1.0f + 0.1f * float(i % 3), 1.5f, z + 1.2f}, 3);
  }
  for (int i = 0; i < 12; ++i) add_cylinder(m, {float(i) * 2.5f, 4, 0}, 0.8f, 2.0f, 24);
  *planar_regions = 20 * 6 + 12 * (24 + 2);
  return m;
}

void expect_inside_and_not_overlapping(const UnwrapResult& r, int check_size) {
  const UvCheckResult check = check_uvs(r.mesh, check_size);
  EXPECT_EQ(check.out_of_range, 0u);
  EXPECT_EQ(check.overlapping_texels, 0u);
  EXPECT_GT(check.covered_texels, 0u);
}

// Captures warnings of the default logger while alive.
class WarningCapture {
 public:
  WarningCapture() : previous_(spdlog::default_logger()) {
    auto sink = std::make_shared<spdlog::sinks::ostream_sink_mt>(out_);
    auto logger = std::make_shared<spdlog::logger>("capture", sink);
    logger->set_level(spdlog::level::warn);
    spdlog::set_default_logger(logger);
  }
  ~WarningCapture() { spdlog::set_default_logger(previous_); }
  std::string text() const { return out_.str(); }

 private:
  std::ostringstream out_;
  std::shared_ptr<spdlog::logger> previous_;
};

TEST(UvUnwrapCad, FlatShadedPartsMergeIntoFewCharts) {
  size_t planar_regions = 0;
  const Mesh m = cad_like_mesh(&planar_regions);
  UnwrapOptions o;
  o.texture_size = 1024;
  const UnwrapResult r = uv_unwrap(m, o);
  // Box sides cannot merge across their 90-degree creases, but each side's two patches do (6
  // charts a box, not 12); each cylinder's 24 barrel facets and caps become a handful of charts
  // instead of 26.
  EXPECT_LE(r.metrics.charts, planar_regions / 2) << "faces " << m.faces.size();
  EXPECT_GT(r.metrics.merged_charts, 0u);
  EXPECT_FALSE(r.metrics.density_reduced);
  EXPECT_EQ(r.metrics.gutter, o.gutter);
  EXPECT_GT(r.metrics.utilization, 0.3);
  expect_inside_and_not_overlapping(r, 1024);
}

TEST(UvUnwrapCad, MergingOffGivesMoreCharts) {
  size_t planar_regions = 0;
  const Mesh m = cad_like_mesh(&planar_regions);
  UnwrapOptions o;
  o.texture_size = 512;
  const size_t merged = uv_unwrap(m, o).metrics.charts;
  o.merge_charts = false;
  const UnwrapResult r = uv_unwrap(m, o);
  EXPECT_LT(merged, r.metrics.charts);
  expect_inside_and_not_overlapping(r, 512);
}

// A plate (one shared vertex per corner) whose sides are a few texels thin: each side is a strip
// whose gutter would take more atlas than itself, so it joins a face it shares its long edge
// with, unfolded about that edge. The plate's two faces stay apart (joined they would fold).
TEST(UvUnwrapCad, ThinSidesOfAPlateJoinItsFaces) {
  Mesh m;
  const float t = 0.004f;  // ~2.6 texels at 1024
  for (int i = 0; i < 8; ++i)
    m.positions.push_back({float(i & 1), (i & 2) ? t : 0.0f, float(i >> 2)});
  // Corner i = x + 2 y + 4 z; faces wound outwards.
  const int quads[6][4] = {{0, 1, 5, 4}, {2, 6, 7, 3}, {0, 4, 6, 2},
                           {1, 3, 7, 5}, {0, 2, 3, 1}, {4, 5, 7, 6}};
  for (const auto& q : quads) {
    m.faces.push_back({uint32_t(q[0]), uint32_t(q[1]), uint32_t(q[2])});
    m.faces.push_back({uint32_t(q[0]), uint32_t(q[2]), uint32_t(q[3])});
  }
  UnwrapOptions o;
  o.texture_size = 1024;
  const UnwrapResult joined = uv_unwrap(m, o);
  o.merge_charts = false;
  const UnwrapResult apart = uv_unwrap(m, o);
  EXPECT_EQ(apart.metrics.charts, 6u);
  EXPECT_EQ(joined.metrics.charts, 2u);
  // Unfolding about a straight edge is exact; only where two sides joined to one face meet at a
  // plate corner (glued along their short edge) is there a little distortion.
  EXPECT_LT(joined.metrics.angle_distortion, 0.05);
  expect_inside_and_not_overlapping(joined, 1024);
}

// A thin pipe tessellated as CAD exporters do: 512 slivers from end to end, each longer than the
// atlas at the density the mesh's area asks for. No split can shorten a sliver, so the pipe stays
// a few charts and the density drops to fit them, instead of 512 needles for the packer.
TEST(UvUnwrapCad, APipeOfEndToEndSliversStaysAFewCharts) {
  const Mesh m = testing::sliver_pipe();
  UnwrapOptions o;
  o.texture_size = 2048;
  const UnwrapResult r = uv_unwrap(m, o);
  EXPECT_LE(r.metrics.charts, 8u);
  EXPECT_GT(r.metrics.utilization, 0.1);  // 512 needles packed to 0.03
  expect_inside_and_not_overlapping(r, 2048);
}

// assimp's 2CylinderEngine (121k faces of CAD tessellation: slivers, fans, cracks): every face
// with area keeps a fair share of the atlas. A parameterization that crushes part of a chart
// (LSCM over slivers, a projection seen edge-on) leaves faces without texels and needles that
// only waste atlas space.
TEST(UvUnwrapCad, EveryFaceOfARealEngineKeepsItsShareOfTexels) {
  const Mesh m = load_mesh(test::data_dir() + "/mesh/meshes-assimp/glTF2/2CylinderEngine.glb");
  UnwrapOptions o;
  o.texture_size = 1024;
  const UnwrapResult r = uv_unwrap(m, o);
  const double texels_per_area = r.metrics.texels_per_unit * r.metrics.texels_per_unit /
                                 (double(o.texture_size) * o.texture_size);
  double total = 0, crushed = 0;
  for (size_t f = 0; f < m.faces.size(); ++f) {
    const Vec3 &a = m.positions[m.faces[f][0]], &b = m.positions[m.faces[f][1]],
               &c = m.positions[m.faces[f][2]];
    const double e1[3] = {b[0] - a[0], b[1] - a[1], b[2] - a[2]},
                 e2[3] = {c[0] - a[0], c[1] - a[1], c[2] - a[2]};
    const double n[3] = {e1[1] * e2[2] - e1[2] * e2[1], e1[2] * e2[0] - e1[0] * e2[2],
                         e1[0] * e2[1] - e1[1] * e2[0]};
    const double area3 = 0.5 * std::sqrt(n[0] * n[0] + n[1] * n[1] + n[2] * n[2]);
    const Vec2 &u = r.mesh.uvs[r.mesh.uv_faces[f][0]], &v = r.mesh.uvs[r.mesh.uv_faces[f][1]],
               &w = r.mesh.uvs[r.mesh.uv_faces[f][2]];
    const double area2 = 0.5 * std::abs((double(v[0]) - u[0]) * (double(w[1]) - u[1]) -
                                        (double(v[1]) - u[1]) * (double(w[0]) - u[0]));
    total += area3;
    if (area2 < area3 * texels_per_area / 64) crushed += area3;  // under 1/8 of its scale
  }
  EXPECT_LT(crushed, 0.002 * total) << "share of the surface with (almost) no texels";
  EXPECT_GT(r.metrics.utilization, 0.3);
  // The file's T-junction cracks have two sides at the same place, which may share a texel.
  const UvCheckResult check = check_uvs(r.mesh, 1024);
  EXPECT_EQ(check.out_of_range, 0u);
  EXPECT_LT(check.overlap_fraction, 1e-4);
}

// A flat ring and many small squares: the squares may sit inside the ring, in texels its outline
// leaves free (a footprint is its covered runs per column, not the span between its ends).
TEST(UvUnwrapPack, SmallChartsFillTheInsideOfARing) {
  Mesh m;
  const int segments = 96;
  const float r_in = 0.4f, r_out = 0.6f;  // a ring 1.2 units wide, of about 400 texels at 512
  for (int s = 0; s < segments; ++s) {
    const float a0 = 2 * float(M_PI) * float(s) / segments,
                a1 = 2 * float(M_PI) * float(s + 1) / segments;
    const Vec3 i0{r_in * std::cos(a0), 0, -r_in * std::sin(a0)},
        i1{r_in * std::cos(a1), 0, -r_in * std::sin(a1)};
    const Vec3 o0{r_out * std::cos(a0), 0, -r_out * std::sin(a0)},
        o1{r_out * std::cos(a1), 0, -r_out * std::sin(a1)};
    add_quad(m, i0, o0, o1, i1);
  }
  const size_t ring_faces = m.faces.size();
  for (int i = 0; i < 60; ++i) {  // squares of side 0.15, far apart in 3D
    const float x = 3 + float(i % 10), z = float(i / 10);
    add_quad(m, {x, 0, z}, {x + 0.15f, 0, z}, {x + 0.15f, 0, z - 0.15f}, {x, 0, z - 0.15f});
  }
  UnwrapOptions o;
  o.texture_size = 512;
  const UnwrapResult r = uv_unwrap(m, o);
  // The ring's centre and inner radius in the atlas (its outer vertices are at r_out).
  double cx = 0, cy = 0;
  size_t n = 0;
  for (size_t f = 0; f < ring_faces; ++f)
    for (uint32_t i : r.mesh.uv_faces[f]) cx += r.mesh.uvs[i][0], cy += r.mesh.uvs[i][1], ++n;
  cx /= double(n), cy /= double(n);
  const double inner = r_in * r.metrics.texels_per_unit / o.texture_size;
  size_t inside = 0;
  for (size_t f = ring_faces; f < m.faces.size(); ++f) {
    bool all_in = true;
    for (uint32_t i : r.mesh.uv_faces[f])
      all_in &= std::hypot(r.mesh.uvs[i][0] - cx, r.mesh.uvs[i][1] - cy) < inner;
    inside += all_in;
  }
  EXPECT_GT(inside, 0u) << "no square inside the ring";
  expect_inside_and_not_overlapping(r, 512);
}

TEST(UvUnwrapFallback, RequestedDensityTooHighIsLoweredWithAWarning) {
  size_t planar_regions = 0;
  const Mesh m = cad_like_mesh(&planar_regions);
  UnwrapOptions o;
  o.texture_size = 256;
  o.texels_per_unit = 1000.0;  // the parts span ~30 units: ~30,000 texels wide
  UnwrapResult r;
  std::string log;
  {
    WarningCapture capture;
    r = uv_unwrap(m, o);
    log = capture.text();
  }
  EXPECT_TRUE(r.metrics.density_reduced);
  EXPECT_DOUBLE_EQ(r.metrics.requested_texels_per_unit, 1000.0);
  EXPECT_GT(r.metrics.texels_per_unit, 0.0);
  EXPECT_LT(r.metrics.texels_per_unit, 1000.0);
  EXPECT_GT(r.metrics.utilization, 0.0);
  EXPECT_NE(log.find("do not fit"), std::string::npos) << log;
  expect_inside_and_not_overlapping(r, 256);
}

TEST(UvUnwrapFallback, ReachableDensityIsKeptExactly) {
  size_t planar_regions = 0;
  const Mesh m = cad_like_mesh(&planar_regions);
  UnwrapOptions o;
  o.texture_size = 1024;
  o.texels_per_unit = 5.0;  // far below what fits
  const UnwrapResult r = uv_unwrap(m, o);
  EXPECT_FALSE(r.metrics.density_reduced);
  EXPECT_DOUBLE_EQ(r.metrics.texels_per_unit, 5.0);
  expect_inside_and_not_overlapping(r, 1024);
}

TEST(UvUnwrapFallback, MoreChartsThanTexelsStillUnwrap) {
  // 3000 separate triangles facing every way at 16 x 16 texels: not even one texel each.
  Mesh m;
  for (int i = 0; i < 3000; ++i) {
    const float a = 0.37f * float(i), b = 0.11f * float(i);
    const Vec3 n{std::cos(a) * std::cos(b), std::sin(b), std::sin(a) * std::cos(b)};
    const Vec3 p{float(i % 50) * 3, float(i / 50) * 3, 0};
    const Vec3 t{-n[2], 0, n[0]};
    add_face(m, p, {p[0] + t[0], p[1] + t[1], p[2] + t[2]},
             {p[0] + 0.5f * n[1], p[1] + 1, p[2] + 0.5f * n[1]});
  }
  UnwrapOptions o;
  o.texture_size = 16;
  o.gutter = 2;
  const UnwrapResult r = uv_unwrap(m, o);
  EXPECT_TRUE(r.metrics.density_reduced);
  for (const Vec2& uv : r.mesh.uvs) {
    EXPECT_GE(uv[0], 0.0f);
    EXPECT_LE(uv[0], 1.0f);
    EXPECT_GE(uv[1], 0.0f);
    EXPECT_LE(uv[1], 1.0f);
  }
  // Charts stay apart even without a texel to spare (checked at a finer raster).
  EXPECT_EQ(check_uvs(r.mesh, 4096).overlapping_texels, 0u);
}

long peak_rss_kib() {
  rusage u{};
  getrusage(RUSAGE_SELF, &u);
  return u.ru_maxrss;
}

// A latitude-longitude sphere whose pole rows are kept as full rings of vertices at the pole:
// 2 * segments faces per pole row collapse to zero area.
Mesh sphere_with_collapsed_poles(int rings, int segments) {
  Mesh m;
  for (int r = 0; r <= rings; ++r) {
    const float th = float(M_PI) * float(r) / float(rings);
    for (int s = 0; s <= segments; ++s) {
      const float ph = 2 * float(M_PI) * float(s) / float(segments);
      m.positions.push_back(
          {std::sin(th) * std::cos(ph), std::cos(th), -std::sin(th) * std::sin(ph)});
    }
  }
  auto at = [&](int r, int s) { return uint32_t(r * (segments + 1) + s); };
  for (int r = 0; r < rings; ++r)
    for (int s = 0; s < segments; ++s) {
      m.faces.push_back({at(r, s), at(r + 1, s), at(r + 1, s + 1)});
      m.faces.push_back({at(r, s), at(r + 1, s + 1), at(r, s + 1)});
    }
  return m;
}

TEST(UvUnwrapDegenerate, CollapsedPoleRowsUnwrapWithBoundedMemoryAndTime) {
  const Mesh m = sphere_with_collapsed_poles(100, 500);  // 100,000 faces, 1,000 of zero area
  const long rss_before = peak_rss_kib();
  const auto t0 = std::chrono::steady_clock::now();
  UnwrapOptions o;
  o.texture_size = 1024;
  const UnwrapResult r = uv_unwrap(m, o);
  const double seconds =
      std::chrono::duration<double>(std::chrono::steady_clock::now() - t0).count();
  // The mesh itself takes ~10 MB; the unwrap, its topology and a 1024 atlas a few hundred at most.
  EXPECT_LT(peak_rss_kib() - rss_before, 1024L * 1024) << "KiB";
  EXPECT_LT(seconds, 60.0);
  EXPECT_FALSE(r.metrics.density_reduced);
  EXPECT_GT(r.metrics.utilization, 0.3);
  expect_inside_and_not_overlapping(r, 1024);
}

TEST(UvUnwrapDegenerate, NearZeroPoleSliversEndTheSplitting) {
  // The same sphere computed in double with the seam welded: the south pole's ring lands at
  // sin(pi) ~ 1e-16 from the axis, so after clean-up its faces are slivers of ~1e-20 area whose
  // normals are noise. Each looked folded on its own, and a one-face chart was split for ever.
  const int rings = 100, segments = 500;
  Mesh m;
  for (int r = 0; r <= rings; ++r) {
    const double th = M_PI * r / rings;
    for (int s = 0; s < segments; ++s) {
      const double ph = 2 * M_PI * s / segments;
      m.positions.push_back({float(std::sin(th) * std::cos(ph)), float(std::cos(th)),
                             float(std::sin(th) * std::sin(ph))});
    }
  }
  auto at = [&](int r, int s) { return uint32_t(r * segments + s % segments); };
  for (int r = 0; r < rings; ++r)
    for (int s = 0; s < segments; ++s) {
      m.faces.push_back({at(r, s), at(r + 1, s), at(r, s + 1)});
      m.faces.push_back({at(r, s + 1), at(r + 1, s), at(r + 1, s + 1)});
    }
  const Mesh clean = cleanup(m, {});
  UnwrapOptions o;
  o.texture_size = 1024;
  const UnwrapResult r = uv_unwrap(clean, o);
  EXPECT_LT(r.metrics.charts, clean.faces.size() / 10);
  expect_inside_and_not_overlapping(r, 1024);
}

TEST(UvUnwrapDegenerate, ZeroAreaFacesJoinChartsInsteadOfTakingTheirOwn) {
  // A flat grid with a zero-area sliver on every interior edge of its first row (T-junction
  // fillers as CAD exporters write them) and a few isolated points.
  Mesh m;
  const int n = 20;
  for (int y = 0; y <= n; ++y)
    for (int x = 0; x <= n; ++x) m.positions.push_back({float(x), float(y), 0});
  auto at = [&](int x, int y) { return uint32_t(y * (n + 1) + x); };
  for (int y = 0; y < n; ++y)
    for (int x = 0; x < n; ++x) {
      m.faces.push_back({at(x, y), at(x + 1, y), at(x + 1, y + 1)});
      m.faces.push_back({at(x, y), at(x + 1, y + 1), at(x, y + 1)});
    }
  for (int x = 1; x < n; ++x) m.faces.push_back({at(x - 1, 0), at(x, 0), at(x + 1, 0)});
  const uint32_t p = uint32_t(m.positions.size());
  m.positions.push_back({50, 50, 50});
  for (int i = 0; i < 10; ++i) m.faces.push_back({p, p, p});  // isolated, all at one point
  const UnwrapResult r = uv_unwrap(m, {});
  // The grid is one chart; the isolated point faces may share one more.
  EXPECT_LE(r.metrics.charts, 2u);
  expect_inside_and_not_overlapping(r, 512);
}

}  // namespace
}  // namespace gen3d::mesh
