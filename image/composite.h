#pragma once
// Compositing RGBA over a solid background.

#include "image/image.h"

namespace gen3d::image {

// RGBA composited over a solid colour (RGB in [0, 1]); other images are returned unchanged.
Image composite_over(const Image& image, float r = 1.0f, float g = 1.0f, float b = 1.0f);

// 8-bit RGBA composited over white as the reference's numpy code does it (ImageProcessorV2):
// in float32, rgb·a + 255·(1 − a) with a = alpha / 255, then truncated to u8. Returns RGB.
// Throws ImageError for an inconsistent or non-RGBA image.
ImageU8 composite_over_white(const ImageU8& rgba);

}  // namespace gen3d::image
