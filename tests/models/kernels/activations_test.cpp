#include "models/kernels/activations.h"

#include <gtest/gtest.h>

#include <cmath>

#include "models/kernels/kernel_test_util.h"

namespace gen3d::models::kernels {
namespace {

using ktest::Guarded;

TEST(Activations, KnownValues) {
  EXPECT_NEAR(apply_act(Act::kGeluErf, 1.0f), 0.8413447f, 1e-6f);
  EXPECT_NEAR(apply_act(Act::kGeluTanh, 1.0f), 0.8411920f, 1e-6f);
  EXPECT_NEAR(apply_act(Act::kSilu, 1.0f), 0.7310586f, 1e-6f);
  EXPECT_EQ(apply_act(Act::kGeluTanh, 0.0f), 0.0f);
  EXPECT_NEAR(apply_act(Act::kGeluErf, -3.0f), -0.0040497f, 1e-6f);
  EXPECT_EQ(apply_act(Act::kNone, -2.5f), -2.5f);
}

TEST(Activations, FastMatchesReferenceStridedWithBias) {
  const std::int64_t shapes[][3] = {
      {1, 1, 1}, {3, 7, 9}, {17, 33, 40}, {257, 129, 131}, {2000, 65, 65}};
  for (Act a : {Act::kNone, Act::kGeluTanh, Act::kGeluErf, Act::kSilu}) {
    for (const auto& s : shapes) {
      const std::int64_t rows = s[0], cols = s[1], ld = s[2];
      SCOPED_TRACE(::testing::Message()
                   << "act " << static_cast<int>(a) << " " << rows << "x" << cols);
      auto src = ktest::random_vec(static_cast<std::size_t>(rows * ld), 7, 3.0f);
      auto bias = ktest::random_vec(static_cast<std::size_t>(cols), 8);
      Guarded r(static_cast<std::size_t>(rows * ld)), f(static_cast<std::size_t>(rows * ld));
      ref::act_copy(a, r.data(), ld, src.data(), ld, rows, cols, bias.data());
      act_copy(a, f.data(), ld, src.data(), ld, rows, cols, bias.data());
      auto pred = ktest::block_pred(static_cast<std::size_t>(rows), static_cast<std::size_t>(cols),
                                    static_cast<std::size_t>(ld));
      EXPECT_TRUE(f.intact_outside(pred));
      for (std::int64_t i = 0; i < rows; ++i)
        for (std::int64_t j = 0; j < cols; ++j)
          ASSERT_EQ(f.data()[i * ld + j], r.data()[i * ld + j]);  // same formula: bit-equal
    }
  }
}

TEST(Activations, InPlaceMatchesReference) {
  auto x = ktest::random_vec(10001, 3, 2.0f);
  auto y = x;
  act_inplace(Act::kGeluTanh, x.data(), static_cast<std::int64_t>(x.size()));
  ref::act_inplace(Act::kGeluTanh, y.data(), static_cast<std::int64_t>(y.size()));
  EXPECT_EQ(x, y);
}

TEST(Softmax, FastMatchesReference) {
  for (std::int64_t cols : {1, 2, 7, 64, 129, 1000}) {
    const std::int64_t rows = 37, ld = cols + 3;
    auto x = ktest::random_vec(static_cast<std::size_t>(rows * ld), 9, 4.0f);
    auto y = x;
    softmax_rows(x.data(), rows, cols, ld);
    ref::softmax_rows(y.data(), rows, cols, ld);
    EXPECT_LE(ktest::nmse(x.data(), y.data(), x.size()), 1e-12) << cols;
    for (std::int64_t i = 0; i < rows; ++i) {
      double s = 0;
      for (std::int64_t j = 0; j < cols; ++j) s += x[static_cast<std::size_t>(i * ld + j)];
      EXPECT_NEAR(s, 1.0, 1e-5);
    }
  }
}

TEST(Softmax, LargeLogitsDoNotOverflow) {
  std::vector<float> x = {1000.0f, 999.0f, -1000.0f};
  softmax_rows(x.data(), 1, 3, 3);
  EXPECT_NEAR(x[0], 0.7310586f, 1e-6f);
  EXPECT_NEAR(x[1], 0.2689414f, 1e-6f);
  EXPECT_EQ(x[2], 0.0f);
}

}  // namespace
}  // namespace gen3d::models::kernels
