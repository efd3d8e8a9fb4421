#pragma once
// Internal: argument checks shared by the image operations, each throwing ImageError.

#include <string>

#include "image/error.h"
#include "image/image.h"

namespace gen3d::image::detail {

// Positive sizes and exactly width * height * channels pixels.
template <class T>
void check_consistent(const BasicImage<T>& image, const char* what) {
  if (image.width <= 0 || image.height <= 0 || image.channels <= 0 ||
      image.pixels.size() != static_cast<size_t>(image.width) * image.height * image.channels)
    throw ImageError(std::string(what) + ": invalid image " + std::to_string(image.width) + "x" +
                     std::to_string(image.height) + "x" + std::to_string(image.channels) +
                     " with " + std::to_string(image.pixels.size()) + " values");
}

// At least one pixel.
template <class T>
void require_pixels(const BasicImage<T>& image, const char* what) {
  if (image.empty() || image.width <= 0 || image.height <= 0)
    throw ImageError(std::string(what) + ": the image is empty");
}

// A positive output size.
inline void check_output_size(int width, int height, const char* what) {
  if (width <= 0 || height <= 0)
    throw ImageError(std::string(what) + ": invalid output size " + std::to_string(width) + "x" +
                     std::to_string(height));
}

}  // namespace gen3d::image::detail
