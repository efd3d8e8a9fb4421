#include "image/composite.h"

#include <algorithm>
#include <string>

#include "image/check.h"
#include "image/error.h"

namespace gen3d::image {

Image composite_over(const Image& image, float r, float g, float b) {
  if (image.channels != 4) return image;
  Image out(image.width, image.height, 3);
  const float bg[3] = {r, g, b};
  for (size_t i = 0, o = 0; i < image.pixels.size(); i += 4, o += 3) {
    const float a = image.pixels[i + 3];
    for (int c = 0; c < 3; ++c) out.pixels[o + c] = image.pixels[i + c] * a + bg[c] * (1.0f - a);
  }
  return out;
}

ImageU8 composite_over_white(const ImageU8& rgba) {
  detail::check_consistent(rgba, "composite_over_white");
  if (rgba.channels != 4)
    throw ImageError("composite_over_white: expected an RGBA image, got " +
                     std::to_string(rgba.channels) + " channels");
  ImageU8 out(rgba.width, rgba.height, 3);
  for (size_t i = 0, o = 0; i < rgba.pixels.size(); i += 4, o += 3) {
    // One float32 operation per statement, as numpy evaluates them.
    const float a = static_cast<float>(rgba.pixels[i + 3]) / 255.0f;
    const float one_minus = 1.0f - a;
    const float white = 255.0f * one_minus;
    for (int c = 0; c < 3; ++c) {
      const float fg = static_cast<float>(rgba.pixels[i + c]) * a;
      const float v = std::clamp(fg + white, 0.0f, 255.0f);
      out.pixels[o + c] = static_cast<std::uint8_t>(v);  // truncation, as astype(uint8)
    }
  }
  return out;
}

}  // namespace gen3d::image
