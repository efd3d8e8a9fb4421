#pragma once
// Internal: Image <-> encoded bytes through OpenCV, shared by the mesh readers and writers.

#include <cstdint>
#include <string>

#include "mesh/image.h"

namespace gen3d::mesh::detail {

// Decodes PNG/JPEG/... bytes to float RGB(A) or grey in [0, 1]; `what` names the source in errors.
Image decode_image(const uint8_t* data, size_t size, const std::string& what);
// Encodes to 8-bit by extension (".png", ".jpg"); `what` names the target in errors.
std::string encode_image(const Image& image, const std::string& ext, const std::string& what);

}  // namespace gen3d::mesh::detail
