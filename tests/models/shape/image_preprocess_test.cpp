// Unit tests of models/shape/image_preprocess: the ImageProcessorV2 steps put together (the
// image operations themselves are tested in tests/image/), the torchvision antialiased resize
// against a direct definition, and bad inputs.

#include <gtest/gtest.h>

#include <array>
#include <cmath>
#include <random>
#include <string>

#include "image/error.h"
#include "models/core/error.h"
#include "models/shape/image_preprocess.h"

namespace gen3d::models {
namespace {

image::ImageU8 random_image(int w, int h, int c, std::mt19937& rng) {
  image::ImageU8 img(w, h, c);
  std::uniform_int_distribution<int> d(0, 255);
  for (auto& p : img.pixels) p = static_cast<std::uint8_t>(d(rng));
  return img;
}

TEST(ImagePreprocess, RecentersCompositesAndResizes) {
  image::ImageU8 img(40, 20, 4, 0);  // S = 40; opaque box rows 5..14, cols 10..29
  for (int y = 5; y <= 14; ++y)
    for (int x = 10; x <= 29; ++x) {
      std::uint8_t* p = img.at(x, y);
      p[0] = 200;
      p[1] = 100;
      p[2] = 50;
      p[3] = 255;
    }
  const PreprocessedImage p = preprocess_image(img, {16, 0.15});
  const Recentered& r = p.recentered;
  EXPECT_EQ(r.info.size, 40);
  EXPECT_EQ(r.info.h, 9);  // the numpy slice leaves the box's last row and column out
  EXPECT_EQ(r.info.w, 19);
  EXPECT_EQ(r.crop_resized.width, r.info.w2);
  EXPECT_EQ(r.crop_resized.height, r.info.h2);
  EXPECT_EQ(r.crop_resized.channels, 4);
  ASSERT_EQ(r.rgb.width, 40);
  ASSERT_EQ(r.rgb.channels, 3);
  ASSERT_EQ(r.mask.channels, 1);
  // Corners are white background with alpha 0; the centre is the object's colour.
  EXPECT_EQ(r.rgb.row(0)[0], 255);
  EXPECT_EQ(r.mask.row(0)[0], 0);
  EXPECT_EQ(r.rgb.row(20)[20 * 3 + 0], 200);
  EXPECT_EQ(r.mask.row(20)[20], 255);
  EXPECT_EQ(p.rgb.width, 16);
  EXPECT_EQ(p.mask.width, 16);
  EXPECT_EQ(p.image.shape(), (Shape{1, 3, 16, 16}));
  EXPECT_EQ(p.mask_tensor.shape(), (Shape{1, 1, 16, 16}));
  EXPECT_EQ(p.image.data()[0], 1.0f);  // white corner
}

TEST(ImagePreprocess, RgbRecentersToItsFullFrame) {
  std::mt19937 rng(7);
  const image::ImageU8 rgb = random_image(6, 5, 3, rng);
  // PIL's convert("RGBA") gives alpha 255 everywhere: the box is the whole image.
  const PreprocessedImage p = preprocess_image(rgb, {16, 0.15});
  EXPECT_EQ(p.recentered.info.row_min, 0);
  EXPECT_EQ(p.recentered.info.row_max, 4);
  EXPECT_EQ(p.image.shape(), (Shape{1, 3, 16, 16}));
}

TEST(ImagePreprocess, RejectsTransparentDegenerateAndBadSizes) {
  EXPECT_THROW(preprocess_image(image::ImageU8(8, 8, 4, 0)), image::ImageError);
  image::ImageU8 line(8, 8, 4, 0);
  for (int x = 0; x < 8; ++x) line.row(3)[x * 4 + 3] = 255;  // one row: h = 0
  EXPECT_THROW(preprocess_image(line), image::ImageError);
  std::mt19937 rng(1);
  EXPECT_THROW(preprocess_image(random_image(4, 4, 4, rng), {0, 0.15}), ModelError);
  image::ImageU8 broken(8, 8, 3);
  broken.pixels.resize(5);
  EXPECT_THROW(array_to_tensor(broken), ModelError);
}

// Direct definition of torchvision's antialiased bilinear resize (per output, 2-D product of
// the normalized 1-D triangle weights), double precision.
double aa_weight_sum(int n, int m, int i, int j) {
  const double scale = double(n) / m;
  const double support = scale >= 1 ? scale : 1.0, inv = scale >= 1 ? 1 / scale : 1.0;
  const double center = scale * (i + 0.5);
  const int lo = std::max(int(center - support + 0.5), 0);
  const int hi = std::min(int(center + support + 0.5), n);
  double total = 0, wj = 0;
  for (int k = lo; k < hi; ++k) {
    const double w = std::max(0.0, 1 - std::abs((k - center + 0.5) * inv));
    total += w;
    if (k == j) wj = w;
  }
  return wj / total;
}

TEST(ImagePreprocess, AntialiasResizeMatchesDefinition) {
  std::mt19937 rng(3);
  std::uniform_real_distribution<float> u(-1, 1);
  for (auto [h, w, oh, ow] : {std::array{12, 9, 5, 7}, std::array{5, 5, 11, 8}, {7, 13, 7, 4}}) {
    Tensor x({2, 3, h, w});
    for (auto& v : x.span()) v = u(rng);
    const Tensor y = resize_bilinear_antialias(x, oh, ow);
    ASSERT_EQ(y.shape(), (Shape{2, 3, oh, ow}));
    for (int p = 0; p < 6; ++p)
      for (int i = 0; i < oh; ++i)
        for (int j = 0; j < ow; ++j) {
          double want = 0;
          for (int a = 0; a < h; ++a)
            for (int b = 0; b < w; ++b)
              want += aa_weight_sum(h, oh, i, a) * aa_weight_sum(w, ow, j, b) *
                      x.data()[(p * h + a) * w + b];
          EXPECT_NEAR(y.data()[(p * oh + i) * ow + j], want, 1e-5);
        }
  }
}

TEST(ImagePreprocess, EncoderTransformShapesAndNormalization) {
  Tensor x({1, 3, 20, 20});
  for (auto& v : x.span()) v = 1.0f;  // white -> u = 1
  const Tensor y = encoder_transform(x, 14);
  ASSERT_EQ(y.shape(), (Shape{1, 3, 14, 14}));
  EXPECT_NEAR(y.data()[0], (1.0f - 0.485f) / 0.229f, 1e-5);
  EXPECT_NEAR(y.data()[2 * 196], (1.0f - 0.406f) / 0.225f, 1e-5);
  // Non-square: shorter side to 14, center crop.
  EXPECT_EQ(encoder_transform(Tensor({2, 3, 20, 30}), 14).shape(), (Shape{2, 3, 14, 14}));
  EXPECT_THROW(encoder_transform(Tensor({1, 4, 8, 8}), 14), ModelError);
}

}  // namespace
}  // namespace gen3d::models
