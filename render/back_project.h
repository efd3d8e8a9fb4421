#pragma once
// Back-projection of a generated view image into UV space (README §8, the reference's
// back_project with bake mode "linear"), and a texel-driven `gather` alternative.

#include <cstdint>
#include <vector>

#include "image/image.h"
#include "mesh/mesh.h"
#include "render/camera.h"
#include "render/rasterizer.h"

namespace gen3d::render {

struct BakeOptions {
  int texture_size = 2048;        // T: the UV-space outputs are T x T per tile (one per
                                  // material, stacked: render/texture_tiles.h)
  int render_size = 2048;         // the renderer's configured size; sets the erosion kernel (Q2)
  int edge_window = -1;           // erosion/dilation half-size; < 0: the reference's (render_size)
  double angle_threshold = 75.0;  // degrees; pixels seen more obliquely get cos 0 (still splat, Q3)
  bool boundary_map = false;      // also splat the (always zero, Q1) boundary map
};

// Half-size k of the (2k+1)^2 erosion/dilation window: int(2/512 * render_size) (0 below 256).
int bake_kernel_half_size(int render_size);
// The window a bake uses: `edge_window` when it is >= 0, else the reference's for render_size.
inline int bake_edge_window(int render_size, int edge_window) {
  return edge_window >= 0 ? edge_window : bake_kernel_half_size(render_size);
}

// Maps in UV space: T x T, or T wide and T high per tile for a mesh with materials.
struct BackProjection {
  image::Image texture;   // T x T x C: splatted colour (0 where nothing landed)
  image::Image cos;       // T x T x 1: splatted view cosine (0 where nothing landed)
  image::Image boundary;  // T x T x 1 when BakeOptions::boundary_map, else empty
};

// View-space intermediates of back_project, for tests and debugging (H x W each).
struct BackProjectDebug {
  std::vector<uint8_t> canny_input;    // trunc(255 * normalized depth), 0 on background
  std::vector<uint8_t> canny_edges;    // cv::Canny(canny_input, 30, 80): 0 / 255
  std::vector<uint8_t> mask_eroded;    // eroded coverage: 0 / 255
  std::vector<uint8_t> edges_dilated;  // dilated edges: 0 / 255
  std::vector<uint8_t> splat_mask;     // eroded coverage and not a dilated edge: 0 / 255
  std::vector<float> cos_view;         // cosine between the normal and the view axis, unthresholded
};

// Splats `view` (H x W x C colour in [0, 1], row 0 = raster row 0) through `raster` (the mesh seen
// by `camera` at H x W; take it from RasterCache) into UV space, exactly as the reference:
// camera-space unweighted vertex normals, cos = -n_z / |n| thresholded at angle_threshold, coverage
// eroded and Canny depth edges dilated by the window of bake_kernel_half_size(render_size), then a
// bilinear "linear grid put" of every remaining pixel at (row, col) = (v, u) * (T - 1), in its
// face's tile, with UVs outside [0, 1] taken modulo 1 (the reference clamps instead, Q15).
// Throws RenderError on mismatched sizes or a mesh without UVs.
BackProjection back_project(const mesh::Mesh& mesh, const Raster& raster, const Camera& camera,
                            const image::Image& view, const BakeOptions& options = {},
                            BackProjectDebug* debug = nullptr);

// back_project's result restricted to the texels it paints (weight sum or cos sum != 0): the same
// values, a fraction of the memory. Omitted texels are 0 in the cos map (so they get no merge
// weight) and in the texture.
struct SparseBackProjection {
  int width = 0, height = 0, channels = 0;  // of the dense T x T maps
  std::vector<uint32_t> texel;              // K: texel indices (row * width + col), ascending
  std::vector<float> texture;               // K x channels
  std::vector<float> cos;                   // K
};

// back_project, returned sparse; bit-identical values. Throws like back_project.
SparseBackProjection back_project_sparse(const mesh::Mesh& mesh, const Raster& raster,
                                         const Camera& camera, const image::Image& view,
                                         const BakeOptions& options = {});

struct GatherOptions {
  double angle_threshold = 75.0;  // degrees; like back_project
  float depth_tolerance = 3e-5f;  // visibility: |texel depth - raster depth| in z01 units (about
                                  // 5 pixel widths of a 2048 view), or the same face id
  int render_size = 2048;         // configured render size: erosion/edge window as back_project
  int edge_window = -1;           // erosion/dilation half-size; < 0: the reference's (render_size)
  bool bicubic = true;            // sample the view with Catmull-Rom (sharper) or bilinearly
};

// Texel-driven alternative to back_project: for every texel covered by `uv_raster`
// (rasterize_uv), the surface point is projected into the view, tested for visibility against
// `view_raster` (same pose, the cached raster), and the view image is sampled bilinearly there.
// cos is the texel's camera-space normal cosine (thresholded), 0 where not visible. Produces
// hole-free maps at any texture size; not the reference algorithm (no golden parity).
BackProjection gather(const mesh::Mesh& mesh, const Raster& uv_raster, const Raster& view_raster,
                      const Camera& camera, const image::Image& view,
                      const GatherOptions& options = {});

// Camera-space vertex normals as the reference computes them for back-projection: the unweighted
// face-mean normals of the positions transformed by the model-view matrix.  V x 3.
std::vector<mesh::Vec3> camera_space_normals(const mesh::Mesh& mesh, const Camera& camera);

}  // namespace gen3d::render
