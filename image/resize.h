#pragma once
// Resizing float images with OpenCV (for the bit-exact u8 resizes of the reference's
// preprocessing, see image/resize_u8.h).

#include <string>

#include "image/image.h"

namespace gen3d::image {

// Resized with OpenCV: "area" for shrinking, "linear", "cubic" (PIL's default for the maps; the
// result is clamped to [0, 1]). The same size returns a copy. Throws ImageError for an empty
// image, a non-positive size or an unknown filter.
Image resize_image(const Image& image, int width, int height, const std::string& filter = "linear");

}  // namespace gen3d::image
