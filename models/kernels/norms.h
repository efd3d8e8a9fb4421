#pragma once
// Normalizations over the last dimension of row blocks. ref:: accumulates in double and is the
// readable definition; the fast path is float two-pass, TBB-parallel over rows.

#include <cstdint>

namespace gen3d::models::kernels {

// y[r, :] = (x[r, :] - mean) / sqrt(var + eps) * gamma + beta   (gamma / beta may be null:
// LayerNorm without affine). Biased variance, like PyTorch. y may alias x.
void layer_norm(float* y, std::int64_t ldy, const float* x, std::int64_t ldx, std::int64_t rows,
                std::int64_t dim, float eps, const float* gamma = nullptr,
                const float* beta = nullptr);

// y[r, :] = (x[r, :] * rsqrt(mean(x^2) + eps)) * scale   (scale may be null). y may alias x.
void rms_norm(float* y, std::int64_t ldy, const float* x, std::int64_t ldx, std::int64_t rows,
              std::int64_t dim, float eps, const float* scale = nullptr);

namespace ref {
void layer_norm(float* y, std::int64_t ldy, const float* x, std::int64_t ldx, std::int64_t rows,
                std::int64_t dim, float eps, const float* gamma = nullptr,
                const float* beta = nullptr);
void rms_norm(float* y, std::int64_t ldy, const float* x, std::int64_t ldx, std::int64_t rows,
              std::int64_t dim, float eps, const float* scale = nullptr);
}  // namespace ref

// Row primitives shared with the fused kernels (single row, float, two-pass).
void layer_norm_row(float* y, const float* x, std::int64_t dim, float eps, const float* gamma,
                    const float* beta);
void rms_norm_row(float* y, const float* x, std::int64_t dim, float eps, const float* scale);

}  // namespace gen3d::models::kernels
