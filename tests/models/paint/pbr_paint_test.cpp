// The 2.1 PBR paint runner: the DINO preprocessing (PIL bicubic resize, centre crop, ImageNet
// normalisation) on hand-computed cases, the CFG combination, and a tiny run's step protocol.

#include "models/paint/pbr_paint.h"

#include <cmath>

#include <gtest/gtest.h>

#include "models/core/error.h"
#include "support/paths.h"
#include "support/tiny_paint21.h"

namespace gen3d::models {
namespace {

// Pillow's bicubic (a = −0.5) halving 4 -> 2: scale 2, support 4, output 0 centred at 1.0 takes
// inputs 0..3 at filter((x − 1 + 0.5) / 2) = cubic(−0.25, 0.25, 0.75, 1.25) = 0.8671875,
// 0.8671875, 0.2265625, −0.0703125 (sum 1.890625); output 1 the mirror image. The row
// [0, 0, 255, 255] gives 255 · (0.2265625 − 0.0703125) / 1.890625 = 21.07 -> 21 and
// 255 · (2 · 0.8671875) / 1.890625 = 233.93 -> 234; [255, 255, 0, 255] gives
// 255 · (1 − 0.2265625 / 1.890625) = 224.44 -> 224 (a = −0.75, OpenCV's cubic, would give 220)
// and 255 · (−0.0703125 + 0.2265625 + 0.8671875) / 1.890625 = 138.04 -> 138.
TEST(PilBicubic, HalvesARowAsPillowDoes) {
  image::ImageU8 row(4, 1, 1);
  row.pixels = {0, 0, 255, 255};
  const image::ImageU8 out = resize_pil_bicubic(row, 2, 1);
  ASSERT_EQ(out.width, 2);
  ASSERT_EQ(out.height, 1);
  EXPECT_EQ(out.pixels[0], 21);
  EXPECT_EQ(out.pixels[1], 234);
  row.pixels = {255, 255, 0, 255};
  const image::ImageU8 dip = resize_pil_bicubic(row, 2, 1);
  EXPECT_EQ(dip.pixels[0], 224);
  EXPECT_EQ(dip.pixels[1], 138);

  // The same along a column, and both axes of a 4 × 4 image whose rows are all that row.
  image::ImageU8 col(1, 4, 1);
  col.pixels = {0, 0, 255, 255};
  const image::ImageU8 c = resize_pil_bicubic(col, 1, 2);
  EXPECT_EQ(c.pixels[0], 21);
  EXPECT_EQ(c.pixels[1], 234);
  image::ImageU8 square(4, 4, 3);
  for (int y = 0; y < 4; ++y)
    for (int x = 0; x < 4; ++x)
      for (int q = 0; q < 3; ++q) square.at(x, y)[q] = x < 2 ? 0 : 255;
  const image::ImageU8 s = resize_pil_bicubic(square, 2, 2);
  for (int y = 0; y < 2; ++y) {
    EXPECT_EQ(s.at(0, y)[1], 21);
    EXPECT_EQ(s.at(1, y)[2], 234);
  }
}

TEST(PilBicubic, RefusesEmptyInputAndSizes) {
  EXPECT_THROW(resize_pil_bicubic(image::ImageU8{}, 2, 2), ModelError);
  EXPECT_THROW(resize_pil_bicubic(image::ImageU8(4, 4, 3), 0, 2), ModelError);
}

float normalized(int u8, int channel) {
  const float mean[3] = {0.485f, 0.456f, 0.406f}, std[3] = {0.229f, 0.224f, 0.225f};
  return (static_cast<float>(u8 * (1.0 / 255.0)) - mean[channel]) / std[channel];
}

// 300 × 256: the short side is already 256 and the long one int(256 · 300 / 256) = 300, so no
// resampling happens and the crop starts at ((256 − 224) / 2, (300 − 224) / 2) = (16, 38).
TEST(DinoPreprocess, CropsTheCentreAndNormalizes) {
  image::ImageU8 img(300, 256, 3);
  for (int y = 0; y < 256; ++y)
    for (int x = 0; x < 300; ++x) {
      img.at(x, y)[0] = static_cast<std::uint8_t>(x % 256);
      img.at(x, y)[1] = static_cast<std::uint8_t>(y);
      img.at(x, y)[2] = 77;
    }
  const Tensor px = dino_pixel_values(img);
  ASSERT_EQ(px.shape(), (Shape{1, 3, 224, 224}));
  const auto at = [&](int c, int y, int x) { return px.data()[(c * 224 + y) * 224 + x]; };
  EXPECT_FLOAT_EQ(at(0, 0, 0), normalized(38, 0));
  EXPECT_FLOAT_EQ(at(1, 0, 0), normalized(16, 1));
  EXPECT_FLOAT_EQ(at(0, 223, 223), normalized((38 + 223) % 256, 0));
  EXPECT_FLOAT_EQ(at(1, 223, 223), normalized(16 + 223, 1));
  EXPECT_FLOAT_EQ(at(2, 100, 50), normalized(77, 2));
  // (77 / 255 − 0.406) / 0.225, by hand.
  EXPECT_NEAR(at(2, 100, 50), -0.4623965f, 1e-6f);
}

// A constant 512² image stays constant through the 512 -> 256 resize (the weights of every
// output pixel sum to one): (128 / 255 − 0.485) / 0.229 = 0.0740646 in the red channel.
TEST(DinoPreprocess, ResizesTheShortSideTo256) {
  const image::ImageU8 img(512, 512, 3, 128);
  const Tensor px = dino_pixel_values(img);
  ASSERT_EQ(px.shape(), (Shape{1, 3, 224, 224}));
  EXPECT_NEAR(px.data()[0], 0.0740646f, 1e-6f);
  EXPECT_FLOAT_EQ(px.data()[224 * 224 + 5], normalized(128, 1));
  EXPECT_THROW(dino_pixel_values(image::ImageU8(8, 8, 4)), ModelError);
}

// facebook/dinov2-giant's preprocessor_config.json as published.
constexpr const char* kGiantPreprocessor = R"({
  "crop_size": {"height": 224, "width": 224},
  "do_center_crop": true,
  "do_convert_rgb": true,
  "do_normalize": true,
  "do_rescale": true,
  "do_resize": true,
  "image_mean": [0.485, 0.456, 0.406],
  "image_processor_type": "BitImageProcessor",
  "image_std": [0.229, 0.224, 0.225],
  "resample": 3,
  "rescale_factor": 0.00392156862745098,
  "size": {"shortest_edge": 256}
})";

