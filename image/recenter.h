#pragma once
// Recentering: crop an RGBA image to its alpha bounding box and centre the object on a square
// canvas. One function serves both references that do it:
// - hy3dgen texgen's recenter_image (the texgen `recenter_image` stage): the crop keeps its size
//   and gets a border of border_ratio of its own width / height on each side;
// - hy3dgen ImageProcessorV2.recenter (the shape conditioner's preprocessing): the canvas keeps
//   the input's larger side and the crop is resized (INTER_AREA) to fill 1 − border_ratio of it.

#include "image/image.h"

namespace gen3d::image {

// How the crop is sized on the canvas.
enum class RecenterFit {
  // Canvas side max(w + 2·int(w·r), h + 2·int(h·r)) for a w × h crop and border ratio r, the crop
  // pasted unscaled (texgen). The borders are computed in float32, as texgen always has.
  keep_size,
  // Canvas side S = max(H, W) of the input; the crop's longer side becomes int(S·(1 − r)) with
  // INTER_AREA, its shorter one int(side · scale) (ImageProcessorV2).
  fit_canvas,
};

struct RecenterOptions {
  double border_ratio = 0.2;                 // margin, as a fraction (see RecenterFit)
  RecenterFit fit = RecenterFit::keep_size;  // how the crop is sized on the canvas
  // Leave the alpha box's last row and column out of the crop, as ImageProcessorV2's numpy slice
  // image[min:max] does; texgen crops the whole box (PIL's getbbox).
  bool exclusive_box_end = false;
};

// The geometry of one recentering (the golden data of ImageProcessorV2 records these numbers).
struct RecenterInfo {
  int size = 0;        // canvas side S
  int row_min = 0;     // first row with alpha > 0
  int row_max = 0;     // last row with alpha > 0 (inclusive)
  int col_min = 0;     // first column with alpha > 0
  int col_max = 0;     // last column with alpha > 0 (inclusive)
  int h = 0;           // crop height: row_max − row_min (+ 1 unless exclusive_box_end)
  int w = 0;           // crop width, likewise
  int desired = 0;     // longer side of the pasted crop: int(S · (1 − r)), or max(h, w) unscaled
  int h2 = 0;          // pasted crop height: int(h · scale)
  int w2 = 0;          // pasted crop width: int(w · scale)
  int row2_min = 0;    // paste row (S − h2) / 2
  int col2_min = 0;    // paste column (S − w2) / 2
  double scale = 0.0;  // desired / max(h, w); 1 for keep_size
};

// Returns the S × S RGBA canvas: transparent white (colour at full scale, alpha 0) with the crop
// pasted at (col2_min, row2_min); `info`, when given, receives the geometry. An image without
// alpha (1 or 3 channels) is returned unchanged. Throws ImageError for an empty or inconsistent
// image, a fully transparent one, an empty crop (a one-row or one-column object with
// exclusive_box_end) or a crop that would resize to nothing.
Image recenter(const Image& image, const RecenterOptions& options = {},
               RecenterInfo* info = nullptr);
ImageU8 recenter(const ImageU8& image, const RecenterOptions& options = {},
                 RecenterInfo* info = nullptr);

}  // namespace gen3d::image
