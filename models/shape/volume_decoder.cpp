#include "models/shape/volume_decoder.h"

#include <oneapi/tbb/blocked_range.h>
#include <oneapi/tbb/parallel_for.h>
#include <oneapi/tbb/parallel_reduce.h>
#include <spdlog/spdlog.h>

#include <algorithm>
#include <array>
#include <cmath>
#include <cstring>
#include <limits>
#include <optional>

#include "models/core/error.h"
#include "models/shape/shape_vae.h"
#include "progress/progress.h"

namespace gen3d::models {

namespace {

using i64 = std::int64_t;
constexpr float kNaN = std::numeric_limits<float>::quiet_NaN();
constexpr i64 kLevel0Stride = 100;  // FlashVDM sampled-query strides (spec 6.2 / 6.3)
constexpr i64 kBucketStride = 50;
constexpr int kBucketsPerAxis = 6;
// Byte masks over a grid; every pass writes each byte it makes, so none is cleared first.
using Mask = std::vector<std::uint8_t, UninitAllocator<std::uint8_t>>;

void validate(const VolumeDecodeOptions& o) {
  std::vector<std::string> e;
  if (o.resolution < 1) e.push_back("resolution must be >= 1");
  if (o.min_resolution < 1) e.push_back("min_resolution must be >= 1");
  if (o.num_chunks < 1) e.push_back("num_chunks must be >= 1");
  if (o.mini_grid_num < 1) e.push_back("mini_grid_num must be >= 1");
  for (int a = 0; a < 3; ++a)
    if (!(o.bbox_max[a] > o.bbox_min[a]))
      e.push_back("bbox_max must exceed bbox_min on every axis");
  if (!(o.band_abs_logit >= 0.0f)) e.push_back("band_abs_logit must be >= 0");
  if (e.empty()) return;
  std::string msg = "volume decoding options:";
  for (const auto& s : e) msg += "\n  " + s;
  throw ModelError(msg);
}

VolumeGrid make_grid(int r, const VolumeDecodeOptions& o, float fill) {
  VolumeGrid g;
  g.resolution = r;
  g.bbox_min = o.bbox_min;
  g.bbox_max = o.bbox_max;
  const i64 n = g.n();
  g.values.resize(static_cast<std::size_t>(n * n * n));  // uninitialised: filled in parallel
  tbb::parallel_for(i64{0}, n,
                    [&](i64 i) { std::fill_n(g.values.begin() + i * n * n, n * n, fill); });
  return g;
}

i64 ceil_div(i64 a, i64 b) {
  return (a + b - 1) / b;
}

// Dense level: all (r+1)^3 vertices in row-major order, `chunk` points per field call. `label`
// names the field calls in progress events.
VolumeGrid decode_dense(const Field& field, int r, const VolumeDecodeOptions& o,
                        const std::string& label) {
  VolumeGrid g = make_grid(r, o, 0.0f);
  const i64 n = g.n(), total = n * n * n;
  std::array<std::vector<float>, 3> axis;
  for (int a = 0; a < 3; ++a) axis[a] = grid_axis(o.bbox_min[a], o.bbox_max[a], r);
  std::vector<float> xyz;
  progress::Steps steps(label, ceil_div(total, o.num_chunks));
  for (i64 c0 = 0; c0 < total; c0 += o.num_chunks) {
    const i64 c1 = std::min(total, c0 + o.num_chunks);
    xyz.resize(static_cast<std::size_t>(3 * (c1 - c0)));
    tbb::parallel_for(c0, c1, [&](i64 t) {
      const i64 i = t / (n * n), j = (t / n) % n, k = t % n;
      float* p = xyz.data() + 3 * (t - c0);
      p[0] = axis[0][static_cast<std::size_t>(i)];
      p[1] = axis[1][static_cast<std::size_t>(j)];
      p[2] = axis[2][static_cast<std::size_t>(k)];
    });
    field.evaluate(xyz.data(), c1 - c0, g.values.data() + c0);
    steps.next();
  }
  return g;
}

// FlashVDM level 0: G^3 blocks of m^3 points, each block one attention group.
VolumeGrid decode_blocks(const Field& field, int r, const VolumeDecodeOptions& o, i64 top_k,
                         const std::string& label) {
  const i64 n = r + 1, G = o.mini_grid_num;
  if (n % G != 0)
    throw ModelError("FlashVDM: level-0 grid " + std::to_string(n) + " is not divisible by " +
                     "mini_grid_num " + std::to_string(G));
  VolumeGrid g = make_grid(r, o, 0.0f);
  const i64 m = n / G, m3 = m * m * m, blocks = G * G * G;
  const i64 per_call = std::max<i64>(o.num_chunks / m3, 1);
  std::array<std::vector<float>, 3> axis;
  for (int a = 0; a < 3; ++a) axis[a] = grid_axis(o.bbox_min[a], o.bbox_max[a], r);
  std::vector<float> xyz, vals;
  std::vector<i64> where, offsets;
  progress::Steps steps(label, ceil_div(blocks, per_call));
  for (i64 b0 = 0; b0 < blocks; b0 += per_call) {
    const i64 b1 = std::min(blocks, b0 + per_call);
    const i64 P = (b1 - b0) * m3;
    xyz.resize(static_cast<std::size_t>(3 * P));
    vals.resize(static_cast<std::size_t>(P));
    where.resize(static_cast<std::size_t>(P));
    offsets.clear();
    for (i64 b = b0; b <= b1; ++b) offsets.push_back((b - b0) * m3);
    tbb::parallel_for(b0, b1, [&](i64 b) {  // each block's m^3 points at its own offset
      i64 t = (b - b0) * m3;
      const i64 ba = b / (G * G), bb = (b / G) % G, bc = b % G;
      for (i64 u = 0; u < m; ++u)
        for (i64 v = 0; v < m; ++v)
          for (i64 w = 0; w < m; ++w, ++t) {
            const i64 i = ba * m + u, j = bb * m + v, k = bc * m + w;
            float* p = xyz.data() + 3 * t;
            p[0] = axis[0][static_cast<std::size_t>(i)];
            p[1] = axis[1][static_cast<std::size_t>(j)];
            p[2] = axis[2][static_cast<std::size_t>(k)];
            where[static_cast<std::size_t>(t)] = g.index(i, j, k);
          }
    });
    field.evaluate_groups(xyz.data(), offsets, KeySelection{top_k, kLevel0Stride}, vals.data());
    tbb::parallel_for(i64{0}, P, [&](i64 q) {  // distinct vertices
      g.values[static_cast<std::size_t>(where[static_cast<std::size_t>(q)])] =
          vals[static_cast<std::size_t>(q)];
    });
    steps.next();
  }
  return g;
}

int sign_of(float f) {
  return (f > 0.0f) - (f < 0.0f);
}

// out[k] |= in[k] for k < n (distinct buffers, so the loop vectorizes).
void or_into(std::uint8_t* __restrict out, const std::uint8_t* __restrict in, i64 n) {
  for (i64 k = 0; k < n; ++k) out[k] |= in[k];
}

// Box dilation of a n^3 byte mask (values 0 or 1) with radius `rad` (a (2 rad + 1)^3 box),
// separable: per axis, each k-row of the result is the OR of the source's rows (or, along k, of
// the row's own bytes) shifted by -rad..rad, clipped at the grid's edges. Whole-row byte ORs
// vectorize; per-voxel neighbour loops took most of a FlashVDM decode's bookkeeping.
void dilate(Mask& mask, i64 n, int rad) {
  if (rad <= 0) return;
  Mask tmp(mask.size());
  for (int axis = 0; axis < 3; ++axis) {
    const std::uint8_t* src = mask.data();
    std::uint8_t* dst = tmp.data();
    tbb::parallel_for(i64{0}, n, [src, dst, n, rad, axis](i64 i) {
      for (i64 j = 0; j < n; ++j) {
        std::uint8_t* out = dst + (i * n + j) * n;
        const std::uint8_t* in = src + (i * n + j) * n;
        std::copy_n(in, n, out);
        if (axis == 2) {  // along the row itself
          for (i64 d = 1; d <= rad && d < n; ++d) {
            or_into(out, in + d, n - d);
            or_into(out + d, in, n - d);
          }
          continue;
        }
        const i64 pos = axis == 0 ? i : j, stride = axis == 0 ? n * n : n;
        for (i64 d = -rad; d <= rad; ++d)
          if (d != 0 && pos + d >= 0 && pos + d < n) or_into(out, in + d * stride, n);
      }
    });
    mask.swap(tmp);
  }
}

// Calls f(k) for each selected k in [k0, k1) of a mask row, in order (memchr skips the runs of
// unselected vertices).
template <typename F>
void for_each_selected(const std::uint8_t* row, i64 k0, i64 k1, F&& f) {
  const std::uint8_t* end = row + k1;
  for (const void* hit = k0 < k1 ? std::memchr(row + k0, 1, static_cast<std::size_t>(k1 - k0))
                                 : nullptr;
       hit != nullptr;) {
    const auto* p = static_cast<const std::uint8_t*>(hit);
    f(p - row);
    hit = p + 1 < end ? std::memchr(p + 1, 1, static_cast<std::size_t>(end - p - 1)) : nullptr;
  }
}

// The coarse vertices whose fine twin (2c) lies within `rad` of fine index f: [first, last]
// (empty when first > last). Only coarse c with 2c < nf have a twin.
std::pair<i64, i64> coarse_window(i64 f, int rad, i64 nc, i64 nf) {
  const i64 first = f - rad <= 0 ? 0 : (f - rad + 1) / 2;
  const i64 last = std::min({(f + rad) / 2, nc - 1, (nf - 1) / 2});
  return {first, last};
}

// The fine mask of spec 5.3 step 4: every coarse vertex c of `band` set at fine 2c (if inside the
// fine grid), then a (2 rad + 1)^3 box dilation clipped at the grid's edges. Both are separable,
// so they run axis by axis from the coarse grid up (k, then j, then i), each pass one coarse axis
// finer: the full-size mask is written once instead of set, then dilated in three passes.
Mask upsample_dilate(const Mask& band, i64 nc, i64 nf, int rad) {
  // Along k: a[ci][cj][fk].
  Mask a(static_cast<std::size_t>(nc * nc * nf));
  tbb::parallel_for(i64{0}, nc * nc, [&](i64 r) {
    const std::uint8_t* in = band.data() + r * nc;
    std::uint8_t* out = a.data() + r * nf;
    std::fill(out, out + nf, std::uint8_t{0});
    for_each_selected(in, 0, std::min(nc, (nf + 1) / 2), [&](i64 c) {
      const i64 f0 = std::max<i64>(0, 2 * c - rad), f1 = std::min(nf, 2 * c + rad + 1);
      std::fill(out + f0, out + f1, std::uint8_t{1});
    });
  });
  // Along j: b[ci][fj][fk], each row the OR of its coarse window's rows.
  Mask b(static_cast<std::size_t>(nc * nf * nf));
  tbb::parallel_for(i64{0}, nc, [&](i64 ci) {
    for (i64 fj = 0; fj < nf; ++fj) {
      std::uint8_t* out = b.data() + (ci * nf + fj) * nf;
      std::fill(out, out + nf, std::uint8_t{0});
      const auto [c0, c1] = coarse_window(fj, rad, nc, nf);
      for (i64 cj = c0; cj <= c1; ++cj) or_into(out, a.data() + (ci * nc + cj) * nf, nf);
    }
  });
  a = {};
  // Along i: fine[fi] = the OR of its coarse window's slabs.
  Mask fine(static_cast<std::size_t>(nf * nf * nf));
  tbb::parallel_for(i64{0}, nf, [&](i64 fi) {
    std::uint8_t* out = fine.data() + fi * nf * nf;
    std::fill(out, out + nf * nf, std::uint8_t{0});
    const auto [c0, c1] = coarse_window(fi, rad, nc, nf);
    for (i64 ci = c0; ci <= c1; ++ci) or_into(out, b.data() + ci * nf * nf, nf * nf);
  });
  return fine;
}

// A refinement level's band: one byte per fine vertex (1: query it), how many fall in each
// i-slab, and the vertices' coordinates per axis, float32(idx) * float32(size / r) +
// float32(min) (spec 5.3; monotone in idx, so a box of indices is a box of coordinates).
struct Band {
  i64 n = 0;                               // fine vertices per axis
  Mask mask;                               // n^3, row-major
  std::vector<i64> slab_start;             // n + 1 prefix counts of selected vertices per i
  std::array<std::vector<float>, 3> axis;  // coordinates per axis
  i64 count() const { return slab_start.back(); }
};

// Spec 5.3 steps 1-4: the fine vertices to query.
Band select_band(const VolumeGrid& coarse, int r_fine, bool last, const VolumeDecodeOptions& o) {
  const i64 nc = coarse.n(), nf = r_fine + 1;
  const float* V = coarse.values.data();
  Mask band(static_cast<std::size_t>(nc * nc * nc));
  tbb::parallel_for(i64{0}, nc, [&](i64 i) {
    for (i64 j = 0; j < nc; ++j)
      for (i64 k = 0; k < nc; ++k) {
        const i64 idx = (i * nc + j) * nc + k;
        const float v = V[idx];
        band[static_cast<std::size_t>(idx)] = 0;
        if (std::isnan(v)) continue;
        const float f = v - o.level;
        bool on = std::abs(f) < o.band_abs_logit;
        const int s = sign_of(f);
        const i64 nb[6][3] = {{i - 1, j, k}, {i + 1, j, k}, {i, j - 1, k},
                              {i, j + 1, k}, {i, j, k - 1}, {i, j, k + 1}};
        for (int q = 0; q < 6 && !on; ++q) {
          const i64 a = nb[q][0], b = nb[q][1], c = nb[q][2];
          if (a < 0 || b < 0 || c < 0 || a >= nc || b >= nc || c >= nc) continue;
          const float u = V[(a * nc + b) * nc + c];
          if (std::isnan(u)) continue;
          on = sign_of(u - o.level) != s;
        }
        band[static_cast<std::size_t>(idx)] = on ? 1 : 0;
      }
  });
  if (!last) dilate(band, nc, 1);
  Band out;
  out.n = nf;
  out.mask = upsample_dilate(band, nc, nf, last ? 2 : 1);
  const Mask& fine = out.mask;
  for (int a = 0; a < 3; ++a) {
    const auto step = static_cast<float>((o.bbox_max[a] - o.bbox_min[a]) / r_fine);
    const auto lo = static_cast<float>(o.bbox_min[a]);
    auto& axis = out.axis[static_cast<std::size_t>(a)];
    axis.resize(static_cast<std::size_t>(nf));
    for (i64 i = 0; i < nf; ++i)
      axis[static_cast<std::size_t>(i)] = static_cast<float>(i) * step + lo;
  }
  out.slab_start.assign(static_cast<std::size_t>(nf + 1), 0);
  tbb::parallel_for(i64{0}, nf, [&](i64 i) {
    const auto* slab = fine.data() + i * nf * nf;
    out.slab_start[static_cast<std::size_t>(i + 1)] =
        std::count(slab, slab + nf * nf, std::uint8_t{1});
  });
  for (i64 i = 0; i < nf; ++i)
    out.slab_start[static_cast<std::size_t>(i + 1)] += out.slab_start[static_cast<std::size_t>(i)];
  return out;
}

// The band's vertices as a row-major list and their coordinates, each i-slab filled in parallel
// from its prefix count.
struct RowPoints {
  std::vector<i64> sel;    // flat indices into the fine grid
  std::vector<float> xyz;  // 3 per vertex
};
RowPoints row_points(const Band& band) {
  const i64 nf = band.n;
  RowPoints out;
  out.sel.resize(static_cast<std::size_t>(band.count()));
  out.xyz.resize(3 * out.sel.size());
  tbb::parallel_for(i64{0}, nf, [&](i64 i) {
    auto q = static_cast<std::size_t>(band.slab_start[static_cast<std::size_t>(i)]);
    const float x = band.axis[0][static_cast<std::size_t>(i)];
    for (i64 j = 0; j < nf; ++j) {
      const float y = band.axis[1][static_cast<std::size_t>(j)];
      const i64 row = (i * nf + j) * nf;
      for_each_selected(band.mask.data() + row, 0, nf, [&](i64 k) {
        out.sel[q] = row + k;
        out.xyz[3 * q] = x;
        out.xyz[3 * q + 1] = y;
        out.xyz[3 * q + 2] = band.axis[2][static_cast<std::size_t>(k)];
        ++q;
      });
    }
  });
  return out;
}

// Hierarchical refinement: query the band's vertices in row-major chunks.
void query_rows(const Field& field, const RowPoints& points, i64 chunk, VolumeGrid& g,
                const std::string& label) {
  const std::vector<i64>& sel = points.sel;
  const std::vector<float>& xyz = points.xyz;
  const auto P = static_cast<i64>(sel.size());
  std::vector<float> vals;
  progress::Steps steps(label, ceil_div(P, chunk));
  for (i64 c0 = 0; c0 < P; c0 += chunk) {
    const i64 c1 = std::min(P, c0 + chunk);
    vals.resize(static_cast<std::size_t>(c1 - c0));
    field.evaluate(xyz.data() + 3 * c0, c1 - c0, vals.data());
    for (i64 q = c0; q < c1; ++q)
      g.values[static_cast<std::size_t>(sel[static_cast<std::size_t>(q)])] =
          vals[static_cast<std::size_t>(q - c0)];
    steps.next();
  }
}

// FlashVDM refinement (spec 6.3): 6x6x6 buckets over the points' box, the points of each bucket
// in row-major order (a stable sort by bucket), bucket-aligned chunks, one attention group per
// bucket. A bucket is a box of indices (a cell is a monotone function of the coordinate, which
// is one of the index), so each bucket is listed straight from the band's mask.
void query_buckets(const Field& field, const Band& band, const VolumeDecodeOptions& o, i64 top_k,
                   VolumeGrid& g, const std::string& label) {
  constexpr int kB = kBucketsPerAxis, kPlane = kB * kB, nb = kB * kB * kB;
  const i64 nf = band.n;
  const std::uint8_t* mask = band.mask.data();
  // The selected vertices' index bounds per axis: their box.
  using Bounds = std::array<i64, 6>;  // lo i j k, hi i j k
  const Bounds bounds = tbb::parallel_reduce(
      tbb::blocked_range<i64>(0, nf), Bounds{nf, nf, nf, -1, -1, -1},
      [&](const tbb::blocked_range<i64>& r, Bounds b) {
        for (i64 i = r.begin(); i < r.end(); ++i) {
          if (band.slab_start[static_cast<std::size_t>(i + 1)] ==
              band.slab_start[static_cast<std::size_t>(i)])
            continue;
          b[0] = std::min(b[0], i);
          b[3] = std::max(b[3], i);
          for (i64 j = 0; j < nf; ++j) {
            const std::uint8_t* row = mask + (i * nf + j) * nf;
            const void* first = std::memchr(row, 1, static_cast<std::size_t>(nf));
            if (first == nullptr) continue;
            const void* last = memrchr(row, 1, static_cast<std::size_t>(nf));
            b[1] = std::min(b[1], j);
            b[4] = std::max(b[4], j);
            b[2] = std::min(b[2], static_cast<const std::uint8_t*>(first) - row);
            b[5] = std::max(b[5], static_cast<const std::uint8_t*>(last) - row);
          }
        }
        return b;
      },
      [](Bounds a, const Bounds& b) {
        for (std::size_t t = 0; t < 3; ++t) {
          a[t] = std::min(a[t], b[t]);
          a[t + 3] = std::max(a[t + 3], b[t + 3]);
        }
        return a;
      });
  // Each cell's index range per axis: cell = floor((x - lo) / (hi - lo) * 5.999), clamped.
  std::array<std::array<i64, kB + 1>, 3> cell_start{};  // cell c: [start[c], start[c + 1])
  for (std::size_t a = 0; a < 3; ++a) {
    const auto& axis = band.axis[a];
    const i64 i0 = bounds[a], i1 = bounds[a + 3];
    const float lo = axis[static_cast<std::size_t>(i0)], hi = axis[static_cast<std::size_t>(i1)];
    const float ext = hi - lo;
    std::array<i64, kB> count{};
    for (i64 i = i0; i <= i1; ++i) {
      int cell = 0;
      if (ext != 0.0f) {
        const float u = (axis[static_cast<std::size_t>(i)] - lo) / ext * 5.999f;
        cell = std::clamp(static_cast<int>(std::floor(u)), 0, kB - 1);
      }
      ++count[static_cast<std::size_t>(cell)];
    }
    cell_start[a][0] = i0;
    for (int c = 0; c < kB; ++c)
      cell_start[a][static_cast<std::size_t>(c + 1)] =
          cell_start[a][static_cast<std::size_t>(c)] + count[static_cast<std::size_t>(c)];
  }
  const auto range = [&](std::size_t a, int c) {
    return std::pair{cell_start[a][static_cast<std::size_t>(c)],
                     cell_start[a][static_cast<std::size_t>(c + 1)]};
  };
  // Selected vertices per i and (y, z) cell, then where each such run starts in bucket order.
  const i64 i0 = bounds[0], rows = bounds[3] - i0 + 1;
  std::vector<i64> at(static_cast<std::size_t>(rows * kPlane), 0);  // [i - i0][cy * 6 + cz]
  tbb::parallel_for(i64{0}, rows, [&](i64 r) {
    i64* counts = at.data() + r * kPlane;
    for (int cy = 0; cy < kB; ++cy) {
      const auto [j0, j1] = range(1, cy);
      for (i64 j = j0; j < j1; ++j) {
        const std::uint8_t* row = mask + ((i0 + r) * nf + j) * nf;
        for (int cz = 0; cz < kB; ++cz) {
          const auto [k0, k1] = range(2, cz);
          counts[cy * kB + cz] += std::count(row + k0, row + k1, std::uint8_t{1});
        }
      }
    }
  });
  std::vector<i64> start(nb + 1, 0);  // each bucket's first position
  i64 pos = 0;
  for (int b = 0; b < nb; ++b) {
    start[static_cast<std::size_t>(b)] = pos;
    const auto [r0, r1] = range(0, b / kPlane);
    for (i64 i = r0; i < r1; ++i) {
      i64& c = at[static_cast<std::size_t>((i - i0) * kPlane + b % kPlane)];
      const i64 n = c;
      c = pos;  // now the first position of this row run
      pos += n;
    }
  }
  start[nb] = pos;
  // Chunks of whole buckets: the next one from bucket `b` on (its size and group offsets;
  // advances `b`).
  const auto next_chunk = [&](int& b, std::vector<i64>& offsets) {
    i64 size = 0;
    offsets.assign(1, 0);
    for (; b < nb; ++b) {
      const i64 bs = start[static_cast<std::size_t>(b + 1)] - start[static_cast<std::size_t>(b)];
      if (bs == 0) continue;
      if (size > 0 && size + bs >= o.num_chunks) break;
      size += bs;
      offsets.push_back(size);
    }
    return size;
  };
  std::vector<float> cx, vals;
  std::vector<i64> offsets, where;
  std::vector<std::pair<int, i64>> runs;  // (bucket, i) of a chunk
  i64 chunks = 0;
  for (int b = 0; b < nb && next_chunk(b, offsets) > 0;) ++chunks;
  progress::Steps steps(label, chunks);
  int b = 0;
  while (b < nb) {
    const int first = b;
    const i64 size = next_chunk(b, offsets);
    if (size == 0) break;
    const i64 base = start[static_cast<std::size_t>(first)];
    cx.resize(static_cast<std::size_t>(3 * size));
    vals.resize(static_cast<std::size_t>(size));
    where.resize(static_cast<std::size_t>(size));
    runs.clear();
    for (int q = first; q < b; ++q) {
      const auto [r0, r1] = range(0, q / kPlane);
      for (i64 i = r0; i < r1; ++i) runs.emplace_back(q, i);
    }
    tbb::parallel_for(std::size_t{0}, runs.size(), [&](std::size_t t) {
      const auto [q, i] = runs[t];
      auto p = static_cast<std::size_t>(
          at[static_cast<std::size_t>((i - i0) * kPlane + q % kPlane)] - base);
      const auto [j0, j1] = range(1, (q / kB) % kB);
      const auto [k0, k1] = range(2, q % kB);
      const float x = band.axis[0][static_cast<std::size_t>(i)];
      for (i64 j = j0; j < j1; ++j) {
        const float y = band.axis[1][static_cast<std::size_t>(j)];
        const i64 row = (i * nf + j) * nf;
        for_each_selected(mask + row, k0, k1, [&](i64 k) {
          cx[3 * p] = x;
          cx[3 * p + 1] = y;
          cx[3 * p + 2] = band.axis[2][static_cast<std::size_t>(k)];
          where[p++] = row + k;
        });
      }
    });
    field.evaluate_groups(cx.data(), offsets, KeySelection{top_k, kBucketStride}, vals.data());
    tbb::parallel_for(i64{0}, size, [&](i64 t) {  // distinct vertices: no two writes collide
      g.values[static_cast<std::size_t>(where[static_cast<std::size_t>(t)])] =
          vals[static_cast<std::size_t>(t)];
    });
    steps.next();
  }
}

}  // namespace

VolumeMethod parse_volume_method(const std::string& name) {
  if (name == "dense") return VolumeMethod::kDense;
  if (name == "hierarchical") return VolumeMethod::kHierarchical;
  if (name == "flashvdm") return VolumeMethod::kFlashVDM;
  throw ModelError("unknown volume decoding method '" + name +
                   "' (expected dense, hierarchical or flashvdm)");
}

const char* volume_method_name(VolumeMethod m) {
  switch (m) {
    case VolumeMethod::kDense:
      return "dense";
    case VolumeMethod::kHierarchical:
      return "hierarchical";
    case VolumeMethod::kFlashVDM:
      return "flashvdm";
  }
  return "?";
}

std::int64_t VolumeGrid::queried_count() const {
  std::int64_t c = 0;
  for (float v : values) c += std::isnan(v) ? 0 : 1;
  return c;
}

std::vector<int> hierarchical_levels(int resolution, int min_resolution) {
  std::vector<int> lv;
  for (int r = resolution; r >= min_resolution && r > 0; r /= 2) lv.push_back(r);
  if (lv.empty()) lv.push_back(resolution);
  std::reverse(lv.begin(), lv.end());
  return lv;
}

std::vector<int> flashvdm_levels(int resolution, int min_resolution, int mini_grid_num) {
  std::vector<int> lv = hierarchical_levels(resolution, min_resolution);
  // Python round (half to even) of levels[0] / G.
  const double q = static_cast<double>(lv[0]) / mini_grid_num;
  const int r0 = static_cast<int>(std::nearbyint(q)) * mini_grid_num - 1;  // FE_TONEAREST
  for (std::size_t k = 0; k < lv.size(); ++k) lv[k] = r0 << k;
  return lv;
}

std::vector<float> grid_axis(double lo, double hi, int resolution) {
  std::vector<float> a(static_cast<std::size_t>(resolution) + 1);
  const double step = (hi - lo) / resolution;
  for (int i = 0; i <= resolution; ++i)
    a[static_cast<std::size_t>(i)] = static_cast<float>(i * step + lo);
  a.back() = static_cast<float>(hi);
  return a;
}

VolumeGrid decode_volume(const Field& field, const VolumeDecodeOptions& o,
                         VolumeDecodeStats* stats) {
  validate(o);
  VolumeDecodeStats local;
  VolumeDecodeStats& st = stats ? *stats : local;
  st = VolumeDecodeStats{};
  auto record = [&](int r, i64 points, const VolumeGrid& g) {
    st.levels.push_back(r);
    st.points_per_level.push_back(points);
    st.points_queried += points;
    if (o.keep_levels) st.level_grids.push_back(g);
  };
  if (o.method == VolumeMethod::kDense) {
    VolumeGrid g = decode_dense(field, o.resolution, o, "decode chunk");
    record(o.resolution, g.n() * g.n() * g.n(), g);
    return g;
  }
  const bool flash = o.method == VolumeMethod::kFlashVDM;
  const std::vector<int> lv = flash
                                  ? flashvdm_levels(o.resolution, o.min_resolution, o.mini_grid_num)
                                  : hierarchical_levels(o.resolution, o.min_resolution);
  if (lv[0] < 1)
    throw ModelError("volume decoding: level schedule starts at " + std::to_string(lv[0]) +
                     " for resolution " + std::to_string(o.resolution) + " (too small)");
  i64 top_k = 0;
  if (flash && field.key_count() > 0)
    top_k = o.top_k >= 0 ? o.top_k : flashvdm_top_k(field.key_count());
  // Progress: field calls per level ("decode chunk (level 2/3)").
  const auto label = [&](std::size_t l) {
    return "decode chunk (level " + std::to_string(l + 1) + "/" + std::to_string(lv.size()) + ")";
  };
  VolumeGrid g = flash ? decode_blocks(field, lv[0], o, top_k, label(0))
                       : decode_dense(field, lv[0], o, label(0));
  record(lv[0], g.n() * g.n() * g.n(), g);
  for (std::size_t l = 1; l < lv.size(); ++l) {
    const bool last = l + 1 == lv.size();
    std::optional<Band> band = select_band(g, lv[l], last, o);
    const i64 count = band->count();
    if (count == 0) {
      st.empty_band = true;
      VolumeGrid none = make_grid(lv.back(), o, kNaN);
      record(lv[l], 0, none);
      spdlog::info("volume decoding: level {} selected no vertex: no surface", lv[l]);
      return none;
    }
    VolumeGrid fine;
    if (flash) {
      fine = make_grid(lv[l], o, kNaN);
      query_buckets(field, *band, o, top_k, fine, label(l));
    } else {
      const RowPoints points = row_points(*band);
      band.reset();  // the list replaces the mask
      fine = make_grid(lv[l], o, kNaN);
      query_rows(field, points, o.num_chunks, fine, label(l));
    }
    record(lv[l], count, fine);
    g = std::move(fine);
  }
  return g;
}

}  // namespace gen3d::models
