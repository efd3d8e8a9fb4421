// The mesh's own (authored) UVs as evidence for the surface no view saw: where the author mapped
// several points onto one texel of a material's texture (mirrored halves, one texture on every
// face of a box, tiles), those points looked alike, so an unseen one takes the seen one's colour.

#include <algorithm>
#include <atomic>
#include <cmath>
#include <functional>

#include <tbb/blocked_range.h>
#include <tbb/parallel_for.h>
#include <tbb/parallel_reduce.h>

#include "render/error.h"
#include "render/surface_fill.h"

namespace gen3d::render {
namespace {

double uv_area(const mesh::Vec2& a, const mesh::Vec2& b, const mesh::Vec2& c) {
  return 0.5 * std::abs((double(b[0]) - a[0]) * (double(c[1]) - a[1]) -
                        (double(b[1]) - a[1]) * (double(c[0]) - a[0]));
}

// A material's texture as seen through the authored UVs: colour and weight sums per cell,
// splatted bilinearly and read back bilinearly; cells wrap, as tiling UVs do.
struct TextureGrid {
  int size = 0;
  std::vector<float> sums;  // size x size x (r, g, b, weight)

  template <typename Visit>
  void corners(double u, double v, Visit&& visit) const {
    const double x = (u - std::floor(u)) * size - 0.5, y = (v - std::floor(v)) * size - 0.5;
    const double x0 = std::floor(x), y0 = std::floor(y);
    const double fx = x - x0, fy = y - y0;
    const auto wrap = [&](double c) {
      const int i = static_cast<int>(c) % size;
      return static_cast<size_t>(i < 0 ? i + size : i);
    };
    for (int dy = 0; dy < 2; ++dy)
      for (int dx = 0; dx < 2; ++dx)
        visit((wrap(y0 + dy) * size + wrap(x0 + dx)) * 4,
              (dx ? fx : 1.0 - fx) * (dy ? fy : 1.0 - fy));
  }
};

}  // namespace

bool faces_correspond(const mesh::Mesh& mesh, const mesh::Mesh& authored) {
  if (authored.faces.size() != mesh.faces.size()) return false;
  if (mesh.has_materials() && authored.face_materials != mesh.face_materials) return false;
  // Seams split a vertex into several, never merge two: corners that share a vertex in `mesh`
  // share one in `authored`.
  std::vector<int64_t> source(mesh.positions.size(), -1);
  for (size_t f = 0; f < mesh.faces.size(); ++f)
    for (size_t k = 0; k < 3; ++k) {
      const uint32_t v = mesh.faces[f][k];
      if (v >= source.size()) return false;
      const int64_t a = authored.faces[f][k];
      if (source[v] < 0) source[v] = a;
      if (source[v] != a) return false;
    }
  return true;
}

size_t fill_from_authored_uvs(const mesh::Mesh& mesh, const mesh::Mesh& authored, image::Image& tex,
                              std::vector<uint8_t>& known, const Raster& uv,
                              std::vector<uint8_t>& source) {
  const size_t faces = mesh.faces.size();
  if (!faces_correspond(mesh, authored) || !authored.has_uvs() ||
      authored.uv_faces.size() != faces || !mesh.has_uvs())
    throw RenderError(
        "surface fill: the authored mesh's faces or UVs do not match the mesh being textured");
  for (const mesh::Tri& t : authored.uv_faces)
    for (uint32_t k : t)
      if (k >= authored.uvs.size())
        throw RenderError("surface fill: an authored uv index is out of range");
  const int size = tex.width;
  const size_t texels = known.size();
  // The atlas is the authored layout itself (uv_unwrap kept it; v may be flipped since): it holds
  // one texel per authored texel already, nothing to share.
  bool kept = true;
  for (size_t f = 0; f < faces && kept; ++f)
    for (size_t k = 0; k < 3 && kept; ++k) {
      const mesh::Vec2& a = authored.uvs[authored.uv_faces[f][k]];
      const mesh::Vec2& n = mesh.uvs[mesh.uv_faces[f][k]];
      kept = a[0] == n[0] && (a[1] == n[1] || 1.0f - a[1] == n[1]);
    }
  if (kept) return 0;
  // Per material (one texture each); a face naming no material of the list shares nothing.
  const uint32_t materials = static_cast<uint32_t>(
      authored.has_materials() ? std::max<size_t>(1, authored.materials.size()) : 1);
  const auto material = [&](size_t f) -> uint32_t {
    return authored.has_materials() ? std::min(authored.face_materials[f], materials) : 0u;
  };

  // Per material: whether it holds painted (bit 1) and unknown (bit 0) chart texels.
  std::vector<uint8_t> holds(materials + 1, 0);
  tbb::parallel_for(
      tbb::blocked_range<size_t>(0, texels), [&](const tbb::blocked_range<size_t>& r) {
        for (size_t i = r.begin(); i < r.end(); ++i) {
          if (!uv.face_id[i]) continue;
          std::atomic_ref<uint8_t> h(holds[material(static_cast<size_t>(uv.face_id[i] - 1))]);
          const uint8_t bit = known[i] ? 2 : 1;
          if (!(h.load(std::memory_order_relaxed) & bit))
            h.fetch_or(bit, std::memory_order_relaxed);
        }
      });
  // A cell about as large as 1 / 0.7^2 atlas texels, so that the painted texels cover every cell
  // of what they saw; faces with no authored UV area carry no evidence.
  std::vector<uint8_t> usable(faces, 0);
  std::vector<double> atlas_area(materials, 0), authored_area(materials, 0);
  for (size_t f = 0; f < faces; ++f) {
    const mesh::Tri& a = authored.uv_faces[f];
    const double area = uv_area(authored.uvs[a[0]], authored.uvs[a[1]], authored.uvs[a[2]]);
    if (!(area > 1e-12) || !std::isfinite(area) || material(f) == materials ||
        holds[material(f)] != 3)
      continue;
    const mesh::Tri& n = mesh.uv_faces[f];
    usable[f] = 1;
    atlas_area[material(f)] += uv_area(mesh.uvs[n[0]], mesh.uvs[n[1]], mesh.uvs[n[2]]);
    authored_area[material(f)] += area;
  }
  std::vector<TextureGrid> grids(materials);
  double cells = 0;
  for (uint32_t m = 0; m < materials; ++m) {
    if (authored_area[m] <= 0 || atlas_area[m] <= 0) continue;
    grids[m].size = static_cast<int>(
        std::clamp(0.7 * size * std::sqrt(atlas_area[m] / authored_area[m]), 4.0, 4096.0));
    cells += double(grids[m].size) * grids[m].size;
  }
  if (cells == 0) return 0;
  // Bounded memory: all grids together hold at most two atlases' worth of cells.
  const double shrink = std::min(1.0, std::sqrt(2.0 * size * size / cells));
  for (TextureGrid& g : grids) {
    if (g.size == 0) continue;
    g.size = std::max(4, static_cast<int>(g.size * shrink));
    g.sums.assign(static_cast<size_t>(g.size) * g.size * 4, 0.0f);
  }
  const auto authored_uv = [&](size_t i, size_t f) {
    const mesh::Tri& a = authored.uv_faces[f];
    double u = 0, v = 0;
    for (size_t k = 0; k < 3; ++k) {
      u += double(uv.bary[i * 3 + k]) * authored.uvs[a[k]][0];
      v += double(uv.bary[i * 3 + k]) * authored.uvs[a[k]][1];
    }
    return std::array<double, 2>{u, v};
  };
  // Gather: every painted texel into its material's grid, in row order (deterministic sums).
  for (size_t i = 0; i < texels; ++i) {
    if (!known[i] || !uv.face_id[i]) continue;
    const size_t f = static_cast<size_t>(uv.face_id[i] - 1);
    if (!usable[f]) continue;
    TextureGrid& g = grids[material(f)];
    const auto [u, v] = authored_uv(i, f);
    const float* c = tex.pixels.data() + i * 3;
    g.corners(u, v, [&](size_t cell, double w) {
      for (int k = 0; k < 3; ++k) g.sums[cell + k] += static_cast<float>(w * c[k]);
      g.sums[cell + 3] += static_cast<float>(w);
    });
  }
  // Scatter: an unknown texel takes the colour there when painted texels lie within about a cell.
  return tbb::parallel_reduce(
      tbb::blocked_range<size_t>(0, texels), size_t{0},
      [&](const tbb::blocked_range<size_t>& r, size_t n) {
        for (size_t i = r.begin(); i < r.end(); ++i) {
          if (known[i] || !uv.face_id[i]) continue;
          const size_t f = static_cast<size_t>(uv.face_id[i] - 1);
          if (!usable[f]) continue;
          const TextureGrid& g = grids[material(f)];
          const auto [u, v] = authored_uv(i, f);
          double sum[4] = {0, 0, 0, 0};
          g.corners(u, v, [&](size_t cell, double w) {
            for (int k = 0; k < 4; ++k) sum[k] += w * g.sums[cell + k];
          });
          if (sum[3] < 0.25) continue;
          for (int k = 0; k < 3; ++k)
            tex.pixels[i * 3 + k] = static_cast<float>(std::clamp(sum[k] / sum[3], 0.0, 1.0));
          known[i] = 1;
          source[i] = static_cast<uint8_t>(TexelSource::shared);
          ++n;
        }
        return n;
      },
      std::plus<size_t>());
}

}  // namespace gen3d::render
