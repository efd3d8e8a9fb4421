#pragma once
// Rectangular crops of an image.

#include <algorithm>
#include <string>

#include "image/error.h"
#include "image/image.h"

namespace gen3d::image {

// The w × h pixels whose top-left corner is (x, y), every channel. Throws ImageError when the
// rectangle is empty or leaves the image.
template <class T>
BasicImage<T> crop(const BasicImage<T>& image, int x, int y, int w, int h) {
  if (w <= 0 || h <= 0 || x < 0 || y < 0 || x + w > image.width || y + h > image.height)
    throw ImageError("crop: rectangle " + std::to_string(w) + "x" + std::to_string(h) + " at (" +
                     std::to_string(x) + ", " + std::to_string(y) + ") does not fit a " +
                     std::to_string(image.width) + "x" + std::to_string(image.height) + " image");
  BasicImage<T> out(w, h, image.channels);
  for (int row = 0; row < h; ++row)
    std::copy_n(image.at(x, y + row), static_cast<size_t>(w) * image.channels, out.row(row));
  return out;
}

}  // namespace gen3d::image
