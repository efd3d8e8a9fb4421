// OpenCV stores BGR(A); gen3d images are RGB(A).
#include "image/codec.h"

#include <algorithm>
#include <cmath>
#include <vector>

#include <opencv2/core.hpp>
#include <opencv2/imgcodecs.hpp>
#include <opencv2/imgproc.hpp>

#include "image/convert.h"
#include "image/error.h"

namespace gen3d::image {
namespace {

// Scale from the decoded depth to [0, 1].
double unit_scale(int depth, const std::string& what) {
  switch (depth) {
    case CV_8U:
      return 1.0 / 255.0;
    case CV_16U:
      return 1.0 / 65535.0;
    case CV_32F:
      return 1.0;
    default:
      throw ImageError("cannot decode image '" + what + "': unsupported pixel depth");
  }
}

// Decoded BGR(A) / grey / grey+alpha to the RGB(A) / grey layouts Image supports.
cv::Mat to_rgb_layout(const cv::Mat& raw, const std::string& what) {
  cv::Mat rgb;
  switch (raw.channels()) {
    case 1:
      return raw;
    case 2: {  // grey + alpha: widen to RGBA, the closest layout Image supports
      std::vector<cv::Mat> ch;
      cv::split(raw, ch);
      cv::merge(std::vector<cv::Mat>{ch[0], ch[0], ch[0], ch[1]}, rgb);
      return rgb;
    }
    case 3:
      cv::cvtColor(raw, rgb, cv::COLOR_BGR2RGB);
      return rgb;
    case 4:
      cv::cvtColor(raw, rgb, cv::COLOR_BGRA2RGBA);
      return rgb;
    default:
      throw ImageError("cannot decode image '" + what + "': unsupported channel count");
  }
}

int u8_type_for(int channels, const std::string& what) {
  switch (channels) {
    case 1:
      return CV_8UC1;
    case 3:
      return CV_8UC3;
    case 4:
      return CV_8UC4;
    default:
      throw ImageError("cannot encode image '" + what + "': unsupported channel count");
  }
}

}  // namespace

Image decode_image(const std::uint8_t* data, size_t size, const std::string& what) {
  if (size == 0) throw ImageError("cannot decode image '" + what + "': no data");
  cv::Mat raw;
  try {
    const cv::Mat buf(1, int(size), CV_8UC1, const_cast<std::uint8_t*>(data));
    raw = cv::imdecode(buf, cv::IMREAD_UNCHANGED);
  } catch (const cv::Exception& e) {
    throw ImageError("cannot decode image '" + what + "': " + e.what());
  }
  if (raw.empty())
    throw ImageError("cannot decode image '" + what + "': unknown or corrupt format");
  const double scale = unit_scale(raw.depth(), what);
  cv::Mat f;
  to_rgb_layout(raw, what).convertTo(f, CV_32F, scale);
  Image img(f.cols, f.rows, f.channels());
  for (int y = 0; y < f.rows; ++y) {
    const float* row = f.ptr<float>(y);
    std::copy(row, row + size_t(f.cols) * f.channels(), img.row(y));
  }
  return img;
}

std::string encode_image(const Image& image, const std::string& ext, const std::string& what) {
  if (image.empty() || image.width <= 0 || image.height <= 0 ||
      image.pixels.size() != size_t(image.width) * image.height * image.channels) {
    throw ImageError("cannot encode image '" + what + "': empty or inconsistent image");
  }
  cv::Mat m(image.height, image.width, u8_type_for(image.channels, what));
  for (int y = 0; y < image.height; ++y) {
    const float* src = image.row(y);
    std::uint8_t* dst = m.ptr<std::uint8_t>(y);
    for (size_t i = 0; i < size_t(image.width) * image.channels; ++i) {
      const float v = std::isfinite(src[i]) ? std::clamp(src[i], 0.0f, 1.0f) : 0.0f;
      dst[i] = unit_to_u8(v);
    }
  }
  if (image.channels == 3) cv::cvtColor(m, m, cv::COLOR_RGB2BGR);
  if (image.channels == 4) cv::cvtColor(m, m, cv::COLOR_RGBA2BGRA);
  std::vector<std::uint8_t> bytes;
  bool ok = false;
  try {
    ok = cv::imencode(ext, m, bytes);
  } catch (const cv::Exception& e) {
    throw ImageError("cannot encode image '" + what + "': " + e.what());
  }
  if (!ok) throw ImageError("cannot encode image '" + what + "' as " + ext);
  return std::string(bytes.begin(), bytes.end());
}

}  // namespace gen3d::image
