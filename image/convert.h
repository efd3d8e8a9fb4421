#pragma once
// Pixel format conversions: float <-> 8-bit, channel layouts.

#include "image/image.h"

namespace gen3d::image {

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
