#pragma once
// Classical background removal for reference images (an OpenCV method, not the reference's
// learned rembg).

#include <string>

#include "image/image.h"

namespace gen3d::image {

struct BackgroundOptions {
  std::string method = "threshold";  // "threshold": distance to the border colour; "grabcut"
  float threshold = 0.08f;           // RGB distance (0..sqrt 3) that counts as foreground
  int grabcut_iterations = 4;        // refinement passes for "grabcut", seeded by the threshold
  bool keep_largest = true;          // drop foreground islands apart from the largest one
};

// Adds an alpha channel to an RGB image whose background is roughly uniform (product shots,
// renders): the background colour is the median of the one-pixel frame. RGBA input is returned
// unchanged. Throws ImageError for an empty image, an unknown method or when nothing is left.
Image remove_background(const Image& image, const BackgroundOptions& options = {});

}  // namespace gen3d::image
