#include "image/convert.h"

#include <algorithm>
#include <cmath>
#include <string>

#include "image/check.h"
#include "image/error.h"

namespace gen3d::image {

ImageU8 image_u8_from_unit(const float* pixels, int width, int height, int channels) {
  if (width <= 0 || height <= 0 || channels <= 0 || pixels == nullptr)
    throw ImageError("image_u8_from_unit: empty image");
  ImageU8 out(width, height, channels);
  for (size_t i = 0; i < out.pixels.size(); ++i) {
    out.pixels[i] = unit_to_u8(std::clamp(pixels[i], 0.0f, 1.0f));
  }
  return out;
}

ImageU8 to_rgba(const ImageU8& image) {
  detail::check_consistent(image, "to_rgba");
  const int cn = image.channels;
  if (cn == 4) return image;
  if (cn != 1 && cn != 3)
    throw ImageError("to_rgba: unsupported channel count " + std::to_string(cn));
  ImageU8 out(image.width, image.height, 4);
  const size_t n = static_cast<size_t>(image.width) * image.height;
  for (size_t p = 0; p < n; ++p) {
    for (int c = 0; c < 3; ++c) out.pixels[p * 4 + c] = image.pixels[p * cn + (cn == 1 ? 0 : c)];
    out.pixels[p * 4 + 3] = 255;
  }
  return out;
}

ImageU8 extract_channel(const ImageU8& image, int channel) {
  detail::check_consistent(image, "extract_channel");
  if (channel < 0 || channel >= image.channels)
    throw ImageError("extract_channel: no channel " + std::to_string(channel) + " in a " +
                     std::to_string(image.channels) + "-channel image");
  ImageU8 out(image.width, image.height, 1);
  for (size_t p = 0; p < out.pixels.size(); ++p)
    out.pixels[p] = image.pixels[p * image.channels + channel];
  return out;
}

}  // namespace gen3d::image
