// Volume decoders on analytic fields (specs/volume-decoding.md section 10 invariants) and on a
// tiny random ShapeVAE (FlashVDM key selection).

#include <gtest/gtest.h>

#include <algorithm>
#include <cmath>
#include <cstring>
#include <limits>
#include <span>

#include "mesh/marching_cubes.h"
#include "models/core/error.h"
#include "models/shape/field.h"
#include "models/shape/shape_vae.h"
#include "models/shape/volume_decoder.h"

namespace gen3d::models {
namespace {

using i64 = std::int64_t;

TEST(VolumeSchedule, HierarchicalTable) {
  const std::vector<std::pair<int, std::vector<int>>> cases = {{62, {62}},
                                                               {64, {64}},
                                                               {100, {100}},
                                                               {125, {125}},
                                                               {126, {63, 126}},
                                                               {128, {64, 128}},
                                                               {196, {98, 196}},
                                                               {255, {63, 127, 255}},
                                                               {256, {64, 128, 256}},
                                                               {380, {95, 190, 380}},
                                                               {384, {96, 192, 384}},
                                                               {512, {64, 128, 256, 512}}};
  for (const auto& [r, lv] : cases) EXPECT_EQ(hierarchical_levels(r, 63), lv) << r;
  EXPECT_EQ(hierarchical_levels(32, 16), (std::vector<int>{16, 32}));
}

TEST(VolumeSchedule, FlashVDMTable) {
  const std::vector<std::pair<int, std::vector<int>>> cases = {{16, {15}},
                                                               {40, {39}},
                                                               {128, {63, 126}},
                                                               {196, {95, 190}},
                                                               {255, {63, 126, 252}},
                                                               {256, {63, 126, 252}},
                                                               {380, {95, 190, 380}},
                                                               {384, {95, 190, 380}},
                                                               {512, {63, 126, 252, 504}}};
  for (const auto& [r, lv] : cases) EXPECT_EQ(flashvdm_levels(r, 63, 4), lv) << r;
  EXPECT_EQ(flashvdm_levels(32, 16, 4), (std::vector<int>{15, 30}));
}

VolumeDecodeOptions opts(VolumeMethod m, int r) {
  VolumeDecodeOptions o;
  o.method = m;
  o.resolution = r;
  return o;
}

// V2: queried vertices per level for the sphere r = 0.5, s = 10 (spec values, +-0.05 %).
TEST(VolumeBand, QueriedCountsMatchSpec) {
  const AnalyticField f = sphere_field(0.5, 10.0);
  struct Case {
    VolumeMethod m;
    int r;
    std::vector<i64> counts;
  };
  const std::vector<Case> cases = {{VolumeMethod::kHierarchical, 128, {274625, 213414}},
                                   {VolumeMethod::kHierarchical, 255, {262144, 241742, 1433446}},
                                   {VolumeMethod::kHierarchical, 256, {274625, 253594, 1469422}},
                                   {VolumeMethod::kFlashVDM, 380, {884736, 723990, 4538522}}};
  for (const Case& c : cases) {
    VolumeDecodeStats st;
    decode_volume(f, opts(c.m, c.r), &st);
    ASSERT_EQ(st.points_per_level.size(), c.counts.size()) << c.r;
    for (std::size_t l = 0; l < c.counts.size(); ++l)
      EXPECT_NEAR(static_cast<double>(st.points_per_level[l]), static_cast<double>(c.counts[l]),
                  5e-4 * static_cast<double>(c.counts[l]))
          << volume_method_name(c.m) << " R " << c.r << " level " << l;
  }
}

mesh::Mesh extract(const VolumeGrid& g,
                   mesh::VertexMapping map = mesh::VertexMapping::kReferenceGrid) {
  mesh::MarchingCubesOptions o;
  o.mapping = map;
  for (int a = 0; a < 3; ++a) {
    o.bbox_min[a] = static_cast<float>(g.bbox_min[a]);
    o.bbox_max[a] = static_cast<float>(g.bbox_max[a]);
  }
  return mesh::marching_cubes({g.values.data(), g.n(), g.n(), g.n()}, o);
}

// V3 + V4: banded values equal dense values; every sign-changing cube is fully queried; the same
// mesh comes out.
TEST(VolumeBand, HierarchicalEqualsDenseOnAnalyticFields) {
  struct Case {
    const char* name;
    AnalyticField f;
    int r;
    float scale;
  };
  const std::vector<Case> cases = {{"sphere10", sphere_field(0.5, 10.0), 128, 10},
                                   {"sphere100", sphere_field(0.5, 100.0), 128, 100},
                                   {"torus", torus_field(0.55, 0.18, 10.0), 255, 10},
                                   {"box", box_field({0.4, 0.3, 0.6}, 10.0), 128, 10},
                                   {"plate", plate_field(0.0158, 0.05, 10.0), 128, 10}};
  for (const Case& c : cases) {
    const VolumeGrid h = decode_volume(c.f, opts(VolumeMethod::kHierarchical, c.r));
    const VolumeGrid d = decode_volume(c.f, opts(VolumeMethod::kDense, h.resolution));
    ASSERT_EQ(h.values.size(), d.values.size());
    i64 bad_value = 0, uncovered = 0;
    const i64 n = d.n();
    // Refined levels use the spec's float32 coordinates (idx * step + min), the dense grid the
    // linspace axis: values agree up to that coordinate rounding (a few 1e-8 times the slope).
    for (std::size_t v = 0; v < d.values.size(); ++v)
      if (!std::isnan(h.values[v]) && std::abs(h.values[v] - d.values[v]) > 1e-6f * c.scale)
        ++bad_value;
    for (i64 i = 0; i + 1 < n; ++i)
      for (i64 j = 0; j + 1 < n; ++j)
        for (i64 k = 0; k + 1 < n; ++k) {
          bool pos = false, neg = false, missing = false;
          for (int q = 0; q < 8; ++q) {
            const std::size_t idx =
                static_cast<std::size_t>(d.index(i + (q & 1), j + ((q >> 1) & 1), k + (q >> 2)));
            (d.values[idx] > 0.0f ? pos : neg) = true;
            missing = missing || std::isnan(h.values[idx]);
          }
          if (pos && neg && missing) ++uncovered;
        }
    EXPECT_EQ(bad_value, 0) << c.name;
    EXPECT_EQ(uncovered, 0) << c.name;
    const mesh::Mesh mh = extract(h), md = extract(d);
    EXPECT_EQ(mh.faces.size(), md.faces.size()) << c.name;
    EXPECT_EQ(mh.positions.size(), md.positions.size()) << c.name;
    EXPECT_NEAR(mesh::signed_volume(mh), mesh::signed_volume(md), 1e-6) << c.name;
  }
}

// V5: chunking does not change results.
TEST(VolumeBand, ChunkIndependence) {
  const AnalyticField f = torus_field(0.55, 0.18, 10.0);
  for (VolumeMethod m :
       {VolumeMethod::kDense, VolumeMethod::kHierarchical, VolumeMethod::kFlashVDM}) {
    VolumeDecodeOptions a = opts(m, 128), b = a;
    a.num_chunks = 1000;
    b.num_chunks = 200000;
    const VolumeGrid ga = decode_volume(f, a), gb = decode_volume(f, b);
    ASSERT_EQ(ga.values.size(), gb.values.size());
    EXPECT_EQ(0, std::memcmp(ga.values.data(), gb.values.data(), ga.values.size() * 4))
        << volume_method_name(m);
  }
}

// Every queried vertex of a banded decode holds the field's value at that vertex's own
// coordinates, float32(idx) * float32(size / r) + float32(min) per axis, to the bit; the fine
// levels compute them while listing the band, the first level from the grid's axes.
TEST(VolumeBand, QueriedValuesAreTheFieldAtTheVertexCoordinates) {
  const AnalyticField f = torus_field(0.55, 0.18, 10.0);
  for (VolumeMethod m : {VolumeMethod::kHierarchical, VolumeMethod::kFlashVDM}) {
    const VolumeDecodeOptions o = opts(m, 128);
    const VolumeGrid g = decode_volume(f, o);
    const std::int64_t n = g.n();
    float step[3], lo[3];
    for (int a = 0; a < 3; ++a) {
      step[a] = static_cast<float>((o.bbox_max[a] - o.bbox_min[a]) / g.resolution);
      lo[a] = static_cast<float>(o.bbox_min[a]);
    }
    std::vector<float> xyz;
    std::vector<float> stored;
    for (std::int64_t t = 0; t < n * n * n; ++t) {
      const float v = g.values[static_cast<std::size_t>(t)];
      if (std::isnan(v)) continue;
      const std::int64_t idx[3] = {t / (n * n), (t / n) % n, t % n};
      for (int a = 0; a < 3; ++a) xyz.push_back(static_cast<float>(idx[a]) * step[a] + lo[a]);
      stored.push_back(v);
    }
    ASSERT_GT(stored.size(), 1000u) << volume_method_name(m);
    std::vector<float> expected(stored.size());
    f.evaluate(xyz.data(), static_cast<std::int64_t>(stored.size()), expected.data());
    EXPECT_EQ(0, std::memcmp(expected.data(), stored.data(), stored.size() * 4))
        << volume_method_name(m);
  }
}

// V7: orientation, bounds, exact mapping radius; no surface without a crash.
TEST(VolumeBand, MeshConventionsAndNoSurface) {
  const AnalyticField f = sphere_field(0.5, 10.0);
  const VolumeGrid g = decode_volume(f, opts(VolumeMethod::kHierarchical, 128));
  const mesh::Mesh m = extract(g, mesh::VertexMapping::kExact);
  ASSERT_FALSE(m.faces.empty());
  EXPECT_GT(mesh::signed_volume(m), 0.0);
  const double cell = 2.02 / g.resolution;
  double worst = 0.0;
  for (const auto& p : m.positions) {
    const double r = std::sqrt(double(p[0]) * p[0] + double(p[1]) * p[1] + double(p[2]) * p[2]);
    worst = std::max(worst, std::abs(r - 0.5));
  }
  EXPECT_LT(worst, 0.05 * cell);
  // Level outside the value range: no surface.
  VolumeDecodeOptions o = opts(VolumeMethod::kHierarchical, 128);
  o.level = 100.0f;
  VolumeDecodeStats st;
  const VolumeGrid e = decode_volume(f, o, &st);
  EXPECT_TRUE(st.empty_band);
  mesh::MarchingCubesReport rep;
  mesh::MarchingCubesOptions mo;
  mo.level = 100.0f;
  EXPECT_TRUE(mesh::marching_cubes({e.values.data(), e.n(), e.n(), e.n()}, mo, &rep).faces.empty());
  EXPECT_TRUE(rep.no_surface);
}

// V9: a thin plate with steep logits is lost by the band (documented), kept with s = 10.
TEST(VolumeBand, ThinFeatureLimitation) {
  VolumeDecodeStats steep, soft;
  decode_volume(plate_field(0.0158, 0.005, 1000.0), opts(VolumeMethod::kHierarchical, 256), &steep);
  EXPECT_TRUE(steep.empty_band);
  const VolumeGrid g = decode_volume(plate_field(0.0158, 0.005, 10.0),
                                     opts(VolumeMethod::kHierarchical, 256), &soft);
  EXPECT_FALSE(soft.empty_band);
  EXPECT_FALSE(extract(g).faces.empty());
}

ShapeVAEConfig tiny_config() {
  ShapeVAEConfig c;
  c.num_latents = 30;
  c.embed_dim = 4;
  c.num_freqs = 3;
  c.heads = 2;
  c.width = 16;
  c.num_decoder_layers = 1;
  c.scale_factor = 0.8;
  return c;
}

// V6: with K = T FlashVDM equals the hierarchical decoder up to summation order; with K < T it
// differs but is deterministic.
TEST(VolumeFlashVDM, KeySelectionDegenerateCaseAndDeterminism) {
  const ShapeVAE vae = ShapeVAE::random(tiny_config(), 7);
  Tensor lat({1, 30, 4});
  for (i64 i = 0; i < lat.numel(); ++i) lat.data()[i] = static_cast<float>(std::sin(0.7 * i));
  const Tensor dec = vae.decode(lat);
  const auto field = vae.geometry_field(dec, 0);
  EXPECT_EQ(field->key_count(), 30);
  VolumeDecodeOptions o = opts(VolumeMethod::kFlashVDM, 40);
  o.min_resolution = 20;      // levels [19, 38]
  o.band_abs_logit = 100.0f;  // wide band: the refinement queries everything near the grid
  o.top_k = 30;
  const VolumeGrid all = decode_volume(*field, o);
  // Same grid through plain (ungrouped) evaluation.
  VolumeDecodeOptions plain = o;
  plain.top_k = 0;
  const VolumeGrid ref = decode_volume(*field, plain);
  ASSERT_EQ(all.values.size(), ref.values.size());
  double worst = 0.0;
  for (std::size_t v = 0; v < all.values.size(); ++v) {
    ASSERT_EQ(std::isnan(all.values[v]), std::isnan(ref.values[v]));
    if (!std::isnan(ref.values[v]))
      worst = std::max(worst, double(std::abs(all.values[v] - ref.values[v])));
  }
  EXPECT_LT(worst, 1e-4);
  o.top_k = 5;
  const VolumeGrid a = decode_volume(*field, o), b = decode_volume(*field, o);
  EXPECT_EQ(0, std::memcmp(a.values.data(), b.values.data(), a.values.size() * 4));
  double diff = 0.0;
  for (std::size_t v = 0; v < a.values.size(); ++v)
    if (!std::isnan(a.values[v]))
      diff = std::max(diff, double(std::abs(a.values[v] - ref.values[v])));
  EXPECT_GT(diff, 1e-3);
}

// Records every grouped call (points and group offsets) and answers with the wrapped field.
class GroupRecorder final : public Field {
 public:
  explicit GroupRecorder(const Field& f) : f_(f) {}
  void evaluate(const float* xyz, i64 n, float* out) const override { f_.evaluate(xyz, n, out); }
  void evaluate_groups(const float* xyz, std::span<const i64> offsets, const KeySelection&,
                       float* out) const override {
    calls.push_back({std::vector<float>(xyz, xyz + 3 * offsets.back()),
                     std::vector<i64>(offsets.begin(), offsets.end())});
    f_.evaluate(xyz, offsets.back(), out);
  }
  i64 key_count() const override { return 64; }
  struct Call {
    std::vector<float> xyz;
    std::vector<i64> offsets;
  };
  mutable std::vector<Call> calls;

