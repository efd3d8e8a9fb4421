#include "models/kernels/norms.h"

#include <gtest/gtest.h>

#include <cmath>

#include "models/kernels/kernel_test_util.h"

namespace gen3d::models::kernels {
namespace {

using ktest::Guarded;

struct NormShape {
  std::int64_t rows, dim, pad;
};
const NormShape kShapes[] = {{1, 1, 0},    {1, 2, 1},     {5, 7, 0},    {33, 32, 3},
                             {129, 65, 0}, {700, 128, 1}, {3, 1024, 0}, {2050, 17, 2}};

TEST(LayerNorm, FastMatchesReferenceWithAndWithoutAffine) {
  for (const auto& s : kShapes) {
    for (int affine = 0; affine < 3; ++affine) {  // none, weight only, weight + bias
      SCOPED_TRACE(::testing::Message() << s.rows << "x" << s.dim << " affine " << affine);
      const std::int64_t ld = s.dim + s.pad;
      auto x = ktest::random_vec(static_cast<std::size_t>(s.rows * ld), 1 + s.dim, 2.0f, 0.5f);
      auto g = ktest::random_vec(static_cast<std::size_t>(s.dim), 2, 0.2f, 1.0f);
      auto b = ktest::random_vec(static_cast<std::size_t>(s.dim), 3, 0.1f);
      const float* gp = affine >= 1 ? g.data() : nullptr;
      const float* bp = affine >= 2 ? b.data() : nullptr;
      Guarded r(static_cast<std::size_t>(s.rows * ld)), f(static_cast<std::size_t>(s.rows * ld));
      ref::layer_norm(r.data(), ld, x.data(), ld, s.rows, s.dim, 1e-6f, gp, bp);
      layer_norm(f.data(), ld, x.data(), ld, s.rows, s.dim, 1e-6f, gp, bp);
      auto pred = ktest::block_pred(static_cast<std::size_t>(s.rows),
                                    static_cast<std::size_t>(s.dim), static_cast<std::size_t>(ld));
      EXPECT_TRUE(f.intact_outside(pred));
      std::vector<float> a, e;
      for (std::int64_t i = 0; i < s.rows; ++i)
        for (std::int64_t j = 0; j < s.dim; ++j) {
          a.push_back(f.data()[i * ld + j]);
          e.push_back(r.data()[i * ld + j]);
        }
      // dim 1: output is exactly 0 (or beta): nmse then is absolute, still tiny.
      EXPECT_LE(ktest::nmse(a.data(), e.data(), a.size()), 1e-11);
    }
  }
}

TEST(LayerNorm, InPlaceAndKnownValues) {
  std::vector<float> x = {1, 2, 3, 4};
  layer_norm(x.data(), 4, x.data(), 4, 1, 4, 0.0f);
  const float s = 1.0f / std::sqrt(1.25f);
  EXPECT_NEAR(x[0], -1.5f * s, 1e-6f);
  EXPECT_NEAR(x[3], 1.5f * s, 1e-6f);
}

TEST(RMSNorm, FastMatchesReference) {
  for (const auto& s : kShapes) {
    SCOPED_TRACE(::testing::Message() << s.rows << "x" << s.dim);
    const std::int64_t ld = s.dim + s.pad;
    auto x = ktest::random_vec(static_cast<std::size_t>(s.rows * ld), 4 + s.rows, 1.5f);
    auto sc = ktest::random_vec(static_cast<std::size_t>(s.dim), 5, 0.15f, 1.0f);
    Guarded r(static_cast<std::size_t>(s.rows * ld)), f(static_cast<std::size_t>(s.rows * ld));
    ref::rms_norm(r.data(), ld, x.data(), ld, s.rows, s.dim, 1e-6f, sc.data());
    rms_norm(f.data(), ld, x.data(), ld, s.rows, s.dim, 1e-6f, sc.data());
    auto pred = ktest::block_pred(static_cast<std::size_t>(s.rows), static_cast<std::size_t>(s.dim),
                                  static_cast<std::size_t>(ld));
    EXPECT_TRUE(f.intact_outside(pred));
    std::vector<float> a, e;
    for (std::int64_t i = 0; i < s.rows; ++i)
      for (std::int64_t j = 0; j < s.dim; ++j) {
        a.push_back(f.data()[i * ld + j]);
        e.push_back(r.data()[i * ld + j]);
      }
    EXPECT_LE(ktest::nmse(a.data(), e.data(), a.size()), 1e-12);
  }
}

TEST(RMSNorm, KnownValues) {
  std::vector<float> x = {3, 4};  // mean square 12.5
  const float scale[] = {2, 1};
  rms_norm(x.data(), 2, x.data(), 2, 1, 2, 0.0f, scale);
  EXPECT_NEAR(x[0], 2 * 3 / std::sqrt(12.5f), 1e-6f);
  EXPECT_NEAR(x[1], 4 / std::sqrt(12.5f), 1e-6f);
}

}  // namespace
}  // namespace gen3d::models::kernels
