#pragma once
// Delighting of the reference image: the classical OpenCV method, and the image steps around the
// learned delighting network (the network itself is models/paint/delight_model.h).

#include "image/image.h"

namespace gen3d::image {

struct DelightOptions {
  float shading_sigma = 0.06f;   // Gaussian sigma of the shading estimate, as a fraction of size
  float strength = 0.8f;         // 0 keeps the shading, 1 divides all of it out
  float highlight_gain = 1.35f;  // a pixel brighter than this x local shading may be specular
  float highlight_max_saturation = 0.25f;  // ... if its saturation is at most this
  float color_scale = 0.95f;               // the reference's mean/std re-matching factor
};

struct DelightStats {
  double highlight_fraction = 0;   // of foreground pixels inpainted as specular
  bool kept_input_colors = false;  // the reference's fallback: re-matching made it worse
};

// Removes low-frequency shading and specular highlights from an RGB(A) image:
// 1. shading S = normalized-convolution Gaussian blur of luminance inside the alpha mask;
// 2. specular pixels (bright against S, unsaturated) are inpainted (OpenCV TELEA, radius 3);
// 3. colour = input * (mean S / S)^strength;
// 4. per-channel mean/std are matched back to the input as the reference's `recorrect_rgb` does,
//    keeping the result only if it is closer to the input than before (its MSE rule).
// Alpha is kept. The result approximates an albedo; it is not the learned delighting model.
// Throws ImageError for an empty image or one without opaque pixels.
Image delight_classical(const Image& image, const DelightOptions& options = {},
                        DelightStats* stats = nullptr);

// The learned delighter's input preparation (the reference's Light_Shadow_Remover): RGBA gets its
// alpha eroded by a 3×3 box and white RGB where that alpha is 0; RGB / grey become RGB unchanged.
Image delight_model_input(const Image& image);
// Its post-processing: the network output `net` (RGB) re-matched to `input` (from
// delight_model_input, same size) with recorrect_rgb over alpha > 0.5 (factor `scale`; the
// network output is kept when matching moves it further from the input), then composited over
// white with the input's alpha. `matched` tells whether the re-matched colours were kept.
// Throws ImageError when `net` is empty or does not match `input`.
Image delight_model_output(const Image& net, const Image& input, float scale = 0.95f,
                           bool* matched = nullptr);

}  // namespace gen3d::image
