#include "image/cv_mat.h"

#include <algorithm>
#include <vector>

#include <opencv2/imgproc.hpp>

namespace gen3d::image::detail {

cv::Mat as_mat(const Image& image) {
  return cv::Mat(image.height, image.width, CV_32FC(image.channels),
                 const_cast<float*>(image.pixels.data()));
}

Image from_mat(const cv::Mat& m) {
  cv::Mat f;
  m.convertTo(f, CV_32F);
  if (!f.isContinuous()) f = f.clone();
  Image out(f.cols, f.rows, f.channels());
  std::copy(f.ptr<float>(), f.ptr<float>() + out.pixels.size(), out.pixels.begin());
  return out;
}

cv::Mat alpha_of(const Image& image) {
  cv::Mat alpha;
  cv::extractChannel(as_mat(image), alpha, 3);
  return alpha;
}

cv::Mat rgb_of(const Image& image) {
  cv::Mat rgb;
  if (image.channels == 4)
    cv::cvtColor(as_mat(image), rgb, cv::COLOR_RGBA2RGB);
  else if (image.channels == 1)
    cv::cvtColor(as_mat(image), rgb, cv::COLOR_GRAY2RGB);
  else
    rgb = as_mat(image).clone();
  return rgb;
}

Image with_alpha(const cv::Mat& rgb, const cv::Mat& alpha) {
  cv::Mat rgba;
  std::vector<cv::Mat> planes;
  cv::split(rgb, planes);
  planes.push_back(alpha);
  cv::merge(planes, rgba);
  return from_mat(rgba);
}

}  // namespace gen3d::image::detail
