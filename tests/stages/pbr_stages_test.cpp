// attach_metallic_roughness and render_shaded run alone through StageRunner, and the raster
// cache's promise for a second set of views baked beside the first.

#include <gtest/gtest.h>

#include "stage_test_helpers.h"

namespace gen3d::test {
namespace {

// The smooth sphere with a grey base-colour texture.
std::shared_ptr<const mesh::Mesh> grey_sphere() {
  auto m = std::make_shared<mesh::Mesh>(*smooth_sphere());
  m->texture = std::make_shared<const Image>(solid(8, {0.5f, 0.5f, 0.5f}));
  return m;
}

TEST(AttachMetallicRoughness, StoresThePaintedImageInGltfLayout) {
  pipeline::StageRunner r = runner("attach_metallic_roughness");
  // Painted as Hunyuan3D-2.1 does: metallic 1 (R) on the left, roughness 1 (G) on the right.
  r.input<mesh::Mesh>("mesh", grey_sphere()).input<Image>("texture", halves(8, kRed, kGreen));
  r.run();
  const auto out = r.output<mesh::Mesh>("mesh");
  ASSERT_TRUE(out && out->pbr.texture);
  const Image& mr = *out->pbr.texture;
  EXPECT_TRUE(near_rgb(mr.at(1, 4), {1, 0, 1})) << "metallic in B, not rough";
  EXPECT_TRUE(near_rgb(mr.at(6, 4), {1, 1, 0})) << "rough in G, not metallic";
  EXPECT_TRUE(out->texture) << "the base colour stays";

  pipeline::StageRunner bare = runner("attach_metallic_roughness");
  mesh::Mesh no_uvs = *smooth_sphere();
  no_uvs.uvs.clear();
  no_uvs.uv_faces.clear();
  bare.input<mesh::Mesh>("mesh", std::move(no_uvs)).input<Image>("texture", solid(8, kRed));
  EXPECT_NE(error_of([&] { bare.run(); }).find("no UVs"), std::string::npos);
}

// Mean grey level of a render's covered pixels in one quadrant (0: upper left, 3: lower right).
double quadrant_mean(const Image& img, int quadrant) {
  const int w = img.width / 2, h = img.height / 2, x0 = (quadrant % 2) * w, y0 = (quadrant / 2) * h;
  double sum = 0;
  size_t n = 0;
  for (int y = y0; y < y0 + h; ++y)
    for (int x = x0; x < x0 + w; ++x) {
      const float* p = img.at(x, y);
      if (p[0] == 1.0f && p[1] == 1.0f && p[2] == 1.0f) continue;  // background
      sum += (p[0] + p[1] + p[2]) / 3;
      ++n;
    }
  return n ? sum / double(n) : 0.0;
}

TEST(RenderShaded, LightComesFromTheUpperLeftAndMetalLooksDifferent) {
  const auto views = level_views({0});
  const auto shade = [&](Rgb painted) {
    pipeline::StageRunner attach = runner("attach_metallic_roughness");
    attach.input<mesh::Mesh>("mesh", grey_sphere()).input<Image>("texture", solid(8, painted));
    attach.run();
    pipeline::StageRunner r = runner("render_shaded");
    r.input<mesh::Mesh>("mesh", attach.output<mesh::Mesh>("mesh"));
    r.input<render::ViewSet>("views", views).param("resolution", 64);
    r.run();
    return (*r.output<stages::ImageList>("maps"))[0];
  };
  const Image rough = shade({0, 1, 0});     // dielectric, fully rough
  const Image metal = shade({1, 0.3f, 0});  // metallic, fairly smooth
  ASSERT_EQ(rough.width, 64);
  // Row 0 is the top of the picture: the upper left quadrant faces the light, the lower right
  // turns away from it.
  EXPECT_GT(quadrant_mean(rough, 0), quadrant_mean(rough, 3) + 0.05)
      << "lit from the upper left; quadrant means " << quadrant_mean(rough, 0) << " "
      << quadrant_mean(rough, 1) << " " << quadrant_mean(rough, 2) << " "
      << quadrant_mean(rough, 3);
  double diff = 0;
  for (size_t i = 0; i < rough.pixels.size(); ++i)
    diff += std::fabs(rough.pixels[i] - metal.pixels[i]);
  EXPECT_GT(diff / rough.pixels.size(), 0.02) << "metallic and roughness change the picture";
}

// A second set of view images baked beside the first (metallic-roughness beside albedo) takes
// the same rasters from the run's cache: no pose is rasterized twice.
TEST(BakeViews, ASecondSetOfImagesReusesTheRasters) {
  const auto views = level_views({0, 180});
  pipeline::StageRunner bake = runner("bake_views");
  bake.input<mesh::Mesh>("mesh", smooth_sphere()).input<render::ViewSet>("views", views);
  bake.input<stages::ImageList>("images", stages::ImageList{solid(32, kRed), solid(32, kRed)});
  bake.param("texture_size", 32).param("render_size", 32);
  bake.run();
  const auto totals = [&](const char* name) { return bake.profiler().counter_totals().at(name); };
  const double rasterized = totals("raster_cache.rasterizations");
  EXPECT_EQ(rasterized, 3.0) << "two poses and the UV raster";
  bake.input<stages::ImageList>("images", stages::ImageList{solid(32, kGreen), solid(32, kBlue)});
  bake.run();  // the same run's shared state, as a second bake node has
  EXPECT_EQ(totals("raster_cache.rasterizations"), rasterized);
  EXPECT_EQ(totals("raster_cache.hits"), 3.0);
}

}  // namespace
}  // namespace gen3d::test
