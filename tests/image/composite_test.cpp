// Compositing over a background: float RGBA over any colour, and the reference's truncating u8
// composite over white.

#include "image/composite.h"

#include <gtest/gtest.h>

#include <cstdint>

#include "image/error.h"

namespace gen3d::image {
namespace {

TEST(Composite, FloatOverColour) {
  Image rgba(1, 1, 4);
  rgba.pixels = {1.0f, 0.5f, 0.0f, 0.25f};
  const Image out = composite_over(rgba, 0.0f, 0.0f, 1.0f);
  ASSERT_EQ(out.channels, 3);
  EXPECT_FLOAT_EQ(out.pixels[0], 0.25f);
  EXPECT_FLOAT_EQ(out.pixels[1], 0.125f);
  EXPECT_FLOAT_EQ(out.pixels[2], 0.75f);
  const Image rgb(2, 2, 3, 0.5f);
  EXPECT_EQ(composite_over(rgb).pixels, rgb.pixels);
}

TEST(Composite, OverWhiteTruncates) {
  // alpha 128 over colour 0: 255 * (1 - 128/255) = 126.9999.. in float32 -> truncates.
  ImageU8 img(4, 4, 4, 0);
  for (int i = 0; i < 16; ++i) img.pixels[i * 4 + 3] = 128;
  const ImageU8 rgb = composite_over_white(img);
  ASSERT_EQ(rgb.channels, 3);
  const float m = 128.0f / 255.0f;
  const float v = 0.0f * m + 255.0f * (1.0f - m);
  EXPECT_EQ(rgb.at(1, 1)[0], static_cast<std::uint8_t>(v));
  EXPECT_EQ(rgb.at(1, 1)[0], 126);
  EXPECT_THROW(composite_over_white(ImageU8(4, 4, 3)), ImageError);
}

}  // namespace
}  // namespace gen3d::image
