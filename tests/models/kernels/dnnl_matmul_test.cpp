// Pair tests of the oneDNN bf16 and int8 GEMMs against their scalar twins (the same roundings,
// exact or double sums), and of both against float32 (the rounding error their operands make).
#include "models/kernels/dnnl_matmul.h"

#include <gtest/gtest.h>
#include <tbb/parallel_for.h>

#include <cmath>
#include <limits>

#include "models/core/dtype.h"
#include "models/kernels/conv.h"
#include "models/kernels/kernel_test_util.h"
#include "models/kernels/linear.h"

namespace gen3d::models::kernels {
namespace {

using ktest::Guarded;

struct Case {
  std::int64_t M, K, N, pad;
  bool bias;
  Act act;
};

std::vector<float> block(const Guarded& g, std::int64_t M, std::int64_t N, std::int64_t ld) {
  std::vector<float> v;
  for (std::int64_t i = 0; i < M; ++i)
    for (std::int64_t j = 0; j < N; ++j) v.push_back(g.data()[i * ld + j]);
  return v;
}

void run_case(const Case& c) {
  SCOPED_TRACE(::testing::Message() << "M=" << c.M << " K=" << c.K << " N=" << c.N << " pad="
                                    << c.pad << " bias=" << c.bias << " act=" << int(c.act));
  const std::int64_t ldx = c.K + c.pad, ldy = c.N + c.pad;
  const auto x = ktest::random_vec(static_cast<std::size_t>(c.M * ldx), 7 + c.M);
  const auto w = ktest::random_vec(static_cast<std::size_t>(c.N * c.K), 19 + c.N, 0.2f);
  const auto b = ktest::random_vec(static_cast<std::size_t>(c.N), 3 + c.K, 0.3f);
  const float* bp = c.bias ? b.data() : nullptr;
  const Bf16Weight packed(w.data(), c.N, c.K);
  // Packing keeps the round-to-nearest-even bf16 of every weight.
  const std::vector<std::uint16_t> bits = packed.plain();
  ASSERT_EQ(bits.size(), w.size());
  for (std::size_t i = 0; i < w.size(); ++i) ASSERT_EQ(bits[i], float_to_bf16(w[i])) << i;
  EXPECT_GE(packed.bytes(), w.size() * 2);

  Guarded fast(static_cast<std::size_t>(c.M * ldy)), twin(static_cast<std::size_t>(c.M * ldy)),
      f32(static_cast<std::size_t>(c.M * ldy));
  linear_bf16(fast.data(), ldy, x.data(), ldx, packed, bp, c.M, c.act);
  ref::linear_bf16(twin.data(), ldy, x.data(), ldx, bits.data(), bp, c.M, c.K, c.N, c.act);
  ref::linear(f32.data(), ldy, x.data(), ldx, w.data(), bp, c.M, c.K, c.N, c.act);
  const auto pred = ktest::block_pred(static_cast<std::size_t>(c.M), static_cast<std::size_t>(c.N),
                                      static_cast<std::size_t>(ldy));
  EXPECT_TRUE(fast.intact_outside(pred));
  const auto a = block(fast, c.M, c.N, ldy), r = block(twin, c.M, c.N, ldy),
             e = block(f32, c.M, c.N, ldy);
  // Same operands, float32 against double accumulation: float rounding only.
  EXPECT_LE(ktest::nmse(a.data(), r.data(), a.size()), 1e-11);
  // Against float32 operands: each operand carries a relative rounding error of at most 2^-9
  // (uniform over [-2^-9, 2^-9], variance 2^-18 / 3); a sum of independent products then has a
  // normalized squared error of about 2 · 2^-18 / 3 = 2.5e-6. Allow 4x.
  EXPECT_LE(ktest::nmse(a.data(), e.data(), a.size()), 1e-5);
  EXPECT_GT(ktest::nmse(a.data(), e.data(), a.size()), 0.0) << "bf16 rounding must show";
}

TEST(DnnlMatmul, Bf16LinearMatchesScalarTwin) {
  for (const Case& c : std::vector<Case>{{1, 16, 8, 0, false, Act::kNone},
                                         {7, 33, 17, 3, true, Act::kNone},
                                         {64, 128, 96, 0, true, Act::kGeluTanh},
                                         {300, 256, 130, 5, true, Act::kGeluErf},
                                         {256, 64, 512, 0, false, Act::kSilu},
                                         {513, 320, 64, 1, true, Act::kNone}})
    run_case(c);
}

TEST(DnnlMatmul, ConcurrentCallsAgreeWithSerial) {
  const std::int64_t M = 96, K = 160, N = 72;
  const auto w = ktest::random_vec(static_cast<std::size_t>(N * K), 5, 0.2f);
  const Bf16Weight packed(w.data(), N, K);
  std::vector<std::vector<float>> xs, serial, parallel;
  for (int t = 0; t < 8; ++t) {
    xs.push_back(ktest::random_vec(static_cast<std::size_t>(M * K), 100 + t));
    serial.emplace_back(static_cast<std::size_t>(M * N));
    parallel.emplace_back(static_cast<std::size_t>(M * N));
    linear_bf16(serial.back().data(), N, xs.back().data(), K, packed, nullptr, M);
  }
  tbb::parallel_for(0, 8, [&](int t) {
    linear_bf16(parallel[static_cast<std::size_t>(t)].data(), N,
                xs[static_cast<std::size_t>(t)].data(), K, packed, nullptr, M);
  });
  for (int t = 0; t < 8; ++t)
    EXPECT_LE(
        ktest::nmse(parallel[static_cast<std::size_t>(t)].data(),
                    serial[static_cast<std::size_t>(t)].data(), static_cast<std::size_t>(M * N)),
        1e-12);
}

TEST(DnnlMatmul, ActivationProductMatchesTwin) {
  const std::int64_t M = 45, K = 40, N = 70;
  const auto a = ktest::random_vec(static_cast<std::size_t>(M * K), 1);
  const auto bt = ktest::random_vec(static_cast<std::size_t>(N * K), 2);  // [N, K]
  std::vector<float> b(static_cast<std::size_t>(K * N));                  // [K, N]
  for (std::int64_t n = 0; n < N; ++n)
    for (std::int64_t k = 0; k < K; ++k) b[k * N + n] = bt[n * K + k];
  std::vector<std::uint16_t> bits(bt.size());
  for (std::size_t i = 0; i < bt.size(); ++i) bits[i] = float_to_bf16(bt[i]);
  std::vector<float> c1(static_cast<std::size_t>(M * N)), c2(c1.size()), r(c1.size());
  matmul_bf16(c1.data(), N, a.data(), K, bt.data(), K, true, M, K, N, 0.5f);
  matmul_bf16(c2.data(), N, a.data(), K, b.data(), N, false, M, K, N, 0.5f);
  ref::linear_bf16(r.data(), N, a.data(), K, bits.data(), nullptr, M, K, N);
  for (auto& v : r) v *= 0.5f;
  EXPECT_LE(ktest::nmse(c1.data(), r.data(), r.size()), 1e-11);
  EXPECT_LE(ktest::nmse(c2.data(), r.data(), r.size()), 1e-11);
}

// int8 (W8A8) linear layers against their scalar twin (the same quantizations, exact integer sums)
// and against float32.
void run_int8_case(const Case& c) {
  SCOPED_TRACE(::testing::Message() << "M=" << c.M << " K=" << c.K << " N=" << c.N << " pad="
                                    << c.pad << " bias=" << c.bias << " act=" << int(c.act));
  const std::int64_t ldx = c.K + c.pad, ldy = c.N + c.pad;
  const auto x = ktest::random_vec(static_cast<std::size_t>(c.M * ldx), 7 + c.M);
  const auto w = ktest::random_vec(static_cast<std::size_t>(c.N * c.K), 19 + c.N, 0.2f);
  const auto b = ktest::random_vec(static_cast<std::size_t>(c.N), 3 + c.K, 0.3f);
  const float* bp = c.bias ? b.data() : nullptr;
  const Int8Weight q(w.data(), c.N, c.K);
  EXPECT_EQ(q.bytes(), static_cast<std::size_t>(c.N * c.K + 4 * c.N));

  Guarded fast(static_cast<std::size_t>(c.M * ldy)), twin(static_cast<std::size_t>(c.M * ldy)),
      f32(static_cast<std::size_t>(c.M * ldy));
  linear_int8(fast.data(), ldy, x.data(), ldx, q, bp, c.M, c.act);
  ref::linear_int8(twin.data(), ldy, x.data(), ldx, q.data(), q.scales(), bp, c.M, c.K, c.N, c.act);
  ref::linear(f32.data(), ldy, x.data(), ldx, w.data(), bp, c.M, c.K, c.N, c.act);
  const auto pred = ktest::block_pred(static_cast<std::size_t>(c.M), static_cast<std::size_t>(c.N),
                                      static_cast<std::size_t>(ldy));
  EXPECT_TRUE(fast.intact_outside(pred));
  const auto a = block(fast, c.M, c.N, ldy), r = block(twin, c.M, c.N, ldy),
             e = block(f32, c.M, c.N, ldy);
  // Same integers, exact sums: only the float32 epilogue (and oneDNN's activation formulas) differ.
  EXPECT_LE(ktest::nmse(a.data(), r.data(), a.size()), 1e-11);
  // Against float32: each operand is rounded to a step of max|row| / 127, an error of variance
  // step^2 / 12; for Gaussian rows (max about 3 to 4.5 standard deviations over these widths)
  // that is a relative variance of (4.5 / 127)^2 / 12 = 1.0e-4 per operand at most, 2.1e-4 for the
  // product. Allow 2x.
  EXPECT_LE(ktest::nmse(a.data(), e.data(), a.size()), 4e-4);
  EXPECT_GT(ktest::nmse(a.data(), e.data(), a.size()), 1e-7) << "int8 rounding must show";
}

TEST(DnnlMatmul, Int8LinearMatchesScalarTwin) {
  for (const Case& c : std::vector<Case>{{1, 16, 8, 0, false, Act::kNone},
                                         {7, 33, 17, 3, true, Act::kNone},
                                         {64, 128, 96, 0, true, Act::kGeluTanh},
                                         {300, 256, 130, 5, true, Act::kGeluErf},
                                         {256, 64, 512, 0, false, Act::kSilu},
                                         {513, 320, 64, 1, true, Act::kNone}})
    run_int8_case(c);
}

TEST(DnnlMatmul, Int8ConcurrentCallsAgreeWithSerial) {
  const std::int64_t M = 96, K = 160, N = 72;
  const auto w = ktest::random_vec(static_cast<std::size_t>(N * K), 5, 0.2f);
  const auto b = ktest::random_vec(static_cast<std::size_t>(N), 6, 0.2f);
  const Int8Weight q(w.data(), N, K);
  std::vector<std::vector<float>> xs, serial, parallel;
  for (int t = 0; t < 8; ++t) {
    xs.push_back(ktest::random_vec(static_cast<std::size_t>(M * K), 100 + t));
    serial.emplace_back(static_cast<std::size_t>(M * N));
    parallel.emplace_back(static_cast<std::size_t>(M * N));
    linear_int8(serial.back().data(), N, xs.back().data(), K, q, b.data(), M, Act::kGeluTanh);
  }
  tbb::parallel_for(0, 8, [&](int t) {
    linear_int8(parallel[static_cast<std::size_t>(t)].data(), N,
                xs[static_cast<std::size_t>(t)].data(), K, q, b.data(), M, Act::kGeluTanh);
  });
  for (int t = 0; t < 8; ++t)
    EXPECT_LE(
        ktest::nmse(parallel[static_cast<std::size_t>(t)].data(),
                    serial[static_cast<std::size_t>(t)].data(), static_cast<std::size_t>(M * N)),
        1e-12);
}

// A row holding a NaN or an infinity comes out NaN, as in float32; the other rows are unharmed.
TEST(DnnlMatmul, Int8NonFiniteRowStaysNonFinite) {
  const std::int64_t M = 4, K = 32, N = 16;
  auto x = ktest::random_vec(static_cast<std::size_t>(M * K), 1);
  const auto w = ktest::random_vec(static_cast<std::size_t>(N * K), 2, 0.2f);
  x[static_cast<std::size_t>(1 * K + 3)] = std::numeric_limits<float>::quiet_NaN();
  x[static_cast<std::size_t>(2 * K + 5)] = std::numeric_limits<float>::infinity();
  const Int8Weight q(w.data(), N, K);
  std::vector<float> y(static_cast<std::size_t>(M * N));
  linear_int8(y.data(), N, x.data(), K, q, nullptr, M);
  for (std::int64_t n = 0; n < N; ++n) {
    EXPECT_TRUE(std::isfinite(y[static_cast<std::size_t>(n)]));
    EXPECT_TRUE(std::isnan(y[static_cast<std::size_t>(N + n)]));
    EXPECT_TRUE(std::isnan(y[static_cast<std::size_t>(2 * N + n)]));
    EXPECT_TRUE(std::isfinite(y[static_cast<std::size_t>(3 * N + n)]));
  }
}

struct ConvCase {
  std::int64_t n, h, w, cin, cout, k;
  ConvGeometry g;
  bool bias;
};

TEST(DnnlConv, Bf16ConvMatchesScalarTwin) {
  for (const ConvCase& c : std::vector<ConvCase>{
           {1, 9, 7, 5, 6, 3, ConvGeometry::same(1), true},
           {2, 16, 16, 32, 48, 3, ConvGeometry::same(1), true},
           {1, 12, 10, 16, 8, 3, ConvGeometry{2, 0, 1, 0, 1}, true},  // SD VAE downsampler
           {2, 8, 8, 24, 40, 1, ConvGeometry::same(0), false},
           {1, 20, 20, 8, 8, 3, ConvGeometry::same(1, 2), true}}) {
    SCOPED_TRACE(::testing::Message()
                 << "n=" << c.n << " h=" << c.h << " w=" << c.w << " cin=" << c.cin
                 << " cout=" << c.cout << " k=" << c.k << " stride=" << c.g.stride);
    const auto x = ktest::random_vec(static_cast<std::size_t>(c.n * c.h * c.w * c.cin), 31);
    const auto w =
        ktest::random_vec(static_cast<std::size_t>(c.cout * c.cin * c.k * c.k), 37, 0.2f);
    const auto b = ktest::random_vec(static_cast<std::size_t>(c.cout), 41, 0.3f);
    ConvWeight f32 =
        pack_conv_weight(w.data(), c.bias ? b.data() : nullptr, c.cout, c.cin, c.k, c.k);
    ConvWeight fast = f32;
    to_bf16(fast);
    ASSERT_TRUE(fast.bf16);
    EXPECT_TRUE(fast.w.empty());
    // The twin: the same bf16 roundings of weights and input, double accumulation.
    const std::vector<std::uint16_t> bits = fast.bf16->plain();
    ASSERT_EQ(bits.size(), f32.w.size());
    ConvWeight twin = f32;
    for (std::size_t i = 0; i < bits.size(); ++i) {
      ASSERT_EQ(bits[i], float_to_bf16(f32.w[i])) << i;
      twin.w[i] = bf16_to_float(bits[i]);
    }
    std::vector<float> xr(x.size());
    for (std::size_t i = 0; i < x.size(); ++i) xr[i] = bf16_to_float(float_to_bf16(x[i]));
    const std::int64_t oh = c.g.out_h(c.h, c.k), ow = c.g.out_w(c.w, c.k);
    const auto n_out = static_cast<std::size_t>(c.n * oh * ow * c.cout);
    std::vector<float> y(n_out), yt(n_out), ye(n_out);
    conv2d(y.data(), x.data(), c.n, c.h, c.w, fast, c.g);
    ref::conv2d(yt.data(), xr.data(), c.n, c.h, c.w, twin, c.g);
    ref::conv2d(ye.data(), x.data(), c.n, c.h, c.w, f32, c.g);
    EXPECT_LE(ktest::nmse(y.data(), yt.data(), n_out), 1e-11);
    EXPECT_LE(ktest::nmse(y.data(), ye.data(), n_out), 1e-5);  // bf16 operand rounding (above)
  }
}

// Convolutions of several shapes from several TBB threads at once: each needs its own
// scratchpad, and a shape may append a weight layout while another call reads the first.
TEST(DnnlConv, ConcurrentCallsOfSeveralShapesAgreeWithSerial) {
  const std::int64_t cin = 24, cout = 32, k = 3;
  const auto w = ktest::random_vec(static_cast<std::size_t>(cout * cin * k * k), 7, 0.2f);
  ConvWeight fast = pack_conv_weight(w.data(), nullptr, cout, cin, k, k);
  to_bf16(fast);
  const ConvGeometry g = ConvGeometry::same(1);
  struct Call {
    std::int64_t h, w;
    std::vector<float> x, serial, parallel;
  };
  std::vector<Call> calls;
  for (int t = 0; t < 12; ++t) {
    Call c{8 + 4 * (t % 3), 12 + 2 * (t % 4), {}, {}, {}};
    c.x = ktest::random_vec(static_cast<std::size_t>(c.h * c.w * cin), 200 + t);
    c.serial.resize(static_cast<std::size_t>(c.h * c.w * cout));
    c.parallel.resize(c.serial.size());
    calls.push_back(std::move(c));
  }
  for (Call& c : calls) conv2d(c.serial.data(), c.x.data(), 1, c.h, c.w, fast, g);
  tbb::parallel_for(std::size_t{0}, calls.size(), [&](std::size_t t) {
    Call& c = calls[t];
    conv2d(c.parallel.data(), c.x.data(), 1, c.h, c.w, fast, g);
  });
  for (const Call& c : calls)
    EXPECT_LE(ktest::nmse(c.parallel.data(), c.serial.data(), c.serial.size()), 1e-12);
}

TEST(DnnlMatmul, DescribesItself) {
  EXPECT_NE(std::string(dnnl_description()).find("oneDNN"), std::string::npos);
}

}  // namespace
}  // namespace gen3d::models::kernels
