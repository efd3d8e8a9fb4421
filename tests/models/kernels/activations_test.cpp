#include "models/kernels/activations.h"

#include <gtest/gtest.h>

#include <cmath>
#include <vector>

#include "models/kernels/kernel_test_util.h"

namespace gen3d::models::kernels {
namespace {

using ktest::Guarded;

::testing::AssertionResult close_to_reference(Act a, float fast, float ref, float x) {
  return ktest::act_close(a == Act::kGeluTanh || a == Act::kSilu, fast, ref, x);
}

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
        for (std::int64_t j = 0; j < cols; ++j) {
          const float x =
              src[static_cast<std::size_t>(i * ld + j)] + bias[static_cast<std::size_t>(j)];
          ASSERT_TRUE(close_to_reference(a, f.data()[i * ld + j], r.data()[i * ld + j], x))
              << i << " " << j << ": " << f.data()[i * ld + j] << " vs " << r.data()[i * ld + j];
        }
    }
  }
}

TEST(Activations, InPlaceMatchesReference) {
  for (Act a : {Act::kGeluTanh, Act::kSilu, Act::kGeluErf}) {
    auto x = ktest::random_vec(100001, 3, 4.0f);  // one long row: split into chunks
    auto y = x;
    const auto in = x;
    act_inplace(a, x.data(), static_cast<std::int64_t>(x.size()));
    ref::act_inplace(a, y.data(), static_cast<std::int64_t>(y.size()));
    for (std::size_t i = 0; i < x.size(); ++i)
      ASSERT_TRUE(close_to_reference(a, x[i], y[i], in[i])) << static_cast<int>(a) << " " << i;
  }
}

// The whole float range of the vector formulas, edges included: within the reference's
// rounding, with the reference's zeros, infinities and NaNs.
TEST(Activations, VectorFormulasOverTheFloatRange) {
  std::vector<float> x;
  for (float v = -120.0f; v <= 120.0f; v += 0.0137f) x.push_back(v);
  for (float v : {0.0f, -0.0f, 1e-30f, -1e-30f, 1e-7f, -1e-7f, 88.0f, -88.0f, 89.0f, -89.0f, 1e10f,
                  -1e10f, INFINITY, -INFINITY, NAN})
    x.push_back(v);
  for (Act a : {Act::kGeluTanh, Act::kSilu}) {
    std::vector<float> f(x.size()), r(x.size());
    act_copy(a, f.data(), static_cast<std::int64_t>(x.size()), x.data(),
             static_cast<std::int64_t>(x.size()), 1, static_cast<std::int64_t>(x.size()));
    ref::act_copy(a, r.data(), static_cast<std::int64_t>(x.size()), x.data(),
                  static_cast<std::int64_t>(x.size()), 1, static_cast<std::int64_t>(x.size()));
    for (std::size_t i = 0; i < x.size(); ++i) {
      if (std::isnan(r[i]) || std::isinf(r[i])) {
        EXPECT_EQ(std::isnan(f[i]), std::isnan(r[i])) << x[i];
        if (std::isinf(r[i])) {
          EXPECT_EQ(f[i], r[i]) << x[i];
        }
        continue;
      }
      ASSERT_TRUE(close_to_reference(a, f[i], r[i], x[i]))
          << static_cast<int>(a) << " at " << x[i] << ": " << f[i] << " vs " << r[i];
      // Against the formula in double from the float32 inner term: the fast path keeps its
      // relative accuracy where 1 + tanh cancels.
      const double xd = x[i];
      const double v =
          static_cast<double>(0.7978845608028654f * (x[i] + 0.044715f * x[i] * x[i] * x[i]));
      const double e = std::exp(-2.0 * std::abs(v));  // 1 + tanh v without cancellation
      const double want =
          a == Act::kGeluTanh ? xd * (v < 0 ? e : 1.0) / (1.0 + e) : xd / (1.0 + std::exp(-xd));
      if (std::abs(want) > 1e-30) {
        // Where e = exp(-2|v|) is tiny, one float32 ulp of v (fused or not) moves it by 2|v|
        // ulp relative: that conditioning is allowed for.
        const double rel = 2e-6 + (a == Act::kGeluTanh ? 5e-7 * std::abs(v) : 5e-7 * std::abs(xd));
        EXPECT_LE(std::abs(f[i] - want), rel * std::abs(want) + 1e-37)
            << static_cast<int>(a) << " at " << x[i] << ": " << f[i] << " vs " << want;
      }
    }
  }
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