 private:
  const Field& f_;
};

// Spec 6.3: a refinement level's points go to the field in 6x6x6 buckets over the points' box
// (cell = floor((x - min) / (max - min) * 5.999) per axis), bucket by bucket in id order, each
// bucket one attention group holding its points in row-major order, and every call whole buckets
// (below the chunk size unless one bucket alone exceeds it). R 300 (levels 75, 150, 300) puts
// vertices near enough to the cell edges that a factor of 5.99 instead of 5.999 moves one.
TEST(VolumeFlashVDM, RefinementGroupsAreTheSpecsBuckets) {
  const AnalyticField torus = torus_field(0.55, 0.18, 10.0);
  const AnalyticField sphere = sphere_field(0.3, 10.0, {0.2, -0.1, 0.05});
  for (const AnalyticField* f : {&torus, &sphere})
    for (const i64 chunk : {i64{3000}, i64{40000}}) {
      const GroupRecorder rec(*f);
      VolumeDecodeOptions o = opts(VolumeMethod::kFlashVDM, 300);
      o.num_chunks = chunk;
      VolumeDecodeStats st;
      decode_volume(rec, o, &st);
      ASSERT_EQ(st.levels.size(), 3u);
      // Split the calls by level (level 0 is the block grid).
      std::size_t c = 0;
      i64 level0 = 0;
      for (; level0 < st.points_per_level[0]; ++c) level0 += rec.calls[c].offsets.back();
      ASSERT_EQ(level0, st.points_per_level[0]);
      for (std::size_t l = 1; l < st.levels.size(); ++l) {
        const std::size_t first = c;
        i64 points = 0;
        for (; c < rec.calls.size() && points < st.points_per_level[l]; ++c)
          points += rec.calls[c].offsets.back();
        ASSERT_EQ(points, st.points_per_level[l]) << "level " << l;
        float lo[3], hi[3];
        for (int a = 0; a < 3; ++a) {
          lo[a] = std::numeric_limits<float>::infinity();
          hi[a] = -lo[a];
        }
        for (std::size_t k = first; k < c; ++k)
          for (std::size_t q = 0; q < rec.calls[k].xyz.size(); ++q) {
            lo[q % 3] = std::min(lo[q % 3], rec.calls[k].xyz[q]);
            hi[q % 3] = std::max(hi[q % 3], rec.calls[k].xyz[q]);
          }
        const auto bucket = [&](const float* p) {
          int id = 0;
          for (int a = 0; a < 3; ++a) {
            const float u = (p[a] - lo[a]) / (hi[a] - lo[a]) * 5.999f;
            id = id * 6 + std::clamp(static_cast<int>(std::floor(u)), 0, 5);
          }
          return id;
        };
        int last_bucket = -1;
        for (std::size_t k = first; k < c; ++k) {
          const auto& call = rec.calls[k];
          const i64 groups = static_cast<i64>(call.offsets.size()) - 1;
          if (groups > 1) {
            EXPECT_LT(call.offsets.back(), chunk) << "level " << l;
          }
          for (i64 gi = 0; gi < groups; ++gi) {
            const i64 b0 = call.offsets[static_cast<std::size_t>(gi)];
            const i64 b1 = call.offsets[static_cast<std::size_t>(gi + 1)];
            ASSERT_LT(b0, b1);
            const int id = bucket(call.xyz.data() + 3 * b0);
            EXPECT_GT(id, last_bucket) << "level " << l << " call " << k << " group " << gi;
            last_bucket = id;
            for (i64 q = b0; q < b1; ++q) {
              const float* p = call.xyz.data() + 3 * q;
              ASSERT_EQ(bucket(p), id) << "level " << l << " point " << q;
              if (q > b0) {
                ASSERT_TRUE(std::lexicographical_compare(p - 3, p, p, p + 3))
                    << "level " << l << " point " << q << " out of row-major order";
              }
            }
          }
        }
      }
      EXPECT_EQ(c, rec.calls.size());
    }
}

TEST(VolumeDecode, RejectsBadOptions) {
  const AnalyticField f = sphere_field(0.5, 10.0);
  VolumeDecodeOptions o;
  o.resolution = 0;
  EXPECT_THROW(decode_volume(f, o), ModelError);
  o.resolution = 16;
  o.num_chunks = 0;
  EXPECT_THROW(decode_volume(f, o), ModelError);
  EXPECT_THROW(parse_volume_method("octree"), ModelError);
}

}  // namespace
}  // namespace gen3d::models
