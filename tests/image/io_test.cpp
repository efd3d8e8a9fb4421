// Image files and encoded bytes: round trips through PNG, the layouts decoding produces, and
// the errors for bad files, bytes and targets.

#include "image/io.h"

#include <gtest/gtest.h>

#include <cmath>
#include <cstdint>
#include <filesystem>
#include <fstream>
#include <string>

#include "image/codec.h"
#include "image/error.h"
#include "support/paths.h"

namespace gen3d::image {
namespace {
namespace fs = std::filesystem;

Image gradient(int channels) {
  Image img(7, 5, channels);
  for (size_t i = 0; i < img.pixels.size(); ++i) img.pixels[i] = float(i % 256) / 255.0f;
  return img;
}

TEST(ImageFiles, PngRoundTripsEightBitValues) {
  const std::string dir = test::temp_dir("image_io_png");
  for (int channels : {1, 3, 4}) {
    const Image img = gradient(channels);
    const std::string path = dir + "/g" + std::to_string(channels) + ".png";
    save_image(img, path);
    const Image back = load_image(path);
    ASSERT_EQ(back.width, 7);
    ASSERT_EQ(back.height, 5);
    ASSERT_EQ(back.channels, channels);
    for (size_t i = 0; i < img.pixels.size(); ++i) EXPECT_FLOAT_EQ(back.pixels[i], img.pixels[i]);
  }
  EXPECT_EQ(std::distance(fs::directory_iterator(dir), fs::directory_iterator()), 3);
}

TEST(ImageFiles, EncodingClampsAndZeroesNonFinite) {
  Image img(2, 1, 1);
  img.pixels = {2.0f, std::nanf("")};
  const std::string png = encode_image(img, ".png", "test");
  const Image back =
      decode_image(reinterpret_cast<const std::uint8_t*>(png.data()), png.size(), "test");
  EXPECT_EQ(back.pixels[0], 1.0f);
  EXPECT_EQ(back.pixels[1], 0.0f);
}

TEST(ImageFiles, ErrorsNameTheFile) {
  const std::string dir = test::temp_dir("image_io_errors");
  try {
    load_image(dir + "/absent.png");
    FAIL() << "loading a missing file succeeded";
  } catch (const ImageError& e) {
    EXPECT_NE(std::string(e.what()).find("absent.png"), std::string::npos) << e.what();
  }
  std::ofstream(dir + "/garbage.png") << "not an image";
  EXPECT_THROW(load_image(dir + "/garbage.png"), ImageError);
  EXPECT_THROW(decode_image(nullptr, 0, "empty"), ImageError);
  EXPECT_THROW(save_image(gradient(3), dir + "/x.bmp"), ImageError);
  EXPECT_THROW(save_image(gradient(3), dir + "/missing/x.png"), ImageError);
  EXPECT_THROW(save_image(gradient(2), dir + "/two.png"), ImageError);
  EXPECT_THROW(save_image(Image(), dir + "/empty.png"), ImageError);
}

}  // namespace
}  // namespace gen3d::image
