#pragma once
// Image preparation of the Hunyuan3D-2 shape pipeline, bit-exact with the official code
// (hy3dgen ImageProcessorV2 + DinoImageEncoder's torchvision transform; golden/dinov2/README.md):
//   RGBA u8 -> recenter (alpha bbox, border ratio, INTER_AREA, composite on white, truncation)
//           -> INTER_CUBIC to the processor size -> [-1, 1] tensor [1, 3, S, S]
//   [B, 3, S, S] in [-1, 1] -> [0, 1] -> antialiased bilinear resize -> center crop -> normalize.
//
// Exactness needs 8-bit pixels, so the u8 steps work on ImageU8 (convert a float [0, 1] image
// with image_u8_from_unit: round(v * 255) is exact for anything decoded from an 8-bit file).
// The OpenCV resizes are re-implemented from the recipes of the reference build (OpenCV 4.6,
// x86 SSE2: fixed-point weights, its SIMD rounding and its scalar tails), so results do not depend
// on the local OpenCV version, CPU or its thread pool.

#include <cstdint>
#include <vector>

#include "models/tensor.h"

namespace gen3d::models {

// Row-major interleaved (HWC) 8-bit pixels; row 0 is the top row. channels: 1, 3 or 4.
struct ImageU8 {
  int width = 0;
  int height = 0;
  int channels = 0;
  std::vector<std::uint8_t> pixels;  // height * width * channels

  ImageU8() = default;
  ImageU8(int w, int h, int c, std::uint8_t fill = 0);
  bool empty() const { return pixels.empty(); }
  std::uint8_t* row(int y) {
    return pixels.data() + static_cast<std::size_t>(y) * width * channels;
  }
  const std::uint8_t* row(int y) const {
    return pixels.data() + static_cast<std::size_t>(y) * width * channels;
  }
};

// u8 = round(clamp(v, 0, 1) * 255) of float pixels [h, w, c] (HWC, values in [0, 1]).
ImageU8 image_u8_from_unit(const float* pixels, int width, int height, int channels);
// PIL's convert("RGBA"): grey -> RGB, alpha 255 where the image has none.
ImageU8 to_rgba(const ImageU8& image);

// --- OpenCV cv::resize on u8, re-implemented (README §4-6); any channel count. ---
// INTER_AREA: box averaging when shrinking in both axes, fixed-point "area linear" otherwise.
ImageU8 resize_area(const ImageU8& src, int width, int height);
// INTER_CUBIC (A = -0.75, replicated border).
ImageU8 resize_cubic(const ImageU8& src, int width, int height);
// INTER_NEAREST (top-left aligned: source index floor(d * n / m)).
ImageU8 resize_nearest(const ImageU8& src, int width, int height);

// --- ImageProcessorV2 ---
struct RecenterInfo {
  int size = 0;        // S = max(H, W)
  int row_min = 0;     // r0: first row with alpha > 0
  int row_max = 0;     // r1: last row with alpha > 0 (inclusive)
  int col_min = 0;     // c0
  int col_max = 0;     // c1
  int h = 0;           // r1 - r0
  int w = 0;           // c1 - c0
  int desired = 0;     // int(S * (1 - border_ratio))
  int h2 = 0;          // int(h * scale)
  int w2 = 0;          // int(w * scale)
  int row2_min = 0;    // paste row (S - h2) // 2
  int col2_min = 0;    // paste column (S - w2) // 2
  double scale = 0.0;  // desired / max(h, w)
};

struct Recentered {
  RecenterInfo info;
  ImageU8 crop_resized;  // [h2, w2, 4] straight RGBA after INTER_AREA
  ImageU8 rgb;           // [S, S, 3] composited on white (truncated)
  ImageU8 mask;          // [S, S, 1] recentered alpha
};

// Official `recenter`: input RGBA [H, W, 4]. Throws ModelError when the alpha bounding box is
// empty or degenerate (h or w = 0), like the reference.
Recentered recenter(const ImageU8& rgba, double border_ratio = 0.15);

struct ImagePreprocessOptions {
  int size = 512;              // processor output size (ImageProcessorV2 size)
  double border_ratio = 0.15;  // margin left around the alpha bounding box
};

struct PreprocessedImage {
  Recentered recentered;
  ImageU8 rgb;         // [size, size, 3] after INTER_CUBIC
  ImageU8 mask;        // [size, size, 1] after INTER_NEAREST
  Tensor image;        // [1, 3, size, size] in [-1, 1] (the conditioner input)
  Tensor mask_tensor;  // [1, 1, size, size] in [-1, 1] (unused by the conditioner)
};

// The whole ImageProcessorV2 call on an image with alpha (1/3-channel images get alpha 255,
// i.e. PIL's convert("RGBA"); background removal is the caller's business).
PreprocessedImage preprocess_image(const ImageU8& image, const ImagePreprocessOptions& opt = {});

// array_to_tensor: float32 ops u8 / 255 * 2 - 1, HWC -> [1, C, H, W].
Tensor array_to_tensor(const ImageU8& image);

// --- DinoImageEncoder transform (torchvision) ---
// Antialiased bilinear resize of x [B, C, H, W] to [B, C, out_h, out_w] (torchvision
// Resize(antialias=True)): separable triangle filter, width pass first, then height.
Tensor resize_bilinear_antialias(const Tensor& x, int out_h, int out_w);

struct EncoderTransformTrace {
  Tensor resized;  // [B, 3, h', w'] after the value-range mapping and the resize
};

// x [B, 3, H, W] in [-1, 1] -> pixel_values [B, 3, image_size, image_size]:
// (x + 1) / 2, Resize(image_size) (shorter side), CenterCrop(image_size), ImageNet normalize.
Tensor encoder_transform(const Tensor& x, int image_size, EncoderTransformTrace* trace = nullptr);

}  // namespace gen3d::models
