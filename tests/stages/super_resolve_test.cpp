// The `super_resolve` stage run alone through StageRunner on the RealESRGAN golden set
// ($GEN3D_GOLDEN_H21_DIR/esrgan, default tests/data/golden/hunyuan3d-2.1/esrgan; skipped when
// absent): unit-range view images in, RealESRGANer.enhance's 8-bit result out. Sizes come from the
// set's tensors.

#include <algorithm>
#include <cstdlib>
#include <filesystem>
#include <string>

#include <gtest/gtest.h>

#include "image/image.h"
#include "models/core/safetensors.h"
#include "models/nn/model_cache.h"
#include "pipeline/error.h"
#include "pipeline/stage_runner.h"
#include "stages/register.h"
#include "stages/types.h"
#include "support/paths.h"

namespace gen3d::test {
namespace {

using stages::ImageList;

const pipeline::Registry& registry() {
  static const pipeline::Registry reg = [] {
    pipeline::Registry r;
    stages::register_texture_stages(r);
    return r;
  }();
  return reg;
}

std::string golden(const std::string& name) {
  return env_or("GEN3D_GOLDEN_H21_DIR", source_dir() + "/tests/data/golden/hunyuan3d-2.1") +
         "/esrgan/" + name;
}

#define REQUIRE_GOLDEN()                                                                \
  do {                                                                                  \
    for (const char* f : {"esrgan.e2e.safetensors", "esrgan.weights.fp32.safetensors"}) \
      if (!std::filesystem::exists(golden(f))) GTEST_SKIP() << "absent: " << golden(f); \
  } while (0)

// A U8 [H, W, C] golden tensor.
image::ImageU8 read_u8(const std::string& name) {
  const auto f = models::SafetensorsFile::open(golden("esrgan.e2e.safetensors"));
  const models::TensorInfo* t = f->find(name);
  if (!t || t->dtype != models::DType::kU8 || t->shape.size() != 3)
    throw std::runtime_error("no U8 [H, W, C] tensor " + name);
  image::ImageU8 img(static_cast<int>(t->shape[1]), static_cast<int>(t->shape[0]),
                     static_cast<int>(t->shape[2]));
  const auto bytes = f->bytes(*t);
  std::copy(bytes.begin(), bytes.end(), img.pixels.begin());
  return img;
}

image::Image unit_range(const image::ImageU8& u8) {
  image::Image img(u8.width, u8.height, u8.channels);
  for (std::size_t i = 0; i < u8.pixels.size(); ++i) img.pixels[i] = u8.pixels[i] / 255.0f;
  return img;
}

// The stage on `views` with the golden weights in fp32.
void with_golden_model(pipeline::StageRunner& stage, const ImageList& views) {
  stage.input<ImageList>("images", views);
  stage.param("model", golden("esrgan.weights.fp32.safetensors")).param("precision", "fp32");
}

// Worst |level difference| against the golden image; fails on bytes that differ away from a
// rounding tie (README: exact where out.near_tie is 0, within 1 where it is 1).
int compare_to_golden(const image::Image& got) {
  const image::ImageU8 want = read_u8("out.image");
  const image::ImageU8 tie = read_u8("out.near_tie");
  EXPECT_EQ(got.width, want.width);
  EXPECT_EQ(got.height, want.height);
  EXPECT_EQ(got.channels, want.channels);
  if (got.pixels.size() != want.pixels.size()) return 256;
  int worst = 0;
  for (std::size_t i = 0; i < want.pixels.size(); ++i) {
    const float level = got.pixels[i] * 255.0f;
    EXPECT_EQ(level, std::nearbyint(level)) << "byte " << i << " is not a multiple of 1/255";
    const int d = std::abs(static_cast<int>(std::nearbyint(level)) - int(want.pixels[i]));
    if (tie.pixels[i] == 0) {
      EXPECT_EQ(d, 0) << "byte " << i;
    }
    worst = std::max(worst, d);
  }
  return worst;
}

TEST(SuperResolveStage, ContractIsAModelStage) {
  const auto* c = registry().contract("super_resolve");
  ASSERT_NE(c, nullptr);
  EXPECT_EQ(c->resource, pipeline::ResourceClass::Model);
  EXPECT_NE(c->find_input("images"), nullptr);
  EXPECT_NE(c->find_output("images"), nullptr);
  for (const char* p : {"model", "precision", "tile", "tile_pad", "resolution", "enabled"})
    EXPECT_NE(c->find_param(p), nullptr) << p;
}

// Hunyuan3D-2.1's call (tile 0): the golden image, with an empty view passing through.
TEST(SuperResolveStage, GoldenEnhanceOfEveryView) {
  REQUIRE_GOLDEN();
  const image::Image view = unit_range(read_u8("in.image"));
  pipeline::StageRunner stage(*registry().find("super_resolve"));
  with_golden_model(stage, {view, image::Image{}, view});
  stage.param("tile", 0);
  stage.run();
  const auto out = stage.output<ImageList>("images");
  ASSERT_TRUE(out);
  ASSERT_EQ(out->size(), 3u);
  EXPECT_LE(compare_to_golden((*out)[0]), 1);
  EXPECT_TRUE((*out)[1].empty());
  EXPECT_EQ((*out)[2].pixels, (*out)[0].pixels);
}

// Tiles smaller than the view with context beyond the network's reach give the same image.
TEST(SuperResolveStage, TiledWithFullContextMatchesTheGolden) {
  REQUIRE_GOLDEN();
  const image::Image view = unit_range(read_u8("in.image"));
  pipeline::StageRunner stage(*registry().find("super_resolve"));
  with_golden_model(stage, {view});
  stage.param("tile", std::max(1, view.width / 3)).param("tile_pad", 1024);
  stage.run();
  EXPECT_LE(compare_to_golden(stage.output<ImageList>("images")->at(0)), 1);
}

TEST(SuperResolveStage, ResolutionResizesAndAlphaFollows) {
  REQUIRE_GOLDEN();
  image::Image rgba(6, 5, 4, 0.25f);
  for (int y = 0; y < 5; ++y)
    for (int x = 0; x < 6; ++x) rgba.at(x, y)[3] = x < 3 ? 1.0f : 0.0f;
  pipeline::StageRunner stage(*registry().find("super_resolve"));
  with_golden_model(stage, {rgba});
  stage.param("resolution", 16);
  stage.run();
  const image::Image& out = stage.output<ImageList>("images")->at(0);
  EXPECT_EQ(out.width, 16);
  EXPECT_EQ(out.height, 16);
  ASSERT_EQ(out.channels, 4);
  EXPECT_NEAR(out.at(0, 8)[3], 1.0f, 1e-3f);
  EXPECT_NEAR(out.at(15, 8)[3], 0.0f, 1e-3f);
}

TEST(SuperResolveStage, DisabledPassesTheViewsThrough) {
  const ImageList views{image::Image(4, 3, 3, 0.5f)};
  pipeline::StageRunner stage(*registry().find("super_resolve"));
  stage.input<ImageList>("images", views);
  stage.param("enabled", false);  // no model needed
  stage.run();
  const auto out = stage.output<ImageList>("images");
  ASSERT_TRUE(out);
  ASSERT_EQ(out->size(), 1u);
  EXPECT_EQ(out->at(0).width, 4);
  EXPECT_EQ(out->at(0).pixels, views[0].pixels);
  // With a resolution the views still reach it, so a config bakes at one size either way.
  pipeline::StageRunner sized(*registry().find("super_resolve"));
  sized.input<ImageList>("images", views);
  sized.param("enabled", false);
  sized.param("resolution", 8);
  sized.run();
  const auto resized = sized.output<ImageList>("images");
  ASSERT_EQ(resized->size(), 1u);
  EXPECT_EQ(resized->at(0).width, 8);
  EXPECT_EQ(resized->at(0).height, 8);
  EXPECT_NEAR(resized->at(0).at(3, 3)[0], 0.5f, 1e-4f);
}

// The network loads once per process, whatever the number of runs.
TEST(SuperResolveStage, TheModelLoadsOnce) {
  REQUIRE_GOLDEN();
  models::nn::clear_shared_models();
  const ImageList views{image::Image(5, 4, 3, 0.5f)};
  for (int i = 0; i < 2; ++i) {
    pipeline::StageRunner stage(*registry().find("super_resolve"));
    with_golden_model(stage, views);
    stage.run();
  }
  EXPECT_EQ(models::nn::shared_model_count(), 1u);
}

TEST(SuperResolveStage, MissingWeightsAreAConfigError) {
  pipeline::StageRunner stage(*registry().find("super_resolve"));
  stage.input<ImageList>("images", ImageList{image::Image(4, 4, 3)});
  stage.param("model", "/nonexistent/RealESRGAN_x4plus.pth");
  try {
    stage.run();
    FAIL() << "expected a ConfigError";
  } catch (const pipeline::ConfigError& e) {
    EXPECT_NE(std::string(e.what()).find("/nonexistent/RealESRGAN_x4plus.pth"), std::string::npos)
        << e.what();
  }
  pipeline::StageRunner none(*registry().find("super_resolve"));
  none.input<ImageList>("images", ImageList{image::Image(4, 4, 3)});
  EXPECT_THROW(none.run(), pipeline::ConfigError);
}

TEST(SuperResolveStage, GreyViewsAreRefused) {
  REQUIRE_GOLDEN();
  pipeline::StageRunner stage(*registry().find("super_resolve"));
  with_golden_model(stage, {image::Image(4, 4, 1)});
  try {
    stage.run();
    FAIL() << "expected an error";
  } catch (const std::exception& e) {
    EXPECT_NE(std::string(e.what()).find("view 0 has 1 channels"), std::string::npos) << e.what();
  }
}

}  // namespace
}  // namespace gen3d::test
