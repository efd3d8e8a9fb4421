// Unit tests of the Hunyuan3D-2.1 PBR UNet2.5D on a tiny random network: batch items are
// independent and shared inputs (text, normal / position latents, reference features, position
// maps) equal repeated ones; keys / values projected once per generation give the same bits; the
// material data flow of the reference (albedo rows never read the mr rows; the mr rows read the
// albedo queries of the reference attention); a probe does not change the result; bad inputs are
// refused by name.

#include <gtest/gtest.h>

#include <algorithm>
#include <cmath>
#include <cstdint>
#include <cstdio>
#include <cstring>
#include <vector>

#include "models/core/error.h"
#include "models/paint/pbr_unet.h"

namespace gen3d::models {
namespace {

using i64 = std::int64_t;

constexpr i64 kTokens = 5, kDino = 16, kViews = 3, kLat = 8, kMap = 16;

UNetConfig tiny() {
  UNetConfig c;
  c.in_channels = 4;
  c.block_out_channels = {32, 32};
  c.down_block_types = {"CrossAttnDownBlock2D", "DownBlock2D"};
  c.up_block_types = {"UpBlock2D", "CrossAttnUpBlock2D"};
  c.layers_per_block = 1;
  c.attention_head_dim = {2, 2};
  c.transformer_layers_per_block = {1, 1};
  c.cross_attention_dim = 24;
  c.norm_num_groups = 8;
  return c;
}

Tensor random(const Shape& s, std::uint32_t seed, float scale = 1.0f) {
  Tensor t(s);
  std::uint32_t x = seed * 2654435761u + 12345u;
  for (float& v : t.span()) {
    x = x * 1664525u + 1013904223u;
    v = scale * (static_cast<float>(x >> 8) / 8388608.0f - 1.0f);
  }
  return t;
}

// Rows [b·n, (b + 1)·n) of a (rows, ...) tensor, repeated `copies` times.
Tensor rows_of(const Tensor& t, i64 first, i64 count, i64 copies = 1) {
  const i64 per = t.numel() / t.dim(0);
  std::vector<i64> dims(t.shape().dims().begin(), t.shape().dims().end());
  dims[0] = count * copies;
  Tensor y(Shape::from(dims));
  for (i64 c = 0; c < copies; ++c)
    std::memcpy(y.data() + c * count * per, t.data() + first * per,
                sizeof(float) * static_cast<std::size_t>(count * per));
  return y;
}

double max_diff(const float* a, const float* b, i64 n) {
  double d = 0;
  for (i64 i = 0; i < n; ++i) d = std::max(d, std::abs(static_cast<double>(a[i]) - b[i]));
  return d;
}

// Position maps (batch, N, 3, S, S): a disc of geometry on white, a different tilt per view (and
// per item when `vary`).
std::vector<std::uint16_t> maps_bits(i64 batch, bool vary = false) {
  std::vector<std::uint16_t> bits(static_cast<std::size_t>(batch * kViews * 3 * kMap * kMap));
  for (i64 b = 0; b < batch; ++b)
    for (i64 v = 0; v < kViews; ++v)
      for (i64 y = 0; y < kMap; ++y)
        for (i64 x = 0; x < kMap; ++x) {
          const double dx = (x + 0.5) / kMap - 0.5, dy = (y + 0.5) / kMap - 0.5;
          const double k = vary ? static_cast<double>(b) : 0.0;
          const bool in = dx * dx + dy * dy < 0.15 - 0.05 * k;
          for (int c = 0; c < 3; ++c) {
            const double val = 0.5 + 0.3 * (c == 0 ? dx : c == 1 ? dy : (v + 1 + 2 * k) * dx * dy);
            bits[static_cast<std::size_t>((((b * kViews + v) * 3 + c) * kMap + y) * kMap + x)] =
                float_to_half(in ? static_cast<float>(val) : 1.0f);
          }
        }
  return bits;
}

struct TinyPbr {
  // Weights in ±0.2: attention logits of order 1, so every branch and index shows in the output.
  std::unique_ptr<PbrUNet> net =
      PbrUNet::random(tiny(), 3, kTokens, kDino, WeightStorage::kF32, 0.2f);
  std::vector<std::uint16_t> bits = maps_bits(1);
  HalfPositionMaps maps{bits, 1, kViews, kMap, kMap};
  Tensor ref_lat = random({1, kLat, kLat, 4}, 1);
  Tensor dino = random({2, 3, kDino}, 2);
  Tensor normals = random({kViews, kLat, kLat, 4}, 3);
  Tensor positions = random({kViews, kLat, kLat, 4}, 4);
  Tensor sample = random({2 * PbrUNet::kMaterials * kViews, kLat, kLat, 4}, 5);
  Tensor text = random({1, PbrUNet::kMaterials, kTokens, 24}, 6);

