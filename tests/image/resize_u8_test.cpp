// The OpenCV u8 resize re-implementations against cv::resize of the installed OpenCV (when it is
// the 4.6 line the recipes come from), and bad inputs.

#include "image/resize_u8.h"

#include <gtest/gtest.h>

#include <opencv2/core.hpp>
#include <opencv2/core/version.hpp>
#include <opencv2/imgproc.hpp>

#include <algorithm>
#include <random>

#include "image/error.h"

namespace gen3d::image {
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
  for (size_t i = 0; i < a.pixels.size(); ++i) n += a.pixels[i] != b.pixels[i];
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

TEST(ResizeU8, AreaMatchesOpenCV) {
  check_against_opencv(cv::INTER_AREA, "INTER_AREA", &resize_area);
}
TEST(ResizeU8, CubicMatchesOpenCV) {
  check_against_opencv(cv::INTER_CUBIC, "INTER_CUBIC", &resize_cubic);
}
TEST(ResizeU8, NearestMatchesOpenCV) {
  check_against_opencv(cv::INTER_NEAREST, "INTER_NEAREST", &resize_nearest);
}

TEST(ResizeU8, RejectsBadSizesAndImages) {
  EXPECT_THROW(resize_cubic(ImageU8(8, 8, 3), 0, 4), ImageError);
  EXPECT_THROW(resize_nearest(ImageU8(8, 8, 3), 4, -1), ImageError);
  ImageU8 broken(8, 8, 3);
  broken.pixels.resize(5);
  EXPECT_THROW(resize_area(broken, 4, 4), ImageError);
  EXPECT_THROW(resize_area(ImageU8(), 4, 4), ImageError);
}

}  // namespace
}  // namespace gen3d::image
