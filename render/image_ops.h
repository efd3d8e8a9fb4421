#pragma once
// Classical image operations on the reference image of a texgen job: recentering, background
// removal and delighting. These are OpenCV methods, not the learned networks of the reference
// (rembg, the InstructPix2Pix delighter); the learned delighter plugs in at the stage level.

#include <string>

#include "mesh/image.h"

namespace gen3d::render {

using mesh::Image;

// The reference's recenter: crop RGBA to the bounding box of alpha > 0, add a border of
// `border_ratio` of the crop's width/height on each side, centre it in a square filled with
// transparent white. An image without alpha (1 or 3 channels) is returned unchanged.
// Throws RenderError when the image is fully transparent.
Image recenter_image(const Image& image, float border_ratio = 0.2f);

struct BackgroundOptions {
  std::string method = "threshold";  // "threshold": distance to the border colour; "grabcut"
  float threshold = 0.08f;           // RGB distance (0..sqrt 3) that counts as foreground
  int grabcut_iterations = 4;        // refinement passes for "grabcut", seeded by the threshold
  bool keep_largest = true;          // drop foreground islands apart from the largest one
};

// Adds an alpha channel to an RGB image whose background is roughly uniform (product shots,
// renders). RGBA input is returned unchanged. Throws RenderError when nothing is left.
Image remove_background(const Image& image, const BackgroundOptions& options = {});

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
Image delight_classical(const Image& image, const DelightOptions& options = {},
                        DelightStats* stats = nullptr);

// The learned delighter's input preparation (the reference's Light_Shadow_Remover): RGBA gets its
// alpha eroded by a 3×3 box and white RGB where that alpha is 0; RGB / grey become RGB unchanged.
Image delight_model_input(const Image& image);
// Its post-processing: the network output `net` (RGB) re-matched to `input` (from
// delight_model_input, same size) with recorrect_rgb over alpha > 0.5 (factor `scale`; the
// network output is kept when matching moves it further from the input), then composited over
// white with the input's alpha. `matched` tells whether the re-matched colours were kept.
Image delight_model_output(const Image& net, const Image& input, float scale = 0.95f,
                           bool* matched = nullptr);

// RGBA composited over a solid colour (RGB in [0, 1]); RGB input is returned unchanged.
Image composite_over(const Image& image, float r = 1.0f, float g = 1.0f, float b = 1.0f);

// Resized with OpenCV: "area" for shrinking, "linear", "cubic" (PIL's default for the maps).
Image resize_image(const Image& image, int width, int height, const std::string& filter = "linear");

}  // namespace gen3d::render
