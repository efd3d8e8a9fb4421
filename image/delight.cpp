#include "image/delight.h"

#include <algorithm>
#include <cmath>
#include <vector>

#include <opencv2/imgproc.hpp>
#include <opencv2/photo.hpp>

#include "image/check.h"
#include "image/cv_mat.h"
#include "image/error.h"

namespace gen3d::image {
namespace {

// The reference's recorrect_rgb: per channel, over the mask, shift and scale `src` to the mean
// and spread of `target` (out = (src − s·mean_src)·std_tgt/std_src + s·mean_tgt, clamped to
// [0, 1]); keeps `src` when that is further from `target` (MSE over the whole image). Returns
// whether the corrected colours were kept.
bool recorrect(const cv::Mat& src, const cv::Mat& target, const cv::Mat& m8, double scale,
               cv::Mat& out) {
  std::vector<cv::Mat> src_planes, dst_planes(3), tgt_planes;
  cv::split(src, src_planes);
  cv::split(target, tgt_planes);
  for (int c = 0; c < 3; ++c) {
    cv::Scalar src_mean, src_std, tgt_mean, tgt_std;
    cv::meanStdDev(src_planes[c], src_mean, src_std, m8);
    cv::meanStdDev(tgt_planes[c], tgt_mean, tgt_std, m8);
    // Biased or unbiased std: the ratio is the same.
    const double ratio = src_std[0] > 1e-8 ? tgt_std[0] / src_std[0] : 1.0;
    dst_planes[c] = (src_planes[c] - scale * src_mean[0]) * ratio + scale * tgt_mean[0];
    cv::min(cv::max(dst_planes[c], 0.0), 1.0, dst_planes[c]);
  }
  cv::Mat corrected;
  cv::merge(dst_planes, corrected);
  const auto mse = [&](const cv::Mat& a) {
    cv::Mat d = a - target;
    return cv::mean(d.mul(d))[0];
  };
  const bool use_corrected = !(mse(src) < mse(corrected));
  out = use_corrected ? corrected : src.clone();
  return use_corrected;
}

}  // namespace

Image delight_classical(const Image& image, const DelightOptions& options, DelightStats* stats) {
  detail::require_pixels(image, "delight");
  const cv::Mat input = detail::rgb_of(image);
  cv::Mat mask;  // 1 inside the object
  if (image.channels == 4)
    cv::threshold(detail::alpha_of(image), mask, 0.5, 1.0, cv::THRESH_BINARY);
  else
    mask = cv::Mat::ones(input.size(), CV_32F);
  const int fg = cv::countNonZero(mask);
  if (fg == 0) throw ImageError("delight: the image has no opaque pixels");

  // 1. Shading: blur of luminance weighted by the mask, divided by the blurred mask, so the
  //    background does not darken the object's rim.
  cv::Mat luma;
  cv::cvtColor(input, luma, cv::COLOR_RGB2GRAY);
  const double sigma =
      std::max(1.0, static_cast<double>(options.shading_sigma) * std::max(input.cols, input.rows));
  cv::Mat num, den;
  cv::GaussianBlur(luma.mul(mask), num, {0, 0}, sigma);
  cv::GaussianBlur(mask, den, {0, 0}, sigma);
  cv::Mat shading = num / cv::max(den, 1e-4);
  const double mean_shading = cv::mean(shading, mask > 0)[0];

  // 2. Specular highlights: much brighter than the local shading and nearly grey.
  cv::Mat hsv;
  cv::cvtColor(input, hsv, cv::COLOR_RGB2HSV);  // float input: S in [0, 1], V in [0, 1]
  cv::Mat highlight(input.size(), CV_8U, cv::Scalar(0));
  for (int y = 0; y < input.rows; ++y)
    for (int x = 0; x < input.cols; ++x) {
      if (mask.at<float>(y, x) == 0.0f) continue;
      const cv::Vec3f p = hsv.at<cv::Vec3f>(y, x);
      if (luma.at<float>(y, x) > options.highlight_gain * shading.at<float>(y, x) &&
          p[1] <= options.highlight_max_saturation && p[2] > 0.6f)
        highlight.at<uint8_t>(y, x) = 255;
    }
  cv::Mat cleaned = input.clone();
  const int highlights = cv::countNonZero(highlight);
  if (highlights > 0) {
    cv::dilate(highlight, highlight, cv::Mat(), {-1, -1}, 1);
    cv::Mat rgb8, filled;
    input.convertTo(rgb8, CV_8UC3, 255.0);
    cv::inpaint(rgb8, highlight, filled, 3, cv::INPAINT_TELEA);
    filled.convertTo(cleaned, CV_32FC3, 1.0 / 255.0);
  }

  // 3. Divide the shading out, partially.
  cv::Mat gain;
  cv::pow(mean_shading / cv::max(shading, 1e-3), options.strength, gain);
  std::vector<cv::Mat> planes;
  cv::split(cleaned, planes);
  for (cv::Mat& p : planes) p = cv::min(p.mul(gain), 1.0);
  cv::Mat albedo;
  cv::merge(planes, albedo);

  // 4. The reference's recorrect_rgb.
  cv::Mat result;
  const bool keep_albedo = !recorrect(albedo, input, mask > 0, options.color_scale, result);
  // Outside the object the input stays as it was.
  input.copyTo(result, mask == 0);
  if (stats) {
    stats->highlight_fraction = static_cast<double>(highlights) / fg;
    stats->kept_input_colors = keep_albedo;
  }
  return image.channels == 4 ? detail::with_alpha(result, detail::alpha_of(image))
                             : detail::from_mat(result);
}

Image delight_model_input(const Image& image) {
  detail::require_pixels(image, "delight input");
  if (image.channels == 4) {
    cv::Mat alpha = detail::alpha_of(image);
    cv::erode(alpha, alpha, cv::Mat::ones(3, 3, CV_8U));
    cv::Mat rgb = detail::rgb_of(image);
    rgb.setTo(cv::Scalar(1.0, 1.0, 1.0), alpha <= 0.0);
    return detail::with_alpha(rgb, alpha);
  }
  return detail::from_mat(detail::rgb_of(image));
}

Image delight_model_output(const Image& net, const Image& input, float scale, bool* matched) {
  detail::require_pixels(net, "delight network output");
  if (net.width != input.width || net.height != input.height || net.channels != 3)
    throw ImageError("delight: network output " + std::to_string(net.width) + "x" +
                     std::to_string(net.height) + "x" + std::to_string(net.channels) +
                     " does not match the input " + std::to_string(input.width) + "x" +
                     std::to_string(input.height));
  const cv::Mat src = detail::rgb_of(net);
  const cv::Mat target = detail::rgb_of(input);
  const cv::Mat alpha = input.channels == 4 ? detail::alpha_of(input)
                                            : cv::Mat(src.rows, src.cols, CV_32F, cv::Scalar(1.0));
  cv::Mat out;
  const bool used = recorrect(src, target, alpha > 0.5, scale, out);
  if (matched) *matched = used;
  // Over white: rgb·a + (1 − a).
  std::vector<cv::Mat> planes;
  cv::split(out, planes);
  for (cv::Mat& p : planes) p = p.mul(alpha) + (1.0 - alpha);
  cv::merge(planes, out);
  return detail::from_mat(out);
}

}  // namespace gen3d::image
