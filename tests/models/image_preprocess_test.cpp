// Unit tests of models/image_preprocess: the OpenCV resize re-implementations against cv::resize
// of the installed OpenCV (when it is the 4.6 line the recipes come from), recentering rules,
// the torchvision antialiased resize against a direct definition, and bad inputs.

#include <gtest/gtest.h>

#include <opencv2/core.hpp>
#include <opencv2/core/version.hpp>
#include <opencv2/imgproc.hpp>

#include <array>
#include <cmath>
#include <random>
#include <string>

#include "models/error.h"
#include "models/image_preprocess.h"

namespace gen3d::models {
namespace {

ImageU8 random_image(int w, int h, int c, std::mt19937& rng) {
  ImageU8 img(w, h, c);
  std::uniform_int_distribution<int> d(0, 255);
  for (auto& p : img.pixels) p = static_cast<std::uint8_t>(d(rng));
  return img;
}

ImageU8 cv_resize(const ImageU8& src, int w, int h, int interp) {
  cv::Mat m(src.height, src.width, CV_8UC(src.channels),
            const_cast<std::uint8_t*>(src.pixels.data()));
  cv::Mat out;
  cv::resize(m, out, cv::Size(w, h), 0, 0, interp);
  ImageU8 r(w, h, src.channels);
  for (int y = 0; y < h; ++y) std::copy_n(out.ptr<std::uint8_t>(y), w * src.channels, r.row(y));
  return r;
}

int count_diff(const ImageU8& a, const ImageU8& b) {
  int n = 0;
  for (std::size_t i = 0; i < a.pixels.size(); ++i) n += a.pixels[i] != b.pixels[i];
  return n;
}

// The recipes pin OpenCV 4.6 on x86 (the reference build); other versions may round differently.
bool opencv_is_reference_line() {
#if defined(__x86_64__) || defined(__i386__)
  return CV_VERSION_MAJOR == 4 && CV_VERSION_MINOR == 6;
#else
  return false;
#endif
}

struct ResizeCase {
  int sw, sh, dw, dh, cn;
};

void check_against_opencv(int interp, const char* name, ImageU8 (*ours)(const ImageU8&, int, int)) {
  if (!opencv_is_reference_line()) GTEST_SKIP() << "OpenCV " << CV_VERSION << " is not 4.6/x86";
  cv::setNumThreads(1);
  std::mt19937 rng(1234);
  std::uniform_int_distribution<int> dim(1, 90);
  std::uniform_int_distribution<int> ch(0, 2);
  const int cns[3] = {1, 3, 4};
  int cases = 0;
  for (int i = 0; i < 300; ++i) {
    ResizeCase c{dim(rng), dim(rng), dim(rng), dim(rng), cns[ch(rng)]};
    if (i % 5 == 0) {  // integer shrink factors (area fast path) and identities
      const int k = 1 + i % 3;
      c.sw = c.dw * k;
      c.sh = c.dh * k;
    }
    const ImageU8 src = random_image(c.sw, c.sh, c.cn, rng);
    const ImageU8 want = cv_resize(src, c.dw, c.dh, interp);
    const ImageU8 got = ours(src, c.dw, c.dh);
    ASSERT_EQ(count_diff(got, want), 0)
        << name << " " << c.sw << "x" << c.sh << "x" << c.cn << " -> " << c.dw << "x" << c.dh;
    ++cases;
  }
  EXPECT_EQ(cases, 300);
}

TEST(ImagePreprocess, AreaMatchesOpenCV) {
  check_against_opencv(cv::INTER_AREA, "INTER_AREA", &resize_area);
}
TEST(ImagePreprocess, CubicMatchesOpenCV) {
  check_against_opencv(cv::INTER_CUBIC, "INTER_CUBIC", &resize_cubic);
}
TEST(ImagePreprocess, NearestMatchesOpenCV) {
  check_against_opencv(cv::INTER_NEAREST, "INTER_NEAREST", &resize_nearest);
}

TEST(ImagePreprocess, RecenterCentersTheAlphaBox) {
  ImageU8 img(40, 20, 4, 0);  // S = 40; opaque box rows 5..14, cols 10..29
  for (int y = 5; y <= 14; ++y)
    for (int x = 10; x <= 29; ++x) {
      std::uint8_t* p = img.row(y) + x * 4;
      p[0] = 200;
      p[1] = 100;
      p[2] = 50;
      p[3] = 255;
    }
  const Recentered r = recenter(img, 0.15);
  EXPECT_EQ(r.info.size, 40);
  EXPECT_EQ(r.info.row_min, 5);
  EXPECT_EQ(r.info.row_max, 14);
  EXPECT_EQ(r.info.h, 9);  // differences, not counts
  EXPECT_EQ(r.info.w, 19);
  EXPECT_EQ(r.info.desired, 34);
  EXPECT_EQ(r.info.w2, 34);
  EXPECT_EQ(r.info.h2, static_cast<int>(9 * (34.0 / 19)));
  EXPECT_EQ(r.rgb.width, 40);
  EXPECT_EQ(r.mask.channels, 1);
  // Corners are white background with alpha 0; the centre is the object's colour.
  EXPECT_EQ(r.rgb.row(0)[0], 255);
  EXPECT_EQ(r.mask.row(0)[0], 0);
  EXPECT_EQ(r.rgb.row(20)[20 * 3 + 0], 200);
  EXPECT_EQ(r.mask.row(20)[20], 255);
}

TEST(ImagePreprocess, CompositeTruncates) {
  // alpha 128 over colour 0: 255 * (1 - 128/255) = 126.9999.. in float32 -> truncates.
  ImageU8 img(4, 4, 4, 0);
  for (auto& p : img.pixels) p = 0;
  for (int i = 0; i < 16; ++i) img.pixels[i * 4 + 3] = 128;
  const Recentered r = recenter(img, 0.0);
  const float m = 128.0f / 255.0f;
  const float v = 0.0f * m + 255.0f * (1.0f - m);
  EXPECT_EQ(r.rgb.row(1)[3], static_cast<std::uint8_t>(v));
}

TEST(ImagePreprocess, RejectsTransparentAndDegenerateImages) {
  EXPECT_THROW(recenter(ImageU8(8, 8, 4, 0)), ModelError);
  ImageU8 line(8, 8, 4, 0);
  for (int x = 0; x < 8; ++x) line.row(3)[x * 4 + 3] = 255;  // one row: h = 0
  EXPECT_THROW(recenter(line), ModelError);
  EXPECT_THROW(recenter(ImageU8(8, 8, 3, 0)), ModelError);  // not RGBA
  EXPECT_THROW(resize_cubic(ImageU8(8, 8, 3), 0, 4), ModelError);
  ImageU8 broken(8, 8, 3);
  broken.pixels.resize(5);
  EXPECT_THROW(resize_area(broken, 4, 4), ModelError);
}

TEST(ImagePreprocess, RgbGetsOpaqueAlpha) {
  std::mt19937 rng(7);
  const ImageU8 rgb = random_image(6, 5, 3, rng);
  const ImageU8 rgba = to_rgba(rgb);
  ASSERT_EQ(rgba.channels, 4);
  for (int i = 0; i < 30; ++i) {
    EXPECT_EQ(rgba.pixels[i * 4 + 3], 255);
    EXPECT_EQ(rgba.pixels[i * 4 + 1], rgb.pixels[i * 3 + 1]);
  }
  // An opaque RGB image recenters to its full frame (bbox = whole image).
  const PreprocessedImage p = preprocess_image(rgb, {16, 0.15});
  EXPECT_EQ(p.recentered.info.row_min, 0);
  EXPECT_EQ(p.image.shape(), (Shape{1, 3, 16, 16}));
}

TEST(ImagePreprocess, FloatImagesRoundTrip) {
  std::vector<float> px = {0.0f, 1.0f / 255, 0.5f, 1.0f, 2.0f, -1.0f};
  const ImageU8 u = image_u8_from_unit(px.data(), 2, 1, 3);
  EXPECT_EQ(u.pixels, (std::vector<std::uint8_t>{0, 1, 128, 255, 255, 0}));
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
