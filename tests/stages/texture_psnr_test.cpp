// The texture_psnr stage run alone through StageRunner on a small sphere built in code: with a
// constant texture (exact expected values) and with a texture baked from a known view.

#include <cmath>
#include <map>
#include <memory>
#include <string>

#include <gtest/gtest.h>

#include "pipeline/stage_runner.h"
#include "stage_test_helpers.h"

namespace gen3d::test {
namespace {

constexpr int kSize = 64;

std::map<std::string, double> psnr(std::shared_ptr<const mesh::Mesh> m,
                                   std::shared_ptr<const render::ViewSet> views,
                                   stages::ImageList images, int resolution = kSize) {
  pipeline::StageRunner r = runner("texture_psnr");
  r.input<mesh::Mesh>("mesh", m).input<render::ViewSet>("views", views);
  r.input<stages::ImageList>("images", std::move(images)).param("resolution", resolution);
  r.run();
  return r.profiler().counter_totals();
}

std::shared_ptr<const mesh::Mesh> textured(Image texture) {
  mesh::Mesh m = *smooth_sphere();
  m.texture = std::make_shared<const Image>(std::move(texture));
  return std::make_shared<const mesh::Mesh>(std::move(m));
}

// A red texture against a red view and a white one: 0 error, then 2 of 3 channels off by 1 on
// every covered pixel, 10 log10(3 / 2) dB.
TEST(TexturePsnr, ConstantTextureGivesTheExactValues) {
  const auto red = textured(solid(16, kRed));
  const double off = 10 * std::log10(1.5);
  // Images of another size than the comparison are resized first.
  const auto g = psnr(red, level_views({0, 180}), {solid(96, kRed), solid(96, kWhite)});
  EXPECT_GT(g.at("psnr.view0"), 100.0);
  EXPECT_NEAR(g.at("psnr.view1"), off, 1e-6);
  // Half the covered pixels are wrong: about 3 dB above the wrong view alone.
  EXPECT_NEAR(g.at("psnr.mean_db"), off + 10 * std::log10(2.0), 0.3);

  // A view without an image is left out.
  const auto one = psnr(red, level_views({0, 180}), {Image{}, solid(kSize, kWhite)});
  EXPECT_EQ(one.count("psnr.view0"), 0u);
  EXPECT_NEAR(one.at("psnr.mean_db"), off, 1e-6);
}

// A grey reference image is compared in every channel: black against black is exact, however
// many channels the picture has.
TEST(TexturePsnr, GreyImagesCompareLikeTheirRgbEquivalent) {
  const auto black = textured(solid(16, Rgb{0, 0, 0}));
  Image grey(kSize, kSize, 1, 0.0f);
  const auto g = psnr(black, level_views({0}), {grey});
  const auto rgb = psnr(black, level_views({0}), {solid(kSize, Rgb{0, 0, 0})});
  EXPECT_GT(g.at("psnr.view0"), 100.0);
  EXPECT_NEAR(g.at("psnr.view0"), rgb.at("psnr.view0"), 1e-9);
}

TEST(TexturePsnr, RefusesWhatItCannotCompare) {
  const auto red = textured(solid(16, kRed));
  EXPECT_NE(error_of([&] { psnr(red, level_views({0}), {Image{}}); }).find("no view to compare"),
            std::string::npos);
  EXPECT_NE(error_of([&] { psnr(red, level_views({0}), {Image{}}, 8); }).find("/params/resolution"),
            std::string::npos);
  EXPECT_NE(error_of([&] { psnr(smooth_sphere(), level_views({0}), {solid(kSize, kRed)}); }), "")
      << "an untextured mesh has no albedo to compare";
  pipeline::StageRunner r = runner("texture_psnr");
  r.input<mesh::Mesh>("mesh", red).input<render::ViewSet>("views", level_views({0}));
  EXPECT_NE(error_of([&] { r.run(); }).find("input \"images\" is not connected"),
            std::string::npos);
}

// A front view, red on its left and blue on its right, baked and inpainted: rendering the textured
// mesh from that view gives the picture back (not mirrored), and the swapped picture is far off.
TEST(TexturePsnr, BakedViewComesBackInTheTexture) {
  const auto front = level_views({0});
  const Image picture = halves(kSize, kRed, kBlue);
  const Inpainted out = inpaint(bake_and_merge(front, {picture}, kSize).merged);
  ASSERT_TRUE(out.mesh);
  const double same = psnr(out.mesh, front, {picture}).at("psnr.view0");
  const double swapped = psnr(out.mesh, front, {halves(kSize, kBlue, kRed)}).at("psnr.view0");
  EXPECT_GT(same, 15.0);
  EXPECT_LT(swapped, 4.0);
}

}  // namespace
}  // namespace gen3d::test
