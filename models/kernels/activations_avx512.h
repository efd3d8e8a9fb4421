#pragma once
// AVX-512 rows of the activations (activations_avx512.cpp): dst[c] = act(src[c] + bias[c]) for
// c < n, bias may be null, dst may alias src. Call only where the CPU has AVX-512F.

#include <cstdint>

namespace gen3d::models::kernels::avx512 {

void gelu_tanh_row(float* dst, const float* src, std::int64_t n, const float* bias);
void silu_row(float* dst, const float* src, std::int64_t n, const float* bias);

}  // namespace gen3d::models::kernels::avx512