TEST(DinoPreprocess, ReadsThePreprocessorConfig) {
  const DinoPreprocess p = DinoPreprocess::parse(kGiantPreprocessor, "giant");
  const DinoPreprocess d;
  EXPECT_EQ(p.shortest_edge, 256);
  EXPECT_EQ(p.crop, 224);
  EXPECT_EQ(p.image_mean, d.image_mean);
  EXPECT_EQ(p.image_std, d.image_std);

  const DinoPreprocess other = DinoPreprocess::parse(
      R"({"size": {"shortest_edge": 240}, "crop_size": 196, "image_mean": [0.5, 0.5, 0.5]})",
      "other");
  EXPECT_EQ(other.shortest_edge, 240);
  EXPECT_EQ(other.crop, 196);
  EXPECT_EQ(other.image_mean[1], 0.5f);
  EXPECT_EQ(dino_pixel_values(image::ImageU8(300, 240, 3, 9), other).shape(),
            (Shape{1, 3, 196, 196}));

  const auto error = [](const std::string& text) {
    try {
      DinoPreprocess::parse(text, "pre.json");
    } catch (const ModelError& e) {
      return std::string(e.what());
    }
    return std::string();
  };
  EXPECT_NE(error(R"({"resample": 2})").find("resample"), std::string::npos);
  EXPECT_NE(error(R"({"size": {"height": 224, "width": 224}})").find("shortest_edge"),
            std::string::npos);
  EXPECT_NE(error(R"({"do_center_crop": false})").find("do_center_crop"), std::string::npos);
  EXPECT_NE(error(R"({"crop_size": 300})").find("does not fit"), std::string::npos);
  EXPECT_NE(error("[1]").find("pre.json"), std::string::npos);
}

