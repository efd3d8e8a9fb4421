#pragma once
// Filling the surface no view saw, on the mesh rather than in the atlas: colour mirrored across the
// mesh's symmetry plane where the mirrored point was seen, then a harmonic (Laplace) fill of colour
// over the welded vertices from the seen ones, so it is smooth, crosses UV seams continuously and
// carries only the low frequencies of the seen boundary.

#include <cstddef>
#include <cstdint>
#include <vector>

#include "image/image.h"
#include "mesh/mesh.h"
#include "render/rasterizer.h"

namespace gen3d::render {

// Where a texel's colour came from (the per-texel source map).
enum class TexelSource : uint8_t {
  background = 0,  // outside the charts
  view = 1,        // painted by a view image
  mirrored = 2,    // the colour seen at its mirror image across the symmetry plane (texel by
                   // texel, or smoothed through the mirrored vertices of its face)
  filled = 3,      // the surface fill (harmonic or vertex propagation)
  inpainted = 4,   // image inpainting inside the charts
  gutter = 5,      // dilation around the charts
  shared = 6,      // the colour seen at a point that the mesh's own UVs map onto the same texel
};

// The per-texel sources (T x T TexelSource, or T x T per tile, stacked: texture_tiles.h) as an RGB
// picture of the same size: views green, mirrored blue, shared through the mesh's own UVs cyan,
// surface fill orange, image inpainting red, gutter grey, background black. An empty image when
// `sources` is not a whole number of size x size tiles.
image::Image source_colors(const std::vector<uint8_t>& sources, int size);

struct SymmetryPlane {
  bool found = false;
  mesh::Vec3 normal{1, 0, 0};
  mesh::Vec3 point{0, 0, 0};
  double error = 0;  // median distance of mirrored surface samples to the surface / bbox diagonal
};

struct SurfaceFillOptions {
  bool symmetry = true;              // mirror seen colour across a detected symmetry plane
  double symmetry_tolerance = 0.01;  // largest accepted SymmetryPlane::error
  int smoothing_passes = 8;          // low-pass passes over the seen vertices' colours first
  int max_iterations = 400;          // conjugate-gradient cap of the harmonic solve
  double tolerance = 1e-4;           // its relative residual
};

struct SurfaceFillReport {
  SymmetryPlane plane;
  size_t near_texels = 0;  // near seen texels: their nearest seen colours
  size_t mirrored_texels = 0;
  size_t filled_texels = 0;  // by the vertex colours (some mirrored: see TexelSource::mirrored)
  size_t seen_vertices = 0;
  size_t mirrored_vertices = 0;  // unseen vertices given the smoothed colour at their mirror image
  size_t solved_vertices = 0;
  size_t unreached_vertices = 0;  // in parts with no seen vertex: the seen mean colour
  int iterations = 0;
  double residual = 0;
  bool converged = true;
};

// The best mirror plane of the mesh among the planes through its area centroid normal to the
// coordinate axes and to its principal axes, scored by how far mirrored surface samples fall from
// the surface (a voxel hash of surface samples). found = error <= tolerance.
SymmetryPlane detect_symmetry(const mesh::Mesh& mesh, double tolerance = 0.01);

// mesh: normalized, v flipped; tex: T x T x 3; known: T x T, non-zero where views painted (updated
// with the texels this fills); uv: the UV raster at T x T; source: T x T TexelSource per texel
// (updated). Fills the unknown chart texels of `tex`.
void fill_surface(const mesh::Mesh& mesh, image::Image& tex, std::vector<uint8_t>& known,
                  const Raster& uv, std::vector<uint8_t>& source,
                  const SurfaceFillOptions& options = {}, SurfaceFillReport* report = nullptr);

// Whether `authored` has the faces of `mesh` in the same order, up to split UV seams (the same
// number of faces and materials; corners sharing a vertex in `mesh` share one in `authored`).
bool faces_correspond(const mesh::Mesh& mesh, const mesh::Mesh& authored);

// The mesh's own UVs as evidence: `authored` is `mesh` before it was given a new atlas (the same
// faces, see faces_correspond; its UVs and face materials are read). Where the author mapped
// several points onto one texel of a material's texture (mirrored halves, one texture on every face
// of a box, tiles), those points looked alike: an unknown chart texel whose authored texel was
// painted through another point takes that colour (TexelSource::shared). Arguments otherwise as
// fill_surface's; returns the number of texels filled. Throws RenderError when the faces differ.
// An observation, not a guess: it goes before any fill.
size_t fill_from_authored_uvs(const mesh::Mesh& mesh, const mesh::Mesh& authored, image::Image& tex,
                              std::vector<uint8_t>& known, const Raster& uv,
                              std::vector<uint8_t>& source);

}  // namespace gen3d::render
