#pragma once
// Triangle rasterizer, bit-exact with the Hunyuan3D-2 reference `custom_rasterizer`
// (shared/golden/texgen/README.md §3): pixel (col, row) is sampled at (col + 0.5, row + 0.5),
// row 0 is NDC y = -1, coverage is inclusive on all three edges, float32 barycentrics with a
// float64 reciprocal, and the depth key trunc(depth * 2^18) * 2147483647 + (face + 1) where the
// smallest key wins. The fast path bins triangles into screen tiles and rasterizes tiles in
// parallel (oneTBB), each tile with its own 64-bit key buffer; since the winner is the minimum
// over unique keys, the result does not depend on thread count or scheduling order.

#include <cstddef>
#include <cstdint>
#include <span>

#include "mesh/mesh.h"
#include "render/buffer.h"
#include "render/camera.h"

namespace gen3d::render {

// Mesh convention of the whole render library: the mesh as the reference renderer holds it, i.e.
// after mesh::normalize_mesh with its defaults: positions in the internal frame (normalized), and
// UVs with v already flipped (uvs[i][1] = 1 - v of the file), so texture row = v * (rows - 1).

// Per-pixel result of one rasterization. Immutable once built (shared through RasterCache).
struct Raster {
  int width = 0;              // pixels per row
  int height = 0;             // rows; row 0 is NDC y = -1 (the reference's layout, no flip)
  Buffer<int32_t> face_id;    // H x W: 1-based index of the visible face, 0 = background
  Buffer<float> bary;         // H x W x 3: barycentrics of face corners 0, 1, 2 (0 on background)
  Buffer<float> depth;        // H x W: z_ndc * 0.49999 + 0.5 at the pixel (the depth that won)
  size_t triangle_count = 0;  // triangles rasterized: every face id is <= this

  size_t pixel_count() const { return static_cast<size_t>(width) * height; }
  // Largest face id present: triangle_count when set by the rasterizer, else a scan.
  size_t max_face_id() const;
  size_t bytes() const {
    return face_id.size() * sizeof(int32_t) + (bary.size() + depth.size()) * sizeof(float);
  }
};

struct RasterOptions {
  int tile_size = 64;    // edge of the square screen tiles that triangles are binned into (8..1024)
  bool parallel = true;  // rasterize tiles with tbb::parallel_for (false: one thread, same result)
};

// Rasterizes triangles given clip coordinates (x, y, z, w; the rasterizer divides by w).
//   clip: V x 4, triangles: F x 3 indices into clip, width/height: output size in pixels.
// Throws RenderError on a bad size or an index out of range.
Raster rasterize(std::span<const mesh::Vec4> clip, std::span<const mesh::Tri> triangles, int width,
                 int height, const RasterOptions& options = {});

// Convenience: clip coordinates of mesh.positions for `camera`, then rasterize(mesh.faces).
Raster rasterize(const mesh::Mesh& mesh, const Camera& camera, int width, int height,
                 const RasterOptions& options = {});

// The reference algorithm as written: one thread, triangle after triangle over its bounding box,
// into a full-frame key buffer. Slow; kept as the oracle for tests and the baseline for benchmarks.
Raster rasterize_reference(std::span<const mesh::Vec4> clip, std::span<const mesh::Tri> triangles,
                           int width, int height);

// Texel-space rasterization: every face is placed at its UVs (uv_faces into uvs) on a
// width x height texture whose texel (col, row) centre is (u * (width - 1), v * (height - 1)) with
// the renderer's flipped v (see above), i.e. texel centres on integer UV-grid positions and row 0
// at original v = 1 (top): the convention of the reference's linear_grid_put. Gives per-texel face
// id + barycentrics for texel-space maps and gather baking. Where UV islands overlap, the lowest
// face index wins. UVs repeat (render/texture_tiles.h): a face outside [0, 1] lands where it
// reads modulo 1, one that crosses the texture's edge lands in both parts; a mesh with materials
// has one width x width tile per material, stacked (height = materials x width), and each face
// lands in its material's. Throws RenderError if the mesh has no UVs or the size does not fit the
// tiles.
Raster rasterize_uv(const mesh::Mesh& mesh, int width, int height,
                    const RasterOptions& options = {});

}  // namespace gen3d::render
