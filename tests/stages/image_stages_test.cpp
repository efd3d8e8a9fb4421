// The image stages (save_images, load_image, recenter_image, remove_background, delight), each run
// alone through StageRunner on small images made in the test.

#include <cmath>
#include <filesystem>
#include <fstream>
#include <map>
#include <memory>
#include <string>

#include <gtest/gtest.h>

#include "pipeline/error.h"
#include "pipeline/stage_runner.h"
#include "stage_test_helpers.h"
#include "support/paths.h"

namespace gen3d::test {
namespace {

bool contains(const std::string& text, const std::string& part) {
  return text.find(part) != std::string::npos;
}

// Runs a one-image stage; `params` first, then the image in, the image out.
std::shared_ptr<const Image> run_on(const char* stage, std::shared_ptr<const Image> in,
                                    const nlohmann::json& params = nlohmann::json::object(),
                                    std::map<std::string, double>* metrics = nullptr) {
  pipeline::StageRunner r = runner(stage);
  for (const auto& [name, value] : params.items()) r.param(name, value);
  r.input<Image>("image", std::move(in));
  r.run();
  if (metrics) *metrics = r.profiler().counter_totals();
  return r.output<Image>("image");
}
std::shared_ptr<const Image> run_on(const char* stage, Image in,
                                    const nlohmann::json& params = nlohmann::json::object(),
                                    std::map<std::string, double>* metrics = nullptr) {
  return run_on(stage, std::make_shared<const Image>(std::move(in)), params, metrics);
}

// A white RGB(A) picture with a disc of `colour` in the middle (alpha 1 on the disc, 0 around).
Image disc(int size, float radius, const float colour[3], bool alpha) {
  Image img(size, size, alpha ? 4 : 3, 1.0f);
  for (int y = 0; y < size; ++y)
    for (int x = 0; x < size; ++x) {
      const float dx = x + 0.5f - size / 2.0f, dy = y + 0.5f - size / 2.0f;
      const bool in = dx * dx + dy * dy <= radius * radius;
      float* p = img.at(x, y);
      if (in)
        for (int c = 0; c < 3; ++c) p[c] = colour[c];
      if (alpha) p[3] = in ? 1.0f : 0.0f;
    }
  return img;
}
constexpr float kRed[3] = {0.8f, 0.1f, 0.1f}, kOrange[3] = {0.9f, 0.55f, 0.2f};

bool is_white(const float* p) {
  return p[0] == 1.0f && p[1] == 1.0f && p[2] == 1.0f;
}

TEST(ImageStages, SaveImagesThenLoadImageRoundTrip) {
  Image rgb(8, 6, 3);
  for (size_t i = 0; i < rgb.pixels.size(); ++i) rgb.pixels[i] = (i % 17) / 16.0f;
  Image rgba(5, 5, 4, 0.5f);
  for (int y = 0; y < 5; ++y) rgba.at(y, y)[3] = 1.0f;  // opaque diagonal, half-transparent rest

  const std::string dir = temp_dir("image_stages_roundtrip") + "/new/views";
  pipeline::StageRunner save = runner("save_images");
  save.input<stages::ImageList>("images", stages::ImageList{rgb, Image{}, rgba});
  save.param("dir", dir).param("prefix", "v");
  save.run();
  EXPECT_TRUE(std::filesystem::is_regular_file(dir + "/v0.png"));
  EXPECT_FALSE(std::filesystem::exists(dir + "/v1.png")) << "an empty image writes no file";
  EXPECT_TRUE(std::filesystem::is_regular_file(dir + "/v2.png"));

  const auto load = [](const std::string& path) {
    pipeline::StageRunner r = runner("load_image");
    r.param("path", path);
    r.run();
    return r.output<Image>("image");
  };
  for (const auto& [file, want] : {std::pair{"/v0.png", &rgb}, std::pair{"/v2.png", &rgba}}) {
    const auto got = load(dir + file);
    ASSERT_TRUE(got) << file;
    ASSERT_EQ(got->width, want->width) << file;
    ASSERT_EQ(got->height, want->height) << file;
    ASSERT_EQ(got->channels, want->channels) << file << ": alpha is kept";
    for (size_t i = 0; i < got->pixels.size(); ++i)
      ASSERT_NEAR(got->pixels[i], want->pixels[i], 0.5 / 255 + 1e-6) << file << " " << i;
  }

  pipeline::StageRunner def = runner("save_images");
  def.input<stages::ImageList>("images", stages::ImageList{rgb}).param("dir", dir);
  def.run();
  EXPECT_TRUE(std::filesystem::is_regular_file(dir + "/view_0.png")) << "default prefix";
}

TEST(ImageStages, SelectImagePicksOneViewImage) {
  pipeline::StageRunner r = runner("select_image");
  r.input<stages::ImageList>("images",
                             stages::ImageList{solid(4, kGreen), Image(), solid(4, kBlue)});
  r.param("index", 2).run();
  EXPECT_TRUE(near_rgb(r.output<Image>("image")->at(1, 1), kBlue));
  pipeline::StageRunner empty = runner("select_image");
  empty.input<stages::ImageList>("images", stages::ImageList{solid(4, kGreen), Image()});
  empty.param("index", 1);
  EXPECT_NE(error_of([&] { empty.run(); }).find("there is no image 1 (2 images)"),
            std::string::npos);
}

TEST(ImageStages, LoadAndSaveRefuseBadParameters) {
  pipeline::StageRunner load = runner("load_image");
  EXPECT_TRUE(contains(error_of([&] { load.run(); }), "missing required parameter \"path\""));
  load.param("path", "no/such/picture.png");
  const std::string missing = error_of([&] { load.run(); });
  EXPECT_TRUE(contains(missing, "image file not found: no/such/picture.png")) << missing;
  EXPECT_THROW(load.run(), pipeline::ConfigError);

  // A picture with nothing opaque in it is no reference image.
  const std::string dir = temp_dir("image_stages_bad");
  pipeline::StageRunner save = runner("save_images");
  save.input<stages::ImageList>("images", stages::ImageList{Image(4, 4, 4, 0.0f)});
  save.param("dir", dir);
  save.run();
  load.param("path", dir + "/view_0.png");
  EXPECT_TRUE(contains(error_of([&] { load.run(); }), "fully transparent"));

  pipeline::StageRunner no_dir = runner("save_images");
  no_dir.input<stages::ImageList>("images", stages::ImageList{Image(2, 2, 3)});
  EXPECT_TRUE(contains(error_of([&] { no_dir.run(); }), "missing required parameter \"dir\""));

  // A directory that cannot be made is refused when the config is checked, before any work.
  const std::string file = dir + "/a_file";
  { std::ofstream(file) << "x"; }
  pipeline::StageRunner into_file = runner("save_images");
  into_file.input<stages::ImageList>("images", stages::ImageList{Image(2, 2, 3)});
  into_file.param("dir", file + "/views");
  const std::string e = error_of([&] { into_file.run(); });
  EXPECT_TRUE(contains(e, "is not a directory")) << e;
}

TEST(ImageStages, RecenterCropsBordersAndCentres) {
  // A 10 x 6 opaque block at (5..14, 3..8) of a transparent 40 x 20 picture.
  Image img(40, 20, 4, 0.0f);
  for (int y = 3; y <= 8; ++y)
    for (int x = 5; x <= 14; ++x) {
      float* p = img.at(x, y);
      p[0] = x / 40.0f, p[1] = y / 20.0f, p[2] = 0.3f, p[3] = 1.0f;
    }
  // Border 0.2: 2 px left and right, 1 px above and below -> 14 x 8, centred in a 14 x 14 square.
  const auto out = run_on("recenter_image", img, {{"border_ratio", 0.2}});
  ASSERT_EQ(out->width, 14);
  ASSERT_EQ(out->height, 14);
  ASSERT_EQ(out->channels, 4);
  for (int y = 0; y < 14; ++y)
    for (int x = 0; x < 14; ++x) {
      const float* p = out->at(x, y);
      const bool block = x >= 2 && x <= 11 && y >= 4 && y <= 9;
      if (block) {
        ASSERT_EQ(p[3], 1.0f) << x << "," << y;
        ASSERT_EQ(p[0], (x + 3) / 40.0f) << "RGB passes through";
        ASSERT_EQ(p[1], (y - 1) / 20.0f);
      } else {
        ASSERT_EQ(p[3], 0.0f) << x << "," << y;
        ASSERT_TRUE(is_white(p)) << "transparent white around";
      }
    }
  const auto tight = run_on("recenter_image", img, {{"border_ratio", 0.0}});
  EXPECT_EQ(tight->width, 10);

  // RGB has no alpha to crop to: unchanged.
  const Image rgb = disc(16, 4, kRed, false);
  EXPECT_EQ(run_on("recenter_image", rgb)->pixels, rgb.pixels);

  EXPECT_TRUE(contains(error_of([&] {
                         run_on("recenter_image", img, {{"border_ratio", 2.5}});
                       }),
                       "/params/border_ratio"));
  EXPECT_TRUE(contains(error_of([&] { run_on("recenter_image", Image(4, 4, 4, 0.0f)); }),
                       "fully transparent"));
}

TEST(ImageStages, RemoveBackgroundFindsTheObject) {
  const Image picture = disc(48, 12, kRed, false);
  for (const char* method : {"threshold", "grabcut"}) {
    SCOPED_TRACE(method);
    const auto out = run_on("remove_background", picture, {{"method", method}});
    ASSERT_EQ(out->width, 48);
    ASSERT_EQ(out->channels, 4);
    size_t opaque = 0;
    for (int y = 0; y < 48; ++y)
      for (int x = 0; x < 48; ++x) {
        const float* p = out->at(x, y);
        const float* q = picture.at(x, y);
        ASSERT_TRUE(p[0] == q[0] && p[1] == q[1] && p[2] == q[2]) << "RGB is kept";
        ASSERT_TRUE(p[3] == 0.0f || p[3] == 1.0f);
        opaque += p[3] == 1.0f;
      }
    EXPECT_EQ(out->at(24, 24)[3], 1.0f) << "the disc is kept";
    EXPECT_EQ(out->at(0, 0)[3], 0.0f) << "the white background is cut";
    EXPECT_EQ(out->at(47, 10)[3], 0.0f);
    EXPECT_NEAR(static_cast<double>(opaque), M_PI * 144, 0.1 * M_PI * 144);
  }

  const Image rgba = disc(16, 4, kRed, true);
  EXPECT_EQ(run_on("remove_background", rgba)->pixels, rgba.pixels) << "RGBA passes through";
  EXPECT_TRUE(contains(error_of([&] { run_on("remove_background", Image(16, 16, 3, 0.4f)); }),
                       "no foreground"));
  EXPECT_TRUE(contains(error_of([&] {
                         run_on("remove_background", picture, {{"threshold", 2.0}});
                       }),
                       "/params/threshold"));
  EXPECT_TRUE(contains(error_of([&] {
                         run_on("remove_background", picture, {{"method", "rembg"}});
                       }),
                       "/params/method"));
}

// An orange disc shaded from dark (left) to bright (right) with a small white highlight.
Image shaded_disc() {
  Image img = disc(48, 18, kOrange, true);
  for (int y = 0; y < 48; ++y)
    for (int x = 0; x < 48; ++x) {
      float* p = img.at(x, y);
      if (p[3] == 0.0f) continue;
      for (int c = 0; c < 3; ++c) p[c] *= 0.55f + 0.45f * x / 47.0f;
    }
  for (int y = 22; y < 26; ++y)
    for (int x = 30; x < 34; ++x)
      for (int c = 0; c < 3; ++c) img.at(x, y)[c] = 1.0f;
  return img;
}

// Right-half minus left-half mean luminance over the disc (not the highlight).
double shading_step(const Image& img) {
  double sum[2] = {0, 0}, n[2] = {0, 0};
  for (int y = 0; y < 48; ++y)
    for (int x = 0; x < 48; ++x) {
      const float* p = img.at(x, y);
      if (p[3] == 0.0f || (y >= 20 && y < 28 && x >= 28 && x < 36)) continue;
      sum[x >= 24] += 0.299 * p[0] + 0.587 * p[1] + 0.114 * p[2];
      n[x >= 24] += 1;
    }
  return sum[1] / n[1] - sum[0] / n[0];
}

TEST(ImageStages, DelightClassicalFlattensShadingAndHighlights) {
  const auto in = std::make_shared<const Image>(shaded_disc());
  std::map<std::string, double> metrics;
  const auto out = run_on("delight", in, nlohmann::json::object(), &metrics);
  ASSERT_EQ(out->width, 48);
  ASSERT_EQ(out->channels, 4);
  for (int y = 0; y < 48; ++y)
    for (int x = 0; x < 48; ++x) {
      const float* p = out->at(x, y);
      ASSERT_EQ(p[3], in->at(x, y)[3]) << "alpha is kept";
      for (int c = 0; c < 3; ++c) ASSERT_TRUE(p[c] >= 0.0f && p[c] <= 1.0f);
      if (p[3] == 0.0f) {
        ASSERT_TRUE(is_white(p)) << "the white background stays white";
      }
    }
  EXPECT_LT(shading_step(*out), 0.5 * shading_step(*in)) << "most of the shading is gone";
  const double highlight = metrics.at("delight.highlight_fraction");
  EXPECT_GT(highlight, 0.0);
  EXPECT_LT(highlight, 0.05);
  const float* spot = out->at(31, 23);
  EXPECT_GT(spot[0] - spot[2], 0.2f) << "the white highlight took the orange around it";

  // strength 0 divides nothing out.
  const auto kept = run_on("delight", in, {{"strength", 0.0}});
  EXPECT_GT(shading_step(*kept), 0.7 * shading_step(*in));

  EXPECT_EQ(run_on("delight", in, {{"method", "none"}}), in) << "none passes the image on";
}

TEST(ImageStages, DelightModelNeedsItsFolder) {
  const auto in = std::make_shared<const Image>(disc(16, 5, kOrange, true));
  const auto error = [&](const nlohmann::json& params) {
    return error_of([&] { run_on("delight", in, params); });
  };
  EXPECT_TRUE(contains(error({{"method", "model"}}), "method 'model' needs \"model\""));
  EXPECT_TRUE(contains(error({{"method", "model"}, {"model", "/no/such/delight"}}),
                       "delight model folder not found: /no/such/delight"));
  const std::string dir = temp_dir("image_stages_delight");
  EXPECT_TRUE(contains(error({{"method", "model"}, {"model", dir}, {"size", 100}}),
                       "size must be a multiple of 8"));
  EXPECT_TRUE(contains(error({{"strength", 1.5}}), "/params/strength"));
  EXPECT_TRUE(contains(error({{"method", "learned"}}), "/params/method"));
  EXPECT_EQ(error({{"size", 100}}), "") << "size matters to the model only";
}

// device: cpu or cuda (the model's networks in bf16); this test binary has no CUDA backend, so
// a valid cuda node fails at its start, naming the node and the device, before anything loads.
TEST(ImageStages, DelightModelTakesADevice) {
  const auto in = std::make_shared<const Image>(disc(16, 5, kOrange, true));
  const auto error = [&](const nlohmann::json& params) {
    return error_of([&] { run_on("delight", in, params); });
  };
  const std::string dir = temp_dir("image_stages_delight_device");
  EXPECT_TRUE(
      contains(error({{"method", "model"}, {"model", dir}, {"device", "gpu"}}), "/params/device"));
  EXPECT_TRUE(contains(
      error({{"method", "model"}, {"model", dir}, {"device", "cuda"}, {"precision", "fp32"}}),
      "device cuda runs the network in bf16"));
  for (const char* precision : {"auto", "bf16"}) {
    const std::string e =
        error({{"method", "model"}, {"model", dir}, {"device", "cuda"}, {"precision", precision}});
    EXPECT_TRUE(contains(e, "device cuda")) << e;
    EXPECT_FALSE(contains(e, "runs the network in bf16")) << e;
  }
  EXPECT_EQ(error({{"device", "cuda"}, {"precision", "fp32"}}), "")
      << "the device matters to the model only";
}

}  // namespace
}  // namespace gen3d::test
