#pragma once
// Element-wise activations and row softmax. Each has a scalar reference (namespace ref) and a
// fast path (TBB-parallel over chunks; same formulas, so results agree to rounding).

#include <cstdint>

namespace gen3d::models::kernels {

enum class Act {
  kNone,
  kGeluTanh,  // 0.5 x (1 + tanh(sqrt(2/pi) (x + 0.044715 x^3)))   (DiT MLPs)
  kGeluErf,   // 0.5 x (1 + erf(x / sqrt(2)))                     (VAE MLPs)
  kSilu,      // x / (1 + exp(-x))
};

float apply_act(Act a, float x);

// x[n] = act(x[n]) in place.
void act_inplace(Act a, float* x, std::int64_t n);
// dst[r, c] = act(src[r, c] + bias[c]) for a rows x cols block; dst may alias src. bias may be
// null. On CPUs with AVX-512, GELU (tanh) and SiLU run a vector formula whose results differ from
// apply_act's by float32 rounding (a few ulp of the terms); the others are apply_act's, bit for
// bit.
void act_copy(Act a, float* dst, std::int64_t ld_dst, const float* src, std::int64_t ld_src,
              std::int64_t rows, std::int64_t cols, const float* bias = nullptr);
// Row-wise softmax in place on x[rows, cols] (row stride ld).
void softmax_rows(float* x, std::int64_t rows, std::int64_t cols, std::int64_t ld);

namespace ref {
void act_inplace(Act a, float* x, std::int64_t n);
void act_copy(Act a, float* dst, std::int64_t ld_dst, const float* src, std::int64_t ld_src,
              std::int64_t rows, std::int64_t cols, const float* bias = nullptr);
void softmax_rows(float* x, std::int64_t rows, std::int64_t cols, std::int64_t ld);
}  // namespace ref

}  // namespace gen3d::models::kernels
