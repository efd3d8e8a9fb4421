// Float resizes through OpenCV.

#include "image/resize.h"

#include <gtest/gtest.h>

#include "image/error.h"

namespace gen3d::image {
namespace {

TEST(Resize, FiltersKeepFlatImagesFlat) {
  const Image flat(9, 7, 3, 0.4f);
  for (const char* filter : {"area", "linear", "cubic"}) {
    const Image out = resize_image(flat, 4, 5, filter);
    ASSERT_EQ(out.width, 4) << filter;
    ASSERT_EQ(out.height, 5) << filter;
    ASSERT_EQ(out.channels, 3) << filter;
    for (float v : out.pixels) EXPECT_NEAR(v, 0.4f, 1e-6) << filter;
  }
  EXPECT_EQ(resize_image(flat, 9, 7, "cubic").pixels, flat.pixels);
}

TEST(Resize, CubicIsClampedToUnitRange) {
  Image step(8, 1, 1, 0.0f);
  for (int x = 4; x < 8; ++x) step.at(x, 0)[0] = 1.0f;
  const Image out = resize_image(step, 29, 1, "cubic");  // overshoots at the edge unclamped
  for (float v : out.pixels) {
    EXPECT_GE(v, 0.0f);
    EXPECT_LE(v, 1.0f);
  }
}

TEST(Resize, RejectsBadArguments) {
  EXPECT_THROW(resize_image(Image(), 4, 4), ImageError);
  EXPECT_THROW(resize_image(Image(4, 4, 3), 0, 4), ImageError);
  EXPECT_THROW(resize_image(Image(4, 4, 3), 2, 2, "lanczos"), ImageError);
}

}  // namespace
}  // namespace gen3d::image
