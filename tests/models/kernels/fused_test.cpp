#include "models/kernels/fused.h"

#include <gtest/gtest.h>

#include "models/kernels/kernel_test_util.h"

namespace gen3d::models::kernels {
namespace {

using ktest::Guarded;

struct FusedShape {
  std::int64_t batch, tokens, dim, extra_tokens;  // extra_tokens: rows of other streams per batch
};
const FusedShape kShapes[] = {{1, 1, 1, 0},   {1, 3, 8, 2},     {2, 17, 32, 6},
                              {3, 65, 33, 1}, {2, 300, 128, 7}, {1, 1025, 64, 0}};

TEST(LnModulate, FastMatchesReference) {
  for (const auto& s : kShapes) {
    SCOPED_TRACE(::testing::Message() << s.batch << "x" << s.tokens << "x" << s.dim);
    const std::int64_t bs = (s.tokens + s.extra_tokens) * s.dim;  // batch stride of x and y
    const std::int64_t off = s.extra_tokens * s.dim;              // stream starts after other rows
    const std::int64_t mod_stride = 6 * s.dim;
    auto x = ktest::random_vec(static_cast<std::size_t>(s.batch * bs), 31, 2.0f, 0.3f);
    auto mod = ktest::random_vec(static_cast<std::size_t>(s.batch * mod_stride), 32, 0.5f);
    Guarded r(static_cast<std::size_t>(s.batch * bs)), f(static_cast<std::size_t>(s.batch * bs));
    ref::ln_modulate(r.data() + off, bs, x.data() + off, bs, s.batch, s.tokens, s.dim,
                     mod.data() + 3 * s.dim, mod.data() + 4 * s.dim, mod_stride, 1e-6f);
    ln_modulate(f.data() + off, bs, x.data() + off, bs, s.batch, s.tokens, s.dim,
                mod.data() + 3 * s.dim, mod.data() + 4 * s.dim, mod_stride, 1e-6f);
    auto pred = [&](std::size_t i) { return static_cast<std::int64_t>(i) % bs >= off; };
    EXPECT_TRUE(f.intact_outside(pred));
    std::vector<float> a, e;
    for (std::size_t i = 0; i < f.size(); ++i)
      if (pred(i)) {
        a.push_back(f.data()[i]);
        e.push_back(r.data()[i]);
      }
    EXPECT_LE(ktest::nmse(a.data(), e.data(), a.size()), 1e-11);
  }
}

TEST(LnModulate, InPlaceEqualsOutOfPlace) {
  auto x = ktest::random_vec(2 * 5 * 16, 1);
  auto mod = ktest::random_vec(2 * 32, 2);
  std::vector<float> y(x.size());
  ln_modulate(y.data(), 80, x.data(), 80, 2, 5, 16, mod.data(), mod.data() + 16, 32, 1e-6f);
  ln_modulate(x.data(), 80, x.data(), 80, 2, 5, 16, mod.data(), mod.data() + 16, 32, 1e-6f);
  EXPECT_EQ(x, y);
}

TEST(GatedResidual, FastMatchesReference) {
  for (const auto& s : kShapes) {
    SCOPED_TRACE(::testing::Message() << s.batch << "x" << s.tokens << "x" << s.dim);
    const std::int64_t hs = (s.tokens + s.extra_tokens) * s.dim, ys = s.tokens * s.dim;
    auto h0 = ktest::random_vec(static_cast<std::size_t>(s.batch * hs), 41);
    auto y = ktest::random_vec(static_cast<std::size_t>(s.batch * ys), 42);
    auto gate = ktest::random_vec(static_cast<std::size_t>(s.batch * 3 * s.dim), 43);
    auto hr = h0, hf = h0;
    ref::gated_residual(hr.data(), hs, y.data(), ys, s.batch, s.tokens, s.dim, gate.data() + s.dim,
                        3 * s.dim);
    gated_residual(hf.data(), hs, y.data(), ys, s.batch, s.tokens, s.dim, gate.data() + s.dim,
                   3 * s.dim);
    EXPECT_EQ(hf, hr);  // one multiply-add per element in both: bit-equal
    // Rows beyond `tokens` in each batch (other stream) are untouched.
    for (std::int64_t b = 0; b < s.batch; ++b)
      for (std::int64_t i = s.tokens * s.dim; i < hs; ++i)
        ASSERT_EQ(hf[static_cast<std::size_t>(b * hs + i)],
                  h0[static_cast<std::size_t>(b * hs + i)]);
  }
}

TEST(QkRmsNorm, FastMatchesReferenceOnDitAndVaeLayouts) {
  const std::int64_t dims[][2] = {{1, 1}, {4, 8}, {3, 17}, {16, 64}, {5, 3}};
  for (const auto& hd : dims) {
    const std::int64_t heads = hd[0], D = hd[1], H = heads * D;
    for (int layout = 0; layout < 2; ++layout) {
      // DiT: (3, heads, D) -> q at n*D, k at H + n*D. VAE: (heads, 3, D) -> q at 3nD, k at 3nD + D.
      const std::int64_t head_stride = layout == 0 ? D : 3 * D;
      const std::int64_t k_off = layout == 0 ? H : D;
      for (std::int64_t rows : {1, 7, 300}) {
        SCOPED_TRACE(::testing::Message()
                     << heads << "x" << D << " layout " << layout << " rows " << rows);
        const std::int64_t ld =
            3 * H + 5;  // 5 trailing columns (like an MLP branch) stay untouched
        auto base = ktest::random_vec(static_cast<std::size_t>(rows * ld), 51, 2.0f);
        auto qs = ktest::random_vec(static_cast<std::size_t>(D), 52, 0.15f, 1.0f);
        auto ks = ktest::random_vec(static_cast<std::size_t>(D), 53, 0.15f, 1.0f);
        auto r = base, f = base;
        ref::qk_rmsnorm(r.data(), rows, ld, heads, D, head_stride, 0, k_off, qs.data(), ks.data(),
                        1e-6f);
        qk_rmsnorm(f.data(), rows, ld, heads, D, head_stride, 0, k_off, qs.data(), ks.data(),
                   1e-6f);
        EXPECT_LE(ktest::nmse(f.data(), r.data(), f.size()), 1e-12);
        for (std::int64_t i = 0; i < rows; ++i)
          for (std::int64_t c = 0; c < ld; ++c) {
            // v columns and the tail must be untouched.
            const bool is_qk = layout == 0 ? c < 2 * H : (c < 3 * H && (c % (3 * D)) < 2 * D);
            if (!is_qk) {
              ASSERT_EQ(f[static_cast<std::size_t>(i * ld + c)],
                        base[static_cast<std::size_t>(i * ld + c)]);
            }
          }
      }
    }
  }
}

TEST(BiasAct, FastMatchesReference) {
  const std::int64_t rows = 123, cols = 77, ld = 80;
  auto y0 = ktest::random_vec(static_cast<std::size_t>(rows * ld), 61, 2.0f);
  auto b = ktest::random_vec(static_cast<std::size_t>(cols), 62);
  for (Act a : {Act::kGeluTanh, Act::kGeluErf, Act::kSilu}) {
    auto r = y0, f = y0;
    ref::bias_act(r.data(), rows, cols, ld, b.data(), a);
    bias_act(f.data(), rows, cols, ld, b.data(), a);
    for (std::int64_t i = 0; i < rows; ++i)
      for (std::int64_t c = 0; c < cols; ++c) {
        const auto k = static_cast<std::size_t>(i * ld + c);
        ASSERT_TRUE(ktest::act_close(a != Act::kGeluErf, f[k], r[k],
                                     y0[k] + b[static_cast<std::size_t>(c)]))
            << static_cast<int>(a) << " " << i << " " << c;
      }
    for (std::int64_t i = 0; i < rows; ++i)
      for (std::int64_t c = cols; c < ld; ++c)
        ASSERT_EQ(f[static_cast<std::size_t>(i * ld + c)],
                  y0[static_cast<std::size_t>(i * ld + c)]);
  }
}

}  // namespace
}  // namespace gen3d::models::kernels
