#pragma once
// OpenCV's cv::resize on 8-bit images, bit-exact with the reference build (OpenCV 4.6, x86 SSE2:
// fixed-point weights, its SIMD rounding and its scalar tails), re-implemented so results do not
// depend on the local OpenCV version, CPU or its thread pool (golden/dinov2/README.md §4-6).
// Any channel count. Each throws ImageError for an inconsistent image or a non-positive size.

#include "image/image.h"

namespace gen3d::image {

// INTER_AREA: box averaging when shrinking in both axes, fixed-point "area linear" otherwise.
ImageU8 resize_area(const ImageU8& src, int width, int height);
// INTER_CUBIC (A = -0.75, replicated border).
ImageU8 resize_cubic(const ImageU8& src, int width, int height);
// INTER_NEAREST (top-left aligned: source index floor(d * n / m)).
ImageU8 resize_nearest(const ImageU8& src, int width, int height);

}  // namespace gen3d::image
