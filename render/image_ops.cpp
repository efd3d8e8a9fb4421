#include "render/image_ops.h"

#include <algorithm>
#include <cmath>
#include <vector>

#include <opencv2/imgproc.hpp>
#include <opencv2/photo.hpp>

#include "render/error.h"

namespace gen3d::render {
namespace {

// Views of our float HWC pixels as cv::Mat (no copy), and back.
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

void require_pixels(const Image& image, const char* what) {
  if (image.empty() || image.width <= 0 || image.height <= 0)
    throw RenderError(std::string(what) + ": the image is empty");
}

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

Image recenter_image(const Image& image, float border_ratio) {
  require_pixels(image, "recenter_image");
  if (image.channels != 4) return image;
  int min_row = image.height, max_row = -1, min_col = image.width, max_col = -1;
  for (int y = 0; y < image.height; ++y)
    for (int x = 0; x < image.width; ++x)
      if (image.at(x, y)[3] > 0.0f) {
        min_row = std::min(min_row, y);
        max_row = std::max(max_row, y);
        min_col = std::min(min_col, x);
        max_col = std::max(max_col, x);
      }
  if (max_row < 0) throw RenderError("recenter_image: the image is fully transparent");
  const int width = max_col - min_col + 1, height = max_row - min_row + 1;
  const int border_w = static_cast<int>(width * border_ratio);
  const int border_h = static_cast<int>(height * border_ratio);
  const int new_w = width + 2 * border_w, new_h = height + 2 * border_h;
  const int side = std::max(new_w, new_h);
  Image out(side, side, 4);
  for (size_t i = 0; i < out.pixels.size(); i += 4)
    out.pixels[i] = out.pixels[i + 1] = out.pixels[i + 2] = 1.0f;
  const int paste_x = (side - new_w) / 2 + border_w, paste_y = (side - new_h) / 2 + border_h;
  for (int y = 0; y < height; ++y)
    std::copy_n(image.at(min_col, min_row + y), static_cast<size_t>(width) * 4,
                out.at(paste_x, paste_y + y));
  return out;
}

Image remove_background(const Image& image, const BackgroundOptions& options) {
  require_pixels(image, "remove_background");
  if (image.channels == 4) return image;
  if (options.method != "threshold" && options.method != "grabcut")
    throw RenderError("remove_background: unknown method \"" + options.method + "\"");
  const cv::Mat rgb = rgb_of(image);
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
    throw RenderError("remove_background: no foreground found (the image looks uniform)");
  cv::Mat alpha;
  fg.convertTo(alpha, CV_32F, 1.0 / 255.0);
  return with_alpha(rgb, alpha);
}

Image delight_classical(const Image& image, const DelightOptions& options, DelightStats* stats) {
  require_pixels(image, "delight");
  const cv::Mat input = rgb_of(image);
  cv::Mat mask;  // 1 inside the object
  if (image.channels == 4)
    cv::threshold(alpha_of(image), mask, 0.5, 1.0, cv::THRESH_BINARY);
  else
    mask = cv::Mat::ones(input.size(), CV_32F);
  const int fg = cv::countNonZero(mask);
  if (fg == 0) throw RenderError("delight: the image has no opaque pixels");

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
  return image.channels == 4 ? with_alpha(result, alpha_of(image)) : from_mat(result);
}

Image delight_model_input(const Image& image) {
  require_pixels(image, "delight input");
  if (image.channels == 4) {
    cv::Mat alpha = alpha_of(image);
    cv::erode(alpha, alpha, cv::Mat::ones(3, 3, CV_8U));
    cv::Mat rgb = rgb_of(image);
    rgb.setTo(cv::Scalar(1.0, 1.0, 1.0), alpha <= 0.0);
    return with_alpha(rgb, alpha);
  }
  return from_mat(rgb_of(image));
}

Image delight_model_output(const Image& net, const Image& input, float scale, bool* matched) {
  require_pixels(net, "delight network output");
  if (net.width != input.width || net.height != input.height || net.channels != 3)
    throw RenderError("delight: network output " + std::to_string(net.width) + "x" +
                      std::to_string(net.height) + "x" + std::to_string(net.channels) +
                      " does not match the input " + std::to_string(input.width) + "x" +
                      std::to_string(input.height));
  const cv::Mat src = rgb_of(net);
  const cv::Mat target = rgb_of(input);
  const cv::Mat alpha =
      input.channels == 4 ? alpha_of(input) : cv::Mat(src.rows, src.cols, CV_32F, cv::Scalar(1.0));
  cv::Mat out;
  const bool used = recorrect(src, target, alpha > 0.5, scale, out);
  if (matched) *matched = used;
  // Over white: rgb·a + (1 − a).
  std::vector<cv::Mat> planes;
  cv::split(out, planes);
  for (cv::Mat& p : planes) p = p.mul(alpha) + (1.0 - alpha);
  cv::merge(planes, out);
  return from_mat(out);
}

Image composite_over(const Image& image, float r, float g, float b) {
  if (image.channels != 4) return image;
  Image out(image.width, image.height, 3);
  const float bg[3] = {r, g, b};
  for (size_t i = 0, o = 0; i < image.pixels.size(); i += 4, o += 3) {
    const float a = image.pixels[i + 3];
    for (int c = 0; c < 3; ++c) out.pixels[o + c] = image.pixels[i + c] * a + bg[c] * (1.0f - a);
  }
  return out;
}

Image resize_image(const Image& image, int width, int height, const std::string& filter) {
  require_pixels(image, "resize_image");
  if (width <= 0 || height <= 0)
    throw RenderError("resize_image: the target size must be positive");
  if (width == image.width && height == image.height) return image;
  int interpolation = cv::INTER_LINEAR;
  if (filter == "area")
    interpolation = cv::INTER_AREA;
  else if (filter == "cubic")
    interpolation = cv::INTER_CUBIC;
  else if (filter != "linear")
    throw RenderError("resize_image: unknown filter \"" + filter + "\"");
  cv::Mat out;
  cv::resize(as_mat(image), out, {width, height}, 0, 0, interpolation);
  if (filter == "cubic") out = cv::min(cv::max(out, 0.0), 1.0);
  return from_mat(out);
}

}  // namespace gen3d::render
