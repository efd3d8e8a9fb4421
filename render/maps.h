#pragma once
// Per-view geometry maps of the texgen pipeline (README §5-7) and texel-space maps, all built from
// a Raster (share one through RasterCache). Image rows follow the raster rows (row 0 = NDC y -1),
// which with the reference cameras is an upright picture; no flip anywhere.

#include <cstdint>
#include <vector>

#include "image/image.h"
#include "mesh/mesh.h"
#include "render/rasterizer.h"

namespace gen3d::render {

// Normal map as texgen renders it (render_normal with use_abs_coor): the reference's unweighted
// vertex normals of the (internal-frame) positions, interpolated without renormalization, encoded
// (n + 1) / 2; background 1 (white).  Returns H x W x 3.
// `vertex_normals` (V x 3) overrides the normals; empty = mesh::vertex_normals_face_mean(mesh).
image::Image normal_map(const mesh::Mesh& mesh, const Raster& raster,
                        const std::vector<mesh::Vec3>& vertex_normals = {});

// Position map: per-vertex 0.5 - p / scale_factor interpolated, background 1.  H x W x 3.
image::Image position_map(const mesh::Mesh& mesh, const Raster& raster, float scale_factor = 1.15f);

// The same maps as the pipeline hands them on: 8-bit RGB, trunc(255 * v) of the float map (README
// Q10), computed without the float image (a quarter of the memory).  H x W x 3 bytes.
std::vector<uint8_t> normal_map_u8(const mesh::Mesh& mesh, const Raster& raster,
                                   const std::vector<mesh::Vec3>& vertex_normals = {});
std::vector<uint8_t> position_map_u8(const mesh::Mesh& mesh, const Raster& raster,
                                     float scale_factor = 1.15f);

// Depth map: the raster's depth (z_ndc * 0.49999 + 0.5, smaller = nearer), background 1.  H x W
// x 1.
image::Image depth_map(const Raster& raster);

// Coverage mask: 1 where a face is visible, else 0.  H x W x 1.
image::Image coverage_mask(const Raster& raster);

// Albedo map: mesh.texture sampled bilinearly at the interpolated per-corner UVs (clamped to the
// edge, UVs outside [0, 1] repeating; texel centres at u * (W - 1), v * (H - 1) with the flipped v,
// the bake convention), or the vertex colours when the mesh has no texture. With several materials
// each face takes its own material's texture, else the vertex colours, else the material's colour.
// Background = `background`. A one-pixel crack the reference rasterizer leaves along an edge two
// faces share (the back face showing through) takes the mean of the pixels across it.  H x W x 3.
// Throws RenderError if a single-material mesh has neither texture+UVs nor vertex colours.
image::Image albedo_map(const mesh::Mesh& mesh, const Raster& raster, float background = 1.0f);

// Texel-space maps from a UV raster (rasterize_uv): raw internal-frame positions / unweighted
// vertex normals per texel, 0 where no face covers the texel.  T x T x 3.
image::Image texel_position_map(const mesh::Mesh& mesh, const Raster& uv_raster);
image::Image texel_normal_map(const mesh::Mesh& mesh, const Raster& uv_raster,
                              const std::vector<mesh::Vec3>& vertex_normals = {});

// 8-bit conversion of the reference: trunc(255 * v) for v in [0, 1] (clamped outside).
std::vector<uint8_t> to_u8(const image::Image& image);

// Bilinear sample of `image` at continuous texel coordinates (x, y) (texel centres at integers),
// clamped to the edge. Writes image.channels floats to out.
void sample_bilinear(const image::Image& image, float x, float y, float* out);

// Catmull-Rom bicubic sample at (x, y), same conventions as sample_bilinear; results are clamped
// to the range of the 4 x 4 neighbourhood, so there is no overshoot at edges.
void sample_bicubic(const image::Image& image, float x, float y, float* out);

}  // namespace gen3d::render
