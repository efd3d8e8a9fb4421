#include "image/recenter.h"

#include <algorithm>
#include <limits>
#include <string>
#include <type_traits>

#include "image/check.h"
#include "image/crop.h"
#include "image/error.h"
#include "image/resize.h"
#include "image/resize_u8.h"

namespace gen3d::image {
namespace {

// The crop resized with the area filter: OpenCV-exact for u8, OpenCV itself for float.
ImageU8 resize_crop(const ImageU8& crop, int width, int height) {
  return resize_area(crop, width, height);
}
Image resize_crop(const Image& crop, int width, int height) {
  return resize_image(crop, width, height, "area");
}

// Full-scale colour: white is 1.0 in float images and 255 in u8 ones.
template <class T>
constexpr T full_scale() {
  return std::is_floating_point_v<T> ? T(1) : std::numeric_limits<T>::max();
}

// The bounding box of alpha > 0 into info.row/col_min/max; throws when there is none.
template <class T>
void find_alpha_box(const BasicImage<T>& rgba, RecenterInfo& info) {
  info.row_min = rgba.height;
  info.row_max = -1;
  info.col_min = rgba.width;
  info.col_max = -1;
  for (int y = 0; y < rgba.height; ++y) {
    const T* row = rgba.row(y);
    for (int x = 0; x < rgba.width; ++x)
      if (row[x * 4 + 3] > T(0)) {
        info.row_min = std::min(info.row_min, y);
        info.row_max = std::max(info.row_max, y);
        info.col_min = std::min(info.col_min, x);
        info.col_max = std::max(info.col_max, x);
      }
  }
  if (info.row_max < 0) throw ImageError("recenter: the image is fully transparent");
}

// Canvas side, pasted crop size and position for a crop of info.w × info.h.
void place_crop(int input_width, int input_height, const RecenterOptions& options,
                RecenterInfo& info) {
  if (options.fit == RecenterFit::keep_size) {
    const float ratio = static_cast<float>(options.border_ratio);
    const int border_w = static_cast<int>(static_cast<float>(info.w) * ratio);
    const int border_h = static_cast<int>(static_cast<float>(info.h) * ratio);
    info.size = std::max(info.w + 2 * border_w, info.h + 2 * border_h);
    info.desired = std::max(info.h, info.w);
    info.scale = 1.0;
    info.h2 = info.h;
    info.w2 = info.w;
  } else {
    info.size = std::max(input_height, input_width);
    const double side = info.size;
    info.desired = static_cast<int>(side * (1.0 - options.border_ratio));
    info.scale = static_cast<double>(info.desired) / std::max(info.h, info.w);
    info.h2 = static_cast<int>(info.h * info.scale);
    info.w2 = static_cast<int>(info.w * info.scale);
    if (info.h2 <= 0 || info.w2 <= 0)
      throw ImageError("recenter: the object is too thin to resize (" + std::to_string(info.h) +
                       "x" + std::to_string(info.w) + " -> " + std::to_string(info.h2) + "x" +
                       std::to_string(info.w2) + ")");
  }
  // Centred; for keep_size this is where the bordered crop's inner corner lands.
  info.row2_min = (info.size - info.h2) / 2;
  info.col2_min = (info.size - info.w2) / 2;
}

template <class T>
BasicImage<T> recenter_impl(const BasicImage<T>& image, const RecenterOptions& options,
                            RecenterInfo* info_out) {
  detail::check_consistent(image, "recenter");
  if (image.channels != 4) return image;
  RecenterInfo info;
  find_alpha_box(image, info);
  const int box_end = options.exclusive_box_end ? 0 : 1;
  info.h = info.row_max - info.row_min + box_end;
  info.w = info.col_max - info.col_min + box_end;
  if (info.h == 0 || info.w == 0)
    throw ImageError("recenter: the alpha bounding box is degenerate (" +
                     std::to_string(info.row_max - info.row_min + 1) + "x" +
                     std::to_string(info.col_max - info.col_min + 1) + " pixels)");
  place_crop(image.width, image.height, options, info);

  BasicImage<T> pasted = crop(image, info.col_min, info.row_min, info.w, info.h);
  if (info.w2 != info.w || info.h2 != info.h) pasted = resize_crop(pasted, info.w2, info.h2);
  BasicImage<T> canvas(info.size, info.size, 4, full_scale<T>());
  for (size_t i = 3; i < canvas.pixels.size(); i += 4) canvas.pixels[i] = T(0);
  for (int y = 0; y < info.h2; ++y)
    std::copy_n(pasted.row(y), static_cast<size_t>(info.w2) * 4,
                canvas.at(info.col2_min, info.row2_min + y));
  if (info_out) *info_out = info;
  return canvas;
}

}  // namespace

Image recenter(const Image& image, const RecenterOptions& options, RecenterInfo* info) {
  return recenter_impl(image, options, info);
}

ImageU8 recenter(const ImageU8& image, const RecenterOptions& options, RecenterInfo* info) {
  return recenter_impl(image, options, info);
}

}  // namespace gen3d::image
