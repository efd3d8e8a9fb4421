#include "render/maps.h"

#include <oneapi/tbb/blocked_range.h>
#include <oneapi/tbb/parallel_for.h>

#include <algorithm>
#include <cmath>
#include <string>

#include "mesh/normals.h"
#include "render/error.h"
#include "render/interpolate.h"

namespace gen3d::render {
namespace {

// Runs body(p) for every pixel index, rows in parallel.
template <class F>
void for_each_pixel(const Raster& r, F&& body) {
  tbb::parallel_for(tbb::blocked_range<int>(0, r.height, 16),
                    [&](const tbb::blocked_range<int>& rows) {
                      for (int y = rows.begin(); y < rows.end(); ++y) {
                        const size_t base = static_cast<size_t>(y) * r.width;
                        for (int x = 0; x < r.width; ++x) body(base + x);
                      }
                    });
}

void check_mesh_for_raster(const char* fn, const mesh::Mesh& mesh, const Raster& raster) {
  if (raster.face_id.size() != raster.pixel_count() ||
      raster.bary.size() != raster.pixel_count() * 3) {
    throw RenderError(std::string(fn) + ": raster buffers do not match its size");
  }
  const size_t max_id = raster.max_face_id();
  if (max_id > mesh.faces.size()) {
    throw RenderError(std::string(fn) + ": raster refers to face " + std::to_string(max_id) +
                      " but the mesh has " + std::to_string(mesh.faces.size()) +
                      " faces (raster of another mesh?)");
  }
}

std::vector<mesh::Vec3> normals_or_default(const mesh::Mesh& mesh,
                                           const std::vector<mesh::Vec3>& normals, const char* fn) {
  if (normals.empty()) return mesh::vertex_normals_face_mean(mesh);
  if (normals.size() != mesh.positions.size()) {
    throw RenderError(std::string(fn) + ": " + std::to_string(normals.size()) +
                      " vertex normals for " + std::to_string(mesh.positions.size()) + " vertices");
  }
  return normals;
}

// Interpolates per-vertex attributes (indexed through mesh.faces) into an H x W x 3 image,
// transforming covered values with enc(v) and filling `bg` elsewhere.
template <class Enc>
image::Image vertex_attr_image(const Raster& r, std::span<const mesh::Vec3> attr,
                               std::span<const mesh::Tri> corners, float bg, Enc&& enc) {
  image::Image img(r.width, r.height, 3);
  for_each_pixel(r, [&](size_t p) {
    float* dst = img.pixels.data() + p * 3;
    const int32_t id = r.face_id[p];
    if (id == 0) {
      dst[0] = dst[1] = dst[2] = bg;
      return;
    }
    const mesh::Vec3 v = interpolate_pixel<3>(&r.bary[p * 3], attr, corners[id - 1]);
    for (int c = 0; c < 3; ++c) dst[c] = enc(v[c]);
  });
  return img;
}

inline uint8_t quantize_u8(float v) {
  const float s = v * 255.0f;
  return !(s > 0.0f) ? 0 : (s >= 255.0f ? 255 : static_cast<uint8_t>(s));
}

// As vertex_attr_image, quantized to 8 bits (trunc(255 * v)) without a float image in between.
template <class Enc>
std::vector<uint8_t> vertex_attr_image_u8(const Raster& r, std::span<const mesh::Vec3> attr,
                                          std::span<const mesh::Tri> corners, float bg, Enc&& enc) {
  std::vector<uint8_t> img(r.pixel_count() * 3);
  const uint8_t bg8 = quantize_u8(bg);
  for_each_pixel(r, [&](size_t p) {
    uint8_t* dst = img.data() + p * 3;
    const int32_t id = r.face_id[p];
    if (id == 0) {
      dst[0] = dst[1] = dst[2] = bg8;
      return;
    }
    const mesh::Vec3 v = interpolate_pixel<3>(&r.bary[p * 3], attr, corners[id - 1]);
    for (int c = 0; c < 3; ++c) dst[c] = quantize_u8(enc(v[c]));
  });
  return img;
}

std::vector<mesh::Vec3> position_attr(const mesh::Mesh& mesh, float scale_factor) {
  if (!(scale_factor > 0.0f)) throw RenderError("position_map: scale_factor must be > 0");
  std::vector<mesh::Vec3> attr(mesh.positions.size());
  for (size_t i = 0; i < attr.size(); ++i) {
    for (int c = 0; c < 3; ++c) attr[i][c] = 0.5f - mesh.positions[i][c] / scale_factor;
  }
  return attr;
}

}  // namespace

std::vector<uint8_t> normal_map_u8(const mesh::Mesh& mesh, const Raster& raster,
                                   const std::vector<mesh::Vec3>& vertex_normals) {
  check_mesh_for_raster("normal_map_u8", mesh, raster);
  const std::vector<mesh::Vec3> n = normals_or_default(mesh, vertex_normals, "normal_map_u8");
  return vertex_attr_image_u8(raster, n, mesh.faces, 1.0f,
                              [](float v) { return (v + 1.0f) * 0.5f; });
}

std::vector<uint8_t> position_map_u8(const mesh::Mesh& mesh, const Raster& raster,
                                     float scale_factor) {
  check_mesh_for_raster("position_map_u8", mesh, raster);
  return vertex_attr_image_u8(raster, position_attr(mesh, scale_factor), mesh.faces, 1.0f,
                              [](float v) { return v; });
}

image::Image normal_map(const mesh::Mesh& mesh, const Raster& raster,
                        const std::vector<mesh::Vec3>& vertex_normals) {
  check_mesh_for_raster("normal_map", mesh, raster);
  const std::vector<mesh::Vec3> n = normals_or_default(mesh, vertex_normals, "normal_map");
  return vertex_attr_image(raster, n, mesh.faces, 1.0f, [](float v) { return (v + 1.0f) * 0.5f; });
}

image::Image position_map(const mesh::Mesh& mesh, const Raster& raster, float scale_factor) {
  check_mesh_for_raster("position_map", mesh, raster);
  return vertex_attr_image(raster, position_attr(mesh, scale_factor), mesh.faces, 1.0f,
                           [](float v) { return v; });
}

image::Image depth_map(const Raster& raster) {
  image::Image img(raster.width, raster.height, 1);
  for_each_pixel(
      raster, [&](size_t p) { img.pixels[p] = raster.face_id[p] != 0 ? raster.depth[p] : 1.0f; });
  return img;
}

image::Image coverage_mask(const Raster& raster) {
  image::Image img(raster.width, raster.height, 1);
  for_each_pixel(raster, [&](size_t p) { img.pixels[p] = raster.face_id[p] != 0 ? 1.0f : 0.0f; });
  return img;
}

void sample_bilinear(const image::Image& image, float x, float y, float* out) {
  const int w = image.width, h = image.height, ch = image.channels;
  x = std::clamp(x, 0.0f, static_cast<float>(w - 1));
  y = std::clamp(y, 0.0f, static_cast<float>(h - 1));
  const int x0 = std::min(static_cast<int>(x), std::max(w - 2, 0));
  const int y0 = std::min(static_cast<int>(y), std::max(h - 2, 0));
  const int x1 = std::min(x0 + 1, w - 1), y1 = std::min(y0 + 1, h - 1);
  const float fx = x - x0, fy = y - y0;
  const float* p00 = image.at(x0, y0);
  const float* p01 = image.at(x1, y0);
  const float* p10 = image.at(x0, y1);
  const float* p11 = image.at(x1, y1);
  for (int c = 0; c < ch; ++c) {
    const float top = p00[c] + (p01[c] - p00[c]) * fx;
    const float bottom = p10[c] + (p11[c] - p10[c]) * fx;
    out[c] = top + (bottom - top) * fy;
  }
}

void sample_bicubic(const image::Image& image, float x, float y, float* out) {
  const int w = image.width, h = image.height, ch = image.channels;
  x = std::clamp(x, 0.0f, static_cast<float>(w - 1));
  y = std::clamp(y, 0.0f, static_cast<float>(h - 1));
  const int x0 = static_cast<int>(std::floor(x)), y0 = static_cast<int>(std::floor(y));
  const float fx = x - x0, fy = y - y0;
  // Catmull-Rom weights for the taps at offsets -1, 0, 1, 2.
  const auto weights = [](float t, float wt[4]) {
    const float t2 = t * t, t3 = t2 * t;
    wt[0] = 0.5f * (-t3 + 2 * t2 - t);
    wt[1] = 0.5f * (3 * t3 - 5 * t2 + 2);
    wt[2] = 0.5f * (-3 * t3 + 4 * t2 + t);
    wt[3] = 0.5f * (t3 - t2);
  };
  float wx[4], wy[4];
  weights(fx, wx);
  weights(fy, wy);
  for (int c = 0; c < ch; ++c) {
    float sum = 0.0f, lo = 1e30f, hi = -1e30f;
    for (int j = 0; j < 4; ++j) {
      const int yy = std::clamp(y0 - 1 + j, 0, h - 1);
      float row = 0.0f;
      for (int i = 0; i < 4; ++i) {
        const float v = image.at(std::clamp(x0 - 1 + i, 0, w - 1), yy)[c];
        row += wx[i] * v;
        lo = std::min(lo, v);
        hi = std::max(hi, v);
      }
      sum += wy[j] * row;
    }
    out[c] = std::clamp(sum, lo, hi);
  }
}

namespace {

// Where each face's base colour comes from: a texture, the vertex colours or a constant colour.
struct FaceColorSource {
  const image::Image* texture = nullptr;
  bool vertex_colors = false;
  mesh::Vec4 color{1, 1, 1, 1};
};

void check_albedo_texture(const image::Image& tex) {
  if (tex.channels < 3) {
    throw RenderError("albedo_map: texture has " + std::to_string(tex.channels) +
                      " channels, expected 3 or 4");
  }
}

// One source per material (or one for the whole mesh), so the per-pixel loop only indexes.
std::vector<FaceColorSource> color_sources(const mesh::Mesh& mesh) {
  const bool colors = mesh.colors.size() == mesh.positions.size();
  const auto usable = [&](const auto& tex) { return tex && !tex->empty() && mesh.has_uvs(); };
  if (!mesh.has_materials()) {
    if (usable(mesh.texture)) {
      check_albedo_texture(*mesh.texture);
      return {FaceColorSource{mesh.texture.get(), false, {}}};
    }
    if (!colors) {
      throw RenderError("albedo_map: the mesh has neither a texture with UVs nor vertex colours");
    }
    return {FaceColorSource{nullptr, true, {}}};
  }
  if (mesh.face_materials.size() != mesh.faces.size()) {
    throw RenderError("albedo_map: face_materials has " +
                      std::to_string(mesh.face_materials.size()) + " entries for " +
                      std::to_string(mesh.faces.size()) + " faces");
  }
  std::vector<FaceColorSource> sources;
  for (const mesh::Material& m : mesh.materials) {
    FaceColorSource s{nullptr, false, m.base_color};
    if (usable(m.texture)) {
      check_albedo_texture(*m.texture);
      s.texture = m.texture.get();
    } else {
      s.vertex_colors = colors;
    }
    sources.push_back(s);
  }
  for (uint32_t m : mesh.face_materials) {
    if (m >= sources.size()) throw RenderError("albedo_map: a face's material is out of range");
  }
  return sources;
}

// A pixel whose centre lies exactly on an edge two faces share belongs to neither in the
// reference's float test, so what lies behind shows through a one-pixel crack along the seam (the
// diagonal of every quad seen head-on). An albedo render is a picture of the surface: such a
// pixel takes the mean colour of the two pixels across the crack, when both show faces that share
// a corner and lie nearer than it. The rasters stay as they are (bit-exact with the reference).
void close_seam_cracks(const mesh::Mesh& mesh, const Raster& raster, image::Image& img) {
  const int w = raster.width, h = raster.height;
  const auto share_corner = [&](int32_t a, int32_t b) {
    if (a == b) return true;
    const mesh::Tri& fa = mesh.faces[size_t(a - 1)];
    const mesh::Tri& fb = mesh.faces[size_t(b - 1)];
    for (uint32_t i : fa)
      for (uint32_t j : fb)
        if (i == j || mesh.positions[i] == mesh.positions[j]) return true;
    return false;
  };
  // Found row by row in parallel, painted afterwards: a crack's colour is read from the picture
  // as rendered. A crack pixel shows another face than the pixels on both sides of it, so most
  // pixels are passed over on their face ids alone.
  struct Crack {
    size_t pixel;
    float color[3];
  };
  std::vector<std::vector<Crack>> rows(static_cast<size_t>(h));
  tbb::parallel_for(0, h, [&](int y) {
    for (int x = 0; x < w; ++x) {
      const size_t p = size_t(y) * w + x;
      const int32_t id = raster.face_id[p];
      // Across the crack: left and right, or above and below.
      for (const auto& [dx, dy] : {std::pair{1, 0}, std::pair{0, 1}}) {
        if (x - dx < 0 || y - dy < 0 || x + dx >= w || y + dy >= h) continue;
        const size_t a = size_t(y - dy) * w + (x - dx), b = size_t(y + dy) * w + (x + dx);
        const int32_t fa = raster.face_id[a], fb = raster.face_id[b];
        if (fa == 0 || fb == 0 || fa == id || fb == id) continue;
        if (id != 0 && raster.depth[p] <= std::max(raster.depth[a], raster.depth[b])) continue;
        if (!share_corner(fa, fb)) continue;
        Crack c{p, {}};
        for (int k = 0; k < 3; ++k)
          c.color[k] = 0.5f * (img.pixels[a * 3 + k] + img.pixels[b * 3 + k]);
        rows[size_t(y)].push_back(c);
        break;
      }
    }
  });
  for (const auto& row : rows)
    for (const Crack& c : row) std::copy_n(c.color, 3, img.pixels.begin() + c.pixel * 3);
}

}  // namespace

image::Image albedo_map(const mesh::Mesh& mesh, const Raster& raster, float background) {
  check_mesh_for_raster("albedo_map", mesh, raster);
  const std::vector<FaceColorSource> sources = color_sources(mesh);
  image::Image img(raster.width, raster.height, 3);
  for_each_pixel(raster, [&](size_t p) {
    float* dst = img.pixels.data() + p * 3;
    const int32_t id = raster.face_id[p];
    if (id == 0) {
      dst[0] = dst[1] = dst[2] = background;
      return;
    }
    const size_t face = size_t(id - 1);
    const FaceColorSource& src = sources[mesh.has_materials() ? mesh.face_materials[face] : 0];
    const float* b = &raster.bary[p * 3];
    if (src.texture) {
      const image::Image& tex = *src.texture;
      const auto uv =
          interpolate_pixel<2>(b, std::span<const mesh::Vec2>(mesh.uvs), mesh.uv_faces[face]);
      float s[4];
      // UVs outside [0, 1] repeat, as glTF's default sampler and most OBJ viewers do.
      const auto wrap = [](float t) { return t >= 0.0f && t <= 1.0f ? t : t - std::floor(t); };
      sample_bilinear(tex, wrap(uv[0]) * (tex.width - 1), wrap(uv[1]) * (tex.height - 1), s);
      dst[0] = s[0];
      dst[1] = s[1];
      dst[2] = s[2];
    } else if (src.vertex_colors) {
      const auto c =
          interpolate_pixel<4>(b, std::span<const mesh::Vec4>(mesh.colors), mesh.faces[face]);
      dst[0] = c[0];
      dst[1] = c[1];
      dst[2] = c[2];
    } else {
      dst[0] = src.color[0];
      dst[1] = src.color[1];
      dst[2] = src.color[2];
    }
  });
  close_seam_cracks(mesh, raster, img);
  return img;
}

image::Image texel_position_map(const mesh::Mesh& mesh, const Raster& uv_raster) {
  check_mesh_for_raster("texel_position_map", mesh, uv_raster);
  return vertex_attr_image(uv_raster, mesh.positions, mesh.faces, 0.0f, [](float v) { return v; });
}

image::Image texel_normal_map(const mesh::Mesh& mesh, const Raster& uv_raster,
                              const std::vector<mesh::Vec3>& vertex_normals) {
  check_mesh_for_raster("texel_normal_map", mesh, uv_raster);
  const std::vector<mesh::Vec3> n = normals_or_default(mesh, vertex_normals, "texel_normal_map");
  return vertex_attr_image(uv_raster, n, mesh.faces, 0.0f, [](float v) { return v; });
}

std::vector<uint8_t> to_u8(const image::Image& image) {
  std::vector<uint8_t> out(image.pixels.size());
  for (size_t i = 0; i < out.size(); ++i) out[i] = quantize_u8(image.pixels[i]);
  return out;
}

}  // namespace gen3d::render
