#include "render/rasterizer.h"

#include <gtest/gtest.h>
#include <oneapi/tbb/global_control.h>
#include <oneapi/tbb/task_arena.h>

#include <cmath>
#include <cstring>
#include <random>

#include "render/error.h"
#include "test_meshes.h"

namespace gen3d::render {
namespace {

void expect_identical(const Raster& a, const Raster& b, const std::string& what) {
  ASSERT_EQ(a.width, b.width) << what;
  ASSERT_EQ(a.height, b.height) << what;
  size_t face_diff = 0, bary_diff = 0, depth_diff = 0;
  for (size_t i = 0; i < a.pixel_count(); ++i) {
    face_diff += a.face_id[i] != b.face_id[i];
    depth_diff += std::memcmp(&a.depth[i], &b.depth[i], sizeof(float)) != 0;
    bary_diff += std::memcmp(&a.bary[i * 3], &b.bary[i * 3], 3 * sizeof(float)) != 0;
  }
  EXPECT_EQ(face_diff, 0u) << what;
  EXPECT_EQ(bary_diff, 0u) << what;
  EXPECT_EQ(depth_diff, 0u) << what;
}

TEST(Rasterizer, TiledMatchesReferenceOnSphere) {
  const mesh::Mesh m = testing::bumpy_sphere(40, 64);
  for (const View& v : ViewSet::hunyuan6().views) {
    const auto clip = clip_positions(m.positions, v.camera);
    for (auto [w, h] : {std::pair{128, 128}, {97, 61}, {300, 211}}) {
      const Raster ref = rasterize_reference(clip, m.faces, w, h);
      for (int tile : {8, 64, 200}) {
        RasterOptions o;
        o.tile_size = tile;
        expect_identical(rasterize(clip, m.faces, w, h, o), ref,
                         "size " + std::to_string(w) + "x" + std::to_string(h) + " tile " +
                             std::to_string(tile));
      }
    }
  }
}

TEST(Rasterizer, TiledMatchesReferenceOnTriangleSoup) {
  for (uint32_t seed : {1u, 2u, 3u}) {
    const mesh::Mesh m = testing::triangle_soup(500, seed);
    Camera cam;
    cam.azim = 30.0 * seed;
    cam.elev = 10.0;
    const auto clip = clip_positions(m.positions, cam);
    expect_identical(rasterize(clip, m.faces, 257, 190),
                     rasterize_reference(clip, m.faces, 257, 190), "seed " + std::to_string(seed));
  }
}

// Row-span culling must stay conservative for slivers, near-degenerate and huge off-screen faces.
TEST(Rasterizer, TiledMatchesReferenceOnSliversAndHugeFaces) {
  std::mt19937 rng(11);
  std::uniform_real_distribution<float> c(-1.2f, 1.2f), tiny(-1e-3f, 1e-3f), huge(-40.0f, 40.0f);
  std::vector<mesh::Vec4> clip;
  std::vector<mesh::Tri> tris;
  auto add = [&](mesh::Vec4 a, mesh::Vec4 b, mesh::Vec4 d) {
    const uint32_t i = static_cast<uint32_t>(clip.size());
    clip.push_back(a);
    clip.push_back(b);
    clip.push_back(d);
    tris.push_back({i, i + 1, i + 2});
  };
  for (int i = 0; i < 400; ++i) {
    const float x = c(rng), y = c(rng), z = 0.5f * c(rng);
    // Sliver: two corners almost together, the third far away.
    add({x, y, z, 1}, {x + tiny(rng), y + tiny(rng), z, 1}, {c(rng), c(rng), z + 0.1f, 1});
    // Needle along a row or a column.
    add({x, y, z, 1}, {c(rng), y + tiny(rng), z, 1}, {x + 2 * tiny(rng), y, z, 1});
    add({x, y, z, 1}, {x + tiny(rng), c(rng), z, 1}, {x, y + 2 * tiny(rng), z, 1});
  }
  for (int i = 0; i < 20; ++i) {  // huge faces, mostly off screen
    add({huge(rng), huge(rng), 0.9f, 1}, {huge(rng), huge(rng), 0.9f, 1},
        {huge(rng), huge(rng), 0.9f, 1});
  }
  for (auto [w, h] : {std::pair{256, 256}, {333, 127}}) {
    expect_identical(rasterize(clip, tris, w, h), rasterize_reference(clip, tris, w, h),
                     "slivers " + std::to_string(w));
  }
}

TEST(Rasterizer, ThreadCountDoesNotChangeResult) {
  const mesh::Mesh m = testing::bumpy_sphere(60, 90);
  const Camera cam{.elev = 20.0, .azim = 45.0};
  Raster one;
  {
    tbb::task_arena arena(1);
    arena.execute([&] { one = rasterize(m, cam, 512, 512); });
  }
  RasterOptions serial;
  serial.parallel = false;
  expect_identical(rasterize(m, cam, 512, 512), one, "default arena vs 1 thread");
  expect_identical(rasterize(m, cam, 512, 512, serial), one, "parallel=false vs 1 thread");
  {
    tbb::task_arena arena(4);
    Raster four;
    arena.execute([&] { four = rasterize(m, cam, 512, 512); });
    expect_identical(four, one, "4-thread arena vs 1 thread");
  }
}

// Property: a covered pixel's barycentrics sum to 1 and reproduce the pixel centre.
TEST(Rasterizer, BarycentricsReproducePixelCentre) {
  const mesh::Mesh m = testing::bumpy_sphere(30, 50);
  const Camera cam{.elev = -30.0, .azim = 200.0};
  const int w = 200, h = 150;
  const auto clip = clip_positions(m.positions, cam);
  const Raster r = rasterize(clip, m.faces, w, h);
  size_t covered = 0;
  for (int y = 0; y < h; ++y) {
    for (int x = 0; x < w; ++x) {
      const size_t p = static_cast<size_t>(y) * w + x;
      if (r.face_id[p] == 0) continue;
      ++covered;
      const mesh::Tri& t = m.faces[r.face_id[p] - 1];
      const float* b = &r.bary[p * 3];
      EXPECT_NEAR(b[0] + b[1] + b[2], 1.0f, 1e-5f);
      float sx = 0, sy = 0;
      for (int k = 0; k < 3; ++k) {
        EXPECT_GE(b[k], -1e-6f);
        sx += b[k] * ((clip[t[k]][0] * 0.5f + 0.5f) * (w - 1) + 0.5f);
        sy += b[k] * ((clip[t[k]][1] * 0.5f + 0.5f) * (h - 1) + 0.5f);
      }
      EXPECT_NEAR(sx, x + 0.5f, 2e-3f);
      EXPECT_NEAR(sy, y + 0.5f, 2e-3f);
    }
  }
  EXPECT_GT(covered, 5000u);
}

// Shared edges are inclusive for both faces; on equal depth the lower face index wins.
TEST(Rasterizer, SharedEdgeGoesToLowerFaceOnTies) {
  // Two triangles forming a square in NDC, split along the diagonal x = y.
  const std::vector<mesh::Vec4> clip = {{-1, -1, 0, 1}, {1, -1, 0, 1}, {1, 1, 0, 1}, {-1, 1, 0, 1}};
  const std::vector<mesh::Tri> tris = {{0, 1, 2}, {0, 2, 3}};
  const Raster r = rasterize(clip, tris, 9, 9);
  for (int y = 0; y < 9; ++y) {
    for (int x = 0; x < 9; ++x) {
      const int id = r.face_id[y * 9 + x];
      EXPECT_EQ(id, x >= y ? 1 : 2) << x << "," << y;
    }
  }
  // Reversing the face order moves the diagonal to the other face (the new index 0).
  const std::vector<mesh::Tri> swapped = {{0, 2, 3}, {0, 1, 2}};
  const Raster s = rasterize(clip, swapped, 9, 9);
  EXPECT_EQ(s.face_id[4 * 9 + 4], 1);
}

TEST(Rasterizer, NearerSurfaceWinsAndNegativeDepthIsDropped) {
  // Two overlapping full-screen triangles at different depths.
  const std::vector<mesh::Vec4> clip = {{-5, -5, 0.5f, 1},  {5, -5, 0.5f, 1},  {0, 5, 0.5f, 1},
                                        {-5, -5, -0.5f, 1}, {5, -5, -0.5f, 1}, {0, 5, -0.5f, 1},
                                        {-5, -5, -1.5f, 1}, {5, -5, -1.5f, 1}, {0, 5, -1.5f, 1}};
  const std::vector<mesh::Tri> tris = {{0, 1, 2}, {3, 4, 5}, {6, 7, 8}};
  const Raster r = rasterize(clip, tris, 16, 16);
  for (size_t p = 0; p < r.pixel_count(); ++p) {
    ASSERT_EQ(r.face_id[p], 2);  // face 3 has depth < 0 (behind the near plane): dropped
    EXPECT_FLOAT_EQ(r.depth[p], -0.5f * 0.49999f + 0.5f);
  }
}

TEST(Rasterizer, DegenerateAndOffscreenFacesAreNotDrawn) {
  const std::vector<mesh::Vec4> clip = {{0, 0, 0, 1}, {0.5f, 0.5f, 0, 1}, {1, 1, 0, 1},
                                        {5, 5, 0, 1}, {6, 5, 0, 1},       {5, 6, 0, 1}};
  const std::vector<mesh::Tri> tris = {{0, 1, 2}, {3, 4, 5}};
  const Raster r = rasterize(clip, tris, 32, 32);
  for (size_t p = 0; p < r.pixel_count(); ++p) EXPECT_EQ(r.face_id[p], 0);
}

TEST(Rasterizer, UvRasterCoversTexelCentres) {
  mesh::Mesh m;
  m.positions = {{0, 0, 0}, {1, 0, 0}, {1, 1, 0}, {0, 1, 0}};
  m.faces = {{0, 1, 2}, {0, 2, 3}};
  // Slightly larger than the unit square: texel centres on the exact border may be missed by the
  // reference's float32 edge test (as in the reference), interior ones never are.
  m.uvs = {{-0.01f, -0.01f}, {1.01f, -0.01f}, {1.01f, 1.01f}, {-0.01f, 1.01f}};
  m.uv_faces = m.faces;
  const int t = 16;
  const Raster r = rasterize_uv(m, t, t);
  for (int row = 0; row < t; ++row) {
    for (int col = 0; col < t; ++col) {
      const size_t p = static_cast<size_t>(row) * t + col;
      ASSERT_NE(r.face_id[p], 0) << row << "," << col;
      // Interpolated UV reproduces the texel centre: u = col/(T-1), (flipped) v = row/(T-1).
      const mesh::Tri& f = m.uv_faces[r.face_id[p] - 1];
      float u = 0, v = 0;
      for (int k = 0; k < 3; ++k) {
        u += r.bary[p * 3 + k] * m.uvs[f[k]][0];
        v += r.bary[p * 3 + k] * m.uvs[f[k]][1];
      }
      // UVs repeat: a border centre that the float test misses on this side of the texture may be
      // reached across its edge, where u = 0 and u = 1 meet (the same place, modulo 1).
      EXPECT_NEAR(std::remainder(u - col / float(t - 1), 1.0f), 0.0f, 1e-5f);
      EXPECT_NEAR(std::remainder(v - row / float(t - 1), 1.0f), 0.0f, 1e-5f);
    }
  }
}

// One triangle whose UVs cross the texture's right edge (u 0.7 .. 1.3).
mesh::Mesh triangle_across_the_edge() {
  mesh::Mesh m;
  m.positions = {{0, 0, 0}, {1, 0, 0}, {0, 1, 0}};
  m.faces = {{0, 1, 2}};
  m.uvs = {{0.7f, 0.2f}, {1.3f, 0.2f}, {0.7f, 0.8f}};
  m.uv_faces = m.faces;
  return m;
}

TEST(Rasterizer, UvRasterWrapsFacesAcrossTheTexturesEdge) {
  const mesh::Mesh m = triangle_across_the_edge();
  const int t = 64;
  const Raster r = rasterize_uv(m, t, t);
  size_t left = 0, right = 0;
  for (int row = 0; row < t; ++row)
    for (int col = 0; col < t; ++col) {
      const size_t p = static_cast<size_t>(row) * t + col;
      if (!r.face_id[p]) continue;
      (col < t / 2 ? left : right) += 1;
      // Every texel holds the point of the face that reads it: u modulo 1 at the texel centre.
      float u = 0, v = 0;
      for (int k = 0; k < 3; ++k) {
        u += r.bary[p * 3 + k] * m.uvs[k][0];
        v += r.bary[p * 3 + k] * m.uvs[k][1];
      }
      EXPECT_NEAR(std::remainder(u - col / float(t - 1), 1.0f), 0.0f, 1e-4f) << row << "," << col;
      EXPECT_NEAR(v, row / float(t - 1), 1e-4f);
    }
  // A quarter of the triangle's area lies past u = 1: wrapped to the left edge, a third of what
  // stays on the right.
  EXPECT_NEAR(double(left) / double(right), 1.0 / 3.0, 0.05);
  // Two whole repeats to the left it reads the same texels.
  mesh::Mesh moved = m;
  for (mesh::Vec2& uv : moved.uvs) uv[0] -= 2.0f;
  const Raster back = rasterize_uv(moved, t, t);
  for (size_t p = 0; p < r.pixel_count(); ++p) EXPECT_EQ(back.face_id[p], r.face_id[p]) << p;
}

TEST(Rasterizer, UvRasterHasATilePerMaterial) {
  // The same UVs for two faces of two materials: each lands in its material's tile.
  mesh::Mesh m = triangle_across_the_edge();
  m.positions.push_back({0, 0, 1});
  m.faces.push_back({0, 1, 3});
  m.uv_faces.push_back({0, 1, 2});
  m.materials = {mesh::Material{"a", nullptr, {1, 1, 1, 1}},
                 mesh::Material{"b", nullptr, {1, 1, 1, 1}}};
  m.face_materials = {1, 0};
  const int t = 32;
  EXPECT_THROW(rasterize_uv(m, t, t), RenderError) << "a tile each: 32 x 64";
  const Raster r = rasterize_uv(m, t, 2 * t);
  const size_t n = static_cast<size_t>(t) * t;
  size_t top = 0, bottom = 0;
  for (size_t p = 0; p < r.pixel_count(); ++p) {
    if (!r.face_id[p]) continue;
    EXPECT_EQ(r.face_id[p], p < n ? 2 : 1) << p;
    (p < n ? top : bottom) += 1;
    if (p < n) {
      EXPECT_EQ(r.face_id[p + n], 1) << "the same texel of the other tile";
    }
  }
  EXPECT_EQ(top, bottom);
  EXPECT_GT(top, 0u);
  m.face_materials = {0, 2};
  EXPECT_THROW(rasterize_uv(m, t, 2 * t), RenderError);
}

TEST(Rasterizer, BadInputsThrow) {
  const std::vector<mesh::Vec4> clip = {{0, 0, 0, 1}, {1, 0, 0, 1}, {0, 1, 0, 1}};
  const std::vector<mesh::Tri> bad = {{0, 1, 3}};
  EXPECT_THROW(rasterize(clip, bad, 8, 8), RenderError);
  const std::vector<mesh::Tri> ok = {{0, 1, 2}};
  EXPECT_THROW(rasterize(clip, ok, 0, 8), RenderError);
  RasterOptions o;
  o.tile_size = 2;
  EXPECT_THROW(rasterize(clip, ok, 8, 8, o), RenderError);
  mesh::Mesh no_uv;
  no_uv.positions = {{0, 0, 0}, {1, 0, 0}, {0, 1, 0}};
  no_uv.faces = ok;
  EXPECT_THROW(rasterize_uv(no_uv, 8, 8), RenderError);
}

}  // namespace
}  // namespace gen3d::render

namespace gen3d::render {
namespace {

TEST(Buffer, LargeBuffersAreZeroedAndPooled) {
  const size_t n = (size_t{8} << 20) / sizeof(float);
  const size_t before = buffer_pool_bytes();
  {
    Buffer<float> b;
    resize_zeroed(b, n);
    for (size_t i = 0; i < n; i += 1000) EXPECT_EQ(b[i], 0.0f);
    std::fill(b.begin(), b.end(), 3.0f);
  }
  EXPECT_GE(buffer_pool_bytes(), before + (size_t{8} << 20));
  Buffer<float> again;
  resize_zeroed(again, n);  // reuses the pooled block, cleared
  for (size_t i = 0; i < n; i += 1000) ASSERT_EQ(again[i], 0.0f);
  EXPECT_EQ(buffer_pool_bytes(), before);
}

}  // namespace
}  // namespace gen3d::render
