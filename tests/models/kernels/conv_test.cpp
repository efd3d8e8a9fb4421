#include "models/kernels/conv.h"

#include <gtest/gtest.h>

#include <cmath>
#include <vector>

#include "models/core/error.h"
#include "models/kernels/kernel_test_util.h"

namespace gen3d::models::kernels {
namespace {

using ktest::Guarded;

struct ConvCase {
  std::int64_t batch, h, w, cin, cout, k;
  ConvGeometry g;
  bool bias;
};

ConvWeight random_weight(std::int64_t cout, std::int64_t cin, std::int64_t kh, std::int64_t kw,
                         bool bias, std::uint64_t seed) {
  auto oihw = ktest::random_vec(static_cast<std::size_t>(cout * cin * kh * kw), seed,
                                1.0f / std::sqrt(static_cast<float>(cin * kh * kw)));
  auto b = ktest::random_vec(static_cast<std::size_t>(cout), seed + 1, 0.5f);
  return pack_conv_weight(oihw.data(), bias ? b.data() : nullptr, cout, cin, kh, kw);
}

TEST(Conv2d, PackMovesInputChannelsInnermost) {
  // O=2, I=3, 2x2: element (o, i, a, b) = 1000o + 100i + 10a + b.
  std::vector<float> w(2 * 3 * 2 * 2);
  for (int o = 0; o < 2; ++o)
    for (int i = 0; i < 3; ++i)
      for (int a = 0; a < 2; ++a)
        for (int b = 0; b < 2; ++b)
          w[((o * 3 + i) * 2 + a) * 2 + b] = 1000 * o + 100 * i + 10 * a + b;
  const float bias[] = {7, 8};
  ConvWeight p = pack_conv_weight(w.data(), bias, 2, 3, 2, 2);
  EXPECT_EQ(p.cout, 2);
  EXPECT_EQ(p.cin, 3);
  ASSERT_EQ(p.w.size(), w.size());
  for (int o = 0; o < 2; ++o)
    for (int a = 0; a < 2; ++a)
      for (int b = 0; b < 2; ++b)
        for (int i = 0; i < 3; ++i)
          EXPECT_EQ(p.w[static_cast<std::size_t>(((o * 2 + a) * 2 + b) * 3 + i)],
                    1000 * o + 100 * i + 10 * a + b);
  EXPECT_EQ(p.bias, (std::vector<float>{7, 8}));
  EXPECT_TRUE(pack_conv_weight(w.data(), nullptr, 2, 3, 2, 2).bias.empty());
}

TEST(Conv2d, KnownValuesWithPadding) {
  // 1 channel 3x3 image 1..9, 3x3 all-ones kernel, pad 1: each output = sum of its neighbourhood.
  std::vector<float> x = {1, 2, 3, 4, 5, 6, 7, 8, 9};
  std::vector<float> ones(9, 1.0f);
  const float bias = 0.5f;
  ConvWeight wt = pack_conv_weight(ones.data(), &bias, 1, 1, 3, 3);
  std::vector<float> y(9);
  conv2d(y.data(), x.data(), 1, 3, 3, wt, ConvGeometry::same(1));
  const std::vector<float> want = {12, 21, 16, 27, 45, 33, 24, 39, 28};
  for (int i = 0; i < 9; ++i) EXPECT_FLOAT_EQ(y[static_cast<std::size_t>(i)], want[i] + 0.5f);
  // Stride 2, pad right/bottom only (the SD VAE downsampler): 4x4 -> 2x2.
  std::vector<float> x4(16);
  for (int i = 0; i < 16; ++i) x4[static_cast<std::size_t>(i)] = static_cast<float>(i);
  ConvGeometry g{2, 0, 1, 0, 1};
  ConvWeight w0 = pack_conv_weight(ones.data(), nullptr, 1, 1, 3, 3);
  std::vector<float> y4(4);
  conv2d(y4.data(), x4.data(), 1, 4, 4, w0, g);
  // Windows: rows 0-2/cols 0-2; rows 0-2/cols 2-4 (col 4 = pad); rows 2-4; both.
  EXPECT_FLOAT_EQ(y4[0], 0 + 1 + 2 + 4 + 5 + 6 + 8 + 9 + 10);
  EXPECT_FLOAT_EQ(y4[1], 2 + 3 + 6 + 7 + 10 + 11);
  EXPECT_FLOAT_EQ(y4[2], 8 + 9 + 10 + 12 + 13 + 14);
  EXPECT_FLOAT_EQ(y4[3], 10 + 11 + 14 + 15);
}

TEST(Conv2d, FastMatchesReference) {
  const ConvCase cases[] = {
      {1, 1, 1, 1, 1, 1, ConvGeometry::same(0), false},
      {2, 5, 7, 3, 8, 3, ConvGeometry::same(1), true},        // conv_in-like, odd sizes
      {1, 9, 6, 5, 4, 3, ConvGeometry::same(1, 2), true},     // stride 2, pad 1
      {2, 8, 8, 6, 6, 3, ConvGeometry{2, 0, 1, 0, 1}, true},  // VAE downsampler
      {1, 7, 9, 4, 5, 3, ConvGeometry{1, 2, 0, 1, 3}, true},  // asymmetric padding
      {3, 6, 5, 16, 24, 1, ConvGeometry::same(0), true},      // 1x1 (GEMM in place)
      {1, 6, 5, 7, 3, 1, ConvGeometry::same(0), false},
      {1, 6, 5, 8, 4, 1, ConvGeometry::same(0, 2), true},     // 1x1 strided
      {1, 4, 4, 3, 2, 1, ConvGeometry::same(1), true},        // 1x1 padded
      {1, 10, 12, 2, 3, 5, ConvGeometry::same(2, 3), false},  // 5x5, stride 3
      {2, 40, 33, 64, 48, 3, ConvGeometry::same(1), true},    // many pixel blocks
      {1, 12, 12, 200, 40, 3, ConvGeometry::same(1), true},   // long patch rows
      {1, 4, 4, 32, 300, 3, ConvGeometry::same(1), true},     // output-channel panels
      {2, 3, 3, 16, 517, 1, ConvGeometry::same(0, 2), true},  // panels on a strided 1x1
  };
  std::uint64_t seed = 10;
  for (const auto& c : cases) {
    SCOPED_TRACE(::testing::Message()
                 << c.batch << "x" << c.h << "x" << c.w << "x" << c.cin << " -> " << c.cout << " k"
                 << c.k << " stride " << c.g.stride << " pad " << c.g.pad_top << ","
                 << c.g.pad_bottom << "," << c.g.pad_left << "," << c.g.pad_right);
    ConvWeight wt = random_weight(c.cout, c.cin, c.k, c.k, c.bias, seed++);
    auto x = ktest::random_vec(static_cast<std::size_t>(c.batch * c.h * c.w * c.cin), seed++);
    const std::int64_t oh = c.g.out_h(c.h, c.k), ow = c.g.out_w(c.w, c.k);
    const auto n = static_cast<std::size_t>(c.batch * oh * ow * c.cout);
    Guarded r(n), f(n);
    ref::conv2d(r.data(), x.data(), c.batch, c.h, c.w, wt, c.g);
    conv2d(f.data(), x.data(), c.batch, c.h, c.w, wt, c.g);
    EXPECT_TRUE(f.intact_outside([n](std::size_t i) { return i < n; }));
    EXPECT_LE(ktest::nmse(f.data(), r.data(), n), 1e-12);
  }
}

TEST(Conv2d, ManyBlocksMatchReference) {
  // Large enough for many pixel blocks and a patch row (864 floats) that bounds the block size.
  const std::int64_t h = 48, w = 40, cin = 96, cout = 64;
  ConvWeight wt = random_weight(cout, cin, 3, 3, true, 77);
  auto x = ktest::random_vec(static_cast<std::size_t>(h * w * cin), 78);
  std::vector<float> y(static_cast<std::size_t>(h * w * cout));
  conv2d(y.data(), x.data(), 1, h, w, wt, ConvGeometry::same(1));
  std::vector<float> r(y.size());
  ref::conv2d(r.data(), x.data(), 1, h, w, wt, ConvGeometry::same(1));
  EXPECT_LE(ktest::nmse(y.data(), r.data(), y.size()), 1e-12);
}

struct GnCase {
  std::int64_t batch, hw, c, groups;
};

TEST(GroupNorm, FastMatchesReferenceWithAndWithoutSilu) {
  const GnCase cases[] = {{1, 1, 1, 1},     {2, 5, 4, 2},     {1, 64, 32, 32},  {3, 17, 12, 4},
                          {2, 300, 96, 32}, {1, 4096, 16, 4}, {1, 9, 1280, 32}, {2, 2000, 8, 1}};
  std::uint64_t seed = 100;
  for (const auto& c : cases) {
    for (int variant = 0; variant < 4; ++variant) {  // affine on/off x silu on/off
      const bool affine = variant & 1, silu = variant & 2;
      SCOPED_TRACE(::testing::Message() << c.batch << "x" << c.hw << "x" << c.c << " groups "
                                        << c.groups << " affine " << affine << " silu " << silu);
      const auto n = static_cast<std::size_t>(c.batch * c.hw * c.c);
      // A large common offset checks that the statistics do not cancel.
      auto x = ktest::random_vec(n, seed++, 2.0f, variant == 3 ? 300.0f : 0.5f);
      auto gamma = ktest::random_vec(static_cast<std::size_t>(c.c), seed++, 0.3f, 1.0f);
      auto beta = ktest::random_vec(static_cast<std::size_t>(c.c), seed++, 0.2f);
      const float* gp = affine ? gamma.data() : nullptr;
      const float* bp = affine ? beta.data() : nullptr;
      Guarded r(n), f(n);
      ref::group_norm(r.data(), x.data(), c.batch, c.hw, c.c, c.groups, 1e-6f, gp, bp, silu);
      group_norm(f.data(), x.data(), c.batch, c.hw, c.c, c.groups, 1e-6f, gp, bp, silu);
      EXPECT_TRUE(f.intact_outside([n](std::size_t i) { return i < n; }));
      // A single element per group normalizes to exactly 0 (then beta / silu(beta)).
      EXPECT_LE(ktest::nmse(f.data(), r.data(), n), 1e-12);
      // In place gives the same numbers.
      std::vector<float> inplace = x;
      group_norm(inplace.data(), inplace.data(), c.batch, c.hw, c.c, c.groups, 1e-6f, gp, bp, silu);
      for (std::size_t i = 0; i < n; ++i) ASSERT_EQ(inplace[i], f.data()[i]) << i;
    }
  }
}

TEST(GroupNorm, KnownValues) {
  // 2 pixels x 4 channels, 2 groups: group 0 holds {1, 2, 3, 4}, group 1 holds {10, 10, 10, 10}.
  std::vector<float> x = {1, 2, 10, 10, 3, 4, 10, 10};
  std::vector<float> y(8);
  group_norm(y.data(), x.data(), 1, 2, 4, 2, 0.0f, nullptr, nullptr, false);
  const float s = 1.0f / std::sqrt(1.25f);
  EXPECT_NEAR(y[0], -1.5f * s, 1e-6f);
  EXPECT_NEAR(y[1], -0.5f * s, 1e-6f);
  EXPECT_NEAR(y[4], 0.5f * s, 1e-6f);
  EXPECT_NEAR(y[5], 1.5f * s, 1e-6f);
  const float gamma[] = {1, 1, 1, 1}, beta[] = {0, 0, 2, -3};
  group_norm(y.data(), x.data(), 1, 2, 4, 2, 1e-6f, gamma, beta, true);
  EXPECT_NEAR(y[2], 2.0f / (1.0f + std::exp(-2.0f)), 1e-6f);  // constant group -> beta
  EXPECT_NEAR(y[7], -3.0f / (1.0f + std::exp(3.0f)), 1e-6f);
}

TEST(GroupNorm, RejectsChannelsNotDivisibleByGroups) {
  std::vector<float> x(6), y(6);
  EXPECT_THROW(group_norm(y.data(), x.data(), 1, 1, 6, 4, 1e-6f, nullptr, nullptr, false),
               ModelError);
}

TEST(Upsample, Nearest2x) {
  // batch 2, 2x3 image, 2 channels.
  const std::int64_t b = 2, h = 2, w = 3, c = 2;
  auto x = ktest::random_vec(static_cast<std::size_t>(b * h * w * c), 5);
  const auto n = static_cast<std::size_t>(b * 4 * h * w * c);
  Guarded y(n);
  upsample_nearest2x(y.data(), x.data(), b, h, w, c);
  EXPECT_TRUE(y.intact_outside([n](std::size_t i) { return i < n; }));
  for (std::int64_t i = 0; i < b; ++i)
    for (std::int64_t yy = 0; yy < 2 * h; ++yy)
      for (std::int64_t xx = 0; xx < 2 * w; ++xx)
        for (std::int64_t ch = 0; ch < c; ++ch)
          ASSERT_EQ(y.data()[((i * 2 * h + yy) * 2 * w + xx) * c + ch],
                    x[static_cast<std::size_t>(((i * h + yy / 2) * w + xx / 2) * c + ch)]);
}

TEST(Layout, NchwNhwcRoundTrip) {
  const std::int64_t shapes[][4] = {{1, 1, 1, 1}, {2, 3, 4, 5}, {1, 64, 9, 7}, {3, 5, 33, 40}};
  for (const auto& s : shapes) {
    const std::int64_t b = s[0], c = s[1], h = s[2], w = s[3];
    const auto n = static_cast<std::size_t>(b * c * h * w);
    auto x = ktest::random_vec(n, 9 + static_cast<std::uint64_t>(c));
    std::vector<float> nhwc(n), back(n);
    nchw_to_nhwc(nhwc.data(), x.data(), b, c, h, w);
    for (std::int64_t i = 0; i < b; ++i)
      for (std::int64_t ch = 0; ch < c; ++ch)
        for (std::int64_t q = 0; q < h * w; ++q)
          ASSERT_EQ(nhwc[static_cast<std::size_t>((i * h * w + q) * c + ch)],
                    x[static_cast<std::size_t>((i * c + ch) * h * w + q)]);
    nhwc_to_nchw(back.data(), nhwc.data(), b, c, h, w);
    EXPECT_EQ(back, x);
  }
}

}  // namespace
}  // namespace gen3d::models::kernels
