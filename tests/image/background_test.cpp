// Classical background removal: a uniform frame becomes transparent, the object opaque.

#include "image/background.h"

#include <gtest/gtest.h>

#include "image/error.h"

namespace gen3d::image {
namespace {

// A red 10×10 square in the middle of a 30×30 light grey RGB image.
Image product_shot() {
  Image img(30, 30, 3, 0.9f);
  for (int y = 10; y < 20; ++y)
    for (int x = 10; x < 20; ++x) {
      float* p = img.at(x, y);
      p[0] = 0.8f, p[1] = 0.1f, p[2] = 0.1f;
    }
  return img;
}

TEST(RemoveBackground, ThresholdAndGrabcutFindTheObject) {
  for (const char* method : {"threshold", "grabcut"}) {
    BackgroundOptions options;
    options.method = method;
    const Image out = remove_background(product_shot(), options);
    ASSERT_EQ(out.channels, 4) << method;
    EXPECT_EQ(out.at(15, 15)[3], 1.0f) << method;
    EXPECT_EQ(out.at(2, 2)[3], 0.0f) << method;
    EXPECT_EQ(out.at(27, 15)[3], 0.0f) << method;
    EXPECT_FLOAT_EQ(out.at(15, 15)[0], 0.8f) << method;  // colours kept
  }
}

TEST(RemoveBackground, PassesRgbaAndRejectsBadInput) {
  const Image rgba(4, 4, 4, 0.5f);
  EXPECT_EQ(remove_background(rgba).pixels, rgba.pixels);
  EXPECT_THROW(remove_background(Image(16, 16, 3, 0.3f)), ImageError);  // nothing but background
  BackgroundOptions unknown;
  unknown.method = "rembg";
  EXPECT_THROW(remove_background(product_shot(), unknown), ImageError);
  EXPECT_THROW(remove_background(Image()), ImageError);
}

}  // namespace
}  // namespace gen3d::image
