#include "image/background.h"

#include <algorithm>
#include <vector>

#include <opencv2/imgproc.hpp>

#include "image/check.h"
#include "image/cv_mat.h"
#include "image/error.h"

namespace gen3d::image {

Image remove_background(const Image& image, const BackgroundOptions& options) {
  detail::require_pixels(image, "remove_background");
  if (image.channels == 4) return image;
  if (options.method != "threshold" && options.method != "grabcut")
    throw ImageError("remove_background: unknown method \"" + options.method + "\"");
  const cv::Mat rgb = detail::rgb_of(image);
  // The background colour is the median of the one-pixel frame, per channel.
  std::vector<float> frame[3];
  for (int x = 0; x < rgb.cols; ++x)
    for (int y : {0, rgb.rows - 1})
      for (int c = 0; c < 3; ++c) frame[c].push_back(rgb.at<cv::Vec3f>(y, x)[c]);
  for (int y = 0; y < rgb.rows; ++y)
    for (int x : {0, rgb.cols - 1})
      for (int c = 0; c < 3; ++c) frame[c].push_back(rgb.at<cv::Vec3f>(y, x)[c]);
  cv::Vec3f bg;
  for (int c = 0; c < 3; ++c) {
    std::nth_element(frame[c].begin(), frame[c].begin() + frame[c].size() / 2, frame[c].end());
    bg[c] = frame[c][frame[c].size() / 2];
  }
  cv::Mat fg(rgb.size(), CV_8U);
  for (int y = 0; y < rgb.rows; ++y)
    for (int x = 0; x < rgb.cols; ++x)
      fg.at<uint8_t>(y, x) = cv::norm(rgb.at<cv::Vec3f>(y, x) - bg) > options.threshold ? 255 : 0;
  const cv::Mat kernel = cv::getStructuringElement(cv::MORPH_ELLIPSE, {5, 5});
  cv::morphologyEx(fg, fg, cv::MORPH_OPEN, kernel);
  cv::morphologyEx(fg, fg, cv::MORPH_CLOSE, kernel);

  if (options.method == "grabcut" && cv::countNonZero(fg) > 0) {
    cv::Mat mask(fg.size(), CV_8U);
    mask.setTo(cv::GC_PR_BGD);
    mask.setTo(cv::GC_PR_FGD, fg);
    cv::Mat eroded;
    cv::erode(fg, eroded, kernel, {-1, -1}, 3);
    mask.setTo(cv::GC_FGD, eroded);
    cv::Mat rgb8, bgd, fgd;
    rgb.convertTo(rgb8, CV_8UC3, 255.0);
    cv::grabCut(rgb8, mask, cv::Rect(), bgd, fgd, options.grabcut_iterations,
                cv::GC_INIT_WITH_MASK);
    fg = (mask == cv::GC_FGD) | (mask == cv::GC_PR_FGD);
  }
  if (options.keep_largest) {
    cv::Mat labels, stats, centroids;
    const int n = cv::connectedComponentsWithStats(fg, labels, stats, centroids, 8);
    int best = 0, best_area = 0;
    for (int i = 1; i < n; ++i)
      if (stats.at<int>(i, cv::CC_STAT_AREA) > best_area) {
        best_area = stats.at<int>(i, cv::CC_STAT_AREA);
        best = i;
      }
    fg = labels == best;
    if (best == 0) fg.setTo(0);
  }
  if (cv::countNonZero(fg) == 0)
    throw ImageError("remove_background: no foreground found (the image looks uniform)");
  cv::Mat alpha;
  fg.convertTo(alpha, CV_32F, 1.0 / 255.0);
  return detail::with_alpha(rgb, alpha);
}

}  // namespace gen3d::image
