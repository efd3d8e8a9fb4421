// The one recenter, in both of its references' configurations: texgen's recenter_image
// (keep_size, checked against a direct transcription of the reference on random masks) and
// ImageProcessorV2's recenter (fit_canvas + exclusive box end; bit-exact goldens in
// tests/models/dinov2_golden_test.cpp).

#include "image/recenter.h"

#include <gtest/gtest.h>

#include <algorithm>
#include <cstdint>
#include <random>

#include "image/error.h"

namespace gen3d::image {
namespace {

// hy3dgen texgen recenter_image, transcribed: PIL getbbox crop, borders int(size * ratio), a
// square of the larger bordered side filled with transparent white, the crop pasted unscaled.
template <class T>
BasicImage<T> texgen_reference(const BasicImage<T>& rgba, float ratio, T white) {
  int r0 = rgba.height, r1 = -1, c0 = rgba.width, c1 = -1;
  for (int y = 0; y < rgba.height; ++y)
    for (int x = 0; x < rgba.width; ++x)
      if (rgba.at(x, y)[3] > T(0)) {
        r0 = std::min(r0, y), r1 = std::max(r1, y);
        c0 = std::min(c0, x), c1 = std::max(c1, x);
      }
  const int width = c1 - c0 + 1, height = r1 - r0 + 1;
  const int border_w = static_cast<int>(width * ratio), border_h = static_cast<int>(height * ratio);
  const int new_w = width + 2 * border_w, new_h = height + 2 * border_h;
  const int side = std::max(new_w, new_h);
  BasicImage<T> out(side, side, 4, white);
  for (int y = 0; y < side; ++y)
    for (int x = 0; x < side; ++x) out.at(x, y)[3] = T(0);
  const int paste_x = (side - new_w) / 2 + border_w, paste_y = (side - new_h) / 2 + border_h;
  for (int y = 0; y < height; ++y)
    for (int x = 0; x < width; ++x)
      std::copy_n(rgba.at(c0 + x, r0 + y), 4, out.at(paste_x + x, paste_y + y));
  return out;
}

// A random RGBA image whose alpha is non-zero inside a random rectangle (with holes).
template <class T>
BasicImage<T> random_object(std::mt19937& rng, T full) {
  std::uniform_int_distribution<int> size(1, 40);
  const int w = size(rng), h = size(rng);
  BasicImage<T> img(w, h, 4);
  std::uniform_int_distribution<int> x(0, w - 1), y(0, h - 1), v(0, 255);
  const int x0 = x(rng), y0 = y(rng);
  const int x1 = std::min(w - 1, x0 + x(rng)), y1 = std::min(h - 1, y0 + y(rng));
  for (int yy = 0; yy < h; ++yy)
    for (int xx = 0; xx < w; ++xx) {
      T* p = img.at(xx, yy);
      for (int c = 0; c < 3; ++c) p[c] = static_cast<T>(v(rng) * full / 255);
      const bool inside = xx >= x0 && xx <= x1 && yy >= y0 && yy <= y1;
      const T alpha = static_cast<T>(std::max(1, v(rng)) * full / 255);
      p[3] = inside && v(rng) > 60 ? alpha : T(0);
    }
  img.at(x0, y0)[3] = full;  // at least one opaque pixel
  return img;
}

template <class T>
void check_texgen_behaviour(T full) {
  std::mt19937 rng(11);
  // 0.7f * 10 rounds up to 7 in float32 (6 in double): the float32 borders are part of the
  // behaviour the texgen stage has always had.
  for (const float ratio : {0.0f, 0.15f, 0.2f, 0.7f, 1.3f})
    for (int i = 0; i < 60; ++i) {
      const BasicImage<T> in = random_object(rng, full);
      RecenterInfo info;
      const BasicImage<T> got = recenter(in, {.border_ratio = ratio}, &info);
      const BasicImage<T> want = texgen_reference(in, ratio, full);
      ASSERT_EQ(got.width, want.width) << "ratio " << ratio << " case " << i;
      ASSERT_EQ(got.height, want.height);
      ASSERT_EQ(got.channels, 4);
      ASSERT_EQ(got.pixels, want.pixels) << "ratio " << ratio << " case " << i;
      EXPECT_EQ(info.size, got.width);
      EXPECT_EQ(info.scale, 1.0);
      EXPECT_EQ(info.w2, info.col_max - info.col_min + 1);
      EXPECT_EQ(info.h2, info.row_max - info.row_min + 1);
    }
}

TEST(Recenter, KeepSizeMatchesTexgenReferenceFloat) {
  check_texgen_behaviour<float>(1.0f);
}

TEST(Recenter, KeepSizeMatchesTexgenReferenceU8) {
  check_texgen_behaviour<std::uint8_t>(255);
}

TEST(Recenter, FloatBordersAsTexgen) {
  Image img(12, 12, 4, 0.0f);  // a 10 x 1 opaque bar: borders int(10 * 0.7f) = 7 and 0
  for (int x = 1; x <= 10; ++x) img.at(x, 5)[3] = 1.0f;
  RecenterInfo info;
  const Image out = recenter(img, {.border_ratio = 0.7f}, &info);
  EXPECT_EQ(out.width, 24);
  EXPECT_EQ(info.col2_min, 7);
  EXPECT_EQ(info.row2_min, 11);
}

TEST(Recenter, ImagesWithoutAlphaPassThrough) {
  const Image rgb(5, 3, 3, 0.25f);
  EXPECT_EQ(recenter(rgb).pixels, rgb.pixels);
  const ImageU8 grey(5, 3, 1, 7);
  const ImageU8 same = recenter(grey, {.fit = RecenterFit::fit_canvas});
  EXPECT_EQ(same.channels, 1);
  EXPECT_EQ(same.pixels, grey.pixels);
}

TEST(Recenter, FitCanvasCentersTheAlphaBox) {
  ImageU8 img(40, 20, 4, 0);  // S = 40; opaque box rows 5..14, cols 10..29
  for (int y = 5; y <= 14; ++y)
    for (int x = 10; x <= 29; ++x) {
      std::uint8_t* p = img.at(x, y);
      p[0] = 200;
      p[1] = 100;
      p[2] = 50;
      p[3] = 255;
    }
  RecenterInfo r;
  const ImageU8 canvas = recenter(
      img, {.border_ratio = 0.15, .fit = RecenterFit::fit_canvas, .exclusive_box_end = true}, &r);
  EXPECT_EQ(r.size, 40);
  EXPECT_EQ(r.row_min, 5);
  EXPECT_EQ(r.row_max, 14);
  EXPECT_EQ(r.h, 9);  // differences, not counts
  EXPECT_EQ(r.w, 19);
  EXPECT_EQ(r.desired, 34);
  EXPECT_EQ(r.w2, 34);
  EXPECT_EQ(r.h2, static_cast<int>(9 * (34.0 / 19)));
  EXPECT_EQ(r.row2_min, (40 - r.h2) / 2);
  EXPECT_EQ(r.col2_min, 3);
  ASSERT_EQ(canvas.width, 40);
  ASSERT_EQ(canvas.height, 40);
  // Corners are transparent white; the centre is the object's colour.
  EXPECT_EQ(canvas.at(0, 0)[0], 255);
  EXPECT_EQ(canvas.at(0, 0)[3], 0);
  EXPECT_EQ(canvas.at(20, 20)[0], 200);
  EXPECT_EQ(canvas.at(20, 20)[3], 255);
}

TEST(Recenter, RejectsTransparentAndDegenerateImages) {
  EXPECT_THROW(recenter(ImageU8(8, 8, 4, 0)), ImageError);
  EXPECT_THROW(recenter(Image(8, 8, 4, 0.0f)), ImageError);
  ImageU8 line(8, 8, 4, 0);
  for (int x = 0; x < 8; ++x) line.at(x, 3)[3] = 255;  // one row: h = 0 with the numpy slice
  const RecenterOptions processor{
      .border_ratio = 0.15, .fit = RecenterFit::fit_canvas, .exclusive_box_end = true};
  EXPECT_THROW(recenter(line, processor), ImageError);
  EXPECT_EQ(recenter(line).width, 8 + 2 * 1);  // texgen keeps it: 8 x 1 with a 1-pixel border
  ImageU8 thin(100, 100, 4, 0);                // 99 x 1 box: its short side resizes to nothing
  for (int x = 0; x < 100; ++x) thin.at(x, 3)[3] = thin.at(x, 4)[3] = 255;
  EXPECT_THROW(recenter(thin, processor), ImageError);
  ImageU8 broken(8, 8, 4);
  broken.pixels.resize(5);
  EXPECT_THROW(recenter(broken), ImageError);
}

}  // namespace
}  // namespace gen3d::image
