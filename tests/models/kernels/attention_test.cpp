#include "models/kernels/attention.h"

#include <gtest/gtest.h>

#include <cmath>
#include <cstdint>
#include <vector>

#include "models/core/dtype.h"

#include "models/kernels/kernel_test_util.h"

namespace gen3d::models::kernels {
namespace {

using ktest::Guarded;

struct AttnCase {
  std::int64_t batch, heads, q_len, kv_len, D;
};

// Runs ref and fast on packed qkv rows (DiT or VAE column layout) and a strided output.
void run_case(const AttnCase& c, bool vae_layout, bool cross, bool bf16 = false,
              double tolerance = 1e-11) {
  SCOPED_TRACE(::testing::Message()
               << "B=" << c.batch << " heads=" << c.heads << " Lq=" << c.q_len << " Lk=" << c.kv_len
               << " D=" << c.D << " vae=" << vae_layout << " cross=" << cross);
  const std::int64_t H = c.heads * c.D, ld = 3 * H + 2;
  // Self-attention reads q, k, v from one buffer; cross-attention reads q from another.
  const std::int64_t kv_rows = cross ? c.kv_len : c.q_len;
  if (!cross && c.kv_len != c.q_len) return;
  auto qkv = ktest::random_vec(static_cast<std::size_t>(c.batch * kv_rows * ld), 71 + c.D, 1.5f);
  auto qbuf = ktest::random_vec(static_cast<std::size_t>(c.batch * c.q_len * H), 72, 1.5f);
  const std::int64_t hs = vae_layout ? 3 * c.D : c.D;
  const std::int64_t ko = vae_layout ? c.D : H, vo = vae_layout ? 2 * c.D : 2 * H;
  HeadsView q = cross ? HeadsView{qbuf.data(), c.q_len * H, H, c.D}
                      : HeadsView{qkv.data(), kv_rows * ld, ld, hs};
  HeadsView k{qkv.data() + ko, kv_rows * ld, ld, hs};
  HeadsView v{qkv.data() + vo, kv_rows * ld, ld, hs};
  const std::int64_t out_ld = H + 3;  // output rows padded: the gap must stay untouched
  const std::size_t out_n = static_cast<std::size_t>(c.batch * c.q_len * out_ld);
  Guarded r(out_n), f(out_n);
  const AttentionShape s{c.batch, c.heads, c.q_len, c.kv_len, c.D, 0.0f, bf16};
  ref::attention({r.data(), c.q_len * out_ld, out_ld, c.D}, q, k, v, s);
  attention({f.data(), c.q_len * out_ld, out_ld, c.D}, q, k, v, s);
  auto pred = [&](std::size_t i) {
    return static_cast<std::int64_t>(i % static_cast<std::size_t>(out_ld)) < H;
  };
  EXPECT_TRUE(f.intact_outside(pred));
  EXPECT_TRUE(r.intact_outside(pred));
  std::vector<float> a, e;
  for (std::size_t i = 0; i < out_n; ++i)
    if (pred(i)) {
      a.push_back(f.data()[i]);
      e.push_back(r.data()[i]);
    }
  EXPECT_LE(ktest::nmse(a.data(), e.data(), a.size()), tolerance);
}

TEST(Attention, FastMatchesReferenceSelfAttention) {
  const AttnCase cases[] = {{1, 1, 1, 1, 1},      {1, 1, 5, 5, 8},      {2, 4, 22, 22, 8},
                            {1, 3, 63, 63, 17},   {2, 2, 64, 64, 16},   {1, 2, 65, 65, 32},
                            {1, 1, 129, 129, 64}, {2, 3, 300, 300, 24}, {1, 4, 257, 257, 64},
                            {1, 2, 600, 600, 16}};  // several query and key tiles
  for (const auto& c : cases) {
    run_case(c, false, false);
    run_case(c, true, false);
  }
}

TEST(Attention, FastMatchesReferenceCrossAttention) {
  const AttnCase cases[] = {{1, 1, 1, 7, 4},     {2, 4, 500, 32, 8},  {1, 2, 3, 300, 16},
                            {2, 1, 130, 129, 5}, {1, 3, 64, 128, 64}, {1, 2, 200, 1, 8},
                            {1, 1, 520, 700, 8}};
  for (const auto& c : cases) {
    run_case(c, false, true);
    run_case(c, true, true);
  }
}

// bf16 block products against the double reference: q, k, v and the softmax weights each carry
// bf16's relative rounding (at most 2^-9), twice through two products and once more through the
// scores' exponent. On these inputs (values up to 1.5, so sharp softmaxes) the normalized squared
// error measured 3.2e-6 to 4.2e-5 (one bf16 GEMM alone: about 8e-6); the bound is 2.4x the worst.
TEST(Attention, Bf16MatchesReferenceWithinBf16Rounding) {
  const AttnCase cases[] = {{1, 1, 1, 1, 1},     {2, 4, 22, 22, 8},    {1, 3, 63, 63, 17},
                            {1, 2, 65, 65, 32},  {2, 3, 300, 300, 24}, {1, 4, 257, 257, 64},
                            {2, 4, 500, 32, 8},  {1, 2, 3, 300, 16},   {2, 1, 130, 129, 5},
                            {1, 1, 520, 700, 8}, {1, 2, 600, 600, 64}};
  for (const auto& c : cases)
    for (bool cross : {false, true}) {
      run_case(c, false, cross, true, 1e-4);
      run_case(c, true, cross, true, 1e-4);
    }
}

// Keys and values rounded to bf16 by the caller (head-major) give the bf16 path's results bit for
// bit, with guard bytes around the output.
TEST(Attention, PreRoundedBf16KeysMatchBf16PathExactly) {
  const AttnCase cases[] = {{1, 1, 1, 1, 1},
                            {2, 3, 70, 300, 24},
                            {1, 4, 257, 1024, 64},
                            {1, 2, 600, 33, 8},
                            {2, 1, 5, 257, 17}};
  for (const auto& c : cases) {
    SCOPED_TRACE(::testing::Message() << "B=" << c.batch << " heads=" << c.heads
                                      << " Lq=" << c.q_len << " Lk=" << c.kv_len << " D=" << c.D);
    const std::int64_t H = c.heads * c.D;
    auto qb = ktest::random_vec(static_cast<std::size_t>(c.batch * c.q_len * H), 81, 1.5f);
    auto kvb = ktest::random_vec(static_cast<std::size_t>(c.batch * c.kv_len * 2 * H), 82, 1.5f);
    const HeadsView q{qb.data(), c.q_len * H, H, c.D};
    const HeadsView k{kvb.data(), c.kv_len * 2 * H, 2 * H, 2 * c.D};
    const HeadsView v{kvb.data() + c.D, c.kv_len * 2 * H, 2 * H, 2 * c.D};
    std::vector<std::uint16_t> k16, v16;
    for (std::int64_t b = 0; b < c.batch; ++b)
      for (std::int64_t h = 0; h < c.heads; ++h)
        for (std::int64_t t = 0; t < c.kv_len; ++t)
          for (std::int64_t d = 0; d < c.D; ++d) {
            const std::int64_t at = b * k.batch_stride + t * k.token_stride + h * k.head_stride + d;
            k16.push_back(float_to_bf16(k.data[at]));
            v16.push_back(float_to_bf16(v.data[at]));
          }
    const std::size_t out_n = static_cast<std::size_t>(c.batch * c.q_len * H);
    Guarded a(out_n), e(out_n);
    const AttentionShape s{c.batch, c.heads, c.q_len, c.kv_len, c.D, 0.0f, true};
    attention({e.data(), c.q_len * H, H, c.D}, q, k, v, s);
    attention_bf16_kv({a.data(), c.q_len * H, H, c.D}, q, k16.data(), v16.data(), s);
    EXPECT_TRUE(a.intact_outside([](std::size_t) { return true; }));
    for (std::size_t i = 0; i < out_n; ++i) ASSERT_EQ(a.data()[i], e.data()[i]) << i;
  }
}

TEST(Attention, UniformKeysAverageValues) {
  // Identical keys -> uniform weights -> output is the mean of v.
  const std::int64_t L = 300, D = 4;
  std::vector<float> q(static_cast<std::size_t>(L * D), 0.3f), k(q.size(), 1.0f), v(q.size());
  for (std::int64_t j = 0; j < L; ++j)
    for (std::int64_t d = 0; d < D; ++d)
      v[static_cast<std::size_t>(j * D + d)] = static_cast<float>(j + d);
  std::vector<float> o(q.size());
  attention({o.data(), L * D, D, D}, {q.data(), L * D, D, D}, {k.data(), L * D, D, D},
            {v.data(), L * D, D, D}, {1, 1, L, L, D, 0.0f});
  for (std::int64_t d = 0; d < D; ++d)
    EXPECT_NEAR(o[static_cast<std::size_t>(d)], (L - 1) / 2.0 + d, 1e-3);
}

TEST(Attention, LargeScoresStayFinite) {
  // Scores of +-1e4 would overflow a naive exp; the online softmax must stay exact.
  const std::int64_t L = 200, D = 2;
  auto q = ktest::random_vec(static_cast<std::size_t>(L * D), 81, 100.0f);
  auto k = ktest::random_vec(static_cast<std::size_t>(L * D), 82, 100.0f);
  auto v = ktest::random_vec(static_cast<std::size_t>(L * D), 83);
  std::vector<float> a(q.size()), e(q.size());
  const AttentionShape s{1, 1, L, L, D, 0.0f};
  attention({a.data(), L * D, D, D}, {q.data(), L * D, D, D}, {k.data(), L * D, D, D},
            {v.data(), L * D, D, D}, s);
  ref::attention({e.data(), L * D, D, D}, {q.data(), L * D, D, D}, {k.data(), L * D, D, D},
                 {v.data(), L * D, D, D}, s);
  for (float x : a) ASSERT_TRUE(std::isfinite(x));
  EXPECT_LE(ktest::nmse(a.data(), e.data(), a.size()), 1e-10);
}

}  // namespace
}  // namespace gen3d::models::kernels
