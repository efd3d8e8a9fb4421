#include "render/raster_cache.h"
#include "mesh/seams.h"

#include <gtest/gtest.h>
#include <oneapi/tbb/parallel_for.h>

#include <cstring>

#include "mesh/seams.h"
#include "render/maps.h"
#include "test_meshes.h"

namespace gen3d::render {
namespace {

TEST(RasterCache, EighteenRequestsForSixPosesRasterizeSixTimes) {
  const mesh::Mesh m = testing::bumpy_sphere(20, 30);
  const ViewSet views = ViewSet::hunyuan6();
  RasterCache cache;
  // normal map, position map and back-projection per pose, as the texgen pipeline asks.
  for (int pass = 0; pass < 3; ++pass) {
    for (const View& v : views.views) {
      auto r = cache.get(m, v.camera, 64, 64);
      ASSERT_TRUE(r);
      if (pass == 0) (void)normal_map(m, *r);
      if (pass == 1) (void)position_map(m, *r);
    }
  }
  const RasterCacheStats s = cache.stats();
  EXPECT_EQ(s.rasterizations, 6u);
  EXPECT_EQ(s.misses, 6u);
  EXPECT_EQ(s.hits, 12u);
  EXPECT_EQ(s.entries, 6u);
  EXPECT_EQ(s.evictions, 0u);
  EXPECT_EQ(s.bytes, 6u * 64 * 64 * 20);
}

TEST(RasterCache, ConcurrentRequestsComputeOnce) {
  const mesh::Mesh m = testing::bumpy_sphere(30, 40);
  const ViewSet views = ViewSet::hunyuan6();
  RasterCache cache;
  std::vector<std::shared_ptr<const Raster>> got(18);
  tbb::parallel_for(0, 18, [&](int i) { got[i] = cache.get(m, views[i % 6].camera, 256, 256); });
  const RasterCacheStats s = cache.stats();
  EXPECT_EQ(s.rasterizations, 6u);
  EXPECT_EQ(s.misses, 6u);
  EXPECT_EQ(s.hits, 12u);
  for (int i = 0; i < 18; ++i) {
    EXPECT_EQ(got[i].get(), got[i % 6].get()) << "request " << i << " got another raster";
  }
  // Cached rasters equal a fresh rasterization.
  const Raster fresh = rasterize(m, views[2].camera, 256, 256);
  EXPECT_EQ(std::memcmp(fresh.face_id.data(), got[2]->face_id.data(), fresh.face_id.size() * 4), 0);
}

TEST(RasterCache, KeyDistinguishesPoseSizeAndMesh) {
  const mesh::Mesh a = testing::bumpy_sphere(10, 12, 1);
  const mesh::Mesh b = testing::bumpy_sphere(10, 12, 2);
  RasterCache cache;
  Camera cam;
  auto r1 = cache.get(a, cam, 32, 32);
  auto r2 = cache.get(a, cam, 32, 16);
  auto r3 = cache.get(b, cam, 32, 32);
  cam.azim = 1.0;
  auto r4 = cache.get(a, cam, 32, 32);
  cam.azim = 0.0;
  cam.distance = 2.0;
  auto r5 = cache.get(a, cam, 32, 32);
  auto uv = cache.get_uv(a, 32, 32);
  EXPECT_EQ(cache.stats().misses, 6u);
  cam.distance = 1.45;
  EXPECT_EQ(cache.get(a, cam, 32, 32).get(), r1.get());
  EXPECT_EQ(cache.get_uv(a, 32, 32).get(), uv.get());
  EXPECT_EQ(cache.stats().hits, 2u);
}

TEST(RasterCache, NewUvsReuseViewRastersButNotUvRasters) {
  // An unwrap changes only the UVs: the camera rasters of the mesh before it still apply (so the
  // maps can be rendered while the unwrap runs), the texel-space raster does not.
  const mesh::Mesh before = testing::bumpy_sphere(10, 12, 1);
  mesh::Mesh after = before;
  for (mesh::Vec2& t : after.uvs) t = {0.5f * t[0], 0.5f * t[1]};
  RasterCache cache;
  const Camera cam;
  auto view = cache.get(before, cam, 32, 32);
  auto uv = cache.get_uv(before, 32, 32);
  EXPECT_EQ(cache.get(after, cam, 32, 32).get(), view.get());
  EXPECT_NE(cache.get_uv(after, 32, 32).get(), uv.get());
  // Splitting vertices along UV seams renumbers them but moves no triangle.
  EXPECT_EQ(cache.get(mesh::split_uv_seams(after), cam, 32, 32).get(), view.get());
  mesh::Mesh moved = before;
  moved.positions[moved.faces[0][0]][0] += 0.01f;
  EXPECT_NE(cache.get(moved, cam, 32, 32).get(), view.get());
}

TEST(RasterCache, EvictsLeastRecentlyUsedWithinBudget) {
  const mesh::Mesh m = testing::bumpy_sphere(10, 12);
  const size_t one = 32 * 32 * 20;
  RasterCache cache(3 * one);
  Camera cam;
  std::shared_ptr<const Raster> first;
  for (int i = 0; i < 5; ++i) {
    cam.azim = 10.0 * i;
    auto r = cache.get(m, cam, 32, 32);
    if (i == 0) first = r;
  }
  RasterCacheStats s = cache.stats();
  EXPECT_EQ(s.entries, 3u);
  EXPECT_EQ(s.evictions, 2u);
  EXPECT_EQ(s.bytes, 3 * one);
  EXPECT_EQ(first->width, 32);  // evicted rasters stay valid for their holders
  // azim 20 is now least recently used; touching it makes azim 30 the next victim.
  cam.azim = 20.0;
  (void)cache.get(m, cam, 32, 32);
  cam.azim = 50.0;
  (void)cache.get(m, cam, 32, 32);
  cam.azim = 20.0;
  (void)cache.get(m, cam, 32, 32);
  s = cache.stats();
  EXPECT_EQ(s.hits, 2u);
  EXPECT_EQ(s.evictions, 3u);
  cam.azim = 30.0;
  (void)cache.get(m, cam, 32, 32);
  EXPECT_EQ(cache.stats().misses, 7u);  // 30 was evicted
}

}  // namespace
}  // namespace gen3d::render
