#pragma once
// The image of each view that texgen bakes: images on disk brought to the render size, a reference
// image fitted onto a view's silhouette, and the RGB inputs of the paint model.

#include <cstddef>
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

// The views opposite `view`: same elevation, azimuth + 180 degrees.
std::vector<size_t> opposite_views(const ViewSet& views, size_t view);

}  // namespace gen3d::render
