// Pixel format conversions: float -> u8 rounding, PIL's convert("RGBA"), channel extraction.

#include "image/convert.h"

#include <gtest/gtest.h>

#include <cmath>
#include <cstdint>
#include <random>
#include <vector>

#include "image/error.h"

namespace gen3d::image {
namespace {

TEST(Convert, UnitFloatsRoundToU8) {
  std::vector<float> px = {0.0f, 1.0f / 255, 0.5f, 1.0f, 2.0f, -1.0f};
  const ImageU8 u = image_u8_from_unit(px.data(), 2, 1, 3);
  EXPECT_EQ(u.pixels, (std::vector<std::uint8_t>{0, 1, 128, 255, 255, 0}));
  EXPECT_THROW(image_u8_from_unit(nullptr, 2, 1, 3), ImageError);
}

// The rounding without a library call agrees with std::lround(c * 255.0f) around every tie
// (each k + 0.5 over 255, 200 floats either side) and at random points of [0, 1].
TEST(Convert, UnitToU8AgreesWithLroundAtEveryTie) {
  auto check = [](float c) {
    ASSERT_EQ(unit_to_u8(c), static_cast<std::uint8_t>(std::lround(c * 255.0f))) << c;
  };
  for (int k = 0; k < 255; ++k) {
    float c = (static_cast<float>(k) + 0.5f) / 255.0f;
    for (int i = 0; i < 200; ++i) c = std::nextafter(c, 0.0f);
    for (int i = 0; i < 400; ++i, c = std::nextafter(c, 1.0f)) check(c);
  }
  std::mt19937 rng(11);
  std::uniform_real_distribution<float> d(0.0f, 1.0f);
  for (int i = 0; i < 100000; ++i) check(d(rng));
  check(0.0f);
  check(1.0f);
}

TEST(Convert, RgbAndGreyGetOpaqueAlpha) {
  std::mt19937 rng(7);
  std::uniform_int_distribution<int> d(0, 255);
  ImageU8 rgb(6, 5, 3);
  for (auto& p : rgb.pixels) p = static_cast<std::uint8_t>(d(rng));
  const ImageU8 rgba = to_rgba(rgb);
  ASSERT_EQ(rgba.channels, 4);
  for (int i = 0; i < 30; ++i) {
    EXPECT_EQ(rgba.pixels[i * 4 + 3], 255);
    EXPECT_EQ(rgba.pixels[i * 4 + 1], rgb.pixels[i * 3 + 1]);
  }
  const ImageU8 grey(2, 2, 1, 9);
  const std::vector<std::uint8_t> grey_rgba = {9, 9, 9, 255, 9, 9, 9, 255,
                                               9, 9, 9, 255, 9, 9, 9, 255};
  EXPECT_EQ(to_rgba(grey).pixels, grey_rgba);
  EXPECT_EQ(to_rgba(rgba).pixels, rgba.pixels);
  EXPECT_THROW(to_rgba(ImageU8(2, 2, 2)), ImageError);
}

TEST(Convert, ExtractsOneChannel) {
  ImageU8 rgba(2, 1, 4);
  rgba.pixels = {1, 2, 3, 4, 5, 6, 7, 8};
  const ImageU8 alpha = extract_channel(rgba, 3);
  EXPECT_EQ(alpha.channels, 1);
  EXPECT_EQ(alpha.pixels, (std::vector<std::uint8_t>{4, 8}));
  EXPECT_THROW(extract_channel(rgba, 4), ImageError);
}

}  // namespace
}  // namespace gen3d::image
