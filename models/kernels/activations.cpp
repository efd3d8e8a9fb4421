#include "models/kernels/activations.h"

#include <tbb/blocked_range.h>
#include <tbb/parallel_for.h>

#include <algorithm>
#include <cmath>
#include <cstdlib>

#include "models/kernels/activations_avx512.h"

namespace gen3d::models::kernels {

namespace {

constexpr float kSqrt2OverPi = 0.7978845608028654f;
constexpr float kInvSqrt2 = 0.7071067811865476f;
constexpr std::int64_t kGrain = 1 << 14;  // elements per task

inline float gelu_tanh(float x) {
  return 0.5f * x * (1.0f + std::tanh(kSqrt2OverPi * (x + 0.044715f * x * x * x)));
}
inline float gelu_erf(float x) {
  return 0.5f * x * (1.0f + std::erf(x * kInvSqrt2));
}
inline float silu(float x) {
  return x / (1.0f + std::exp(-x));
}

template <class F>
void map_block(float* dst, std::int64_t ld_dst, const float* src, std::int64_t ld_src,
               std::int64_t r0, std::int64_t r1, std::int64_t cols, const float* bias, F f) {
  for (std::int64_t r = r0; r < r1; ++r) {
    float* d = dst + r * ld_dst;
    const float* s = src + r * ld_src;
    if (bias) {
      for (std::int64_t c = 0; c < cols; ++c) d[c] = f(s[c] + bias[c]);
    } else {
      for (std::int64_t c = 0; c < cols; ++c) d[c] = f(s[c]);
    }
  }
}

// A whole row at once, where a vector version exists: GELU (tanh) and SiLU with AVX-512.
using RowFn = void (*)(float*, const float*, std::int64_t, const float*);

RowFn vector_row(Act a) {
  // GEN3D_SCALAR_ACT=1 keeps the scalar formulas (for comparisons).
  static const bool avx512 = __builtin_cpu_supports("avx512f") != 0;
  if (!avx512 || std::getenv("GEN3D_SCALAR_ACT")) return nullptr;
  if (a == Act::kGeluTanh) return avx512::gelu_tanh_row;
  if (a == Act::kSilu) return avx512::silu_row;
  return nullptr;
}

void par_rows(RowFn fn, float* dst, std::int64_t ld_dst, const float* src, std::int64_t ld_src,
              std::int64_t rows, std::int64_t cols, const float* bias) {
  // One long row (an in-place pass over a buffer) splits into chunks.
  if (rows == 1 && cols > kGrain) {
    tbb::parallel_for(tbb::blocked_range<std::int64_t>(0, cols, kGrain),
                      [&](const tbb::blocked_range<std::int64_t>& r) {
                        fn(dst + r.begin(), src + r.begin(), r.size(),
                           bias ? bias + r.begin() : nullptr);
                      });
    return;
  }
  const std::int64_t rows_per_task =
      std::max<std::int64_t>(1, kGrain / std::max<std::int64_t>(cols, 1));
  tbb::parallel_for(tbb::blocked_range<std::int64_t>(0, rows, rows_per_task),
                    [&](const tbb::blocked_range<std::int64_t>& r) {
                      for (std::int64_t i = r.begin(); i < r.end(); ++i)
                        fn(dst + i * ld_dst, src + i * ld_src, cols, bias);
                    });
}

template <class F>
void par_map(float* dst, std::int64_t ld_dst, const float* src, std::int64_t ld_src,
             std::int64_t rows, std::int64_t cols, const float* bias, F f) {
  const std::int64_t rows_per_task =
      std::max<std::int64_t>(1, kGrain / std::max<std::int64_t>(cols, 1));
  if (rows <= rows_per_task) {
    map_block(dst, ld_dst, src, ld_src, 0, rows, cols, bias, f);
    return;
  }
  tbb::parallel_for(tbb::blocked_range<std::int64_t>(0, rows, rows_per_task),
                    [&](const tbb::blocked_range<std::int64_t>& r) {
                      map_block(dst, ld_dst, src, ld_src, r.begin(), r.end(), cols, bias, f);
                    });
}

void softmax_row(float* x, std::int64_t cols) {
  float m = -INFINITY;
  for (std::int64_t c = 0; c < cols; ++c) m = std::max(m, x[c]);
  float sum = 0.0f;
  for (std::int64_t c = 0; c < cols; ++c) {
    x[c] = std::exp(x[c] - m);
    sum += x[c];
  }
  const float inv = 1.0f / sum;
  for (std::int64_t c = 0; c < cols; ++c) x[c] *= inv;
}

}  // namespace

float apply_act(Act a, float x) {
  switch (a) {
    case Act::kGeluTanh:
      return gelu_tanh(x);
    case Act::kGeluErf:
      return gelu_erf(x);
    case Act::kSilu:
      return silu(x);
    case Act::kNone:
      break;
  }
  return x;
}

void act_copy(Act a, float* dst, std::int64_t ld_dst, const float* src, std::int64_t ld_src,
              std::int64_t rows, std::int64_t cols, const float* bias) {
  if (RowFn fn = vector_row(a)) return par_rows(fn, dst, ld_dst, src, ld_src, rows, cols, bias);
  switch (a) {
    case Act::kGeluTanh:
      return par_map(dst, ld_dst, src, ld_src, rows, cols, bias, gelu_tanh);
    case Act::kGeluErf:
      return par_map(dst, ld_dst, src, ld_src, rows, cols, bias, gelu_erf);
    case Act::kSilu:
      return par_map(dst, ld_dst, src, ld_src, rows, cols, bias, silu);
    case Act::kNone:
      return par_map(dst, ld_dst, src, ld_src, rows, cols, bias, [](float v) { return v; });
  }
}

void act_inplace(Act a, float* x, std::int64_t n) {
  act_copy(a, x, n, x, n, 1, n);
}

void softmax_rows(float* x, std::int64_t rows, std::int64_t cols, std::int64_t ld) {
  const std::int64_t rows_per_task =
      std::max<std::int64_t>(1, kGrain / std::max<std::int64_t>(cols, 1));
  tbb::parallel_for(tbb::blocked_range<std::int64_t>(0, rows, rows_per_task),
                    [&](const tbb::blocked_range<std::int64_t>& r) {
                      for (std::int64_t i = r.begin(); i < r.end(); ++i)
                        softmax_row(x + i * ld, cols);
                    });
}

namespace ref {

void act_inplace(Act a, float* x, std::int64_t n) {
  for (std::int64_t i = 0; i < n; ++i) x[i] = apply_act(a, x[i]);
}

void act_copy(Act a, float* dst, std::int64_t ld_dst, const float* src, std::int64_t ld_src,
              std::int64_t rows, std::int64_t cols, const float* bias) {
  for (std::int64_t r = 0; r < rows; ++r)
    for (std::int64_t c = 0; c < cols; ++c)
      dst[r * ld_dst + c] = apply_act(a, src[r * ld_src + c] + (bias ? bias[c] : 0.0f));
}

void softmax_rows(float* x, std::int64_t rows, std::int64_t cols, std::int64_t ld) {
  for (std::int64_t r = 0; r < rows; ++r) {
    float* row = x + r * ld;
    double m = -INFINITY;
    for (std::int64_t c = 0; c < cols; ++c) m = std::max<double>(m, row[c]);
    double sum = 0.0;
    for (std::int64_t c = 0; c < cols; ++c) sum += std::exp(static_cast<double>(row[c]) - m);
    for (std::int64_t c = 0; c < cols; ++c)
      row[c] = static_cast<float>(std::exp(static_cast<double>(row[c]) - m) / sum);
  }
}

}  // namespace ref

}  // namespace gen3d::models::kernels
