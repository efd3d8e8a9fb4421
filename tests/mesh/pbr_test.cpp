#include "mesh/pbr.h"

#include <gtest/gtest.h>

#include <stdexcept>

namespace gen3d::mesh {
namespace {

// A 2 x 1 metallic-roughness view as Hunyuan3D-2.1 paints it (R metallic, G roughness): pixel 0
// purely metallic and smooth, pixel 1 purely rough and not metallic. B is noise the model may
// leave there; it must not leak into the result.
image::Image painted_mr() {
  image::Image mr(2, 1, 3);
  const float px[2][3] = {{1.0f, 0.0f, 0.7f}, {0.0f, 1.0f, 0.3f}};
  for (int x = 0; x < 2; ++x)
    for (int c = 0; c < 3; ++c) mr.at(x, 0)[c] = px[x][c];
  return mr;
}

TEST(GltfMetallicRoughness, MetallicLandsInBlueAndRoughnessInGreen) {
  const image::Image gltf = gltf_metallic_roughness(painted_mr());
  ASSERT_EQ(gltf.width, 2);
  ASSERT_EQ(gltf.height, 1);
  ASSERT_EQ(gltf.channels, 3);
  // The purely metallic pixel: metallic (B) 1, roughness (G) 0.
  EXPECT_FLOAT_EQ(gltf.at(0, 0)[2], 1.0f);
  EXPECT_FLOAT_EQ(gltf.at(0, 0)[1], 0.0f);
  // The purely rough pixel: roughness (G) 1, metallic (B) 0.
  EXPECT_FLOAT_EQ(gltf.at(1, 0)[1], 1.0f);
  EXPECT_FLOAT_EQ(gltf.at(1, 0)[2], 0.0f);
  // R carries no occlusion.
  EXPECT_FLOAT_EQ(gltf.at(0, 0)[0], 1.0f);
  EXPECT_FLOAT_EQ(gltf.at(1, 0)[0], 1.0f);
}

TEST(GltfMetallicRoughness, IntermediateValuesAreKeptExactly) {
  image::Image mr(1, 1, 4);
  mr.pixels = {0.25f, 0.75f, 0.5f, 0.1f};  // RGBA: alpha is ignored like B
  const image::Image gltf = gltf_metallic_roughness(mr);
  ASSERT_EQ(gltf.channels, 3);
  EXPECT_FLOAT_EQ(gltf.pixels[1], 0.75f);
  EXPECT_FLOAT_EQ(gltf.pixels[2], 0.25f);
}

TEST(GltfMetallicRoughness, ChannelsSplitBackForMtl) {
  const image::Image gltf = gltf_metallic_roughness(painted_mr());
  const image::Image metallic = metallic_channel(gltf);
  const image::Image roughness = roughness_channel(gltf);
  ASSERT_EQ(metallic.channels, 1);
  ASSERT_EQ(roughness.channels, 1);
  EXPECT_FLOAT_EQ(metallic.pixels[0], 1.0f);
  EXPECT_FLOAT_EQ(metallic.pixels[1], 0.0f);
  EXPECT_FLOAT_EQ(roughness.pixels[0], 0.0f);
  EXPECT_FLOAT_EQ(roughness.pixels[1], 1.0f);
}

TEST(GltfMetallicRoughness, SeparateMapsJoinInGltfLayout) {
  image::Image metallic(2, 1, 1), roughness(2, 1, 1);
  metallic.pixels = {1.0f, 0.0f};
  roughness.pixels = {0.25f, 0.75f};
  const image::Image both = gltf_metallic_roughness_from_maps(&metallic, &roughness);
  ASSERT_EQ(both.channels, 3);
  EXPECT_FLOAT_EQ(both.at(0, 0)[2], 1.0f);
  EXPECT_FLOAT_EQ(both.at(0, 0)[1], 0.25f);
  EXPECT_FLOAT_EQ(both.at(1, 0)[2], 0.0f);
  EXPECT_FLOAT_EQ(both.at(1, 0)[1], 0.75f);
  // A missing map is 1: its factor alone decides.
  const image::Image only = gltf_metallic_roughness_from_maps(&metallic, nullptr);
  EXPECT_FLOAT_EQ(only.at(1, 0)[1], 1.0f);
  EXPECT_FLOAT_EQ(only.at(1, 0)[2], 0.0f);
  EXPECT_THROW(gltf_metallic_roughness_from_maps(nullptr, nullptr), std::invalid_argument);
  EXPECT_THROW(gltf_metallic_roughness_from_maps(&metallic, &(roughness = image::Image(3, 1, 1))),
               std::invalid_argument);
}

TEST(GltfMetallicRoughness, TooFewChannelsAreRefused) {
  EXPECT_THROW(gltf_metallic_roughness(image::Image(2, 2, 1)), std::invalid_argument);
  EXPECT_THROW(metallic_channel(image::Image(2, 2, 2)), std::invalid_argument);
}

}  // namespace
}  // namespace gen3d::mesh
