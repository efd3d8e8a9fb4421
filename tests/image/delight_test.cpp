// Delighting: the classical method on simple inputs, and the learned delighter's image steps
// around the network (input preparation with alpha erosion and white outside; the colour
// re-matching with its fall-back and the white composite).

#include "image/delight.h"

#include <gtest/gtest.h>

#include "image/error.h"

namespace gen3d::image {
namespace {

// An opaque square (x, y in [2, 6)) of colour c on a transparent 8×8 canvas.
Image square_rgba(float c) {
  Image img(8, 8, 4, 0.0f);
  for (int y = 2; y < 6; ++y)
    for (int x = 2; x < 6; ++x) {
      float* p = img.at(x, y);
      p[0] = c, p[1] = c * 0.5f, p[2] = 1.0f - c, p[3] = 1.0f;
    }
  return img;
}

TEST(DelightClassical, FlatImageKeepsItsColourAndAlpha) {
  const Image in = square_rgba(0.4f);
  DelightStats stats;
  const Image out = delight_classical(in, {}, &stats);
  ASSERT_EQ(out.channels, 4);
  EXPECT_EQ(stats.highlight_fraction, 0.0);
  for (int y = 0; y < 8; ++y)
    for (int x = 0; x < 8; ++x) {
      EXPECT_EQ(out.at(x, y)[3], in.at(x, y)[3]);
      if (in.at(x, y)[3] > 0.5f) {
        for (int c = 0; c < 3; ++c) EXPECT_NEAR(out.at(x, y)[c], in.at(x, y)[c], 1e-3) << x << y;
      }
    }
  EXPECT_THROW(delight_classical(Image(4, 4, 4, 0.0f)), ImageError);  // nothing opaque
  EXPECT_THROW(delight_classical(Image()), ImageError);
}

TEST(DelightModelImages, InputErodesAlphaAndWhitensOutside) {
  const Image in = delight_model_input(square_rgba(0.4f));
  ASSERT_EQ(in.channels, 4);
  // The 4×4 square erodes to its 2×2 core.
  EXPECT_EQ(in.at(3, 3)[3], 1.0f);
  EXPECT_EQ(in.at(2, 2)[3], 0.0f);
  EXPECT_EQ(in.at(2, 2)[0], 1.0f);  // white where alpha is now 0
  EXPECT_EQ(in.at(0, 0)[1], 1.0f);
  EXPECT_FLOAT_EQ(in.at(3, 4)[0], 0.4f);  // colours inside untouched

  const Image rgb(4, 4, 3, 0.25f);
  const Image same = delight_model_input(rgb);
  EXPECT_EQ(same.channels, 3);
  EXPECT_EQ(same.pixels, rgb.pixels);
}

TEST(DelightModelImages, OutputRematchesColoursAndCompositesOnWhite) {
  const Image input = delight_model_input(square_rgba(0.4f));
  // A "network output" that is the input's colour scaled down: matching brings it back.
  Image net(8, 8, 3, 1.0f);
  for (int y = 0; y < 8; ++y)
    for (int x = 0; x < 8; ++x)
      for (int c = 0; c < 3; ++c) net.at(x, y)[c] = input.at(x, y)[c] * 0.5f;
  bool matched = false;
  const Image out = delight_model_output(net, input, 0.95f, &matched);
  EXPECT_TRUE(matched);
  ASSERT_EQ(out.channels, 3);
  EXPECT_EQ(out.at(0, 0)[0], 1.0f);  // alpha 0: white
  // Inside the core the re-matched red is close to the input's (flat channel: offset only).
  EXPECT_NEAR(out.at(3, 3)[0], 0.95f * 0.4f + (0.2f - 0.95f * 0.2f), 1e-5);

  // Matching that moves the whole image further from the input is dropped. The core is off by
  // +0.1; the shift that fixes it would also move the 60 white pixels outside by −0.095.
  Image close = input.channels == 3 ? input : Image(8, 8, 3);
  for (int y = 0; y < 8; ++y)
    for (int x = 0; x < 8; ++x)
      for (int c = 0; c < 3; ++c)
        close.at(x, y)[c] = input.at(x, y)[c] + (input.at(x, y)[3] > 0.5f ? 0.1f : 0.0f);
  bool matched2 = true;
  const Image kept = delight_model_output(close, input, 0.95f, &matched2);
  EXPECT_FALSE(matched2);
  EXPECT_FLOAT_EQ(kept.at(3, 3)[0], 0.5f);  // the network's own colour
  EXPECT_EQ(kept.at(0, 0)[2], 1.0f);

  EXPECT_THROW(delight_model_output(Image(4, 4, 3), input), ImageError);
}

}  // namespace
}  // namespace gen3d::image
