#pragma once
// Filling the texels no view painted: mesh-vertex propagation, image inpainting inside the UV
// charts, then dilation into the gutter and a smooth fill of the background so mip-mapping never
// pulls in black.

#include <cstdint>
#include <string>
#include <vector>

#include "image/image.h"
#include "mesh/mesh.h"
#include "render/rasterizer.h"

namespace gen3d::render {

struct InpaintOptions {
  // "charts": the vertex colours are interpolated over every unpainted chart texel, OpenCV
  //   inpaints what no painted vertex reaches, then the gutter is dilated and the background
  //   filled — fast: its cost follows the remaining holes, not the atlas.
  // "reference": the reference's order exactly: vertex inpaint, 8-bit truncation, OpenCV
  //   Navier-Stokes over every unpainted texel of the whole image (slow; kept for parity).
  std::string method = "charts";
  std::string algorithm = "ns";  // OpenCV inpainting: "ns" (Navier-Stokes) or "telea"
  double radius = 3.0;           // OpenCV inpainting radius in texels
  int gutter = 4;                // texels around the charts filled by dilation
  bool vertex_inpaint = true;    // propagate colours over mesh connectivity first
  // "charts" only: how unpainted surface is filled before image inpainting.
  // "propagate": breadth-first vertex propagation (inverse-distance, then the reached mean);
  // "harmonic": render/surface_fill.h (symmetry mirror, then a smooth harmonic fill);
  // "none": no surface fill here (it was done beforehand: fill_unseen_surface and the overload of
  // inpaint_texture that takes its result).
  std::string fill = "propagate";
  bool symmetry = true;      // "harmonic": mirror seen colour across a detected symmetry plane
  int max_iterations = 400;  // "harmonic": cap of the solver
};

struct InpaintReport {
  size_t chart_texels = 0;   // texels inside the charts
  size_t view_texels = 0;    // painted by the views (trusted after merge)
  size_t vertex_texels = 0;  // added by vertex propagation (vertex texels + interpolation)
  size_t image_texels = 0;   // filled by image inpainting inside the charts
  size_t gutter_texels = 0;  // filled by dilation around the charts
  size_t vertices_unreached = 0;
  size_t mirrored_texels = 0;  // "harmonic": taken from their mirror image (also in vertex_texels)
  size_t mirrored_vertices = 0;  // "harmonic": given the smoothed colour at their mirror image
  size_t shared_texels = 0;     // with the mesh's own UVs: the colour seen where they share a texel
  bool symmetry_found = false;  // "harmonic" with symmetry: a mirror plane was detected
  double symmetry_error = 0;    // its error (median mirrored distance / bbox diagonal)
  int fill_iterations = 0;      // "harmonic": solver iterations
  // Per texel, a TexelSource (render/surface_fill.h); "charts" only.
  std::vector<uint8_t> sources;
};

// The unseen chart texels the surface fill coloured ("charts" method), as a list: everything the
// rest of the inpainting needs from it, and small next to the atlas.
struct SurfaceFillResult {
  int size = 0;                  // the texture's width (its height: one width per tile)
  std::vector<uint32_t> texels;  // row-major indices of the texels it filled, ascending
  std::vector<float> colors;     // RGB per filled texel
  std::vector<uint8_t> sources;  // TexelSource per filled texel
  // The charts (texels the UV raster covers): [begin, end) pairs of row-major texel indices,
  // ascending, so what comes after the fill needs no UV raster.
  std::vector<uint32_t> chart_runs;
  size_t vertices_unreached = 0;
  size_t mirrored_texels = 0;
  size_t mirrored_vertices = 0;  // unseen vertices given the smoothed colour at their mirror image
  size_t shared_texels = 0;      // the colour seen where the mesh's own UVs map the same texel
  bool symmetry_found = false;
  double symmetry_error = 0;
  int fill_iterations = 0;
};

// The surface fill of the "charts" method alone (options.fill, vertex_inpaint, symmetry,
// max_iterations; "none" or no vertex_inpaint fills nothing). Arguments as for inpaint_texture;
// uv_raster is required. authored: the mesh with its own UVs before it was given a new atlas;
// what they share is filled first, whichever the fill (render/surface_fill.h,
// fill_from_authored_uvs).
SurfaceFillResult fill_unseen_surface(const mesh::Mesh& mesh, const image::Image& texture,
                                      const std::vector<uint8_t>& trust, const Raster& uv_raster,
                                      const InpaintOptions& options = {},
                                      const mesh::Mesh* authored = nullptr);

// mesh: as the render library holds it (normalized, v flipped).
// texture: T x T x 3 merged bake in [0, 1], or for a mesh with materials one T x T tile per
// material, stacked (render/texture_tiles.h; each tile is filled on its own, "charts" only);
// trust: a byte per texel, non-zero where views painted; uv_raster: the mesh's UV-space raster at
// the texture's size (rasterize_uv; required by "charts", ignored by "reference"). Returns the
// filled texture (RGB float); fills `report` when given.
image::Image inpaint_texture(const mesh::Mesh& mesh, const image::Image& texture,
                             const std::vector<uint8_t>& trust, const Raster* uv_raster,
                             const InpaintOptions& options = {}, InpaintReport* report = nullptr);

// The rest of the "charts" method after fill_unseen_surface: the same result as inpaint_texture
// with the options the fill ran with (options.fill and the fill's own options are not read here;
// the report combines the fill's counts with the inpainting's).
// `texture` is taken by value: a caller that made it for this call moves it in (no 48 MB copy at
// 2048).
image::Image inpaint_texture(image::Image texture, const std::vector<uint8_t>& trust,
                             const SurfaceFillResult& filled, const InpaintOptions& options = {},
                             InpaintReport* report = nullptr);

}  // namespace gen3d::render
