#include "render/rasterizer.h"

#include <oneapi/tbb/blocked_range.h>
#include <oneapi/tbb/parallel_for.h>

#include <algorithm>
#include <cmath>
#include <memory>
#include <string>
#include <vector>

#include "render/error.h"

// Bit parity with the reference needs every float operation exactly as written: this file is
// compiled with -ffp-contract=off (no FMA contraction), see render/CMakeLists.txt.

namespace gen3d::render {
namespace {

constexpr uint64_t kMaxInt = 2147483647ull;
// The reference's initial key: decodes (key % kMaxInt) to kMaxInt - 1, "no face".
constexpr uint64_t kBackgroundKey = kMaxInt * kMaxInt + (kMaxInt - 1);
constexpr float kDepthQuant = 262144.0f;  // 2 << 17

// A vertex in pixel coordinates as the reference computes it (x, y), its depth mapped to [0, 1]
// (z) and its clip w (for the perspective correction of the final barycentrics).
struct ScreenVertex {
  float x, y, z, w;
};

ScreenVertex to_screen(const mesh::Vec4& c, float wm1, float hm1) {
  ScreenVertex s;
  s.x = (c[0] / c[3] * 0.5f + 0.5f) * wm1 + 0.5f;
  s.y = (0.5f + 0.5f * c[1] / c[3]) * hm1 + 0.5f;
  s.z = c[2] / c[3] * 0.49999f + 0.5f;
  s.w = c[3];
  return s;
}

// Everything the per-pixel loops need about one triangle.
struct FaceSetup {
  float ax, ay;     // corner 0 (pixel coordinates)
  float cax, cay;   // corner 2 - corner 0
  float bax, bay;   // corner 1 - corner 0
  float inv;        // float(1.0 / double(signed area)), the reference's tri_inv
  float z0, z1, z2; // depths of the corners
  float w0, w1, w2; // clip w of the corners
  int x0, x1;       // visited columns [x0, x1), clipped to the image; x0 >= x1: not drawn
  int y0, y1;       // visited rows [y0, y1)
};

// Visited range of the reference loop `for (int p = lo; p < hi + 1; ++p)` clipped to [0, n).
void visit_range(float lo, float hi, int n, int& begin, int& end) {
  // trunc(lo) only matters for lo >= 0: negative starts are clipped to 0 anyway.
  begin = lo >= 0.0f ? (lo < static_cast<float>(n) ? static_cast<int>(lo) : n) : 0;
  const float stop = hi + 1.0f;  // float, as in the reference comparison
  if (!(stop > 0.0f)) {
    end = 0;
  } else if (stop >= static_cast<float>(n)) {
    end = n;
  } else {
    end = static_cast<int>(std::ceil(stop));  // first integer p with float(p) >= stop
  }
}

FaceSetup setup_face(const ScreenVertex& a, const ScreenVertex& b, const ScreenVertex& c, int width,
                     int height) {
  FaceSetup f;
  f.ax = a.x;
  f.ay = a.y;
  f.cax = c.x - a.x;
  f.cay = c.y - a.y;
  f.bax = b.x - a.x;
  f.bay = b.y - a.y;
  f.z0 = a.z;
  f.z1 = b.z;
  f.z2 = c.z;
  f.w0 = a.w;
  f.w1 = b.w;
  f.w2 = c.w;
  f.x0 = f.x1 = f.y0 = f.y1 = 0;
  const float area = f.cax * f.bay - f.bax * f.cay;
  const bool finite = std::isfinite(a.x) && std::isfinite(a.y) && std::isfinite(b.x) &&
                      std::isfinite(b.y) && std::isfinite(c.x) && std::isfinite(c.y);
  if (area == 0.0f || !finite) return f;  // never drawn (the reference returns bary = -1)
  f.inv = static_cast<float>(1.0 / static_cast<double>(area));
  visit_range(std::min(a.x, std::min(b.x, c.x)), std::max(a.x, std::max(b.x, c.x)), width, f.x0,
              f.x1);
  visit_range(std::min(a.y, std::min(b.y, c.y)), std::max(a.y, std::max(b.y, c.y)), height, f.y0,
              f.y1);
  if (f.x0 >= f.x1 || f.y0 >= f.y1) f.x0 = f.x1 = f.y0 = f.y1 = 0;
  return f;
}

bool drawn(const FaceSetup& f) { return f.x0 < f.x1; }

// Reference barycentrics at pixel centre (px, py). Returns alpha; beta/gamma through out-params.
//   beta  = A(a, p, c) * inv,  gamma = A(a, b, p) * inv,  alpha = (1.0 - beta) - gamma in double.
inline float barycentric(const FaceSetup& f, float px, float py, float& beta, float& gamma) {
  const float dx = px - f.ax;
  const float dy = py - f.ay;
  beta = (f.cax * dy - dx * f.cay) * f.inv;
  gamma = (dx * f.bay - f.bax * dy) * f.inv;
  return static_cast<float>((1.0 - static_cast<double>(beta)) - static_cast<double>(gamma));
}

inline bool in_unit(float v) { return v >= 0.0f && v <= 1.0f; }

// The fragment key, or kBackgroundKey when the fragment is dropped (depth < 0, or NaN).
inline uint64_t fragment_key(float depth, uint32_t face) {
  if (!(depth >= 0.0f)) return kBackgroundKey;
  const float q = depth * kDepthQuant;
  // The reference converts with (int); beyond INT_MAX that is undefined, we saturate.
  const uint64_t zq = q < 2147483520.0f ? static_cast<uint64_t>(static_cast<int>(q)) : kMaxInt;
  return zq * kMaxInt + (face + 1ull);
}

// Writes the reference's second pass (barycentrics recomputed for the winner, divided by w and
// renormalized) for one pixel.
inline void resolve_pixel(const FaceSetup* setups, uint64_t key, float px, float py,
                          int32_t* face_out, float* bary_out, float* depth_out) {
  if (key == kBackgroundKey) {
    *face_out = 0;
    bary_out[0] = bary_out[1] = bary_out[2] = 0.0f;
    *depth_out = 0.0f;
    return;
  }
  const uint64_t id = key % kMaxInt;
  *face_out = static_cast<int32_t>(id);
  const FaceSetup& f = setups[id - 1];
  float beta, gamma;
  const float alpha = barycentric(f, px, py, beta, gamma);
  *depth_out = alpha * f.z0 + beta * f.z1 + gamma * f.z2;
  const float b0 = alpha / f.w0, b1 = beta / f.w1, b2 = gamma / f.w2;
  const float s = 1.0f / (b0 + b1 + b2);
  bary_out[0] = b0 * s;
  bary_out[1] = b1 * s;
  bary_out[2] = b2 * s;
}

// Min-key rasterization of one face into a key buffer covering [kx0, kx1) x [ky0, ky1) with row
// stride `stride`, restricted to that window.
inline void raster_face(const FaceSetup& f, uint32_t face, int kx0, int ky0, int kx1, int ky1,
                        uint64_t* keys, int stride) {
  const int xs = std::max(f.x0, kx0), xe = std::min(f.x1, kx1);
  const int ys = std::max(f.y0, ky0), ye = std::min(f.y1, ky1);
  for (int y = ys; y < ye; ++y) {
    const float py = static_cast<float>(y) + 0.5f;
    const float dy = py - f.ay;
    const float tb = f.cax * dy;  // (c.x - a.x)(p.y - a.y)
    const float tg = f.bax * dy;  // (b.x - a.x)(p.y - a.y)
    uint64_t* row = keys + static_cast<ptrdiff_t>(y - ky0) * stride - kx0;
    for (int x = xs; x < xe; ++x) {
      const float dx = (static_cast<float>(x) + 0.5f) - f.ax;
      const float beta = (tb - dx * f.cay) * f.inv;
      const float gamma = (dx * f.bay - tg) * f.inv;
      const float alpha =
          static_cast<float>((1.0 - static_cast<double>(beta)) - static_cast<double>(gamma));
      if (!(in_unit(alpha) && in_unit(beta) && in_unit(gamma))) continue;
      const float depth = alpha * f.z0 + beta * f.z1 + gamma * f.z2;
      const uint64_t key = fragment_key(depth, face);
      if (key < row[x]) row[x] = key;
    }
  }
}

void check_inputs(const char* fn, std::span<const mesh::Tri> triangles, size_t vertex_count,
                  int width, int height) {
  if (width <= 0 || height <= 0 || width > 65536 || height > 65536) {
    throw RenderError(std::string(fn) + ": invalid raster size " + std::to_string(width) + "x" +
                      std::to_string(height) + " (expected 1..65536)");
  }
  for (size_t f = 0; f < triangles.size(); ++f) {
    for (uint32_t v : triangles[f]) {
      if (v >= vertex_count) {
        throw RenderError(std::string(fn) + ": face " + std::to_string(f) + " uses vertex " +
                          std::to_string(v) + " but there are only " +
                          std::to_string(vertex_count) + " vertices");
      }
    }
  }
}

std::vector<FaceSetup> setup_faces(std::span<const ScreenVertex> verts,
                                   std::span<const mesh::Tri> triangles, int width, int height,
                                   bool parallel) {
  std::vector<FaceSetup> setups(triangles.size());
  auto body = [&](const tbb::blocked_range<size_t>& r) {
    for (size_t i = r.begin(); i < r.end(); ++i) {
      const mesh::Tri& t = triangles[i];
      setups[i] = setup_face(verts[t[0]], verts[t[1]], verts[t[2]], width, height);
    }
  };
  const tbb::blocked_range<size_t> all(0, triangles.size(), 4096);
  if (parallel) {
    tbb::parallel_for(all, body);
  } else {
    body(all);
  }
  return setups;
}

void allocate(Raster& r, int width, int height) {
  r.width = width;
  r.height = height;
  const size_t n = r.pixel_count();
  r.face_id.resize(n);
  r.bary.resize(n * 3);
  r.depth.resize(n);
}

Raster rasterize_screen(std::span<const ScreenVertex> verts, std::span<const mesh::Tri> triangles,
                        int width, int height, const RasterOptions& options) {
  if (options.tile_size < 8 || options.tile_size > 1024) {
    throw RenderError("rasterize: tile_size " + std::to_string(options.tile_size) +
                      " out of range 8..1024");
  }
  const std::vector<FaceSetup> setups =
      setup_faces(verts, triangles, width, height, options.parallel);

  // Bin faces into tiles (CSR: offsets per tile, face indices in ascending order).
  const int ts = options.tile_size;
  const int tiles_x = (width + ts - 1) / ts, tiles_y = (height + ts - 1) / ts;
  const size_t tile_count = static_cast<size_t>(tiles_x) * tiles_y;
  std::vector<uint32_t> offsets(tile_count + 1, 0);
  for (const FaceSetup& f : setups) {
    if (!drawn(f)) continue;
    for (int ty = f.y0 / ts; ty <= (f.y1 - 1) / ts; ++ty) {
      for (int tx = f.x0 / ts; tx <= (f.x1 - 1) / ts; ++tx) ++offsets[ty * tiles_x + tx + 1];
    }
  }
  for (size_t t = 0; t < tile_count; ++t) offsets[t + 1] += offsets[t];
  std::vector<uint32_t> bins(offsets[tile_count]);
  {
    std::vector<uint32_t> fill(offsets.begin(), offsets.end() - 1);
    for (size_t i = 0; i < setups.size(); ++i) {
      const FaceSetup& f = setups[i];
      if (!drawn(f)) continue;
      for (int ty = f.y0 / ts; ty <= (f.y1 - 1) / ts; ++ty) {
        for (int tx = f.x0 / ts; tx <= (f.x1 - 1) / ts; ++tx) {
          bins[fill[ty * tiles_x + tx]++] = static_cast<uint32_t>(i);
        }
      }
    }
  }

  Raster out;
  allocate(out, width, height);
  auto body = [&](const tbb::blocked_range<size_t>& range) {
    std::unique_ptr<uint64_t[]> keys(new uint64_t[static_cast<size_t>(ts) * ts]);
    for (size_t t = range.begin(); t < range.end(); ++t) {
      const int tx0 = static_cast<int>(t % tiles_x) * ts, ty0 = static_cast<int>(t / tiles_x) * ts;
      const int tx1 = std::min(tx0 + ts, width), ty1 = std::min(ty0 + ts, height);
      const int tw = tx1 - tx0;
      std::fill(keys.get(), keys.get() + static_cast<size_t>(tw) * (ty1 - ty0), kBackgroundKey);
      for (uint32_t k = offsets[t]; k < offsets[t + 1]; ++k) {
        const uint32_t face = bins[k];
        raster_face(setups[face], face, tx0, ty0, tx1, ty1, keys.get(), tw);
      }
      for (int y = ty0; y < ty1; ++y) {
        const uint64_t* krow = keys.get() + static_cast<size_t>(y - ty0) * tw;
        const size_t base = static_cast<size_t>(y) * width;
        const float py = static_cast<float>(y) + 0.5f;
        for (int x = tx0; x < tx1; ++x) {
          resolve_pixel(setups.data(), krow[x - tx0], static_cast<float>(x) + 0.5f, py,
                        &out.face_id[base + x], &out.bary[(base + x) * 3], &out.depth[base + x]);
        }
      }
    }
  };
  const tbb::blocked_range<size_t> all(0, tile_count, 1);
  if (options.parallel) {
    tbb::parallel_for(all, body);
  } else {
    body(all);
  }
  return out;
}

std::vector<ScreenVertex> clip_to_screen(std::span<const mesh::Vec4> clip, int width, int height) {
  const float wm1 = static_cast<float>(width - 1), hm1 = static_cast<float>(height - 1);
  std::vector<ScreenVertex> verts(clip.size());
  for (size_t i = 0; i < clip.size(); ++i) verts[i] = to_screen(clip[i], wm1, hm1);
  return verts;
}

}  // namespace

Raster rasterize(std::span<const mesh::Vec4> clip, std::span<const mesh::Tri> triangles, int width,
                 int height, const RasterOptions& options) {
  check_inputs("rasterize", triangles, clip.size(), width, height);
  const std::vector<ScreenVertex> verts = clip_to_screen(clip, width, height);
  return rasterize_screen(verts, triangles, width, height, options);
}

Raster rasterize(const mesh::Mesh& mesh, const Camera& camera, int width, int height,
                 const RasterOptions& options) {
  const std::vector<mesh::Vec4> clip = clip_positions(mesh.positions, camera);
  return rasterize(clip, mesh.faces, width, height, options);
}

Raster rasterize_reference(std::span<const mesh::Vec4> clip, std::span<const mesh::Tri> triangles,
                           int width, int height) {
  check_inputs("rasterize_reference", triangles, clip.size(), width, height);
  const std::vector<ScreenVertex> verts = clip_to_screen(clip, width, height);
  const size_t n = static_cast<size_t>(width) * height;
  std::vector<uint64_t> zbuffer(n, kBackgroundKey);
  std::vector<FaceSetup> setups(triangles.size());
  for (size_t i = 0; i < triangles.size(); ++i) {
    const mesh::Tri& t = triangles[i];
    const ScreenVertex &a = verts[t[0]], &b = verts[t[1]], &c = verts[t[2]];
    setups[i] = setup_face(a, b, c, width, height);
    // The reference loop, unclipped bounds: for (px = x_min; px < x_max + 1; ++px), skip outside.
    const float area = (c.x - a.x) * (b.y - a.y) - (b.x - a.x) * (c.y - a.y);
    if (area == 0.0f || !drawn(setups[i])) continue;
    const FaceSetup& f = setups[i];
    for (int px = f.x0; px < f.x1; ++px) {
      for (int py = f.y0; py < f.y1; ++py) {
        float beta, gamma;
        const float alpha = barycentric(f, static_cast<float>(px) + 0.5f,
                                        static_cast<float>(py) + 0.5f, beta, gamma);
        if (!(in_unit(alpha) && in_unit(beta) && in_unit(gamma))) continue;
        const float depth = alpha * a.z + beta * b.z + gamma * c.z;
        const uint64_t key = fragment_key(depth, static_cast<uint32_t>(i));
        uint64_t& z = zbuffer[static_cast<size_t>(py) * width + px];
        z = std::min(z, key);
      }
    }
  }
  Raster out;
  allocate(out, width, height);
  for (size_t p = 0; p < n; ++p) {
    resolve_pixel(setups.data(), zbuffer[p], static_cast<float>(p % width) + 0.5f,
                  static_cast<float>(p / width) + 0.5f, &out.face_id[p], &out.bary[p * 3],
                  &out.depth[p]);
  }
  return out;
}

Raster rasterize_uv(const mesh::Mesh& mesh, int width, int height, const RasterOptions& options) {
  if (!mesh.has_uvs() || mesh.uv_faces.size() != mesh.faces.size()) {
    throw RenderError("rasterize_uv: the mesh has no UVs (uv_faces must have one entry per face)");
  }
  check_inputs("rasterize_uv", mesh.uv_faces, mesh.uvs.size(), width, height);
  const float wm1 = static_cast<float>(width - 1), hm1 = static_cast<float>(height - 1);
  std::vector<ScreenVertex> verts(mesh.uvs.size());
  for (size_t i = 0; i < verts.size(); ++i) {
    verts[i] = {mesh.uvs[i][0] * wm1 + 0.5f, mesh.uvs[i][1] * hm1 + 0.5f, 0.5f, 1.0f};
  }
  return rasterize_screen(verts, mesh.uv_faces, width, height, options);
}

}  // namespace gen3d::render
