#pragma once
// Pixel format conversions: float <-> 8-bit, channel layouts.

#include <cstdint>

#include "image/image.h"

namespace gen3d::image {

// round(c * 255) for c in [0, 1], ties up, exactly as std::lround(c * 255.0f) gives it (the float
// product is exact in double) but without a library call, so loops over pixels vectorize.
inline std::uint8_t unit_to_u8(float c) {
  return static_cast<std::uint8_t>(static_cast<int>(static_cast<double>(c * 255.0f) + 0.5));
}

// u8 = round(clamp(v, 0, 1) * 255) of float pixels [h, w, c] (HWC, values in [0, 1]); exact for
// anything decoded from an 8-bit file. Throws ImageError for an empty image or a null pointer.
ImageU8 image_u8_from_unit(const float* pixels, int width, int height, int channels);

// PIL's convert("RGBA"): grey -> RGB, alpha 255 where the image has none. RGBA is returned as it
// is. Throws ImageError for inconsistent images or other channel counts.
ImageU8 to_rgba(const ImageU8& image);

// One channel of an image as a 1-channel image. Throws ImageError for an inconsistent image or
// a channel it does not have.
ImageU8 extract_channel(const ImageU8& image, int channel);

}  // namespace gen3d::image
