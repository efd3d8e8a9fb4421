#pragma once
// Internal: float Image <-> cv::Mat for the OpenCV-based operations.

#include <opencv2/core.hpp>

#include "image/image.h"

namespace gen3d::image::detail {

// A CV_32FC(channels) view of the pixels (no copy); valid while `image` lives.
cv::Mat as_mat(const Image& image);
// A copy of any float-convertible cv::Mat as an Image.
Image from_mat(const cv::Mat& m);
// The alpha channel (channel 3) of an RGBA image, CV_32F.
cv::Mat alpha_of(const Image& image);
// RGB CV_32FC3 of a grey, RGB or RGBA image (alpha dropped), as a new buffer.
cv::Mat rgb_of(const Image& image);
// RGBA Image from RGB CV_32FC3 and alpha CV_32F.
Image with_alpha(const cv::Mat& rgb, const cv::Mat& alpha);

}  // namespace gen3d::image::detail
