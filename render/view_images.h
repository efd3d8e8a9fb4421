#pragma once
// The image of each view that texgen bakes: images on disk brought to the render size, a reference
// image fitted onto a view's silhouette, and the RGB inputs of the paint model.

#include <cstddef>
#include <cstdint>
#include <string>
#include <vector>

#include "image/image.h"
#include "render/camera.h"
#include "render/rasterizer.h"

namespace gen3d::render {

// The images (.png, .jpg, .jpeg, .webp, any case) directly in `dir`, sorted by path.
std::vector<std::string> list_view_images(const std::string& dir);

// RGB on white at size × size (area filter when shrinking, linear otherwise); grey becomes RGB.
image::Image view_image_rgb(const image::Image& image, int size);

// RGB, RGBA or grey -> size × size × 3 floats at `out`, RGBA composited over the grey `background`
// (the paint pipeline: grey 127 behind the reference, white behind the maps); area filter when
// shrinking, bicubic otherwise.
void paint_input_rgb(const image::Image& image, int size, float background, float* out);

// The reference image's object (alpha > 0.5, or everything for RGB) mapped bilinearly onto the
// bounding box of the raster's silhouette, on a white RGB canvas of the raster's size; `mirror`
// flips it left-right. Throws RenderError when the silhouette or the object is empty.
image::Image fit_into_silhouette(const image::Image& reference, const Raster& raster, bool mirror);

// The raster's covered pixels (its silhouette), one byte per pixel.
std::vector<uint8_t> silhouette_mask(const Raster& raster);
// The pixels of an RGB image on white that are not white (some channel below 0.9): the object of
// an albedo render or of a view image composited over white. Light parts of an object fall out,
// which can only lower an IoU measured with it.
std::vector<uint8_t> non_white_mask(const image::Image& rgb);
// Intersection over union of two masks of one size (1 when both are empty: nothing to misplace).
double mask_iou(const std::vector<uint8_t>& a, const std::vector<uint8_t>& b);

// How a reference image was registered onto a silhouette (the "silhouette" fit).
struct SilhouetteFit {
  double iou = 0;             // silhouette agreement of the fit (intersection over union)
  double bbox_iou = 0;        // the same for the bounding-box fit it started from
  double scale = 1;           // view pixels per reference pixel
  double rotation_deg = 0;    // rotation of the reference on the view, degrees
  double offset_x = 0;        // view pixels from the bounding-box fit's placement of the object's
  double offset_y = 0;        // centroid to the fitted one
  bool box_fit_kept = false;  // the search did not beat the bounding-box fit, which was kept
};

struct SilhouetteFitOptions {
  double max_rotation_deg = 10;  // 0: scale and translation only
};

// The reference image's object (alpha > 0.5) registered onto the raster's silhouette by the
// similarity transform (uniform scale, translation, a small rotation) that maximizes their
// intersection over union, to sub-pixel precision: a coarse-to-fine pattern search from the
// bounding-box fit on the bilinearly sampled object mask. Every pixel of the canvas (raster size,
// white where the transform leaves the reference) samples the reference bilinearly; `mirror` flips
// the reference left-right first. An RGB reference has no object mask: it gets the bounding-box fit
// above, and so does a reference whose search ends below the bounding-box fit. Throws RenderError
// when the silhouette or the object is empty.
image::Image register_to_silhouette(const image::Image& reference, const Raster& raster,
                                    bool mirror, const SilhouetteFitOptions& options = {},
                                    SilhouetteFit* fit = nullptr);

// The views opposite `view`: same elevation, azimuth + 180 degrees.
std::vector<size_t> opposite_views(const ViewSet& views, size_t view);

}  // namespace gen3d::render
