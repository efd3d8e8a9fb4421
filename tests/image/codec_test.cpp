// The image codecs (libpng, TurboJPEG, libwebp) against OpenCV's imgcodecs, which gen3d used
// before: every PNG and JPEG under tests/data, and PNG / WebP variants OpenCV writes, decode to
// the same samples and layouts. Plus the errors for what gen3d does not read.

#include "image/codec.h"

#include <gtest/gtest.h>

#include <filesystem>
#include <fstream>
#include <iterator>
#include <string>
#include <vector>

#include <zlib.h>
#include <opencv2/core.hpp>
#include <opencv2/imgcodecs.hpp>
#include <opencv2/imgproc.hpp>

#include "image/error.h"
#include "support/paths.h"

namespace gen3d::image {
namespace {
namespace fs = std::filesystem;

std::vector<std::uint8_t> read_bytes(const std::string& path) {
  std::ifstream in(path, std::ios::binary);
  return {std::istreambuf_iterator<char>(in), std::istreambuf_iterator<char>()};
}

// What the earlier OpenCV decoder made of these bytes, in gen3d's layout and scale.
Image opencv_decode(const std::vector<std::uint8_t>& bytes) {
  const cv::Mat raw = cv::imdecode(bytes, cv::IMREAD_UNCHANGED);
  if (raw.empty()) return Image();
  cv::Mat rgb;
  switch (raw.channels()) {
    case 1:
      rgb = raw;
      break;
    case 2: {
      std::vector<cv::Mat> ch;
      cv::split(raw, ch);
      cv::merge(std::vector<cv::Mat>{ch[0], ch[0], ch[0], ch[1]}, rgb);
      break;
    }
    case 3:
      cv::cvtColor(raw, rgb, cv::COLOR_BGR2RGB);
      break;
    default:
      cv::cvtColor(raw, rgb, cv::COLOR_BGRA2RGBA);
  }
  cv::Mat f;
  rgb.convertTo(f, CV_32F, raw.depth() == CV_16U ? 1.0 / 65535.0 : 1.0 / 255.0);
  Image img(f.cols, f.rows, f.channels());
  for (int y = 0; y < f.rows; ++y)
    std::copy_n(f.ptr<float>(y), size_t(f.cols) * f.channels(), img.row(y));
  return img;
}

void expect_same_as_opencv(const std::vector<std::uint8_t>& bytes, const std::string& what) {
  const Image expected = opencv_decode(bytes);
  ASSERT_FALSE(expected.empty()) << what << ": OpenCV cannot read it";
  const Image got = decode_image(bytes.data(), bytes.size(), what);
  ASSERT_EQ(got.width, expected.width) << what;
  ASSERT_EQ(got.height, expected.height) << what;
  ASSERT_EQ(got.channels, expected.channels) << what;
  size_t differing = 0;
  for (size_t i = 0; i < got.pixels.size(); ++i) differing += got.pixels[i] != expected.pixels[i];
  EXPECT_EQ(differing, 0u) << what << ": samples differ from OpenCV's decoding";
}

TEST(ImageCodec, EveryPngAndJpegInTheTestDataDecodesAsOpenCvDecodesIt) {
  size_t files = 0;
  for (const auto& entry : fs::recursive_directory_iterator(test::data_dir())) {
    const std::string ext = entry.path().extension().string();
    if (!entry.is_regular_file() || (ext != ".png" && ext != ".jpg")) continue;
    const std::string path = entry.path().string();
    const std::vector<std::uint8_t> bytes = read_bytes(path);
    if (bytes.empty() || cv::imdecode(bytes, cv::IMREAD_UNCHANGED).empty()) {
      // Deliberately broken files: both refuse them.
      EXPECT_THROW(decode_image(bytes.data(), bytes.size(), path), ImageError) << path;
      continue;
    }
    expect_same_as_opencv(bytes, path);
    ++files;
  }
  EXPECT_GT(files, 50u);
}

// PNG layouts OpenCV writes: grey, grey 16-bit, RGB, RGBA, RGBA 16-bit, 1-bit grey; WebP with and
// without alpha; grey and colour JPEG.
TEST(ImageCodec, PngAndWebpVariantsDecodeAsOpenCvDecodesThem) {
  cv::RNG rng(7);
  struct Variant {
    int type;
    std::string ext;
    std::vector<int> params;
  };
  const std::vector<Variant> variants = {
      {CV_8UC1, ".png", {}},
      {CV_16UC1, ".png", {}},
      {CV_8UC3, ".png", {cv::IMWRITE_PNG_COMPRESSION, 9}},
      {CV_8UC4, ".png", {}},
      {CV_16UC4, ".png", {}},
      {CV_8UC1, ".png", {cv::IMWRITE_PNG_BILEVEL, 1}},
      {CV_8UC3, ".webp", {cv::IMWRITE_WEBP_QUALITY, 101}},
      {CV_8UC4, ".webp", {cv::IMWRITE_WEBP_QUALITY, 101}},
      {CV_8UC1, ".jpg", {}},
      {CV_8UC3, ".jpg", {cv::IMWRITE_JPEG_QUALITY, 80}},
  };
  for (const Variant& v : variants) {
    cv::Mat m(13, 21, v.type);
    rng.fill(m, cv::RNG::UNIFORM, 0, CV_MAT_DEPTH(v.type) == CV_16U ? 65536 : 256);
    std::vector<std::uint8_t> bytes;
    ASSERT_TRUE(cv::imencode(v.ext, m, bytes, v.params));
    expect_same_as_opencv(bytes, "type " + std::to_string(v.type) + v.ext);
  }
}

TEST(ImageCodec, EncodedPngAndJpegDecodeWithOpenCv) {
  Image img(9, 6, 3);  // values on the 8-bit grid, as decoding makes them
  for (size_t i = 0; i < img.pixels.size(); ++i)
    img.pixels[i] = float(i * 7 % 256) * static_cast<float>(1.0 / 255.0);
  for (const std::string ext : {".png", ".jpg"}) {
    const std::string s = encode_image(img, ext, "test");
    const std::vector<std::uint8_t> bytes(s.begin(), s.end());
    expect_same_as_opencv(bytes, ext);
  }
  // RGBA to JPEG keeps the colour and drops the alpha.
  Image rgba(4, 4, 4, 0.25f);
  const std::string jpg = encode_image(rgba, ".jpg", "test");
  const Image rgb =
      decode_image(reinterpret_cast<const std::uint8_t*>(jpg.data()), jpg.size(), "test");
  EXPECT_EQ(rgb.channels, 3);
  EXPECT_NEAR(rgb.pixels[0], 0.25f, 2.0f / 255.0f);
  const std::string png = encode_image(img, ".png", "test");
  const Image back =
      decode_image(reinterpret_cast<const std::uint8_t*>(png.data()), png.size(), "test");
  EXPECT_EQ(back.pixels, img.pixels);
}

// Large enough for many strips deflated side by side: OpenCV and gen3d read back every sample.
TEST(ImageCodec, PngWrittenInStripsDecodesExactlyWithOpenCv) {
  for (const int channels : {1, 3, 4}) {
    Image img(301, 1037, channels);
    uint32_t state = 12345;
    for (float& v : img.pixels) {
      state = state * 1664525u + 1013904223u;
      const uint32_t k = (state >> 24) % 300u;  // some runs for the RLE strategy too
      v = k < 256 ? float(k) * static_cast<float>(1.0 / 255.0) : 0.5f;
    }
    const std::string s = encode_image(img, ".png", "strips");
    const std::vector<std::uint8_t> bytes(s.begin(), s.end());
    expect_same_as_opencv(bytes, "strips, " + std::to_string(channels) + " channels");
    const Image back = decode_image(bytes.data(), bytes.size(), "strips");
    EXPECT_EQ(back.pixels, img.pixels) << channels;
  }
}

// A header declaring more than 16384 x 16384 pixels is refused before anything is allocated.
TEST(ImageCodec, HugeDeclaredSizesAreRefusedWithTheirSize) {
  std::string png("\x89PNG\r\n\x1a\n", 8);
  const unsigned char ihdr[17] = {'I', 'H', 'D', 'R', 0, 0, 0x4e, 0x20, 0, 0, 0x4e, 0x20,  // 20000²
                                  8,   0,   0,   0,   0};
  png += std::string("\0\0\0\x0d", 4);
  png.append(reinterpret_cast<const char*>(ihdr), 17);
  const auto put_crc = [&](const unsigned char* chunk, unsigned n) {
    const uLong crc = crc32(0, chunk, n);
    for (int shift = 24; shift >= 0; shift -= 8) png += static_cast<char>((crc >> shift) & 0xff);
  };
  put_crc(ihdr, 17);
  // An empty IDAT: libpng reads the header up to the first image data.
  const unsigned char idat[4] = {'I', 'D', 'A', 'T'};
  png += std::string("\0\0\0\0", 4);
  png.append(reinterpret_cast<const char*>(idat), 4);
  put_crc(idat, 4);
  try {
    decode_image(reinterpret_cast<const std::uint8_t*>(png.data()), png.size(), "huge.png");
    ADD_FAILURE() << "a 20000 x 20000 header decoded";
  } catch (const ImageError& e) {
    EXPECT_NE(std::string(e.what()).find("16384 x 16384"), std::string::npos) << e.what();
  }
}

TEST(ImageCodec, ErrorsNameTheFormatAndTheSource) {
  const std::vector<std::pair<std::string, std::string>> cases = {
      {std::string("BM\x36\0\0\0\0\0\0\0", 10), "BMP"},
      {"II*\0rest", "TIFF"},
      {"GIF89a....", "GIF"},
      {"hello, not an image", "unknown or corrupt"},
      {"\x89PNG\r\n\x1a\n\0\0\0\rIHDR", "PNG"},  // truncated
      {"\xFF\xD8\xFF\xE0 junk", "JPEG"},
      {"RIFF\x10\0\0\0WEBPVP8 junk", "WebP"},
  };
  for (const auto& [bytes, expected] : cases) {
    try {
      decode_image(reinterpret_cast<const std::uint8_t*>(bytes.data()), bytes.size(), "tex.bin");
      ADD_FAILURE() << expected << ": decoding succeeded";
    } catch (const ImageError& e) {
      const std::string what = e.what();
      EXPECT_NE(what.find("tex.bin"), std::string::npos) << what;
      EXPECT_NE(what.find(expected), std::string::npos) << what;
    }
  }
  EXPECT_THROW(encode_image(Image(2, 2, 3, 0.5f), ".bmp", "out.bmp"), ImageError);
  EXPECT_THROW(encode_image(Image(2, 2, 2, 0.5f), ".png", "out.png"), ImageError);
}

}  // namespace
}  // namespace gen3d::image
