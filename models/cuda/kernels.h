#pragma once
// The CUDA backend's own kernels (kernels.cu), launched on the backend's stream. Shapes and
// strides mean what they mean in models/kernels (fused.h, attention.h, activations.h); every
// kernel computes in float32, with the bf16 roundings of the CPU's bf16 path where it has them.

#include <cuda_bf16.h>

#include <cstdint>

#include "models/kernels/activations.h"
#include "models/kernels/attention.h"

namespace gen3d::models::cuda {

using i64 = std::int64_t;

// dst[r, c] (row stride ld_dst) = bf16(src[r, c]) (row stride ld_src).
void to_bf16(__nv_bfloat16* dst, i64 ld_dst, const float* src, i64 ld_src, i64 rows, i64 cols);
// y[rows, out] (row stride ldy) = x[rows, in] w[out, in]^T (bf16 bits, row strides ldx, ldw) in
// float32, one output per thread: the fallback for shapes cuBLASLt offers no algorithm for.
void gemm_simt(float* y, i64 ldy, const __nv_bfloat16* x, i64 ldx, const std::uint16_t* w, i64 ldw,
               i64 rows, i64 in, i64 out);
// y[r, c] = act(y[r, c] + bias[c]) (bias may be null).
void bias_act(float* y, i64 ldy, i64 rows, i64 cols, const float* bias, kernels::Act act);
void act_copy(kernels::Act act, float* dst, i64 ld_dst, const float* src, i64 ld_src, i64 rows,
              i64 cols);
void add(float* y, const float* x, i64 n);
// y[i] += s * x[i], the product and the sum rounded apart.
void add_scaled(float* y, const float* x, float s, i64 n);
// nn::DeviceOps::rotate_pairs.
void rotate_pairs(float* x, i64 ld, i64 rows, i64 len, i64 heads, i64 head_dim, const float* cos,
                  const float* sin, i64 per_table);
// g[r, c] = silu(z[r, c]) * z[r, hidden + c].
void swiglu(float* g, i64 ldg, const float* z, i64 ldz, i64 rows, i64 hidden);
// g[r, c] = z[r, c] * gelu_erf(z[r, hidden + c]) (GEGLU's gate); g may alias z.
void geglu(float* g, i64 ldg, const float* z, i64 ldz, i64 rows, i64 hidden);
// y[b, r, c] += x[b, c] for y (batch, rows, cols), x (batch, cols), both dense.
void add_broadcast(float* y, const float* x, i64 batch, i64 rows, i64 cols);
// y = (x - mean) * rstd * weight + bias per row (weight, bias may be null); y may alias x.
void layer_norm(float* y, i64 ldy, const float* x, i64 ldx, i64 rows, i64 dim, const float* weight,
                const float* bias, float eps);
void ln_modulate(float* y, i64 ysb, const float* x, i64 xsb, i64 batch, i64 tokens, i64 dim,
                 const float* shift, const float* scale, i64 mod_stride, float eps);
void gated_residual(float* h, i64 hsb, const float* y, i64 ysb, i64 batch, i64 tokens, i64 dim,
                    const float* gate, i64 gate_stride);
void qk_rmsnorm(float* qkv, i64 rows, i64 ld, i64 heads, i64 head_dim, i64 head_stride,
                i64 q_offset, i64 k_offset, const float* q_scale, const float* k_scale, float eps);
// y = x * rsqrt(mean(x^2) + eps) * scale per row of `dim` (scale may be null); y may alias x.
void rms_norm(float* y, i64 ldy, const float* x, i64 ldx, i64 rows, i64 dim, const float* scale,
              float eps);
// y[rows, out] = x[rows, in] w[out, in]^T, float32 operands and accumulation (w dense).
void linear_f32(float* y, i64 ldy, const float* x, i64 ldx, const float* w, i64 rows, i64 in,
                i64 out);
// dst[i] = src[rows[i]] and dst[rows[i]] += weight[i] * src[i] (DeviceOps::gather_rows,
// scatter_add_rows); `rows` and `weight` on the device.
void gather_rows(float* dst, i64 ld_dst, const float* src, i64 ld_src, const i64* rows, i64 n,
                 i64 cols);
void scatter_add_rows(float* dst, i64 ld_dst, const float* src, i64 ld_src, const i64* rows,
                      const float* weight, i64 n, i64 cols);
// Fourier features [points, 3 (2F + 1)] of points [points, 3] (kernels' formula: see
// DeviceOps::fourier).
void fourier(float* out, const float* xyz, i64 points, const float* freqs, i64 num_freqs);
// FlashVDM's key selection (nn::DeviceOps::selected_key_attention): idx [groups, heads, top_k]
// (int32, on the device) = for each group of query rows [offsets[g], offsets[g + 1]) (offsets on
// the device) and head, the top_k keys (ascending) scored by the mean of the group's rows 0,
// stride, 2 stride, ... (kernels/key_selection.h's double-precision definition). At most 16384
// keys.
void select_keys(int* idx, const kernels::HeadsView& q, const kernels::HeadsView& k,
                 const i64* offsets, i64 groups, i64 heads, i64 head_dim, i64 kv_len, i64 top_k,
                 i64 stride);
// Each group's queries attend to its selected keys idx (as select_keys writes them; offsets
// [groups + 1] on the host; batch 1, strides of q, k, v and out as attention()'s).
void grouped_attention(const kernels::HeadsOut& out, const kernels::HeadsView& q,
                       const kernels::HeadsView& k, const kernels::HeadsView& v,
                       const kernels::AttentionShape& s, const int* idx, const i64* offsets,
                       i64 groups, i64 top_k);
// Softmax attention with bf16 operands and float32 accumulation and softmax. Head dims 64 and
// 128 run a tiled kernel on the tensor cores (never materialising q_len x kv_len); other head
// dims a plain kernel that keeps one query's scores in shared memory.
void attention(const kernels::HeadsOut& out, const kernels::HeadsView& q,
               const kernels::HeadsView& k, const kernels::HeadsView& v,
               const kernels::AttentionShape& s);

}  // namespace gen3d::models::cuda
