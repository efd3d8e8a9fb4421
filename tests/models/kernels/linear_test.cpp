#include "models/kernels/linear.h"

#include <gtest/gtest.h>

#include <tuple>

#include "models/core/blas_threads.h"
#include "models/core/dtype.h"
#include "models/kernels/kernel_test_util.h"

namespace gen3d::models::kernels {
namespace {

using ktest::Guarded;

struct LinearCase {
  std::int64_t M, K, N, pad;  // pad: extra row-stride columns in x and y
  bool bias;
  Act act;
};

void run_case(const LinearCase& c, bool f16) {
  SCOPED_TRACE(::testing::Message()
               << "M=" << c.M << " K=" << c.K << " N=" << c.N << " pad=" << c.pad
               << " bias=" << c.bias << " act=" << static_cast<int>(c.act) << " f16=" << f16);
  const std::int64_t ldx = c.K + c.pad, ldy = c.N + c.pad;
  auto x = ktest::random_vec(static_cast<std::size_t>(c.M * ldx), 11 + c.M);
  auto w = ktest::random_vec(static_cast<std::size_t>(c.N * c.K), 23 + c.N, 0.2f);
  auto b = ktest::random_vec(static_cast<std::size_t>(c.N), 5 + c.K, 0.3f);
  std::vector<std::uint16_t> w16(w.size());
  if (f16) {  // both sides use the half-rounded weights
    for (std::size_t i = 0; i < w.size(); ++i) {
      w16[i] = float_to_half(w[i]);
      w[i] = half_to_float(w16[i]);
    }
  }
  const float* bp = c.bias ? b.data() : nullptr;
  Guarded ref_out(static_cast<std::size_t>(c.M * ldy)),
      fast_out(static_cast<std::size_t>(c.M * ldy));
  ref::linear(ref_out.data(), ldy, x.data(), ldx, w.data(), bp, c.M, c.K, c.N, c.act);
  if (f16) {
    linear_f16w(fast_out.data(), ldy, x.data(), ldx, w16.data(), bp, c.M, c.K, c.N, c.act);
  } else {
    linear(fast_out.data(), ldy, x.data(), ldx, w.data(), bp, c.M, c.K, c.N, c.act);
  }
  auto pred = ktest::block_pred(static_cast<std::size_t>(c.M), static_cast<std::size_t>(c.N),
                                static_cast<std::size_t>(ldy));
  EXPECT_TRUE(fast_out.intact_outside(pred));
  EXPECT_TRUE(ref_out.intact_outside(pred));
  // Compare only the written block.
  std::vector<float> a, r;
  for (std::int64_t i = 0; i < c.M; ++i)
    for (std::int64_t j = 0; j < c.N; ++j) {
      a.push_back(fast_out.data()[i * ldy + j]);
      r.push_back(ref_out.data()[i * ldy + j]);
    }
  EXPECT_LE(ktest::nmse(a.data(), r.data(), a.size()), 1e-11);
}

std::vector<LinearCase> cases() {
  std::vector<LinearCase> out;
  const std::int64_t Ms[] = {1, 3, 17, 130};
  const std::int64_t Ks[] = {1, 5, 64, 127};
  const std::int64_t Ns[] = {1, 7, 33, 256};
  int i = 0;
  for (auto M : Ms)
    for (auto K : Ks)
      for (auto N : Ns) {
        const Act acts[] = {Act::kNone, Act::kGeluTanh, Act::kGeluErf, Act::kSilu};
        out.push_back({M, K, N, (i % 3 == 0) ? 3 : 0, i % 2 == 0, acts[i % 4]});
        ++i;
      }
  // Large enough for the TBB-tiled path, with ragged tiles.
  out.push_back({257, 300, 301, 0, true, Act::kGeluTanh});
  out.push_back({600, 129, 515, 5, true, Act::kNone});
  out.push_back({1100, 64, 70, 0, false, Act::kSilu});
  return out;
}

TEST(LinearKernel, FastMatchesReferenceOnManyShapes) {
  for (const auto& c : cases()) run_case(c, false);
}

TEST(LinearKernel, F16WeightsMatchReferenceOnManyShapes) {
  for (const auto& c : cases()) run_case(c, true);
}

TEST(LinearKernel, KnownValues) {
  // y = x W^T + b with W [2, 3].
  const float x[] = {1, 2, 3, -1, 0, 1};
  const float w[] = {1, 0, -1, 0.5f, 0.5f, 0.5f};
  const float b[] = {10, -1};
  float y[4];
  linear(y, 2, x, 3, w, b, 2, 3, 2);
  EXPECT_FLOAT_EQ(y[0], 1 - 3 + 10);
  EXPECT_FLOAT_EQ(y[1], 3 - 1);
  EXPECT_FLOAT_EQ(y[2], -1 - 1 + 10);
  EXPECT_FLOAT_EQ(y[3], 0 - 1);
}

TEST(LinearKernel, BlasRunsSingleThreadedUnderTbb) {
  const LinearCase c{64, 64, 64, 0, false, Act::kNone};
  run_case(c, false);
  const int n = blas_threads();  // -1: this BLAS has no thread API (then it is serial anyway)
  EXPECT_TRUE(n == 1 || n == -1) << "BLAS threads = " << n;
}

TEST(LinearKernel, SingleCallThreadingModeAgrees) {
  const LinearCase c{300, 256, 300, 0, true, Act::kNone};
  set_gemm_threading(GemmThreading::kSingleCall);
  run_case(c, false);
  set_gemm_threading(GemmThreading::kTbbTiles);
  run_case(c, false);
}

}  // namespace
}  // namespace gen3d::models::kernels
