#include "models/core/dtype.h"

#include <gtest/gtest.h>

#include <random>

#include <bit>
#include <cmath>
#include <limits>
#include <vector>

namespace gen3d::models {
namespace {

TEST(DType, ParseAndSizes) {
  DType t;
  ASSERT_TRUE(parse_dtype("F16", &t));
  EXPECT_EQ(t, DType::kF16);
  EXPECT_EQ(dtype_size(t), 2u);
  ASSERT_TRUE(parse_dtype("BF16", &t));
  EXPECT_EQ(dtype_name(t), "BF16");
  EXPECT_FALSE(parse_dtype("F8_E4M3", &t));
  EXPECT_FALSE(parse_dtype("f32", &t));
}

TEST(DType, HalfRoundTripsEveryValue) {
  // Every finite half widens and narrows back to itself; NaNs stay NaN.
  for (std::uint32_t h = 0; h < 65536; ++h) {
    const float f = half_to_float(static_cast<std::uint16_t>(h));
    if (std::isnan(f)) {
      EXPECT_TRUE(std::isnan(half_to_float(float_to_half(f))));
      continue;
    }
    ASSERT_EQ(float_to_half(f), h) << "half 0x" << std::hex << h;
  }
}

TEST(DType, VectorWideningMatchesScalarForEveryHalf) {
  std::vector<std::uint16_t> all(65536);
  for (std::uint32_t h = 0; h < 65536; ++h) all[h] = static_cast<std::uint16_t>(h);
  std::vector<float> wide(all.size());
  widen_to_f32(DType::kF16, all.data(), all.size(), wide.data());
  std::vector<float> direct(all.size());
  widen_f16(all.data(), all.size(), direct.data());
  for (std::uint32_t h = 0; h < 65536; ++h) {
    ASSERT_EQ(std::bit_cast<std::uint32_t>(direct[h]), std::bit_cast<std::uint32_t>(wide[h]));
    ASSERT_EQ(std::bit_cast<std::uint32_t>(wide[h]),
              std::bit_cast<std::uint32_t>(half_to_float(static_cast<std::uint16_t>(h))))
        << "half 0x" << std::hex << h;
  }
}

TEST(DType, HalfKnownValues) {
  EXPECT_EQ(half_to_float(0x3c00), 1.0f);
  EXPECT_EQ(half_to_float(0xc000), -2.0f);
  EXPECT_EQ(half_to_float(0x7bff), 65504.0f);
  EXPECT_EQ(half_to_float(0x0001), std::ldexp(1.0f, -24));  // smallest subnormal
  EXPECT_TRUE(std::isinf(half_to_float(0x7c00)));
  EXPECT_EQ(float_to_half(65520.0f), 0x7c00);  // rounds to inf
  EXPECT_EQ(float_to_half(65519.0f), 0x7bff);
  EXPECT_EQ(float_to_half(1.0f + std::ldexp(1.0f, -11)), 0x3c00);  // tie -> even
  EXPECT_EQ(float_to_half(1.0f + 3 * std::ldexp(1.0f, -11)), 0x3c02);
  EXPECT_EQ(float_to_half(std::ldexp(1.0f, -25)), 0x0000);  // tie at half the smallest subnormal
  EXPECT_EQ(float_to_half(std::ldexp(1.5f, -25)), 0x0001);
}

TEST(DType, Bf16) {
  EXPECT_EQ(bf16_to_float(0x3f80), 1.0f);
  EXPECT_EQ(float_to_bf16(1.0f), 0x3f80);
  EXPECT_EQ(float_to_bf16(std::bit_cast<float>(0x3f808000u)), 0x3f80);  // tie -> even
  EXPECT_EQ(float_to_bf16(std::bit_cast<float>(0x3f818000u)), 0x3f82);
  EXPECT_TRUE(std::isnan(bf16_to_float(float_to_bf16(std::numeric_limits<float>::quiet_NaN()))));
}

// The hardware conversion (where the CPU has one) gives round_to_bf16's bits on zeros and normal
// floats of every exponent, both signs, ties to even and values rounding up to infinity.
TEST(DType, RoundNormalToBf16MatchesTheSoftwareRounding) {
  std::mt19937 rng(7);
  std::vector<float> v = {0.0f,
                          -0.0f,
                          1.0f,
                          std::numeric_limits<float>::min(),
                          -std::numeric_limits<float>::min(),
                          std::numeric_limits<float>::max(),
                          -std::numeric_limits<float>::max()};
  for (std::uint32_t tie : {0x3f808000u, 0x3f818000u, 0x7f7f8000u, 0x00808000u, 0x7f7fffffu})
    v.push_back(std::bit_cast<float>(tie));
  while (v.size() < 100003) {
    const std::uint32_t bits = rng();
    const std::uint32_t exponent = (bits >> 23) & 0xffu;
    if (exponent == 0 || exponent == 0xffu) continue;  // subnormal, zero, infinity, NaN
    v.push_back(std::bit_cast<float>(bits));
  }
  std::vector<std::uint16_t> a(v.size()), b(v.size());
  round_to_bf16(v.data(), v.size(), a.data());
  round_normal_to_bf16(v.data(), v.size(), b.data());
  for (std::size_t i = 0; i < v.size(); ++i)
    ASSERT_EQ(a[i], b[i]) << "value " << v[i] << " bits " << std::bit_cast<std::uint32_t>(v[i]);
}

TEST(DType, WidenUnaligned) {
  unsigned char bytes[7] = {0, 0x00, 0x3c, 0x00, 0xc0, 0, 0};
  float out[2];
  widen_to_f32(DType::kF16, bytes + 1, 2, out);  // odd address
  EXPECT_EQ(out[0], 1.0f);
  EXPECT_EQ(out[1], -2.0f);
}

}  // namespace
}  // namespace gen3d::models
