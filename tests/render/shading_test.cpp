#include "render/shading.h"

#include <gtest/gtest.h>

#include <cmath>
#include <memory>

#include "render/test_meshes.h"

namespace gen3d::render {
namespace {

// The bumpy sphere with a flat grey base colour, seen from the front.
struct Scene {
  mesh::Mesh mesh = testing::as_loaded(testing::bumpy_sphere(16, 24));
  Camera camera;
  Raster raster;
  Scene() {
    mesh.texture = std::make_shared<const image::Image>(4, 4, 3, 0.6f);
    raster = rasterize(mesh, camera, 64, 64);
  }
};

// A 4 x 4 glTF metallic-roughness texture of one value: G roughness, B metallic.
std::shared_ptr<const image::Image> mr_texture(float metallic, float roughness) {
  auto t = std::make_shared<image::Image>(4, 4, 3);
  for (int p = 0; p < 16; ++p) {
    t->pixels[p * 3 + 0] = 1.0f;
    t->pixels[p * 3 + 1] = roughness;
    t->pixels[p * 3 + 2] = metallic;
  }
  return t;
}

double max_difference(const image::Image& a, const image::Image& b) {
  EXPECT_EQ(a.pixels.size(), b.pixels.size());
  double d = 0;
  for (size_t i = 0; i < a.pixels.size() && i < b.pixels.size(); ++i)
    d = std::max(d, double(std::fabs(a.pixels[i] - b.pixels[i])));
  return d;
}

TEST(ShadedMap, TextureChannelsActLikeTheFactors) {
  Scene s;
  mesh::Mesh textured = s.mesh, factors = s.mesh;
  textured.pbr.texture = mr_texture(0.8f, 0.3f);  // metallic from B, roughness from G
  factors.pbr.metallic = 0.8f;
  factors.pbr.roughness = 0.3f;
  const image::Image a = shaded_map(textured, s.raster, s.camera);
  const image::Image b = shaded_map(factors, s.raster, s.camera);
  EXPECT_LT(max_difference(a, b), 1e-5);
  // ... and the swapped reading would look different.
  factors.pbr.metallic = 0.3f;
  factors.pbr.roughness = 0.8f;
  EXPECT_GT(max_difference(a, shaded_map(factors, s.raster, s.camera)), 0.05);
}

TEST(ShadedMap, NoPbrIsARoughDielectricOnTheBackground) {
  Scene s;
  mesh::Mesh plain = s.mesh, explicit_pbr = s.mesh;
  explicit_pbr.pbr.metallic = 0.0f;
  explicit_pbr.pbr.roughness = 1.0f;
  const image::Image a = shaded_map(plain, s.raster, s.camera);
  EXPECT_LT(max_difference(a, shaded_map(explicit_pbr, s.raster, s.camera)), 1e-6);
  ASSERT_EQ(a.channels, 3);
  for (size_t p = 0; p < s.raster.pixel_count(); ++p) {
    const float* px = a.pixels.data() + p * 3;
    if (s.raster.face_id[p] == 0) {
      EXPECT_EQ(px[0], 1.0f);
    } else {
      EXPECT_GE(px[0], 0.0f);
      EXPECT_LE(px[0], 1.0f);
    }
  }
}

}  // namespace
}  // namespace gen3d::render
