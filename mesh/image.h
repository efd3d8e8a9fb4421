#pragma once
// Image: a plain float32 raster shared by every module (textures, maps, view images).

#include <cstddef>
#include <vector>

namespace gen3d::mesh {

// Row-major, interleaved (HWC) float32 pixels. Colour values are in [0, 1]; row 0 is the top row
// as stored in image files. channels is 1 (grey), 3 (RGB) or 4 (RGBA).
struct Image {
  int width = 0;
  int height = 0;
  int channels = 0;
  std::vector<float> pixels;  // width * height * channels

  Image() = default;
  Image(int w, int h, int c, float fill = 0.0f)
      : width(w), height(h), channels(c), pixels(static_cast<size_t>(w) * h * c, fill) {}

  bool empty() const { return pixels.empty(); }
  float* at(int x, int y) { return pixels.data() + (static_cast<size_t>(y) * width + x) * channels; }
  const float* at(int x, int y) const {
    return pixels.data() + (static_cast<size_t>(y) * width + x) * channels;
  }
};

}  // namespace gen3d::mesh
