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
  g.values.assign(static_cast<std::size_t>(g.n() * g.n() * g.n()), fill);
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
    for (i64 t = c0; t < c1; ++t) {
      const i64 i = t / (n * n), j = (t / n) % n, k = t % n;
      float* p = xyz.data() + 3 * (t - c0);
      p[0] = axis[0][static_cast<std::size_t>(i)];
      p[1] = axis[1][static_cast<std::size_t>(j)];
      p[2] = axis[2][static_cast<std::size_t>(k)];
    }
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
    i64 t = 0;
    for (i64 b = b0; b < b1; ++b) {
      offsets.push_back(t);
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
    }
    offsets.push_back(t);
    field.evaluate_groups(xyz.data(), offsets, KeySelection{top_k, kLevel0Stride}, vals.data());
    for (i64 q = 0; q < P; ++q)
      g.values[static_cast<std::size_t>(where[static_cast<std::size_t>(q)])] =
          vals[static_cast<std::size_t>(q)];
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
void dilate(std::vector<std::uint8_t>& mask, i64 n, int rad) {
  if (rad <= 0) return;
  std::vector<std::uint8_t> tmp(mask.size());
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

// The fine vertices to query, in row-major order, and their coordinates.
struct BandPoints {
  std::vector<i64> sel;    // flat indices into the fine grid
  std::vector<float> xyz;  // 3 per vertex
};

// Spec 5.3 steps 1-4: the fine vertices to query.
BandPoints select_band(const VolumeGrid& coarse, int r_fine, bool last,
                       const VolumeDecodeOptions& o) {
  const i64 nc = coarse.n(), nf = r_fine + 1;
  const float* V = coarse.values.data();
  std::vector<std::uint8_t> band(static_cast<std::size_t>(nc * nc * nc), 0);
  tbb::parallel_for(i64{0}, nc, [&](i64 i) {
    for (i64 j = 0; j < nc; ++j)
      for (i64 k = 0; k < nc; ++k) {
        const i64 idx = (i * nc + j) * nc + k;
        const float v = V[idx];
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
  std::vector<std::uint8_t> fine(static_cast<std::size_t>(nf * nf * nf), 0);
  tbb::parallel_for(i64{0}, nc, [&](i64 i) {
    if (2 * i >= nf) return;
    for (i64 j = 0; j < nc && 2 * j < nf; ++j)
      for (i64 k = 0; k < nc && 2 * k < nf; ++k)
        if (band[static_cast<std::size_t>((i * nc + j) * nc + k)])
          fine[static_cast<std::size_t>((2 * i * nf + 2 * j) * nf + 2 * k)] = 1;
  });
  dilate(fine, nf, last ? 2 : 1);
  // Row-major list and the vertices' coordinates (float32(idx) * float32(size / r) +
  // float32(min) per axis): count per i-slab, then fill, skipping unselected runs with memchr.
  float step[3], lo[3];
  for (int a = 0; a < 3; ++a) {
    step[a] = static_cast<float>((o.bbox_max[a] - o.bbox_min[a]) / r_fine);
    lo[a] = static_cast<float>(o.bbox_min[a]);
  }
  std::vector<i64> counts(static_cast<std::size_t>(nf + 1), 0);
  tbb::parallel_for(i64{0}, nf, [&](i64 i) {
    const auto* slab = fine.data() + i * nf * nf;
    counts[static_cast<std::size_t>(i + 1)] = std::count(slab, slab + nf * nf, std::uint8_t{1});
  });
  for (i64 i = 0; i < nf; ++i)
    counts[static_cast<std::size_t>(i + 1)] += counts[static_cast<std::size_t>(i)];
  BandPoints points;
  points.sel.resize(static_cast<std::size_t>(counts.back()));
  points.xyz.resize(3 * points.sel.size());
  tbb::parallel_for(i64{0}, nf, [&](i64 i) {
    auto q = static_cast<std::size_t>(counts[static_cast<std::size_t>(i)]);
    const float x = static_cast<float>(i) * step[0] + lo[0];
    for (i64 j = 0; j < nf; ++j) {
      const float y = static_cast<float>(j) * step[1] + lo[1];
      const i64 row = (i * nf + j) * nf;
      const std::uint8_t* begin = fine.data() + row;
      const auto row_bytes = static_cast<std::size_t>(nf);
      for (const void* hit = std::memchr(begin, 1, row_bytes); hit != nullptr; ++q) {
        const i64 k = static_cast<const std::uint8_t*>(hit) - begin;
        points.sel[q] = row + k;
        points.xyz[3 * q] = x;
        points.xyz[3 * q + 1] = y;
        points.xyz[3 * q + 2] = static_cast<float>(k) * step[2] + lo[2];
        hit = std::memchr(begin + k + 1, 1, row_bytes - static_cast<std::size_t>(k + 1));
      }
    }
  });
  return points;
}

// Hierarchical refinement: query the selected vertices in row-major chunks.
void query_rows(const Field& field, const std::vector<i64>& sel, const std::vector<float>& xyz,
                i64 chunk, VolumeGrid& g, const std::string& label) {
  std::vector<float> vals;
  const i64 P = static_cast<i64>(sel.size());
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

// FlashVDM refinement: 6x6x6 buckets over the points' box, stable order, bucket-aligned chunks,
// one attention group per bucket (spec 6.3).
void query_buckets(const Field& field, const std::vector<i64>& sel, const std::vector<float>& xyz,
                   const VolumeDecodeOptions& o, i64 top_k, VolumeGrid& g,
                   const std::string& label) {
  const std::size_t P = sel.size();
  // The points' box (min and max are exact whatever the order of the parallel reduction).
  using Box = std::array<float, 6>;  // lo x y z, hi x y z
  Box init;
  for (int a = 0; a < 3; ++a) {
    init[static_cast<std::size_t>(a)] = std::numeric_limits<float>::infinity();
    init[static_cast<std::size_t>(a + 3)] = -std::numeric_limits<float>::infinity();
  }
  const Box box = tbb::parallel_reduce(
      tbb::blocked_range<std::size_t>(0, P, 1 << 14), init,
      [&](const tbb::blocked_range<std::size_t>& r, Box b) {
        for (std::size_t q = r.begin(); q < r.end(); ++q)
          for (std::size_t a = 0; a < 3; ++a) {
            b[a] = std::min(b[a], xyz[3 * q + a]);
            b[a + 3] = std::max(b[a + 3], xyz[3 * q + a]);
          }
        return b;
      },
      [](Box a, const Box& b) {
        for (std::size_t i = 0; i < 3; ++i) {
          a[i] = std::min(a[i], b[i]);
          a[i + 3] = std::max(a[i + 3], b[i + 3]);
        }
        return a;
      });
  const float lo[3] = {box[0], box[1], box[2]}, hi[3] = {box[3], box[4], box[5]};
  constexpr int nb = kBucketsPerAxis * kBucketsPerAxis * kBucketsPerAxis;
  // Bucket ids, and a stable counting sort by them in parallel: each block of points counts its
  // buckets, the offsets run bucket-major then block by block, so the order is the serial one.
  constexpr std::size_t kBlock = std::size_t{1} << 16;
  const std::size_t blocks = (P + kBlock - 1) / kBlock;
  std::vector<int> bucket(P);
  std::vector<i64> block_counts(blocks * nb, 0);  // [block][bucket]
  tbb::parallel_for(std::size_t{0}, blocks, [&](std::size_t blk) {
    i64* counts = block_counts.data() + blk * nb;
    for (std::size_t q = blk * kBlock; q < std::min(P, (blk + 1) * kBlock); ++q) {
      int id = 0;
      for (std::size_t a = 0; a < 3; ++a) {
        const float ext = hi[a] - lo[a];
        int cell = 0;
        if (ext != 0.0f) {
          const float u = (xyz[3 * q + a] - lo[a]) / ext * 5.999f;
          cell = std::clamp(static_cast<int>(std::floor(u)), 0, kBucketsPerAxis - 1);
        }
        id = id * kBucketsPerAxis + cell;
      }
      bucket[q] = id;
      ++counts[id];
    }
  });
  std::vector<i64> start(nb + 1, 0);  // each bucket's first position
  {
    i64 pos = 0;
    for (int b = 0; b < nb; ++b) {
      start[static_cast<std::size_t>(b)] = pos;
      for (std::size_t blk = 0; blk < blocks; ++blk) {
        i64& c = block_counts[blk * nb + static_cast<std::size_t>(b)];
        const i64 n = c;
        c = pos;  // now this block's first position in bucket b
        pos += n;
      }
    }
    start[nb] = pos;
  }
  std::vector<std::size_t> order(P);
  tbb::parallel_for(std::size_t{0}, blocks, [&](std::size_t blk) {
    i64* fill = block_counts.data() + blk * nb;
    for (std::size_t q = blk * kBlock; q < std::min(P, (blk + 1) * kBlock); ++q)
      order[static_cast<std::size_t>(fill[bucket[q]]++)] = q;
  });
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
  std::vector<i64> offsets;
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
    tbb::parallel_for(i64{0}, size, [&](i64 t) {
      std::copy_n(xyz.data() + 3 * order[static_cast<std::size_t>(base + t)], 3, cx.data() + 3 * t);
    });
    field.evaluate_groups(cx.data(), offsets, KeySelection{top_k, kBucketStride}, vals.data());
    tbb::parallel_for(i64{0}, size, [&](i64 t) {  // distinct vertices: no two writes collide
      g.values[static_cast<std::size_t>(sel[order[static_cast<std::size_t>(base + t)]])] =
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
    const BandPoints band = select_band(g, lv[l], last, o);
    const std::vector<i64>& sel = band.sel;
    VolumeGrid fine = make_grid(lv[l], o, kNaN);
    if (sel.empty()) {
      st.empty_band = true;
      fine = make_grid(lv.back(), o, kNaN);
      record(lv[l], 0, fine);
      spdlog::info("volume decoding: level {} selected no vertex: no surface", lv[l]);
      return fine;
    }
    if (flash)
      query_buckets(field, sel, band.xyz, o, top_k, fine, label(l));
    else
      query_rows(field, sel, band.xyz, o.num_chunks, fine, label(l));
    record(lv[l], static_cast<i64>(sel.size()), fine);
    g = std::move(fine);
  }
  return g;
}

}  // namespace gen3d::models
