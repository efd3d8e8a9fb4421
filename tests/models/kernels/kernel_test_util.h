#pragma once
// Helpers for kernel pair tests: seeded random data, guarded output buffers, normalized error.

#include <gtest/gtest.h>

#include <bit>
#include <cmath>
#include <cstdint>
#include <functional>
#include <random>
#include <vector>

namespace gen3d::models::ktest {

// An activation's fast path against the reference for input x. GELU (tanh) and SiLU may take a
// vector formula (models/kernels/activations.h) whose terms round differently: a few float32 ulp
// of the result, or, where the reference's 1 + tanh cancels (large negative x), the reference's
// own error, |x| times a few 1e-8. Any other activation is bit-equal. `gelu_or_silu` says which.
inline ::testing::AssertionResult act_close(bool gelu_or_silu, float fast, float ref, float x) {
  if (!gelu_or_silu) {
    if (fast == ref || (std::isnan(fast) && std::isnan(ref))) return ::testing::AssertionSuccess();
    return ::testing::AssertionFailure() << fast << " vs " << ref << ": not bit-equal";
  }
  const double tol = 4e-7 * std::abs(static_cast<double>(ref)) + 1e-7 * std::abs(double(x));
  if (std::abs(static_cast<double>(fast) - ref) <= tol + 1e-30)
    return ::testing::AssertionSuccess();
  return ::testing::AssertionFailure()
         << fast << " vs " << ref << " at " << x << ": differs by " << std::abs(double(fast) - ref);
}

inline std::vector<float> random_vec(std::size_t n, std::uint64_t seed, float scale = 1.0f,
                                     float mean = 0.0f) {
  std::mt19937_64 rng(seed);
  std::normal_distribution<float> d(mean, scale);
  std::vector<float> v(n);
  for (auto& x : v) x = d(rng);
  return v;
}

// sum (a - b)^2 / sum b^2 (NaN anywhere -> +inf).
inline double nmse(const float* a, const float* b, std::size_t n) {
  double num = 0.0, den = 0.0;
  for (std::size_t i = 0; i < n; ++i) {
    if (std::isnan(a[i]) || std::isnan(b[i])) return INFINITY;
    const double d = static_cast<double>(a[i]) - b[i];
    num += d * d;
    den += static_cast<double>(b[i]) * b[i];
  }
  return den > 0 ? num / den : num;
}

// A buffer of `n` floats with kGuard sentinel floats on each side. Every element starts as the
// sentinel; `intact_outside(pred)` checks that the guards and every in-buffer element for which
// pred(i) is false still hold it (catches out-of-bounds and stray writes into strided gaps).
class Guarded {
 public:
  static constexpr std::size_t kGuard = 64;
  static constexpr std::uint32_t kSentinelBits = 0x7fc0beefu;  // a quiet NaN payload
  explicit Guarded(std::size_t n) : n_(n), buf_(n + 2 * kGuard, sentinel()) {}
  float* data() { return buf_.data() + kGuard; }
  const float* data() const { return buf_.data() + kGuard; }
  std::size_t size() const { return n_; }
  static float sentinel() { return std::bit_cast<float>(kSentinelBits); }
  static bool is_sentinel(float v) { return std::bit_cast<std::uint32_t>(v) == kSentinelBits; }
  ::testing::AssertionResult intact_outside(const std::function<bool(std::size_t)>& written) const {
    for (std::size_t i = 0; i < kGuard; ++i) {
      if (!is_sentinel(buf_[i]))
        return ::testing::AssertionFailure()
               << "guard before the buffer overwritten at -" << (kGuard - i);
      if (!is_sentinel(buf_[kGuard + n_ + i]))
        return ::testing::AssertionFailure() << "guard after the buffer overwritten at +" << i;
    }
    for (std::size_t i = 0; i < n_; ++i) {
      const bool w = written(i);
      if (!w && !is_sentinel(buf_[kGuard + i]))
        return ::testing::AssertionFailure()
               << "element " << i << " outside the output was written";
      if (w && is_sentinel(buf_[kGuard + i]))
        return ::testing::AssertionFailure() << "output element " << i << " was not written";
    }
    return ::testing::AssertionSuccess();
  }

 private:
  std::size_t n_;
  std::vector<float> buf_;
};

// Row-block output predicate: element i belongs to a rows x cols block with row stride ld
// starting at offset `col0`.
inline std::function<bool(std::size_t)> block_pred(std::size_t rows, std::size_t cols,
                                                   std::size_t ld, std::size_t col0 = 0) {
  return [=](std::size_t i) {
    const std::size_t r = i / ld, c = i % ld;
    return r < rows && c >= col0 && c < col0 + cols;
  };
}

}  // namespace gen3d::models::ktest
