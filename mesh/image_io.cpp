// Image files through OpenCV. OpenCV stores BGR(A); gen3d images are RGB(A).
#include <algorithm>
#include <cmath>
#include <filesystem>
#include <fstream>
#include <iterator>
#include <vector>

#include <opencv2/core.hpp>
#include <opencv2/imgcodecs.hpp>
#include <opencv2/imgproc.hpp>

#include "mesh/atomic_write.h"
#include "mesh/error.h"
#include "mesh/image_codec.h"
#include "mesh/io.h"

namespace gen3d::mesh {
namespace detail {

Image decode_image(const uint8_t* data, size_t size, const std::string& what) {
  if (size == 0) throw MeshError("cannot decode image '" + what + "': no data");
  cv::Mat raw;
  try {
    const cv::Mat buf(1, int(size), CV_8UC1, const_cast<uint8_t*>(data));
    raw = cv::imdecode(buf, cv::IMREAD_UNCHANGED);
  } catch (const cv::Exception& e) {
    throw MeshError("cannot decode image '" + what + "': " + e.what());
  }
  if (raw.empty()) throw MeshError("cannot decode image '" + what + "': unknown or corrupt format");
  double scale = 1.0;
  switch (raw.depth()) {
    case CV_8U:
      scale = 1.0 / 255.0;
      break;
    case CV_16U:
      scale = 1.0 / 65535.0;
      break;
    case CV_32F:
      scale = 1.0;
      break;
    default:
      throw MeshError("cannot decode image '" + what + "': unsupported pixel depth");
  }
  cv::Mat rgb;
  switch (raw.channels()) {
    case 1:
      rgb = raw;
      break;
    case 2: {  // grey + alpha: widen to RGBA, the closest layout Image supports
      std::vector<cv::Mat> ch;
      cv::split(raw, ch);
      cv::merge(std::vector<cv::Mat>{ch[0], ch[0], ch[0], ch[1]}, rgb);
      break;
    }
    case 3:
      cv::cvtColor(raw, rgb, cv::COLOR_BGR2RGB);
      break;
    case 4:
      cv::cvtColor(raw, rgb, cv::COLOR_BGRA2RGBA);
      break;
    default:
      throw MeshError("cannot decode image '" + what + "': unsupported channel count");
  }
  cv::Mat f;
  rgb.convertTo(f, CV_32F, scale);
  Image img(f.cols, f.rows, f.channels());
  for (int y = 0; y < f.rows; ++y) {
    const float* row = f.ptr<float>(y);
    std::copy(row, row + size_t(f.cols) * f.channels(), img.at(0, y));
  }
  return img;
}

std::string encode_image(const Image& image, const std::string& ext, const std::string& what) {
  if (image.empty() || image.width <= 0 || image.height <= 0 ||
      image.pixels.size() != size_t(image.width) * image.height * image.channels) {
    throw MeshError("cannot encode image '" + what + "': empty or inconsistent image");
  }
  int type = 0;
  switch (image.channels) {
    case 1:
      type = CV_8UC1;
      break;
    case 3:
      type = CV_8UC3;
      break;
    case 4:
      type = CV_8UC4;
      break;
    default:
      throw MeshError("cannot encode image '" + what + "': unsupported channel count");
  }
  cv::Mat m(image.height, image.width, type);
  for (int y = 0; y < image.height; ++y) {
    const float* src = image.at(0, y);
    uint8_t* dst = m.ptr<uint8_t>(y);
    for (size_t i = 0; i < size_t(image.width) * image.channels; ++i) {
      const float v = std::isfinite(src[i]) ? std::clamp(src[i], 0.0f, 1.0f) : 0.0f;
      dst[i] = uint8_t(std::lround(v * 255.0f));
    }
  }
  if (image.channels == 3) cv::cvtColor(m, m, cv::COLOR_RGB2BGR);
  if (image.channels == 4) cv::cvtColor(m, m, cv::COLOR_RGBA2BGRA);
  std::vector<uint8_t> bytes;
  bool ok = false;
  try {
    ok = cv::imencode(ext, m, bytes);
  } catch (const cv::Exception& e) {
    throw MeshError("cannot encode image '" + what + "': " + e.what());
  }
  if (!ok) throw MeshError("cannot encode image '" + what + "' as " + ext);
  return std::string(bytes.begin(), bytes.end());
}

}  // namespace detail

Image load_image(const std::string& path) {
  std::ifstream in(path, std::ios::binary);
  if (!in) throw MeshError("cannot open image '" + path + "': no such file or not readable");
  const std::vector<uint8_t> bytes((std::istreambuf_iterator<char>(in)),
                                   std::istreambuf_iterator<char>());
  return detail::decode_image(bytes.data(), bytes.size(), path);
}

void save_image(const Image& image, const std::string& path) {
  std::string ext = std::filesystem::path(path).extension().string();
  std::transform(ext.begin(), ext.end(), ext.begin(),
                 [](unsigned char c) { return std::tolower(c); });
  if (ext != ".png" && ext != ".jpg" && ext != ".jpeg") {
    throw MeshError("cannot write image '" + path + "': unsupported extension (use .png or .jpg)");
  }
  detail::write_files_atomically({{path, detail::encode_image(image, ext, path)}});
}

}  // namespace gen3d::mesh
