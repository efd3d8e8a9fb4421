#include "render/rasterizer.h"

#include <oneapi/tbb/blocked_range.h>
#include <oneapi/tbb/parallel_for.h>

#include <algorithm>
#include <cmath>
#include <cstring>
#include <memory>
#include <string>
#include <vector>

#include "render/error.h"
#include "render/texture_tiles.h"

// Bit parity with the reference needs every float operation exactly as written: this file is
// compiled with -ffp-contract=off (no FMA contraction), see render/CMakeLists.txt.

namespace gen3d::render {
namespace {

constexpr uint64_t kMaxInt = 2147483647ull;
// The reference's initial key: decodes (key % kMaxInt) to kMaxInt - 1, "no face".
constexpr uint64_t kBackgroundKey = kMaxInt * kMaxInt + (kMaxInt - 1);
constexpr float kDepthQuant = 262144.0f;  // 2 << 17
constexpr double kFlatSlope = 1e-12;      // |d lambda / dX| below this: constant along a row

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
  float ax, ay;      // corner 0 (pixel coordinates)
  float cax, cay;    // corner 2 - corner 0
  float bax, bay;    // corner 1 - corner 0
  float inv;         // float(1.0 / double(signed area)), the reference's tri_inv
  float z0, z1, z2;  // depths of the corners
  float w0, w1, w2;  // clip w of the corners
  int x0, x1;        // visited columns [x0, x1), clipped to the image; x0 >= x1: not drawn
  int y0, y1;        // visited rows [y0, y1)
  // Row-span culling (fast path only): barycentric lambda_k(X) = p_k(row) + q_k * X in float64,
  // and margins m_k far above the float32 rounding error of the exact test, so every pixel the
  // exact test could accept lies inside the conservative span where all lambda_k >= -m_k.
  double inv_area;  // 1 / area in float64
  double mb, mg, ma;
  double qb, qg, qa;     // d lambda / dX of beta, gamma, alpha
  double rqb, rqg, rqa;  // 1 / q (0 where q is flat)
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
  if (f.x0 >= f.x1 || f.y0 >= f.y1) {
    f.x0 = f.x1 = f.y0 = f.y1 = 0;
    return f;
  }
  f.inv_area = 1.0 / static_cast<double>(area);
  const double w = std::max(a.x, std::max(b.x, c.x)) - std::min(a.x, std::min(b.x, c.x)) + 2.0;
  const double h = std::max(a.y, std::max(b.y, c.y)) - std::min(a.y, std::min(b.y, c.y)) + 2.0;
  const double u = 0x1p-18, ia = std::abs(f.inv_area);
  f.mb = u * (std::abs(f.cax) * h + w * std::abs(f.cay)) * ia + u;
  f.mg = u * (std::abs(f.bax) * h + w * std::abs(f.bay)) * ia + u;
  f.ma = f.mb + f.mg + u;
  f.qb = -f.cay * f.inv_area;
  f.qg = f.bay * f.inv_area;
  f.qa = -f.qb - f.qg;
  const auto reciprocal = [](double q) { return std::abs(q) > kFlatSlope ? 1.0 / q : 0.0; };
  f.rqb = reciprocal(f.qb);
  f.rqg = reciprocal(f.qg);
  f.rqa = reciprocal(f.qa);
  return f;
}

// Narrows [lo, hi] (pixel-centre X) to where lambda(X) = p + q * X >= -m (rq = 1 / q, or 0 when
// |q| <= kFlatSlope). Returns false if empty. The pixel expansion of row_span absorbs the rounding
// of the float64 arithmetic here.
inline bool clip_span(double p, double q, double rq, double m, double& lo, double& hi) {
  const double t = -m - p;  // lambda >= -m  <=>  q * X >= t
  if (q > kFlatSlope) {
    lo = std::max(lo, t * rq);
  } else if (q < -kFlatSlope) {
    hi = std::min(hi, t * rq);
  } else if (!(0.0 >= t - kFlatSlope * (std::abs(lo) + std::abs(hi)))) {
    return false;
  }
  return lo <= hi;
}

// Conservative column span [xs, xe) of row y for face f (superset of the exact coverage).
inline void row_span(const FaceSetup& f, float py, int& xs, int& xe) {
  const double dy = static_cast<double>(py) - f.ay;
  const double pb = (f.cax * dy + static_cast<double>(f.ax) * f.cay) * f.inv_area;
  const double pg = (-static_cast<double>(f.ax) * f.bay - f.bax * dy) * f.inv_area;
  double lo = xs + 0.5, hi = xe - 0.5;
  if (!clip_span(pb, f.qb, f.rqb, f.mb, lo, hi) || !clip_span(pg, f.qg, f.rqg, f.mg, lo, hi) ||
      !clip_span(1.0 - pb - pg, f.qa, f.rqa, f.ma, lo, hi)) {
    xe = xs;
    return;
  }
  // Pixel x is sampled at X = x + 0.5; keep one extra pixel on each side. Here
  // xs + 0.5 <= lo <= hi <= xe - 0.5 with xs >= 0, so truncation is floor and ceil is cheap
  // (std::floor/ceil are library calls without SSE4.1).
  const double l = lo - 0.5, h = hi - 0.5;
  const int li = static_cast<int>(l), hi_i = static_cast<int>(h);
  xs = std::max(xs, li - 1);
  xe = std::min(xe, hi_i + (static_cast<double>(hi_i) < h ? 1 : 0) + 2);
}

bool drawn(const FaceSetup& f) {
  return f.x0 < f.x1;
}

// Reference barycentrics at pixel centre (px, py). Returns alpha; beta/gamma through out-params.
//   beta  = A(a, p, c) * inv,  gamma = A(a, b, p) * inv,  alpha = (1.0 - beta) - gamma in double.
inline float barycentric(const FaceSetup& f, float px, float py, float& beta, float& gamma) {
  const float dx = px - f.ax;
  const float dy = py - f.ay;
  beta = (f.cax * dy - dx * f.cay) * f.inv;
  gamma = (dx * f.bay - f.bax * dy) * f.inv;
  return static_cast<float>((1.0 - static_cast<double>(beta)) - static_cast<double>(gamma));
}

inline bool in_unit(float v) {
  return v >= 0.0f && v <= 1.0f;
}

// The fragment key, or kBackgroundKey when the fragment is dropped (depth < 0, or NaN).
inline uint64_t fragment_key(float depth, uint32_t face) {
  if (!(depth >= 0.0f)) return kBackgroundKey;
  const float q = depth * kDepthQuant;
  // The reference converts with (int); beyond INT_MAX that is undefined, we saturate.
  const uint64_t zq = q < 2147483520.0f ? static_cast<uint64_t>(static_cast<int>(q)) : kMaxInt;
  return zq * kMaxInt + (face + 1ull);
}

// Writes the reference's second pass (barycentrics recomputed for the winner, divided by w and
// renormalized) for one pixel. Background pixels are left as they are (zero).
inline void resolve_pixel(const FaceSetup* setups, uint64_t key, float px, float py,
                          int32_t* face_out, float* bary_out, float* depth_out) {
  if (key == kBackgroundKey) return;  // outputs start zeroed
  const uint64_t id = key % kMaxInt;
  *face_out = static_cast<int32_t>(id);
  const FaceSetup& f = setups[id - 1];
  float beta, gamma;
  const float alpha = barycentric(f, px, py, beta, gamma);
  *depth_out = alpha * f.z0 + beta * f.z1 + gamma * f.z2;
  // x / 1.0f == x exactly: orthographic views (w = 1) skip the three divisions.
  const bool unit_w = f.w0 == 1.0f && f.w1 == 1.0f && f.w2 == 1.0f;
  const float b0 = unit_w ? alpha : alpha / f.w0;
  const float b1 = unit_w ? beta : beta / f.w1;
  const float b2 = unit_w ? gamma : gamma / f.w2;
  const float s = 1.0f / (b0 + b1 + b2);
  bary_out[0] = b0 * s;
  bary_out[1] = b1 * s;
  bary_out[2] = b2 * s;
}

// 4-lane float32 / 2-lane float64 vectors (GCC/Clang vector extensions: SSE2 on x86-64, NEON on
// ARM). Every lane operation is the same IEEE operation as the scalar reference formula.
typedef float F4 __attribute__((vector_size(16)));
typedef double D2 __attribute__((vector_size(16)));
typedef int32_t I4 __attribute__((vector_size(16)));

// alpha = float((1.0 - double(beta)) - double(gamma)) per lane.
inline F4 alpha_of(F4 beta, F4 gamma) {
  const D2 b_lo = __builtin_convertvector(__builtin_shufflevector(beta, beta, 0, 1), D2);
  const D2 b_hi = __builtin_convertvector(__builtin_shufflevector(beta, beta, 2, 3), D2);
  const D2 g_lo = __builtin_convertvector(__builtin_shufflevector(gamma, gamma, 0, 1), D2);
  const D2 g_hi = __builtin_convertvector(__builtin_shufflevector(gamma, gamma, 2, 3), D2);
  const D2 one = {1.0, 1.0};
  const auto a_lo =
      __builtin_convertvector((one - b_lo) - g_lo, __attribute__((vector_size(8))) float);
  const auto a_hi =
      __builtin_convertvector((one - b_hi) - g_hi, __attribute__((vector_size(8))) float);
  return __builtin_shufflevector(a_lo, a_hi, 0, 1, 2, 3);
}

// Min-key rasterization of one face into a key buffer covering [kx0, kx1) x [ky0, ky1) with row
// stride `stride`, restricted to that window. Four pixels of a row at a time.
inline void raster_face(const FaceSetup& f, uint32_t face, int kx0, int ky0, int kx1, int ky1,
                        uint64_t* keys, int stride) {
  const int xs = std::max(f.x0, kx0), xe = std::min(f.x1, kx1);
  const int ys = std::max(f.y0, ky0), ye = std::min(f.y1, ky1);
  const F4 lane = {0.0f, 1.0f, 2.0f, 3.0f};
  const I4 lane_i = {0, 1, 2, 3};
  const F4 zero = {0.0f, 0.0f, 0.0f, 0.0f}, one = {1.0f, 1.0f, 1.0f, 1.0f};
  for (int y = ys; y < ye; ++y) {
    const float py = static_cast<float>(y) + 0.5f;
    const float dy = py - f.ay;
    const float tb = f.cax * dy;  // (c.x - a.x)(p.y - a.y)
    const float tg = f.bax * dy;  // (b.x - a.x)(p.y - a.y)
    uint64_t* row = keys + static_cast<ptrdiff_t>(y - ky0) * stride - kx0;
    int rs = xs, re = xe;
    row_span(f, py, rs, re);
    for (int x = rs; x < re; x += 4) {
      // Pixel centres x + 0.5 (exact: small integers plus 0.5 are representable).
      const F4 px = (static_cast<float>(x) + lane) + 0.5f;
      const F4 dx = px - f.ax;
      const F4 beta = (tb - dx * f.cay) * f.inv;
      const F4 gamma = (dx * f.bay - tg) * f.inv;
      const F4 alpha = alpha_of(beta, gamma);
      const I4 inside = (alpha >= zero) & (alpha <= one) & (beta >= zero) & (beta <= one) &
                        (gamma >= zero) & (gamma <= one) & ((x + lane_i) < re);
      if (!(inside[0] | inside[1] | inside[2] | inside[3])) continue;
      const F4 depth = alpha * f.z0 + beta * f.z1 + gamma * f.z2;
      for (int k = 0; k < 4; ++k) {
        if (!inside[k]) continue;
        const uint64_t key = fragment_key(depth[k], face);
        if (key < row[x + k]) row[x + k] = key;
      }
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
  resize_zeroed(r.face_id, n);  // background is all zeros: only covered pixels are written
  resize_zeroed(r.bary, n * 3);
  resize_zeroed(r.depth, n);
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
  out.triangle_count = triangles.size();
  auto body = [&](const tbb::blocked_range<size_t>& range) {
    std::unique_ptr<uint64_t[]> keys(new uint64_t[static_cast<size_t>(ts) * ts]);
    for (size_t t = range.begin(); t < range.end(); ++t) {
      const int tx0 = static_cast<int>(t % tiles_x) * ts, ty0 = static_cast<int>(t / tiles_x) * ts;
      const int tx1 = std::min(tx0 + ts, width), ty1 = std::min(ty0 + ts, height);
      const int tw = tx1 - tx0;
      if (offsets[t] != offsets[t + 1]) {
        std::fill(keys.get(), keys.get() + static_cast<size_t>(tw) * (ty1 - ty0), kBackgroundKey);
      }
      for (uint32_t k = offsets[t]; k < offsets[t + 1]; ++k) {
        const uint32_t face = bins[k];
        raster_face(setups[face], face, tx0, ty0, tx1, ty1, keys.get(), tw);
      }
      if (offsets[t] == offsets[t + 1]) continue;  // empty tile: stays background (zeros)
      for (int y = ty0; y < ty1; ++y) {
        const size_t base = static_cast<size_t>(y) * width;
        const uint64_t* krow = keys.get() + static_cast<size_t>(y - ty0) * tw;
        const float py = static_cast<float>(y) + 0.5f;
        for (int x = tx0; x < tx1; ++x) {
          const uint64_t key = krow[x - tx0];
          if (key == kBackgroundKey) continue;
          resolve_pixel(setups.data(), key, static_cast<float>(x) + 0.5f, py,
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

size_t Raster::max_face_id() const {
  if (triangle_count > 0) return triangle_count;
  int32_t m = 0;
  for (int32_t id : face_id) m = std::max(m, id);
  return static_cast<size_t>(m);
}

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
    // The reference loop for (px = x_min; px < x_max + 1; ++px), pixels off the image skipped:
    // setup_face's [x0, x1) x [y0, y1) is exactly that range. Column-major, as the reference.
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
  out.triangle_count = triangles.size();
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
  const int tiles = texture_tiles(mesh);
  check_face_tiles("rasterize_uv", mesh);
  if (tiles > 1 && height != tiles * width)
    throw RenderError("rasterize_uv: a mesh with " + std::to_string(tiles) +
                      " materials has one square tile per material, stacked: expected " +
                      std::to_string(width) + " x " + std::to_string(tiles * width) + ", got " +
                      std::to_string(width) + " x " + std::to_string(height));
  const bool inside = std::all_of(mesh.uvs.begin(), mesh.uvs.end(), [](const mesh::Vec2& t) {
    return t[0] >= 0.0f && t[0] <= 1.0f && t[1] >= 0.0f && t[1] <= 1.0f;
  });
  if (tiles == 1 && inside) {
    const float wm1 = static_cast<float>(width - 1), hm1 = static_cast<float>(height - 1);
    std::vector<ScreenVertex> verts(mesh.uvs.size());
    for (size_t i = 0; i < verts.size(); ++i) {
      verts[i] = {mesh.uvs[i][0] * wm1 + 0.5f, mesh.uvs[i][1] * hm1 + 0.5f, 0.5f, 1.0f};
    }
    return rasterize_screen(verts, mesh.uv_faces, width, height, options);
  }
  // UVs repeat (modulo 1) and each material has its own tile: a face is drawn once per whole
  // repeat of the texture it reaches into, moved back by that many, so every part of it lands
  // where REPEAT sampling reads it (a face across the texture's edge, in both parts). Each tile is
  // rasterized on its own (its faces clipped to it) and copied into its rows; copies keep their
  // face's corner order, so barycentrics stay the face's.
  const int tile_height = height / tiles;
  const float wm1 = static_cast<float>(width - 1), hm1 = static_cast<float>(tile_height - 1);
  constexpr int kMaxRepeats = 4;  // per axis: a face spanning more repeats is drawn in 4 of them
  std::vector<std::vector<uint32_t>> faces_of(static_cast<size_t>(tiles));
  for (size_t f = 0; f < mesh.faces.size(); ++f)
    faces_of[face_tile(mesh, f)].push_back(static_cast<uint32_t>(f));
  Raster out;
  allocate(out, width, height);
  out.triangle_count = mesh.faces.size();
  for (int k = 0; k < tiles; ++k) {
    // A face's primary copy (the repeat its UV centroid lies in) goes before every other copy:
    // where faces overlap modulo 1 at an edge (UVs a little past 0 and 1), a texel belongs to the
    // face that reaches it without wrapping; otherwise, as everywhere, to the lowest face index.
    struct Copy {
      uint32_t face;
      float du, dv;
    };
    std::vector<Copy> primary, secondary;
    for (uint32_t f : faces_of[static_cast<size_t>(k)]) {
      const mesh::Tri& t = mesh.uv_faces[f];
      float lo[2] = {INFINITY, INFINITY}, hi[2] = {-INFINITY, -INFINITY}, mid[2] = {0, 0};
      bool finite = true;
      for (uint32_t c : t)
        for (int a = 0; a < 2; ++a) {
          finite = finite && std::isfinite(mesh.uvs[c][a]);
          lo[a] = std::min(lo[a], mesh.uvs[c][a]);
          hi[a] = std::max(hi[a], mesh.uvs[c][a]);
          mid[a] += mesh.uvs[c][a] / 3.0f;
        }
      if (!finite) continue;
      const float cu = std::floor(mid[0]), cv = std::floor(mid[1]);
      const float u0 = std::floor(lo[0]), v0 = std::floor(lo[1]);
      const int nu = std::clamp(static_cast<int>(std::ceil(hi[0] - u0)), 1, kMaxRepeats);
      const int nv = std::clamp(static_cast<int>(std::ceil(hi[1] - v0)), 1, kMaxRepeats);
      for (int j = 0; j < nv; ++j)
        for (int i = 0; i < nu; ++i) {
          const Copy c{f, u0 + static_cast<float>(i), v0 + static_cast<float>(j)};
          (c.du == cu && c.dv == cv ? primary : secondary).push_back(c);
        }
    }
    primary.insert(primary.end(), secondary.begin(), secondary.end());
    std::vector<ScreenVertex> verts;
    std::vector<mesh::Tri> tris;
    std::vector<uint32_t> origin;  // the face each drawn triangle copies
    verts.reserve(primary.size() * 3);
    for (const Copy& c : primary) {
      const uint32_t base = static_cast<uint32_t>(verts.size());
      for (uint32_t corner : mesh.uv_faces[c.face]) {
        const float u = mesh.uvs[corner][0] - c.du, v = mesh.uvs[corner][1] - c.dv;
        verts.push_back({u * wm1 + 0.5f, v * hm1 + 0.5f, 0.5f, 1.0f});
      }
      tris.push_back({base, base + 1, base + 2});
      origin.push_back(c.face);
    }
    if (tris.empty()) continue;
    const Raster r = rasterize_screen(verts, tris, width, tile_height, options);
    const size_t offset = static_cast<size_t>(k) * width * tile_height;
    tbb::parallel_for(tbb::blocked_range<size_t>(0, r.pixel_count(), 1 << 14),
                      [&](const tbb::blocked_range<size_t>& range) {
                        for (size_t p = range.begin(); p < range.end(); ++p) {
                          const int32_t id = r.face_id[p];
                          if (id == 0) continue;
                          const size_t q = offset + p;
                          out.face_id[q] = static_cast<int32_t>(origin[size_t(id - 1)] + 1);
                          std::copy_n(&r.bary[p * 3], 3, &out.bary[q * 3]);
                          out.depth[q] = r.depth[p];
                        }
                      });
  }
  return out;
}

}  // namespace gen3d::render
