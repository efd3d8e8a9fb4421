#pragma once
// Attribute interpolation over a Raster (README §4): value = b0*attr[c0] + b1*attr[c1] +
// b2*attr[c2] in float32, summed left to right; background pixels get `background`.

#include <array>
#include <cstddef>
#include <span>
#include <string>

#include "mesh/mesh.h"
#include "render/error.h"
#include "render/rasterizer.h"

namespace gen3d::render {

// Interpolates one pixel of a covered raster. attr: per-vertex values (N x C), corners: the
// winning face's attribute indices.
template <size_t C>
inline std::array<float, C> interpolate_pixel(const float* bary,
                                              std::span<const std::array<float, C>> attr,
                                              const mesh::Tri& corners) {
  std::array<float, C> out;
  const auto& a0 = attr[corners[0]];
  const auto& a1 = attr[corners[1]];
  const auto& a2 = attr[corners[2]];
  for (size_t c = 0; c < C; ++c) out[c] = bary[0] * a0[c] + bary[1] * a1[c] + bary[2] * a2[c];
  return out;
}

// Interpolates per-vertex attributes to every pixel.
//   raster: H x W, attr: N x C, corners: F x 3 (indices into attr for face f's corners; faces or
//   uv_faces), out: H x W x C (row-major, channel-interleaved), background: value off the mesh.
template <size_t C>
void interpolate(const Raster& raster, std::span<const std::array<float, C>> attr,
                 std::span<const mesh::Tri> corners, std::span<float> out,
                 const std::array<float, C>& background) {
  if (out.size() != raster.pixel_count() * C) {
    throw RenderError("interpolate: output holds " + std::to_string(out.size()) +
                      " floats, expected " + std::to_string(raster.pixel_count() * C));
  }
  for (size_t p = 0; p < raster.pixel_count(); ++p) {
    const int32_t id = raster.face_id[p];
    float* dst = out.data() + p * C;
    if (id == 0) {
      for (size_t c = 0; c < C; ++c) dst[c] = background[c];
      continue;
    }
    const auto v = interpolate_pixel<C>(&raster.bary[p * 3], attr, corners[id - 1]);
    for (size_t c = 0; c < C; ++c) dst[c] = v[c];
  }
}

}  // namespace gen3d::render
