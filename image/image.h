#pragma once
// The raster value types shared by every module: float images (textures, maps, view images) and
// 8-bit images (the bit-exact preprocessing of the reference's u8 pipelines).

#include <cstddef>
#include <cstdint>
#include <vector>

namespace gen3d::image {

// Row-major, interleaved (HWC) pixels; row 0 is the top row as stored in image files. channels is
// 1 (grey), 3 (RGB) or 4 (RGBA).
template <class T>
struct BasicImage {
  int width = 0;
  int height = 0;
  int channels = 0;
  std::vector<T> pixels;  // width * height * channels

  BasicImage() = default;
  BasicImage(int w, int h, int c, T fill = T{})
      : width(w), height(h), channels(c), pixels(static_cast<size_t>(w) * h * c, fill) {}

  bool empty() const { return pixels.empty(); }
  T* at(int x, int y) { return pixels.data() + (static_cast<size_t>(y) * width + x) * channels; }
  const T* at(int x, int y) const {
    return pixels.data() + (static_cast<size_t>(y) * width + x) * channels;
  }
  T* row(int y) { return at(0, y); }
  const T* row(int y) const { return at(0, y); }
};

// Colour values in [0, 1].
using Image = BasicImage<float>;
// Colour values in [0, 255].
using ImageU8 = BasicImage<std::uint8_t>;

}  // namespace gen3d::image
