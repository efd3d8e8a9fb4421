#pragma once
// Image files in and out: PNG, JPEG and WebP in, PNG and JPEG out (image/codec.h).

#include <string>

#include "image/image.h"

namespace gen3d::image {

// Reads an image file as float RGB(A) or grey in [0, 1], row 0 at the top. Throws ImageError
// naming the file when it is missing, unreadable or not a decodable image.
Image load_image(const std::string& path);

// Writes 8-bit PNG/JPEG by extension (values are clamped to [0, 1] and rounded). The file is
// written to a temporary sibling and renamed into place, so a failure leaves no partial file.
// Throws ImageError naming the file.
void save_image(const Image& image, const std::string& path);

}  // namespace gen3d::image
