// Pair tests of the symmetric per-row int8 quantization against its scalar twin (bit for bit),
// and of its rounding against the float values.
#include "models/kernels/quantize.h"

#include <gtest/gtest.h>

#include <cmath>
#include <limits>
#include <vector>

#include "models/kernels/kernel_test_util.h"

namespace gen3d::models::kernels {
namespace {

struct Shape2 {
  std::int64_t rows, cols, pad;
};

TEST(Quantize, RowsMatchScalarTwinBitForBit) {
  for (const Shape2& s : std::vector<Shape2>{
           {1, 1, 0}, {3, 17, 2}, {64, 1024, 0}, {129, 333, 5}, {2000, 96, 1}, {5, 40000, 3}}) {
    SCOPED_TRACE(::testing::Message() << s.rows << " x " << s.cols << " pad " << s.pad);
    const std::int64_t ld = s.cols + s.pad;
    auto x = ktest::random_vec(static_cast<std::size_t>(s.rows * ld), 11 + s.cols, 2.0f);
    // Ties: values at exactly k + 0.5 steps after scaling by 127 / max (max set to 127).
    if (s.cols >= 8) {
      x[0] = 127.0f;
      x[1] = 2.5f;
      x[2] = -3.5f;
      x[3] = 0.5f;
      x[4] = -0.0f;
      x[5] = -127.0f;
    }
    std::vector<std::int8_t> q(static_cast<std::size_t>(s.rows * ld), 99), r = q;
    std::vector<float> sq(static_cast<std::size_t>(s.rows)), sr = sq;
    quantize_rows_s8(q.data(), ld, sq.data(), x.data(), ld, s.rows, s.cols);
    ref::quantize_rows_s8(r.data(), ld, sr.data(), x.data(), ld, s.rows, s.cols);
    for (std::int64_t i = 0; i < s.rows; ++i) {
      ASSERT_EQ(sq[static_cast<std::size_t>(i)], sr[static_cast<std::size_t>(i)]) << "row " << i;
      for (std::int64_t c = 0; c < ld; ++c) {
        const auto k = static_cast<std::size_t>(i * ld + c);
        if (c >= s.cols) {
          ASSERT_EQ(q[k], 99) << "padding written at " << i << ", " << c;
          continue;
        }
        ASSERT_EQ(q[k], r[k]) << i << ", " << c;
        ASSERT_GE(q[k], -127);
        // Dequantized within half a step of the value.
        ASSERT_LE(std::abs(q[k] * sq[static_cast<std::size_t>(i)] - x[k]),
                  0.5f * sq[static_cast<std::size_t>(i)] * (1.0f + 1e-5f) + 1e-30f);
      }
    }
    if (s.cols >= 8) {
      EXPECT_EQ(sq[0], 1.0f);
      EXPECT_EQ(q[0], 127);
      EXPECT_EQ(q[1], 2);   // 2.5 -> 2 (ties to even)
      EXPECT_EQ(q[2], -4);  // -3.5 -> -4
      EXPECT_EQ(q[3], 0);   // 0.5 -> 0
      EXPECT_EQ(q[4], 0);
      EXPECT_EQ(q[5], -127);
    }
  }
}

TEST(Quantize, ZeroAndNonFiniteRows) {
  const float inf = std::numeric_limits<float>::infinity();
  const float nan = std::numeric_limits<float>::quiet_NaN();
  std::vector<float> x = {0.0f, -0.0f, 0.0f, 1.0f, inf, 2.0f, 3.0f, nan, -1.0f, 4.0f, -8.0f, 2.0f};
  std::vector<std::int8_t> q(12, 5), r(12, 5);
  std::vector<float> sq(4), sr(4);
  quantize_rows_s8(q.data(), 3, sq.data(), x.data(), 3, 4, 3);
  ref::quantize_rows_s8(r.data(), 3, sr.data(), x.data(), 3, 4, 3);
  EXPECT_EQ(sq[0], 0.0f);
  EXPECT_TRUE(std::isnan(sq[1]));
  EXPECT_TRUE(std::isnan(sq[2]));
  EXPECT_FLOAT_EQ(sq[3], 8.0f / 127.0f);
  EXPECT_EQ(sq[0], sr[0]);
  EXPECT_TRUE(std::isnan(sr[1]));
  EXPECT_TRUE(std::isnan(sr[2]));
  EXPECT_EQ(sq[3], sr[3]);
  for (std::size_t i = 0; i < 9; ++i) EXPECT_EQ(q[i], 0) << i;
  EXPECT_EQ(q[9], 64);  // 4 * 127 / 8 = 63.5 -> 64 (ties to even)
  EXPECT_EQ(q[10], -127);
  EXPECT_EQ(q[11], 32);  // 31.75 -> 32
  for (std::size_t i = 0; i < 12; ++i) EXPECT_EQ(q[i], r[i]) << i;
}

}  // namespace
}  // namespace gen3d::models::kernels
