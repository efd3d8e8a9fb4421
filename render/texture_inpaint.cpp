#include "render/texture_inpaint.h"

#include <algorithm>
#include <cmath>
#include <functional>
#include <map>

#include <tbb/blocked_range.h>
#include <tbb/parallel_for.h>
#include <tbb/parallel_reduce.h>
#include <opencv2/imgproc.hpp>
#include <opencv2/photo.hpp>

#include "mesh/vertex_inpaint.h"
#include "render/error.h"
#include "render/surface_fill.h"
#include "render/texture_tiles.h"

namespace gen3d::render {
namespace {

size_t count(const std::vector<uint8_t>& mask) {
  return static_cast<size_t>(std::count_if(mask.begin(), mask.end(), [](uint8_t v) { return v; }));
}

// 8-bit copy with truncation, as the reference converts before cv::inpaint.
cv::Mat to_u8_truncated(const image::Image& image) {
  cv::Mat out(image.height, image.width, CV_8UC3);
  for (size_t i = 0; i < image.pixels.size(); ++i)
    out.data[i] = static_cast<uint8_t>(std::clamp(image.pixels[i], 0.0f, 1.0f) * 255.0f);
  return out;
}

image::Image from_u8(const cv::Mat& m) {
  image::Image out(m.cols, m.rows, 3);
  for (size_t i = 0; i < out.pixels.size(); ++i) out.pixels[i] = m.data[i] / 255.0f;
  return out;
}

// Average of the known 8-neighbours, one ring per pass: the gutter gets the charts' edge colours.
// A ring's texels read only texels known before the ring, so they are computed in parallel with
// the same result as one by one; after the first ring only the neighbours of the last one are
// looked at. The ring's texels become `known`, with source `gutter`.
size_t dilate_rings(image::Image& tex, std::vector<uint8_t>& known, std::vector<uint8_t>& source,
                    int rings) {
  const int w = tex.width, h = tex.height;
  // The first ring: every unknown texel next to a known one, row by row.
  std::vector<uint32_t> ring;
  if (rings > 0) {
    // Per row, a column is near a known texel when any of the three rows holds one there or in
    // a neighbouring column.
    std::vector<std::vector<uint32_t>> rows(static_cast<size_t>(h));
    tbb::parallel_for(0, h, [&](int y) {
      std::vector<uint8_t> column(static_cast<size_t>(w) + 2, 0);
      for (int r = std::max(0, y - 1); r <= std::min(h - 1, y + 1); ++r) {
        const uint8_t* row = known.data() + static_cast<size_t>(r) * w;
        for (int x = 0; x < w; ++x) column[static_cast<size_t>(x) + 1] |= row[x];
      }
      const uint8_t* own = known.data() + static_cast<size_t>(y) * w;
      for (int x = 0; x < w; ++x)
        if (!own[x] && (column[static_cast<size_t>(x)] | column[static_cast<size_t>(x) + 1] |
                        column[static_cast<size_t>(x) + 2]))
          rows[static_cast<size_t>(y)].push_back(static_cast<uint32_t>(y * w + x));
    });
    for (const auto& row : rows) ring.insert(ring.end(), row.begin(), row.end());
  }
  size_t filled = 0;
  std::vector<uint8_t> queued;
  std::vector<float> colors;
  for (int pass = 0; pass < rings && !ring.empty(); ++pass) {
    colors.resize(ring.size() * 3);
    tbb::parallel_for(size_t{0}, ring.size(), [&](size_t k) {
      const int x = static_cast<int>(ring[k] % w), y = static_cast<int>(ring[k] / w);
      float sum[3] = {0, 0, 0};
      int count = 0;
      for (int dy = -1; dy <= 1; ++dy)
        for (int dx = -1; dx <= 1; ++dx) {
          const int nx = x + dx, ny = y + dy;
          if (nx < 0 || ny < 0 || nx >= w || ny >= h || !known[static_cast<size_t>(ny) * w + nx])
            continue;
          const float* p = tex.at(nx, ny);
          for (int c = 0; c < 3; ++c) sum[c] += p[c];
          ++count;
        }
      for (int c = 0; c < 3; ++c) colors[k * 3 + c] = sum[c] / count;
    });
    for (size_t k = 0; k < ring.size(); ++k) {
      std::copy_n(colors.begin() + k * 3, 3, tex.pixels.begin() + size_t{ring[k]} * 3);
      known[ring[k]] = 1;
      source[ring[k]] = static_cast<uint8_t>(TexelSource::gutter);
    }
    filled += ring.size();
    if (pass + 1 == rings) break;
    // The next ring: the unknown neighbours of this one.
    if (queued.empty()) queued.assign(known.size(), 0);
    std::vector<uint32_t> next;
    for (uint32_t i : ring) {
      const int x = static_cast<int>(i % w), y = static_cast<int>(i / w);
      for (int dy = -1; dy <= 1; ++dy)
        for (int dx = -1; dx <= 1; ++dx) {
          const int nx = x + dx, ny = y + dy;
          if (nx < 0 || ny < 0 || nx >= w || ny >= h) continue;
          const size_t j = static_cast<size_t>(ny) * w + nx;
          if (known[j] || queued[j]) continue;
          queued[j] = 1;
          next.push_back(static_cast<uint32_t>(j));
        }
    }
    ring.swap(next);
  }
  return filled;
}

// Push-pull: average known texels down a pyramid, then fill unknown texels from the coarser level
// on the way up. Smooth, O(texels), never leaves a hole. Parallel over rows; every coarse texel
// sums its fine texels in row order, so the result does not depend on the thread count.
void push_pull_fill(image::Image& tex, const std::vector<uint8_t>& known) {
  struct Level {
    int w, h;
    std::vector<float> rgb, weight;
  };
  // The finest level's weights are `known` itself (1 or 0), read in place.
  std::vector<Level> levels;
  levels.push_back(Level{tex.width, tex.height, std::move(tex.pixels), {}});
  const auto weight_of = [&](const Level& level, size_t f) {
    return &level == &levels[0] ? (known[f] ? 1.0f : 0.0f) : level.weight[f];
  };
  while (levels.back().w > 1 || levels.back().h > 1) {
    const Level& fine = levels.back();
    Level coarse{(fine.w + 1) / 2, (fine.h + 1) / 2, {}, {}};
    coarse.rgb.assign(static_cast<size_t>(coarse.w) * coarse.h * 3, 0.0f);
    coarse.weight.assign(static_cast<size_t>(coarse.w) * coarse.h, 0.0f);
    tbb::parallel_for(0, coarse.h, [&](int cy) {
      for (int y = 2 * cy; y < std::min(2 * cy + 2, fine.h); ++y)
        for (int x = 0; x < fine.w; ++x) {
          const size_t f = static_cast<size_t>(y) * fine.w + x;
          const size_t c = static_cast<size_t>(cy) * coarse.w + x / 2;
          const float wgt = weight_of(fine, f);
          for (int k = 0; k < 3; ++k) coarse.rgb[c * 3 + k] += fine.rgb[f * 3 + k] * wgt;
          coarse.weight[c] += wgt;
        }
      for (int cx = 0; cx < coarse.w; ++cx) {
        const size_t c = static_cast<size_t>(cy) * coarse.w + cx;
        if (coarse.weight[c] > 0) {
          for (int k = 0; k < 3; ++k) coarse.rgb[c * 3 + k] /= coarse.weight[c];
          coarse.weight[c] = 1.0f;
        }
      }
    });
    levels.push_back(std::move(coarse));
  }
  for (size_t l = levels.size() - 1; l-- > 0;) {
    Level& fine = levels[l];
    const Level& coarse = levels[l + 1];
    tbb::parallel_for(0, fine.h, [&](int y) {
      for (int x = 0; x < fine.w; ++x) {
        const size_t f = static_cast<size_t>(y) * fine.w + x;
        if (weight_of(fine, f) > 0) {
          if (l > 0) {
            for (int k = 0; k < 3; ++k) fine.rgb[f * 3 + k] /= fine.weight[f];
            fine.weight[f] = 1.0f;
          }
          continue;
        }
        const size_t c = static_cast<size_t>(y / 2) * coarse.w + x / 2;
        for (int k = 0; k < 3; ++k) fine.rgb[f * 3 + k] = coarse.rgb[c * 3 + k];
        if (l > 0) fine.weight[f] = 1.0f;
      }
    });
  }
  tex.pixels = std::move(levels[0].rgb);
}

// Colours per *position* vertex (welded, so propagation crosses UV seams and reaches charts no view
// saw): a vertex is seeded by the painted texels around its UV vertices' texels (3 x 3), then
// colours spread breadth-first over mesh edges, each new vertex taking the inverse-square-distance
// average of its already coloured neighbours. Returns RGB per position vertex and whether it has
// one (per position, not per UV vertex: a mesh's own UVs may give one UV vertex to several
// positions, faces of different parts or materials that read the same texture coordinate).
void propagate_vertex_colors(const mesh::Mesh& mesh, const image::Image& tex,
                             const std::vector<uint8_t>& painted, std::vector<float>& vertex_color,
                             std::vector<uint8_t>& vertex_known, size_t& unreached) {
  // Weld equal positions: seam-split copies of a vertex are one vertex here.
  std::vector<uint32_t> weld(mesh.positions.size());
  {
    std::map<mesh::Vec3, uint32_t> first;
    for (size_t i = 0; i < mesh.positions.size(); ++i)
      weld[i] = first.emplace(mesh.positions[i], static_cast<uint32_t>(i)).first->second;
  }
  const size_t nv = mesh.positions.size();
  const int size = tex.width;  // of a tile (render/texture_tiles.h)
  std::vector<double> color(nv * 3, 0.0), weight(nv, 0.0);
  for (size_t f = 0; f < mesh.faces.size(); ++f)
    for (int k = 0; k < 3; ++k) {
      // The texel the corner's UV reads, in its face's tile, UVs repeating.
      const mesh::Vec2& uv = mesh.uvs[mesh.uv_faces[f][k]];
      const int col = static_cast<int>(std::lround(wrap_uv(uv[0]) * (size - 1)));
      const int row = static_cast<int>(std::lround(wrap_uv(uv[1]) * (size - 1)));
      const int top = static_cast<int>(face_tile(mesh, f)) * size;
      const uint32_t p = weld[mesh.faces[f][k]];
      for (int y = std::max(0, row - 1); y <= std::min(size - 1, row + 1); ++y)
        for (int x = std::max(0, col - 1); x <= std::min(size - 1, col + 1); ++x) {
          if (!painted[static_cast<size_t>(top + y) * size + x]) continue;
          const float* c = tex.at(x, top + y);
          for (int ch = 0; ch < 3; ++ch) color[p * 3 + ch] += c[ch];
          weight[p] += 1.0;
        }
    }
  std::vector<uint8_t> known(nv, 0);
  std::vector<uint32_t> frontier;
  for (size_t p = 0; p < nv; ++p)
    if (weight[p] > 0) {
      for (int ch = 0; ch < 3; ++ch) color[p * 3 + ch] /= weight[p];
      known[p] = 1;
    }
  // Undirected, de-duplicated vertex adjacency in CSR form.
  std::vector<std::vector<uint32_t>> adjacent(nv);
  for (const mesh::Tri& f : mesh.faces)
    for (int k = 0; k < 3; ++k) {
      const uint32_t a = weld[f[k]], b = weld[f[(k + 1) % 3]];
      adjacent[a].push_back(b);
      adjacent[b].push_back(a);
    }
  for (auto& a : adjacent) {
    std::sort(a.begin(), a.end());
    a.erase(std::unique(a.begin(), a.end()), a.end());
  }
  for (size_t p = 0; p < nv; ++p)
    if (!known[p])
      for (uint32_t q : adjacent[p])
        if (known[q]) {
          frontier.push_back(static_cast<uint32_t>(p));
          break;
        }
  std::vector<uint32_t> next;
  std::vector<uint8_t> queued(nv, 0);
  for (uint32_t p : frontier) queued[p] = 1;
  while (!frontier.empty()) {
    // Colour the whole layer from the previous layers, then mark it, so the order inside a layer
    // does not matter (deterministic, thread-count independent).
    std::vector<double> layer(frontier.size() * 3, 0.0);
    for (size_t i = 0; i < frontier.size(); ++i) {
      const uint32_t p = frontier[i];
      double wsum = 0.0;
      for (uint32_t q : adjacent[p]) {
        if (!known[q]) continue;
        const mesh::Vec3& a = mesh.positions[p];
        const mesh::Vec3& b = mesh.positions[q];
        const double d2 = std::max(1e-8, double(a[0] - b[0]) * (a[0] - b[0]) +
                                             double(a[1] - b[1]) * (a[1] - b[1]) +
                                             double(a[2] - b[2]) * (a[2] - b[2]));
        for (int ch = 0; ch < 3; ++ch) layer[i * 3 + ch] += color[q * 3 + ch] / d2;
        wsum += 1.0 / d2;
      }
      for (int ch = 0; ch < 3; ++ch) layer[i * 3 + ch] /= wsum;
    }
    next.clear();
    for (size_t i = 0; i < frontier.size(); ++i) {
      const uint32_t p = frontier[i];
      for (int ch = 0; ch < 3; ++ch) color[p * 3 + ch] = layer[i * 3 + ch];
      known[p] = 1;
    }
    for (uint32_t p : frontier)
      for (uint32_t q : adjacent[p])
        if (!known[q] && !queued[q]) {
          queued[q] = 1;
          next.push_back(q);
        }
    frontier.swap(next);
  }
  unreached = 0;
  for (size_t p = 0; p < nv; ++p) unreached += weld[p] == p && !known[p];
  // Parts no view reached (hidden inner parts of CAD assemblies, say) take the mean colour of the
  // reached surface: as plausible as inpainting their atlas neighbours, which belong to unrelated
  // surfaces, and it keeps image inpainting to the seams where it is useful and affordable.
  double mean[3] = {0, 0, 0}, reached = 0;
  for (size_t p = 0; p < nv; ++p)
    if (known[p] && weld[p] == p) {
      for (int ch = 0; ch < 3; ++ch) mean[ch] += color[p * 3 + ch];
      reached += 1;
    }
  if (unreached > 0 && reached > 0) {
    const double n = reached;
    for (size_t p = 0; p < nv; ++p)
      if (!known[p]) {
        for (int ch = 0; ch < 3; ++ch) color[p * 3 + ch] = mean[ch] / n;
        known[p] = 1;
      }
  }
  vertex_color.assign(nv * 3, 0.0f);
  vertex_known.assign(nv, 0);
  for (size_t v = 0; v < nv; ++v) {
    const uint32_t p = weld[v];
    if (!known[p]) continue;
    vertex_known[v] = 1;
    for (int ch = 0; ch < 3; ++ch) vertex_color[v * 3 + ch] = static_cast<float>(color[p * 3 + ch]);
  }
}

// A square texture, or the stacked square tiles of a mesh with materials (texture_tiles.h).
void check_texture(const image::Image& texture, const std::vector<uint8_t>& trust) {
  if (texture.channels != 3 || texture.width <= 0 || texture.height % texture.width != 0)
    throw RenderError(
        "inpaint_texture: expected an RGB texture of square tiles (height a multiple of the "
        "width)");
  if (trust.size() != static_cast<size_t>(texture.width) * texture.height)
    throw RenderError("inpaint_texture: trust mask size mismatch");
}

void check_uv(const image::Image& texture, const Raster* uv_raster) {
  if (!uv_raster || uv_raster->pixel_count() != static_cast<size_t>(texture.width) * texture.height)
    throw RenderError(
        "inpaint_texture: the \"charts\" method needs the UV raster at the texture size");
}

// The texture holds one tile per material of the mesh (texture_tiles.h).
void check_tiles(const mesh::Mesh& mesh, const image::Image& texture) {
  check_face_tiles("inpaint_texture", mesh);
  const int tiles = texture_tiles(mesh);
  if (texture.height != tiles * texture.width)
    throw RenderError("inpaint_texture: a mesh with " + std::to_string(tiles) +
                      " texture tiles needs a " + std::to_string(texture.width) + " x " +
                      std::to_string(tiles * texture.width) + " texture, got " +
                      std::to_string(texture.width) + " x " + std::to_string(texture.height));
}

// The initial per-texel sources of the "charts" method: views, chart texels still to fill, and
// the background.
std::vector<uint8_t> initial_sources(const std::vector<uint8_t>& known,
                                     const std::vector<uint8_t>& charts) {
  std::vector<uint8_t> source(known.size());
  tbb::parallel_for(size_t{0}, known.size(), [&](size_t i) {
    source[i] = static_cast<uint8_t>(known[i]    ? TexelSource::view
                                     : charts[i] ? TexelSource::filled
                                                 : TexelSource::background);
  });
  return source;
}

// The chart mask as [begin, end) runs, and back.
std::vector<uint32_t> chart_runs(const Raster& uv) {
  std::vector<uint32_t> runs;
  const size_t n = uv.pixel_count();
  for (size_t i = 0; i < n;) {
    if (!uv.face_id[i]) {
      ++i;
      continue;
    }
    const size_t begin = i;
    while (i < n && uv.face_id[i]) ++i;
    runs.push_back(static_cast<uint32_t>(begin));
    runs.push_back(static_cast<uint32_t>(i));
  }
  return runs;
}

std::vector<uint8_t> chart_mask(const std::vector<uint32_t>& runs, size_t texels) {
  if (runs.size() % 2) throw RenderError("inpaint_texture: the surface fill's chart runs are odd");
  std::vector<uint8_t> charts(texels, 0);
  uint32_t last = 0;
  for (size_t k = 0; k < runs.size(); k += 2) {
    if (runs[k] < last || runs[k] >= runs[k + 1] || runs[k + 1] > texels)
      throw RenderError("inpaint_texture: the surface fill's chart runs do not fit the texture");
    std::fill(charts.begin() + runs[k], charts.begin() + runs[k + 1], uint8_t{1});
    last = runs[k + 1];
  }
  return charts;
}

}  // namespace

SurfaceFillResult fill_unseen_surface(const mesh::Mesh& mesh, const image::Image& texture,
                                      const std::vector<uint8_t>& trust, const Raster& uv,
                                      const InpaintOptions& options, const mesh::Mesh* authored) {
  check_texture(texture, trust);
  check_uv(texture, &uv);
  check_tiles(mesh, texture);
  if (options.fill != "propagate" && options.fill != "harmonic" && options.fill != "none")
    throw RenderError("inpaint_texture: unknown fill \"" + options.fill + "\"");
  SurfaceFillResult out;
  out.size = texture.width;
  out.chart_runs = chart_runs(uv);
  if (!options.vertex_inpaint || !mesh.has_uvs() || options.fill == "none") return out;
  const size_t texels = trust.size();
  image::Image tex = texture;
  std::vector<uint8_t> known(trust.begin(), trust.end());
  std::vector<uint8_t> charts(texels);
  tbb::parallel_for(size_t{0}, texels, [&](size_t i) { charts[i] = uv.face_id[i] != 0; });
  std::vector<uint8_t> source = initial_sources(known, charts);
  if (authored) out.shared_texels = fill_from_authored_uvs(mesh, *authored, tex, known, uv, source);
  if (options.fill == "harmonic") {
    SurfaceFillOptions fill;
    fill.symmetry = options.symmetry;
    fill.max_iterations = options.max_iterations;
    SurfaceFillReport fr;
    fill_surface(mesh, tex, known, uv, source, fill, &fr);
    out.vertices_unreached = fr.unreached_vertices;
    out.mirrored_texels = fr.mirrored_texels;
    out.mirrored_vertices = fr.mirrored_vertices;
    out.symmetry_found = fr.plane.found;
    out.symmetry_error = fr.plane.error;
    out.fill_iterations = fr.iterations;
  } else {
    // Unpainted chart texels whose face has three coloured corners take the interpolated colour.
    std::vector<float> vertex_color;
    std::vector<uint8_t> vertex_known;
    propagate_vertex_colors(mesh, tex, known, vertex_color, vertex_known, out.vertices_unreached);
    for (size_t i = 0; i < texels; ++i) {
      if (known[i] || !uv.face_id[i]) continue;
      const mesh::Tri& corners = mesh.faces[static_cast<size_t>(uv.face_id[i] - 1)];
      if (!vertex_known[corners[0]] || !vertex_known[corners[1]] || !vertex_known[corners[2]])
        continue;
      float* q = tex.pixels.data() + i * 3;
      for (int c = 0; c < 3; ++c) {
        float v = 0.0f;
        for (int k = 0; k < 3; ++k) v += uv.bary[i * 3 + k] * vertex_color[corners[k] * 3 + c];
        q[c] = std::clamp(v, 0.0f, 1.0f);
      }
      known[i] = 1;
    }
  }
  // The filled texels in index order: counted per row, then written from each row's offset.
  const int w = texture.width, h = texture.height;
  std::vector<size_t> offset(static_cast<size_t>(h) + 1, 0);
  tbb::parallel_for(0, h, [&](int y) {
    size_t n = 0;
    for (size_t i = static_cast<size_t>(y) * w; i < static_cast<size_t>(y + 1) * w; ++i)
      n += known[i] && !trust[i];
    offset[static_cast<size_t>(y) + 1] = n;
  });
  for (size_t y = 0; y < static_cast<size_t>(h); ++y) offset[y + 1] += offset[y];
  const size_t n = offset.back();
  out.texels.resize(n);
  out.colors.resize(n * 3);
  out.sources.resize(n);
  tbb::parallel_for(0, h, [&](int y) {
    size_t k = offset[static_cast<size_t>(y)];
    for (size_t i = static_cast<size_t>(y) * w; i < static_cast<size_t>(y + 1) * w; ++i) {
      if (!known[i] || trust[i]) continue;
      out.texels[k] = static_cast<uint32_t>(i);
      std::copy_n(tex.pixels.begin() + i * 3, 3, out.colors.begin() + k * 3);
      out.sources[k++] = source[i];
    }
  });
  return out;
}

image::Image inpaint_texture(const mesh::Mesh& mesh, const image::Image& texture,
                             const std::vector<uint8_t>& trust, const Raster* uv_raster,
                             const InpaintOptions& options, InpaintReport* report) {
  check_texture(texture, trust);
  const bool reference = options.method == "reference";
  if (options.fill != "propagate" && options.fill != "harmonic" && options.fill != "none")
    throw RenderError("inpaint_texture: unknown fill \"" + options.fill + "\"");
  if (!reference && options.method != "charts")
    throw RenderError("inpaint_texture: unknown method \"" + options.method + "\"");
  check_tiles(mesh, texture);
  if (reference && texture.height != texture.width)
    throw RenderError(
        "inpaint_texture: the reference method fills one texture; a mesh with several "
        "materials (a texture each) needs the \"charts\" method");
  if (!reference) {
    check_uv(texture, uv_raster);
    const SurfaceFillResult filled = fill_unseen_surface(mesh, texture, trust, *uv_raster, options);
    return inpaint_texture(texture, trust, filled, options, report);
  }
  const size_t texels = trust.size();
  const int flags = options.algorithm == "telea" ? cv::INPAINT_TELEA : cv::INPAINT_NS;
  InpaintReport r;
  r.view_texels = count(trust);
  image::Image tex = texture;
  std::vector<uint8_t> known(trust.begin(), trust.end());
  if (options.vertex_inpaint && mesh.has_uvs())
    r.vertices_unreached =
        mesh::vertex_inpaint(mesh, tex, known, /*v_flipped=*/true).unreached_vertices;
  // Every unpainted texel, background included, goes through cv::inpaint on the 8-bit image.
  cv::Mat holes(texture.height, texture.width, CV_8U);
  for (size_t i = 0; i < texels; ++i) holes.data[i] = known[i] ? 0 : 255;
  r.vertex_texels = count(known) - r.view_texels;
  r.image_texels = static_cast<size_t>(cv::countNonZero(holes));
  cv::Mat filled;
  cv::inpaint(to_u8_truncated(tex), holes, filled, options.radius, flags);
  if (report) *report = r;
  return from_u8(filled);
}

namespace {

// The rest of the "charts" method on one square texture (a tile).
image::Image inpaint_square(image::Image texture, const std::vector<uint8_t>& trust,
                            const SurfaceFillResult& filled, const InpaintOptions& options,
                            InpaintReport* report) {
  const size_t texels = trust.size();
  const int flags = options.algorithm == "telea" ? cv::INPAINT_TELEA : cv::INPAINT_NS;

  InpaintReport r;
  r.view_texels = count(trust);
  image::Image& tex = texture;
  std::vector<uint8_t> known(trust.begin(), trust.end());
  const std::vector<uint8_t> charts = chart_mask(filled.chart_runs, texels);
  r.chart_texels = count(charts);
  std::vector<uint8_t> source = initial_sources(known, charts);
  for (size_t k = 0; k < filled.texels.size(); ++k) {
    const size_t i = filled.texels[k];
    if (i >= texels || known[i] || !charts[i])
      throw RenderError(
          "inpaint_texture: the surface fill does not match this texture (it fills texel " +
          std::to_string(i) + ", which is painted or outside the charts)");
    std::copy_n(filled.colors.begin() + k * 3, 3, tex.pixels.begin() + i * 3);
    known[i] = 1;
    source[i] = filled.sources[k];
  }
  r.vertices_unreached = filled.vertices_unreached;
  r.mirrored_texels = filled.mirrored_texels;
  r.mirrored_vertices = filled.mirrored_vertices;
  r.shared_texels = filled.shared_texels;
  r.symmetry_found = filled.symmetry_found;
  r.symmetry_error = filled.symmetry_error;
  r.fill_iterations = filled.fill_iterations;
  r.vertex_texels = filled.texels.size();
  // What is left inside the charts goes to OpenCV inpainting.
  cv::Mat holes(texture.height, texture.width, CV_8U);
  for (size_t i = 0; i < texels; ++i) holes.data[i] = (!known[i] && charts[i]) ? 255 : 0;
  r.image_texels = static_cast<size_t>(cv::countNonZero(holes));
  if (r.image_texels > 0 && r.image_texels < r.chart_texels) {
    // cv::inpaint's work follows the hole texels; crop to their bounding box plus the radius.
    const cv::Rect box = cv::boundingRect(holes);
    const int pad = static_cast<int>(std::ceil(options.radius)) + 2;
    const cv::Rect roi = (box + cv::Size(2 * pad, 2 * pad) - cv::Point(pad, pad)) &
                         cv::Rect(0, 0, texture.width, texture.height);
    // cv::inpaint reads every texel outside the holes as known, so unpainted background next to a
    // chart would bleed black in: give it the push-pull extrapolation of the painted texels first.
    image::Image prefilled = tex;
    push_pull_fill(prefilled, known);
    cv::Mat src(texture.height, texture.width, CV_32FC3, prefilled.pixels.data());
    cv::Mat src8;
    src(roi).convertTo(src8, CV_8UC3, 255.0);
    cv::Mat filled;
    cv::inpaint(src8, holes(roi), filled, options.radius, flags);
    for (int y = 0; y < roi.height; ++y)
      for (int x = 0; x < roi.width; ++x) {
        const size_t i = static_cast<size_t>(y + roi.y) * texture.width + (x + roi.x);
        if (!holes.data[i]) continue;
        const cv::Vec3b v = filled.at<cv::Vec3b>(y, x);
        float* q = tex.at(x + roi.x, y + roi.y);
        for (int c = 0; c < 3; ++c) q[c] = v[c] / 255.0f;
        known[i] = 1;
        source[i] = static_cast<uint8_t>(TexelSource::inpainted);
      }
  } else if (r.image_texels > 0) {
    // Nothing trusted inside the charts at all: nothing to inpaint from; push-pull fills below.
    r.image_texels = 0;
  }
  r.gutter_texels = dilate_rings(tex, known, source, options.gutter);
  push_pull_fill(tex, known);
  r.sources = std::move(source);
  if (report) *report = r;
  return tex;
}

// The part of a surface fill that lies in texels [begin, end), renumbered from begin.
SurfaceFillResult fill_slice(const SurfaceFillResult& filled, size_t begin, size_t end) {
  SurfaceFillResult out;
  out.size = filled.size;
  for (size_t k = 0; k < filled.texels.size(); ++k) {
    const size_t i = filled.texels[k];
    if (i < begin || i >= end) continue;
    out.texels.push_back(static_cast<uint32_t>(i - begin));
    out.colors.insert(out.colors.end(), filled.colors.begin() + k * 3,
                      filled.colors.begin() + k * 3 + 3);
    out.sources.push_back(filled.sources[k]);
  }
  for (size_t k = 0; k + 1 < filled.chart_runs.size(); k += 2) {
    const size_t b = std::max<size_t>(filled.chart_runs[k], begin);
    const size_t e = std::min<size_t>(filled.chart_runs[k + 1], end);
    if (b >= e) continue;
    out.chart_runs.push_back(static_cast<uint32_t>(b - begin));
    out.chart_runs.push_back(static_cast<uint32_t>(e - begin));
  }
  return out;
}

}  // namespace

image::Image inpaint_texture(image::Image texture, const std::vector<uint8_t>& trust,
                             const SurfaceFillResult& filled, const InpaintOptions& options,
                             InpaintReport* report) {
  check_texture(texture, trust);
  if (options.method != "charts")
    throw RenderError(
        "inpaint_texture: a surface fill done beforehand needs the \"charts\" method");
  if (filled.size != texture.width || filled.colors.size() != filled.texels.size() * 3 ||
      filled.sources.size() != filled.texels.size() || filled.chart_runs.size() % 2)
    throw RenderError("inpaint_texture: the surface fill was made for " +
                      std::to_string(filled.size) + " x " + std::to_string(filled.size) +
                      " texture tiles, this texture is " + std::to_string(texture.width) + " x " +
                      std::to_string(texture.height));
  const int w = texture.width, tiles = texture.height / w;
  if (tiles == 1) return inpaint_square(std::move(texture), trust, filled, options, report);
  // One texture per material: each tile is filled on its own, so no colour crosses from one
  // material's texture into another's.
  const size_t n = static_cast<size_t>(w) * w;
  InpaintReport r;
  r.sources.reserve(trust.size());
  for (int k = 0; k < tiles; ++k) {
    const size_t begin = n * static_cast<size_t>(k);
    image::Image tile(w, w, 3);
    std::copy_n(texture.pixels.begin() + static_cast<std::ptrdiff_t>(begin * 3), n * 3,
                tile.pixels.begin());
    const std::vector<uint8_t> tile_trust(trust.begin() + static_cast<std::ptrdiff_t>(begin),
                                          trust.begin() + static_cast<std::ptrdiff_t>(begin + n));
    InpaintReport part;
    tile = inpaint_square(std::move(tile), tile_trust, fill_slice(filled, begin, begin + n),
                          options, &part);
    std::copy(tile.pixels.begin(), tile.pixels.end(),
              texture.pixels.begin() + static_cast<std::ptrdiff_t>(begin * 3));
    r.chart_texels += part.chart_texels;
    r.view_texels += part.view_texels;
    r.vertex_texels += part.vertex_texels;
    r.image_texels += part.image_texels;
    r.gutter_texels += part.gutter_texels;
    r.sources.insert(r.sources.end(), part.sources.begin(), part.sources.end());
  }
  r.vertices_unreached = filled.vertices_unreached;
  r.mirrored_texels = filled.mirrored_texels;
  r.mirrored_vertices = filled.mirrored_vertices;
  r.shared_texels = filled.shared_texels;
  r.symmetry_found = filled.symmetry_found;
  r.symmetry_error = filled.symmetry_error;
  r.fill_iterations = filled.fill_iterations;
  if (report) *report = std::move(r);
  return texture;
}

}  // namespace gen3d::render
