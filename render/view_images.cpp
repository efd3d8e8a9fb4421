#include "render/view_images.h"

#include <algorithm>
#include <cctype>
#include <cmath>
#include <filesystem>

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

image::Image fit_into_silhouette(const image::Image& reference, const Raster& raster, bool mirror) {
  const int w = raster.width, h = raster.height;
  std::vector<uint8_t> silhouette(raster.pixel_count());
  for (size_t i = 0; i < silhouette.size(); ++i) silhouette[i] = raster.face_id[i] != 0;
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
