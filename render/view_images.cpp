#include "render/view_images.h"

#include <algorithm>
#include <cctype>
#include <cmath>
#include <filesystem>
#include <numbers>

#include <opencv2/imgproc.hpp>

#include "image/composite.h"
#include "image/resize.h"
#include "render/error.h"
#include "render/maps.h"

namespace gen3d::render {

namespace {

// Bounding box of a mask's non-zero entries, inclusive.
struct Box {
  int x0, y0, x1, y1;
  int width() const { return x1 - x0 + 1; }
  int height() const { return y1 - y0 + 1; }
};

// False when the mask is empty.
bool mask_box(const std::vector<uint8_t>& mask, int w, int h, Box& box) {
  box = {w, h, -1, -1};
  for (int y = 0; y < h; ++y)
    for (int x = 0; x < w; ++x)
      if (mask[static_cast<size_t>(y) * w + x]) {
        box.x0 = std::min(box.x0, x), box.y0 = std::min(box.y0, y);
        box.x1 = std::max(box.x1, x), box.y1 = std::max(box.y1, y);
      }
  return box.x1 >= 0;
}

}  // namespace

std::vector<std::string> list_view_images(const std::string& dir) {
  std::vector<std::string> files;
  for (const auto& e : std::filesystem::directory_iterator(dir)) {
    std::string ext = e.path().extension().string();
    std::transform(ext.begin(), ext.end(), ext.begin(),
                   [](unsigned char c) { return static_cast<char>(std::tolower(c)); });
    if (ext == ".png" || ext == ".jpg" || ext == ".jpeg" || ext == ".webp")
      files.push_back(e.path().string());
  }
  std::sort(files.begin(), files.end());
  return files;
}

image::Image view_image_rgb(const image::Image& image, int size) {
  const image::Image rgb = image::composite_over(image);
  image::Image sized = image::resize_image(rgb, size, size, rgb.width > size ? "area" : "linear");
  if (sized.channels == 3) return sized;
  image::Image out(size, size, 3);
  for (size_t i = 0; i < sized.pixels.size(); ++i)
    for (int c = 0; c < 3; ++c) out.pixels[i * 3 + c] = sized.pixels[i];
  return out;
}

void paint_input_rgb(const image::Image& image, int size, float background, float* out) {
  image::Image rgb = image.channels == 4
                         ? image::composite_over(image, background, background, background)
                         : image;
  if (rgb.width != size || rgb.height != size)
    rgb = image::resize_image(rgb, size, size, rgb.width > size ? "area" : "cubic");
  const size_t n = static_cast<size_t>(size) * size;
  for (size_t i = 0; i < n; ++i)
    for (int c = 0; c < 3; ++c)
      out[i * 3 + c] = rgb.pixels[i * rgb.channels + (rgb.channels == 1 ? 0 : c)];
}

std::vector<uint8_t> silhouette_mask(const Raster& raster) {
  std::vector<uint8_t> mask(raster.pixel_count());
  for (size_t i = 0; i < mask.size(); ++i) mask[i] = raster.face_id[i] != 0;
  return mask;
}

std::vector<uint8_t> non_white_mask(const image::Image& rgb) {
  std::vector<uint8_t> mask(static_cast<size_t>(rgb.width) * rgb.height, 0);
  for (size_t i = 0; i < mask.size(); ++i)
    for (int c = 0; c < rgb.channels && !mask[i]; ++c)
      mask[i] = rgb.pixels[i * rgb.channels + c] < 0.9f;
  return mask;
}

double mask_iou(const std::vector<uint8_t>& a, const std::vector<uint8_t>& b) {
  size_t both = 0, either = 0;
  for (size_t i = 0; i < std::min(a.size(), b.size()); ++i) {
    both += a[i] && b[i];
    either += a[i] || b[i];
  }
  return either ? static_cast<double>(both) / static_cast<double>(either) : 1.0;
}

image::Image fit_into_silhouette(const image::Image& reference, const Raster& raster, bool mirror) {
  const int w = raster.width, h = raster.height;
  const std::vector<uint8_t> silhouette = silhouette_mask(raster);
  std::vector<uint8_t> object(static_cast<size_t>(reference.width) * reference.height, 1);
  if (reference.channels == 4)
    for (size_t i = 0; i < object.size(); ++i) object[i] = reference.pixels[i * 4 + 3] > 0.5f;
  Box dst, src;
  if (!mask_box(silhouette, w, h, dst))
    throw RenderError("the mesh is not visible from the reference view");
  if (!mask_box(object, reference.width, reference.height, src))
    throw RenderError("the reference image has no opaque pixels");
  const image::Image rgb = image::composite_over(reference);
  image::Image out(w, h, 3, 1.0f);
  const double sx = double(src.width()) / dst.width();
  const double sy = double(src.height()) / dst.height();
  for (int y = dst.y0; y <= dst.y1; ++y)
    for (int x = dst.x0; x <= dst.x1; ++x) {
      const int col = mirror ? dst.x1 - (x - dst.x0) : x;
      const float fx = static_cast<float>(src.x0 + (col - dst.x0 + 0.5) * sx - 0.5);
      const float fy = static_cast<float>(src.y0 + (y - dst.y0 + 0.5) * sy - 0.5);
      sample_bilinear(rgb, fx, fy, out.at(x, y));
    }
  return out;
}

namespace {

// The reference's object mask as floats (1 inside), sampled bilinearly with 0 outside the image.
struct MaskSampler {
  int w = 0, h = 0;
  std::vector<float> m;
  float at(double x, double y) const {
    if (x <= -1.0 || y <= -1.0 || x >= w || y >= h) return 0.0f;
    const int x0 = static_cast<int>(std::floor(x)), y0 = static_cast<int>(std::floor(y));
    const float fx = static_cast<float>(x - x0), fy = static_cast<float>(y - y0);
    const auto get = [&](int xx, int yy) {
      return (xx < 0 || yy < 0 || xx >= w || yy >= h) ? 0.0f : m[static_cast<size_t>(yy) * w + xx];
    };
    return (get(x0, y0) * (1 - fx) + get(x0 + 1, y0) * fx) * (1 - fy) +
           (get(x0, y0 + 1) * (1 - fx) + get(x0 + 1, y0 + 1) * fx) * fy;
  }
};

// View pixel p -> reference coordinate a + s R(theta) (p - c): `c` the silhouette centroid.
struct Similarity {
  double ax = 0, ay = 0, log_s = 0, theta = 0;
  double cx = 0, cy = 0;
  void map(double px, double py, double& qx, double& qy) const {
    const double s = std::exp(log_s), c = std::cos(theta) * s, n = std::sin(theta) * s;
    const double dx = px - cx, dy = py - cy;
    qx = ax + c * dx - n * dy;
    qy = ay + n * dx + c * dy;
  }
};

}  // namespace

image::Image register_to_silhouette(const image::Image& reference_in, const Raster& raster,
                                    bool mirror, const SilhouetteFitOptions& options,
                                    SilhouetteFit* fit) {
  if (reference_in.channels != 4) {
    if (fit) *fit = {};
    return fit_into_silhouette(reference_in, raster, mirror);
  }
  image::Image flipped;
  if (mirror) {
    flipped = reference_in;
    const int rw = reference_in.width, c = reference_in.channels;
    for (int y = 0; y < reference_in.height; ++y)
      for (int x = 0; x < rw; ++x)
        for (int k = 0; k < c; ++k) flipped.at(x, y)[k] = reference_in.at(rw - 1 - x, y)[k];
  }
  const image::Image& reference = mirror ? flipped : reference_in;
  const int w = raster.width, h = raster.height;

  // Silhouette pixels and centroid; object mask, area and centroid.
  std::vector<uint32_t> sil;
  double scx = 0, scy = 0;
  for (int y = 0; y < h; ++y)
    for (int x = 0; x < w; ++x)
      if (raster.face_id[static_cast<size_t>(y) * w + x]) {
        sil.push_back(static_cast<uint32_t>(y) * w + x);
        scx += x, scy += y;
      }
  if (sil.empty()) throw RenderError("the mesh is not visible from the reference view");
  scx /= sil.size(), scy /= sil.size();
  // The object: alpha > 0.5 with its holes filled (a background-coloured part inside the object,
  // say white paint on a white backdrop, is still object), so holes do not bias the fit.
  const int rw = reference.width, rh = reference.height;
  cv::Mat object(rh + 2, rw + 2, CV_8U, cv::Scalar(0));
  for (int y = 0; y < rh; ++y)
    for (int x = 0; x < rw; ++x)
      object.at<uint8_t>(y + 1, x + 1) =
          reference.pixels[(static_cast<size_t>(y) * rw + x) * 4 + 3] > 0.5f ? 255 : 0;
  cv::Mat outside = object.clone();
  cv::floodFill(outside, cv::Point(0, 0), cv::Scalar(128));
  MaskSampler mask{rw, rh, {}};
  mask.m.resize(static_cast<size_t>(rw) * rh);
  double area = 0, ocx = 0, ocy = 0;
  for (int y = 0; y < rh; ++y)
    for (int x = 0; x < rw; ++x) {
      const size_t i = static_cast<size_t>(y) * rw + x;
      mask.m[i] = outside.at<uint8_t>(y + 1, x + 1) != 128 ? 1.0f : 0.0f;
      area += mask.m[i], ocx += mask.m[i] * x, ocy += mask.m[i] * y;
    }
  if (area == 0) throw RenderError("the reference image has no opaque pixels");
  ocx /= area, ocy /= area;
  // IoU of a transform over every stride-th silhouette pixel (the object's area in view pixels
  // is its reference area / s^2).
  const auto iou = [&](const Similarity& t, size_t stride) {
    double inter = 0, n = 0;
    for (size_t k = 0; k < sil.size(); k += stride) {
      const int x = static_cast<int>(sil[k] % w), y = static_cast<int>(sil[k] / w);
      double qx, qy;
      t.map(x, y, qx, qy);
      inter += mask.at(qx, qy);
      n += 1;
    }
    const double s = std::exp(t.log_s);
    const double object = area / (s * s) * n / static_cast<double>(sil.size());
    return inter / std::max(1e-9, n + object - inter);
  };

  // Start: the bounding-box fit's uniform counterpart (centroids matched, areas matched).
  Similarity t;
  t.cx = scx, t.cy = scy, t.ax = ocx, t.ay = ocy;
  t.log_s = 0.5 * std::log(area / static_cast<double>(sil.size()));
  const double max_theta = options.max_rotation_deg * std::numbers::pi / 180.0;
  // Pattern search: each parameter tries +-step; no improvement in a sweep halves the steps.
  const auto search = [&](Similarity& best, size_t stride, double step_px, double min_px) {
    double best_iou = iou(best, stride);
    const double s = std::exp(best.log_s);
    double step[4] = {step_px * s, step_px * s, step_px / std::sqrt(double(sil.size())),
                      max_theta > 0 ? step_px / std::sqrt(double(sil.size())) : 0.0};
    // At most four improving sweeps per step size, so a noisy subsampled objective cannot keep
    // the search at one scale.
    for (int round = 0, at_level = 0; round < 60 && step[0] > min_px * s; ++round) {
      bool improved = false;
      for (int k = 0; k < 4; ++k) {
        if (step[k] == 0) continue;
        for (double sign : {1.0, -1.0}) {
          Similarity c = best;
          double* v[4] = {&c.ax, &c.ay, &c.log_s, &c.theta};
          *v[k] += sign * step[k];
          if (std::fabs(c.theta) > max_theta) continue;
          const double value = iou(c, stride);
          if (value > best_iou) {
            best_iou = value, best = c, improved = true;
            break;
          }
        }
      }
      if (!improved || ++at_level >= 4) {
        for (double& st : step) st *= 0.5;
        at_level = 0;
      }
    }
    return best_iou;
  };
  const size_t coarse = std::max<size_t>(1, sil.size() / 4000);
  // The boxes of the view's silhouette and of the object: the other start, and the bounding-box
  // fit the result is compared with.
  Box dst, src;
  {
    const std::vector<uint8_t> s_mask = silhouette_mask(raster);
    std::vector<uint8_t> o_mask(mask.m.size());
    for (size_t i = 0; i < o_mask.size(); ++i) o_mask[i] = mask.m[i] > 0.5f;
    mask_box(s_mask, w, h, dst);
    mask_box(o_mask, rw, rh, src);
  }
  {
    // The other start: the boxes' centres and their mean scale.
    Similarity b = t;
    b.log_s =
        0.5 * std::log(double(src.width()) * src.height() / (double(dst.width()) * dst.height()));
    b.ax = 0.5 * (src.x0 + src.x1) + (t.cx - 0.5 * (dst.x0 + dst.x1)) * std::exp(b.log_s);
    b.ay = 0.5 * (src.y0 + src.y1) + (t.cy - 0.5 * (dst.y0 + dst.y1)) * std::exp(b.log_s);
    if (iou(b, coarse) > iou(t, coarse)) t = b;
  }
  search(t, coarse, 8.0, 0.25 * std::sqrt(double(coarse)));
  // Sub-pixel refinement on 10000 silhouette pixels at most.
  search(t, std::max<size_t>(1, sil.size() / 10000), 1.0, 0.05);
  // The fit and the bounding-box fit are scored on the same 250,000 silhouette pixels at most: an
  // IoU within about 1e-3, at a tenth of the cost of a 2048 view's every pixel.
  const size_t fine = std::max<size_t>(1, sil.size() / 250000);
  const double final_iou = iou(t, fine);

  SilhouetteFit f;
  f.iou = final_iou;
  f.scale = std::exp(-t.log_s);
  f.rotation_deg = t.theta * 180.0 / std::numbers::pi;
  {
    // Where each fit puts the object's centroid on the view.
    const double s = std::exp(t.log_s), c = std::cos(t.theta), n = std::sin(t.theta);
    const double dx = (ocx - t.ax) / s, dy = (ocy - t.ay) / s;
    const double fx = t.cx + c * dx + n * dy, fy = t.cy - n * dx + c * dy;
    // The bounding-box fit: view box -> object box, per axis.
    const double sx = double(src.width()) / dst.width(), sy = double(src.height()) / dst.height();
    const double bx = (ocx + 0.5 - src.x0) / sx + dst.x0 - 0.5;
    const double by = (ocy + 0.5 - src.y0) / sy + dst.y0 - 0.5;
    f.offset_x = fx - bx, f.offset_y = fy - by;
    double inter = 0, samples = 0;
    for (size_t k = 0; k < sil.size(); k += fine) {
      const int x = static_cast<int>(sil[k] % w), y = static_cast<int>(sil[k] / w);
      inter +=
          mask.at(src.x0 + (x - dst.x0 + 0.5) * sx - 0.5, src.y0 + (y - dst.y0 + 0.5) * sy - 0.5);
      samples += 1;
    }
    const double object = area / (sx * sy) * samples / static_cast<double>(sil.size());
    f.bbox_iou = inter / std::max(1e-9, samples + object - inter);
  }
  if (f.bbox_iou > f.iou) {
    // The search found no better agreement than the boxes (a local optimum): keep the boxes.
    f.box_fit_kept = true;
    f.iou = f.bbox_iou;
    f.scale = 1.0, f.rotation_deg = 0, f.offset_x = f.offset_y = 0;
    if (fit) *fit = f;
    return fit_into_silhouette(reference_in, raster, mirror);
  }
  if (fit) *fit = f;

  // Colours: the object's own inside it (holes included); just outside, the nearest object pixel's,
  // so a silhouette pixel the fit puts a fraction of a pixel off the object gets no white halo.
  image::Image rgb(rw, rh, 3, 1.0f);
  {
    cv::Mat not_object(rh, rw, CV_8U);
    for (size_t i = 0; i < mask.m.size(); ++i) not_object.data[i] = mask.m[i] > 0.5f ? 0 : 255;
    cv::Mat dist, labels;
    cv::distanceTransform(not_object, dist, labels, cv::DIST_L2, cv::DIST_MASK_5,
                          cv::DIST_LABEL_PIXEL);
    std::vector<size_t> label_pixel(static_cast<size_t>(rw) * rh + 1, 0);
    for (size_t i = 0; i < mask.m.size(); ++i)
      if (mask.m[i] > 0.5f)
        label_pixel[static_cast<size_t>(labels.at<int>(static_cast<int>(i)))] = i;
    const float halo = 4.0f;  // reference pixels
    for (size_t i = 0; i < mask.m.size(); ++i) {
      const bool inside = mask.m[i] > 0.5f;
      if (!inside && dist.at<float>(static_cast<int>(i)) > halo) continue;
      const size_t src =
          inside ? i : label_pixel[static_cast<size_t>(labels.at<int>(static_cast<int>(i)))];
      for (int c = 0; c < 3; ++c) rgb.pixels[i * 3 + c] = reference.pixels[src * 4 + c];
    }
  }
  // Only the silhouette (and a small margin) is ever baked: the rest of the canvas stays white.
  int x0 = w, y0 = h, x1 = -1, y1 = -1;
  for (uint32_t p : sil) {
    const int x = static_cast<int>(p % w), y = static_cast<int>(p / w);
    x0 = std::min(x0, x), y0 = std::min(y0, y), x1 = std::max(x1, x), y1 = std::max(y1, y);
  }
  x0 = std::max(0, x0 - 2), y0 = std::max(0, y0 - 2);
  x1 = std::min(w - 1, x1 + 2), y1 = std::min(h - 1, y1 + 2);
  image::Image out(w, h, 3, 1.0f);
  for (int y = y0; y <= y1; ++y)
    for (int x = x0; x <= x1; ++x) {
      double qx, qy;
      t.map(x, y, qx, qy);
      if (qx < -0.5 || qy < -0.5 || qx > rgb.width - 0.5 || qy > rgb.height - 0.5) continue;
      sample_bilinear(rgb, static_cast<float>(qx), static_cast<float>(qy), out.at(x, y));
    }
  return out;
}

std::vector<size_t> opposite_views(const ViewSet& views, size_t view) {
  std::vector<size_t> out;
  const Camera& c = views[view].camera;
  for (size_t v = 0; v < views.size(); ++v) {
    const double d = std::fmod(std::fabs(views[v].camera.azim - c.azim - 180.0), 360.0);
    if (v != view && views[v].camera.elev == c.elev && d < 1e-6) out.push_back(v);
  }
  return out;
}

}  // namespace gen3d::render
