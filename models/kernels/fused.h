#pragma once
// Fused ops of the DiT blocks. Tensors are batches of token rows: element (b, t, c) of a stream
// lives at ptr[b * batch_stride + t * dim + c]; per-batch modulation vectors (shift / scale /
// gate) at vec[b * mod_stride + c]. ref:: composes the plain kernels; the fast path does each op in
// one pass over the rows, TBB-parallel.

#include <cstdint>

#include "models/kernels/activations.h"

namespace gen3d::models::kernels {

// y[b, t, :] = (1 + scale[b]) * LN(x[b, t, :]) + shift[b]   (LN without affine). y may alias x.
void ln_modulate(float* y, std::int64_t y_batch_stride, const float* x, std::int64_t x_batch_stride,
                 std::int64_t batch, std::int64_t tokens, std::int64_t dim, const float* shift,
                 const float* scale, std::int64_t mod_stride, float eps);

// h[b, t, :] += gate[b] * y[b, t, :]
void gated_residual(float* h, std::int64_t h_batch_stride, const float* y,
                    std::int64_t y_batch_stride, std::int64_t batch, std::int64_t tokens,
                    std::int64_t dim, const float* gate, std::int64_t gate_stride);

// In-place RMSNorm over the head dim of q and k inside packed rows (e.g. a qkv Linear output):
// row r, head n: q at qkv[r * ld + q_offset + n * head_stride], k likewise at k_offset; each
// becomes (x * rsqrt(mean(x^2) + eps)) * {q,k}_scale[0..head_dim).
void qk_rmsnorm(float* qkv, std::int64_t rows, std::int64_t ld, std::int64_t heads,
                std::int64_t head_dim, std::int64_t head_stride, std::int64_t q_offset,
                std::int64_t k_offset, const float* q_scale, const float* k_scale, float eps);

// y[r, c] = act(y[r, c] + bias[c]) in place (the epilogue of a GEMM that produced y without bias).
void bias_act(float* y, std::int64_t rows, std::int64_t cols, std::int64_t ld, const float* bias,
              Act act);

namespace ref {
void ln_modulate(float* y, std::int64_t y_batch_stride, const float* x, std::int64_t x_batch_stride,
                 std::int64_t batch, std::int64_t tokens, std::int64_t dim, const float* shift,
                 const float* scale, std::int64_t mod_stride, float eps);
void gated_residual(float* h, std::int64_t h_batch_stride, const float* y,
                    std::int64_t y_batch_stride, std::int64_t batch, std::int64_t tokens,
                    std::int64_t dim, const float* gate, std::int64_t gate_stride);
void qk_rmsnorm(float* qkv, std::int64_t rows, std::int64_t ld, std::int64_t heads,
                std::int64_t head_dim, std::int64_t head_stride, std::int64_t q_offset,
                std::int64_t k_offset, const float* q_scale, const float* k_scale, float eps);
void bias_act(float* y, std::int64_t rows, std::int64_t cols, std::int64_t ld, const float* bias,
              Act act);
}  // namespace ref

}  // namespace gen3d::models::kernels
