#pragma once
// Image preparation of the Hunyuan3D-2 shape pipeline, bit-exact with the official code
// (hy3dgen ImageProcessorV2 + DinoImageEncoder's torchvision transform; golden/dinov2/README.md):
//   RGBA u8 -> recenter (alpha bbox, border ratio, INTER_AREA, composite on white, truncation)
//           -> INTER_CUBIC to the processor size -> [-1, 1] tensor [1, 3, S, S]
//   [B, 3, S, S] in [-1, 1] -> [0, 1] -> antialiased bilinear resize -> center crop -> normalize.
//
// Exactness needs 8-bit pixels, so the image steps work on image::ImageU8 (convert a float
// [0, 1] image with image::image_u8_from_unit) with the OpenCV-exact resizes of
// image/resize_u8.h; this file holds what is specific to the conditioner network.

#include "image/image.h"
#include "image/recenter.h"
#include "models/core/tensor.h"

namespace gen3d::models {

// ImageProcessorV2's recenter step, with its intermediate images (the golden data holds each).
struct Recentered {
  image::RecenterInfo info;
  image::ImageU8 crop_resized;  // [h2, w2, 4] straight RGBA after INTER_AREA
  image::ImageU8 rgb;           // [S, S, 3] composited on white (truncated)
  image::ImageU8 mask;          // [S, S, 1] recentered alpha
};

struct ImagePreprocessOptions {
  int size = 512;              // processor output size (ImageProcessorV2 size)
  double border_ratio = 0.15;  // margin left around the alpha bounding box
};

struct PreprocessedImage {
  Recentered recentered;
  image::ImageU8 rgb;   // [size, size, 3] after INTER_CUBIC
  image::ImageU8 mask;  // [size, size, 1] after INTER_NEAREST
  Tensor image;         // [1, 3, size, size] in [-1, 1] (the conditioner input)
  Tensor mask_tensor;   // [1, 1, size, size] in [-1, 1] (unused by the conditioner)
};

// The whole ImageProcessorV2 call on an image with alpha (1/3-channel images get alpha 255,
// i.e. PIL's convert("RGBA"); background removal is the caller's business). Throws
// image::ImageError when the image is fully transparent or its alpha box is degenerate (one row
// or column), like the reference, and ModelError for a non-positive size.
PreprocessedImage preprocess_image(const image::ImageU8& image,
                                   const ImagePreprocessOptions& opt = {});

// array_to_tensor: float32 ops u8 / 255 * 2 - 1, HWC -> [1, C, H, W].
Tensor array_to_tensor(const image::ImageU8& image);

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
