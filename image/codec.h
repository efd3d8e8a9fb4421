#pragma once
// Encoded image bytes <-> Image, for files and for textures embedded in mesh files: PNG (libpng in,
// zlib out), JPEG (TurboJPEG) and WebP (libwebp, in only); other formats are refused by name.

#include <cstdint>
#include <string>

#include "image/image.h"

namespace gen3d::image {

// Decodes PNG/JPEG/WebP bytes to float RGB(A) or grey in [0, 1] (grey + alpha widens to RGBA);
// `what` names the source in errors. Throws ImageError for empty, corrupt or unsupported data.
Image decode_image(const std::uint8_t* data, size_t size, const std::string& what);

// Encodes to 8-bit by extension (".png", ".jpg"): values are clamped to [0, 1] and rounded,
// non-finite values become 0. `what` names the target in errors. Throws ImageError.
std::string encode_image(const Image& image, const std::string& ext, const std::string& what);

}  // namespace gen3d::image