  PbrCondition condition(const Tensor& dino_rows) const {
    return net->condition(ref_lat, 1, dino_rows, maps, kLat);
  }
};

TEST(PbrUNetForward, BatchItemsAreIndependentAndSharedInputsEqualRepeatedOnes) {
  TinyPbr s;
  const PbrCondition cond = s.condition(s.dino);
  const std::vector<float> ref_scale{0.5f, 1.0f};
  const Tensor out =
      s.net->forward(s.sample, s.normals, s.positions, 700.0f, s.text, cond, ref_scale, 0.75f);
  ASSERT_EQ(out.dim(0), s.sample.dim(0));
  const i64 item = PbrUNet::kMaterials * kViews;
  const i64 per = out.numel() / out.dim(0);
  for (i64 b = 0; b < 2; ++b) {
    const PbrCondition one = s.condition(rows_of(s.dino, b, 1));
    const Tensor o =
        s.net->forward(rows_of(s.sample, b * item, item), s.normals, s.positions, 700.0f, s.text,
                       one, std::vector<float>{ref_scale[static_cast<std::size_t>(b)]}, 0.75f);
    EXPECT_LE(max_diff(o.data(), out.data() + b * item * per, o.numel()), 1e-5) << "item " << b;
    std::printf("  item %lld alone: max |diff| %.3g\n", static_cast<long long>(b),
                max_diff(o.data(), out.data() + b * item * per, o.numel()));
  }
  // Repeated text, normal / position latents, reference features and position maps.
  const std::vector<std::uint16_t> bits2 = maps_bits(2);
  PbrCondition rep;
  rep.ref = s.net->reference_features(rows_of(s.ref_lat, 0, 1, 2), 1);
  rep.dino = cond.dino.clone();
  s.net->prepare_positions(rep, {bits2, 2, kViews, kMap, kMap}, kLat);
  const Tensor out_rep =
      s.net->forward(s.sample, rows_of(s.normals, 0, kViews, 2), rows_of(s.positions, 0, kViews, 2),
                     700.0f, rows_of(s.text, 0, 1, 2), rep, ref_scale, 0.75f);
  EXPECT_LE(max_diff(out_rep.data(), out.data(), out.numel()), 1e-5);
}

// Every per-item input distinct (reference latents, DINO tokens, position maps, normal and
// position latents, text): each item of a batch equals its own run.
TEST(PbrUNetForward, DistinctItemsEachMatchTheirOwnRun) {
  TinyPbr s;
  constexpr i64 B = 2;
  const i64 item = PbrUNet::kMaterials * kViews;
  const Tensor ref_lat = random({B, kLat, kLat, 4}, 11);
  const Tensor normals = random({B * kViews, kLat, kLat, 4}, 12);
  const Tensor positions = random({B * kViews, kLat, kLat, 4}, 13);
  const Tensor text = random({B, PbrUNet::kMaterials, kTokens, 24}, 14);
  const std::vector<std::uint16_t> bits = maps_bits(B, /*vary=*/true);
  const std::vector<float> ref_scale{1.0f, 0.5f};
  const PbrCondition cond =
      s.net->condition(ref_lat, 1, s.dino, {bits, B, kViews, kMap, kMap}, kLat);
  ASSERT_EQ(cond.ref.batch, B);
  const Tensor out =
      s.net->forward(s.sample, normals, positions, 400.0f, text, cond, ref_scale, 1.0f);
  const i64 per = out.numel() / out.dim(0);
  const std::size_t map_item = bits.size() / B;
  for (i64 b = 0; b < B; ++b) {
    const std::span<const std::uint16_t> own(bits.data() + b * map_item, map_item);
    const PbrCondition one = s.net->condition(rows_of(ref_lat, b, 1), 1, rows_of(s.dino, b, 1),
                                              {own, 1, kViews, kMap, kMap}, kLat);
    const Tensor o =
        s.net->forward(rows_of(s.sample, b * item, item), rows_of(normals, b * kViews, kViews),
                       rows_of(positions, b * kViews, kViews), 400.0f, rows_of(text, b, 1), one,
                       std::vector<float>{ref_scale[static_cast<std::size_t>(b)]}, 1.0f);
    EXPECT_LE(max_diff(o.data(), out.data() + b * item * per, o.numel()), 1e-5) << "item " << b;
    std::printf("  item %lld alone: max |diff| %.3g\n", static_cast<long long>(b),
                max_diff(o.data(), out.data() + b * item * per, o.numel()));
  }
  // The items do differ (their inputs do).
  EXPECT_GT(max_diff(out.data(), out.data() + item * per, item * per), 1e-3);
  // Keys / values projected once (the reference features item by item, per-item prompts and
  // DINO rows) give the same bits as projecting them in the forward.
  PbrCondition once = cond;
  s.net->project(once, text, ref_scale);
  const Tensor projected =
      s.net->forward(s.sample, normals, positions, 400.0f, text, once, ref_scale, 1.0f);
  ASSERT_EQ(projected.shape(), out.shape());
  EXPECT_EQ(0, std::memcmp(projected.data(), out.data(), sizeof(float) * out.numel()));
}

TEST(PbrUNetForward, AlbedoNeverReadsMrAndMrReadsTheAlbedoQueries) {
  TinyPbr s;
  const PbrCondition cond = s.condition(s.dino);
  const i64 item = PbrUNet::kMaterials * kViews;
  const i64 per = kLat * kLat * 4;
  for (float rs : {0.0f, 1.0f}) {
    const std::vector<float> ref_scale{rs, rs};
    const Tensor out =
        s.net->forward(s.sample, s.normals, s.positions, 300.0f, s.text, cond, ref_scale);
    // Perturb the mr rows of item 0: its albedo rows stay bit-identical.
    Tensor mr = s.sample.clone();
    for (i64 i = kViews * per; i < item * per; ++i) mr.data()[i] += 0.5f;
    const Tensor o_mr = s.net->forward(mr, s.normals, s.positions, 300.0f, s.text, cond, ref_scale);
    EXPECT_EQ(max_diff(o_mr.data(), out.data(), kViews * per), 0.0) << "ref_scale " << rs;
    EXPECT_GT(max_diff(o_mr.data() + kViews * per, out.data() + kViews * per, kViews * per), 1e-3);
    // Perturb the albedo rows of item 0: its mr rows change only through the reference attention.
    Tensor alb = s.sample.clone();
    for (i64 i = 0; i < kViews * per; ++i) alb.data()[i] += 0.5f;
    const Tensor o_alb =
        s.net->forward(alb, s.normals, s.positions, 300.0f, s.text, cond, ref_scale);
    const double d = max_diff(o_alb.data() + kViews * per, out.data() + kViews * per, kViews * per);
    if (rs == 0.0f)
      EXPECT_EQ(d, 0.0);
    else
      EXPECT_GT(d, 1e-4);
  }
}

TEST(PbrUNetForward, ProbeDoesNotChangeTheResultAndSeesEveryBranch) {
  TinyPbr s;
  const PbrCondition cond = s.condition(s.dino);
  const std::vector<float> ref_scale{0.0f, 1.0f};
  const Tensor plain =
      s.net->forward(s.sample, s.normals, s.positions, 500.0f, s.text, cond, ref_scale);
  std::vector<std::string> names;
  const Tensor probed =
      s.net->forward(s.sample, s.normals, s.positions, 500.0f, s.text, cond, ref_scale, 1.0f,
                     [&](const std::string& n, const Tensor&) { names.push_back(n); });
  EXPECT_EQ(max_diff(plain.data(), probed.data(), plain.numel()), 0.0);
  const auto& sites = s.net->main_unet().transformer_sites();
  for (const TransformerSite& site : sites)
    for (const char* b :
         {".transformer.norm1", ".transformer.attn1", ".attn_refview", ".attn_multiview",
          ".transformer.attn2", ".attn_dino", ".transformer.norm3", ".transformer.ff", ""})
      EXPECT_NE(std::find(names.begin(), names.end(), site.path + b), names.end()) << site.path + b;
}

TEST(PbrUNetForward, BadInputsAreRefusedByName) {
  TinyPbr s;
  const PbrCondition cond = s.condition(s.dino);
  auto fails = [&](auto&& f, const char* what) {
    try {
      f();
      ADD_FAILURE() << "accepted: " << what;
    } catch (const ModelError& e) {
      EXPECT_NE(std::string(e.what()).find(what), std::string::npos) << e.what();
    }
  };
  fails(
      [&] {
        (void)s.net->forward(s.sample, s.normals, s.positions, 1.0f, s.text, cond,
                             std::vector<float>{1.0f});
      },
      "ref_scale");
  fails(
      [&] {
        (void)s.net->forward(s.sample, s.normals, s.positions, 1.0f, random({1, 1, kTokens, 24}, 9),
                             cond, std::vector<float>{1.0f, 1.0f});
      },
      "text");
  fails(
      [&] {
        (void)s.net->forward(rows_of(s.sample, 0, 5), s.normals, s.positions, 1.0f, s.text, cond,
                             std::vector<float>{1.0f});
      },
      "sample rows");
  fails([&] { (void)s.net->project_dino(random({1, 3, kDino + 1}, 9)); }, "DINO");
  fails([&] { (void)pbr_voxel_indices(s.maps, 3, 8); }, "grid 3");
  fails([&] { (void)pbr_rope_tables(std::vector<std::int32_t>(3, 0), 1, 1, 24, 8); }, "head_dim");
  fails(
      [&] {
        (void)pbr_rope_tables(std::vector<std::int32_t>{0, 0, 8}, 1, 1, 16, 8);
      },
      "voxel index 8");
  fails([&] { (void)pbr_multires_voxel_indices(s.maps, 4); }, "below 8");
}

}  // namespace
}  // namespace gen3d::models