// eps = u + g·(r − u) + g·(f − r) per element, rows [uncond | ref | full].
TEST(PbrCfg, CombinesTheThreeRows) {
  Tensor raw(Shape{3, 2});
  const float v[6] = {1.0f, -2.0f, 3.0f, 0.5f, 4.0f, 1.5f};
  std::copy(v, v + 6, raw.data());
  Tensor out(Shape{1, 2});
  pbr_cfg_combine(raw, 3.0f, out);
  EXPECT_FLOAT_EQ(out.data()[0], 1.0f + 3.0f * (3.0f - 1.0f) + 3.0f * (4.0f - 3.0f));   // 10
  EXPECT_FLOAT_EQ(out.data()[1], -2.0f + 3.0f * (0.5f + 2.0f) + 3.0f * (1.5f - 0.5f));  // 8.5
  Tensor wrong(Shape{2, 2});
  EXPECT_THROW(pbr_cfg_combine(raw, 3.0f, wrong), ModelError);
}

// The tiny folder end to end: every step reports the CFG batch of 3 · 2 · N rows and the guided
// (2 · N) prediction; both materials come back at the view size.
TEST(PbrPaint, RunsTheThreeRowCfgEveryStep) {
  const test::TinyPaint21Folder f =
      test::write_tiny_paint21_folder(test::temp_dir("pbr_paint_runner"), 2);
  const auto model = load_pbr_paint_model(f.dir, f.dino_dir);
  PbrPaintInputs in;
  const std::int64_t n = 3, s = 64;
  in.reference = Tensor(Shape{1, s, s, 3});
  in.normals = Tensor(Shape{n, s, s, 3});
  in.positions = Tensor(Shape{n, s, s, 3});
  for (std::int64_t k = 0; k < in.reference.numel(); ++k)
    in.reference.data()[k] = static_cast<float>(k % 97) / 96.0f;
  for (std::int64_t k = 0; k < in.normals.numel(); ++k) {
    in.normals.data()[k] = static_cast<float>(k % 89) / 88.0f;
    in.positions.data()[k] = (k / 3) % 7 == 0 ? 1.0f : static_cast<float>(k % 53) / 60.0f;
  }
  PbrPaintOptions opt;
  opt.steps = 3;
  int calls = 0;
  const PbrPaintResult out = paint_pbr_views(*model, in, opt, [&](const PbrPaintStep& st) {
    EXPECT_EQ(st.index, calls);
    EXPECT_EQ(st.total, 3);
    EXPECT_EQ(st.noise_pred_raw->dim(0), 3 * 2 * n);
    EXPECT_EQ(st.noise_pred->dim(0), 2 * n);
    EXPECT_EQ(st.latents->dim(0), 2 * n);
    EXPECT_EQ(st.latents->dim(1), s / f.downscale);
    ++calls;
  });
  EXPECT_EQ(calls, 3);
  EXPECT_EQ(out.albedo.shape(), (Shape{n, s, s, 3}));
  EXPECT_EQ(out.mr.shape(), (Shape{n, s, s, 3}));

  // Without guidance the fully conditioned row runs alone.
  opt.guidance = 1.0f;
  opt.steps = 1;
  paint_pbr_views(*model, in, opt,
                  [&](const PbrPaintStep& st) { EXPECT_EQ(st.noise_pred_raw->dim(0), 2 * n); });

  // Two CFG rows; anything but 2 or 3 is refused.
  opt.guidance = 3.0f;
  opt.cfg_rows = 2;
  paint_pbr_views(*model, in, opt,
                  [&](const PbrPaintStep& st) { EXPECT_EQ(st.noise_pred_raw->dim(0), 2 * 2 * n); });
  opt.cfg_rows = 4;
  EXPECT_THROW(paint_pbr_views(*model, in, opt), ModelError);
  opt.cfg_rows = 3;

  // A view size the multiview grids cannot halve three times is refused.
  PbrPaintInputs odd;
  odd.reference = Tensor(Shape{1, 40, 40, 3});
  odd.normals = Tensor(Shape{1, 40, 40, 3});
  odd.positions = Tensor(Shape{1, 40, 40, 3});
  EXPECT_THROW(paint_pbr_views(*model, odd, opt), ModelError);
}

}  // namespace
}  // namespace gen3d::models
