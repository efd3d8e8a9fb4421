// The CUDA backend's kernels. Correctness first: every kernel mirrors the float32 formula of its
// CPU twin in models/kernels; the attention kernel follows FlashAttention-2's loop (online
// softmax over key tiles, bf16 tensor-core products through WMMA, float32 accumulation).

#include <mma.h>

#include <cfloat>
#include <cmath>
#include <string>

#include "models/core/error.h"
#include "models/cuda/kernels.h"
#include "models/cuda/runtime.h"

namespace gen3d::models::cuda {

namespace {

using kernels::Act;

constexpr int kThreads = 256;

unsigned blocks_for(i64 n, int threads = kThreads) {
  const i64 b = (n + threads - 1) / threads;
  return static_cast<unsigned>(b < 65535 * 16 ? (b < 1 ? 1 : b) : 65535 * 16);
}

__device__ __forceinline__ float act_fn(int act, float x) {
  switch (act) {
    case static_cast<int>(Act::kGeluTanh): {
      const float k0 = 0.7978845608028654f, k1 = 0.044715f;
      return 0.5f * x * (1.0f + tanhf(k0 * (x + k1 * x * x * x)));
    }
    case static_cast<int>(Act::kGeluErf):
      return 0.5f * x * (1.0f + erff(x * 0.7071067811865476f));
    case static_cast<int>(Act::kSilu):
      return x / (1.0f + expf(-x));
    default:
      return x;
  }
}

__device__ __forceinline__ float round_bf16(float x) {
  return __bfloat162float(__float2bfloat16_rn(x));
}

__global__ void to_bf16_kernel(__nv_bfloat16* dst, const float* src, i64 ld, i64 rows, i64 cols) {
  const i64 n = rows * cols;
  for (i64 i = blockIdx.x * static_cast<i64>(blockDim.x) + threadIdx.x; i < n;
       i += static_cast<i64>(gridDim.x) * blockDim.x) {
    const i64 r = i / cols, c = i - r * cols;
    dst[i] = __float2bfloat16_rn(src[r * ld + c]);
  }
}

__global__ void bias_act_kernel(float* y, i64 ld, i64 rows, i64 cols, const float* bias, int act) {
  const i64 n = rows * cols;
  for (i64 i = blockIdx.x * static_cast<i64>(blockDim.x) + threadIdx.x; i < n;
       i += static_cast<i64>(gridDim.x) * blockDim.x) {
    const i64 r = i / cols, c = i - r * cols;
    float v = y[r * ld + c];
    if (bias) v += bias[c];
    y[r * ld + c] = act_fn(act, v);
  }
}

__global__ void act_copy_kernel(int act, float* dst, i64 ldd, const float* src, i64 lds, i64 rows,
                                i64 cols) {
  const i64 n = rows * cols;
  for (i64 i = blockIdx.x * static_cast<i64>(blockDim.x) + threadIdx.x; i < n;
       i += static_cast<i64>(gridDim.x) * blockDim.x) {
    const i64 r = i / cols, c = i - r * cols;
    dst[r * ldd + c] = act_fn(act, src[r * lds + c]);
  }
}

__global__ void add_kernel(float* y, const float* x, i64 n) {
  for (i64 i = blockIdx.x * static_cast<i64>(blockDim.x) + threadIdx.x; i < n;
       i += static_cast<i64>(gridDim.x) * blockDim.x)
    y[i] += x[i];
}

// Sum over the block (blockDim.x a multiple of 32, at most 1024); every thread gets the total.
__device__ float block_sum(float v, float* scratch) {
  for (int o = 16; o > 0; o >>= 1) v += __shfl_xor_sync(0xffffffffu, v, o);
  const int warp = threadIdx.x / 32, lane = threadIdx.x % 32;
  __syncthreads();  // scratch may still be read from a previous call
  if (lane == 0) scratch[warp] = v;
  __syncthreads();
  const int warps = blockDim.x / 32;
  float t = lane < warps ? scratch[lane] : 0.0f;
  for (int o = 16; o > 0; o >>= 1) t += __shfl_xor_sync(0xffffffffu, t, o);
  return t;
}

// One block per row (b, t): y = (1 + scale) * LN(x) + shift, LN without affine; y may alias x.
__global__ void ln_modulate_kernel(float* y, i64 ysb, const float* x, i64 xsb, i64 tokens, i64 dim,
                                   const float* shift, const float* scale, i64 ms, float eps) {
  __shared__ float scratch[32];
  const i64 row = blockIdx.x;
  const i64 b = row / tokens, t = row - b * tokens;
  const float* xr = x + b * xsb + t * dim;
  float* yr = y + b * ysb + t * dim;
  float s = 0.0f;
  for (i64 i = threadIdx.x; i < dim; i += blockDim.x) s += xr[i];
  const float mean = block_sum(s, scratch) / static_cast<float>(dim);
  float q = 0.0f;
  for (i64 i = threadIdx.x; i < dim; i += blockDim.x) {
    const float d = xr[i] - mean;
    q += d * d;
  }
  const float rstd = 1.0f / sqrtf(block_sum(q, scratch) / static_cast<float>(dim) + eps);
  const float* sh = shift + b * ms;
  const float* sc = scale + b * ms;
  for (i64 i = threadIdx.x; i < dim; i += blockDim.x)
    yr[i] = (1.0f + sc[i]) * ((xr[i] - mean) * rstd) + sh[i];
}

__global__ void gated_residual_kernel(float* h, i64 hsb, const float* y, i64 ysb, i64 batch,
                                      i64 tokens, i64 dim, const float* gate, i64 gs) {
  const i64 n = batch * tokens * dim;
  for (i64 i = blockIdx.x * static_cast<i64>(blockDim.x) + threadIdx.x; i < n;
       i += static_cast<i64>(gridDim.x) * blockDim.x) {
    const i64 b = i / (tokens * dim), rem = i - b * tokens * dim;
    const i64 c = rem % dim;
    h[b * hsb + rem] += gate[b * gs + c] * y[b * ysb + rem];
  }
}

// One warp per (row, head, q or k): x * rsqrt(mean(x^2) + eps) * scale, in place.
__global__ void qk_rmsnorm_kernel(float* qkv, i64 rows, i64 ld, i64 heads, i64 head_dim,
                                  i64 head_stride, i64 q_off, i64 k_off, const float* q_scale,
                                  const float* k_scale, float eps) {
  const i64 warp = (blockIdx.x * static_cast<i64>(blockDim.x) + threadIdx.x) / 32;
  const int lane = threadIdx.x % 32;
  if (warp >= rows * heads * 2) return;
  const bool is_k = warp % 2 == 1;
  const i64 rh = warp / 2, r = rh / heads, n = rh - r * heads;
  float* p = qkv + r * ld + (is_k ? k_off : q_off) + n * head_stride;
  const float* sc = is_k ? k_scale : q_scale;
  float s = 0.0f;
  for (i64 d = lane; d < head_dim; d += 32) s += p[d] * p[d];
  for (int o = 16; o > 0; o >>= 1) s += __shfl_xor_sync(0xffffffffu, s, o);
  const float r_ = 1.0f / sqrtf(s / static_cast<float>(head_dim) + eps);
  for (i64 d = lane; d < head_dim; d += 32) p[d] = (p[d] * r_) * sc[d];
}

struct AttnArgs {
  float* o;
  i64 o_bs, o_ts, o_hs;
  const float *q, *k, *v;
  i64 q_bs, q_ts, q_hs, k_bs, k_ts, k_hs, v_bs, v_ts, v_hs;
  i64 heads, lq, lk, d;
  float scale;
};

// Plain attention for any head dim: one block per (query, head, batch); the query's scores live
// in shared memory (kv_len floats).
__global__ void attention_plain_kernel(AttnArgs a) {
  extern __shared__ float sh[];  // [d] query, [32] scratch, [lk] scores
  float* qv = sh;
  float* scratch = sh + a.d;
  float* sc = scratch + 32;
  const i64 qi = blockIdx.x, h = blockIdx.y, b = blockIdx.z;
  const float* qp = a.q + b * a.q_bs + qi * a.q_ts + h * a.q_hs;
  for (i64 d = threadIdx.x; d < a.d; d += blockDim.x) qv[d] = round_bf16(qp[d]);
  __syncthreads();
  float mx = -FLT_MAX;
  for (i64 j = threadIdx.x; j < a.lk; j += blockDim.x) {
    const float* kp = a.k + b * a.k_bs + j * a.k_ts + h * a.k_hs;
    float s = 0.0f;
    for (i64 d = 0; d < a.d; ++d) s += qv[d] * round_bf16(kp[d]);
    s *= a.scale;
    sc[j] = s;
    mx = fmaxf(mx, s);
  }
  // Block max through the sum helper's scratch: negate-free max reduce.
  for (int o = 16; o > 0; o >>= 1) mx = fmaxf(mx, __shfl_xor_sync(0xffffffffu, mx, o));
  __syncthreads();
  if (threadIdx.x % 32 == 0) scratch[threadIdx.x / 32] = mx;
  __syncthreads();
  mx = -FLT_MAX;
  for (int w = 0; w < static_cast<int>(blockDim.x / 32); ++w) mx = fmaxf(mx, scratch[w]);
  float sum = 0.0f;
  for (i64 j = threadIdx.x; j < a.lk; j += blockDim.x) {
    const float p = expf(sc[j] - mx);
    sc[j] = p;
    sum += p;
  }
  sum = block_sum(sum, scratch);  // synchronizes: every score is final
  const float inv = 1.0f / sum;
  float* op = a.o + b * a.o_bs + qi * a.o_ts + h * a.o_hs;
  for (i64 d = threadIdx.x; d < a.d; d += blockDim.x) {
    float acc = 0.0f;
    for (i64 j = 0; j < a.lk; ++j)
      acc += round_bf16(sc[j]) * round_bf16(a.v[b * a.v_bs + j * a.v_ts + h * a.v_hs + d]);
    op[d] = acc * inv;
  }
}

// q, k or v of every (batch, head) packed as bf16 [batch * heads, len, D] for the tiled kernel's
// 16-byte loads.
__global__ void pack_heads_kernel(__nv_bfloat16* dst, const float* src, i64 bs, i64 ts, i64 hs,
                                  i64 heads, i64 len, i64 d) {
  const i64 n = heads * len * d * gridDim.y;
  const i64 b = blockIdx.y;
  for (i64 i = blockIdx.x * static_cast<i64>(blockDim.x) + threadIdx.x; i < n / gridDim.y;
       i += static_cast<i64>(gridDim.x) * blockDim.x) {
    const i64 h = i / (len * d), rem = i - h * len * d, t = rem / d, c = rem - t * d;
    dst[b * heads * len * d + i] = __float2bfloat16_rn(src[b * bs + t * ts + h * hs + c]);
  }
}

// FlashAttention-2's loop on the tensor cores. A block of 8 warps takes 128 queries (16 per warp)
// of one (batch, head) and walks the keys in tiles of 64: S = Q K^T (bf16 WMMA, float32 out), the
// online softmax in float32 with a whole warp on each query row (lane c holds columns c and
// c + 32: conflict-free shared-memory reads), P rounded to bf16, O += P V (WMMA). O lives in
// registers (lane c holds columns c, c + 32, ...), rescaled as the row maximum moves.
constexpr int kBM = 128, kBN = 64, kWarps = 8;

template <int D>
struct FlashSmem {
  static constexpr int ldq = D + 8;                      // bf16 pitch of Q, K, V tiles
  static constexpr int lds = (D + 4) > 68 ? D + 4 : 68;  // float pitch of S / PV scratch
  static constexpr int ldp = kBN + 8;                    // bf16 pitch of P
  static constexpr int q_bytes = kBM * ldq * 2;
  static constexpr int kv_bytes = kBN * ldq * 2;
  static constexpr int s_bytes = kWarps * 16 * lds * 4;
  static constexpr int p_bytes = kWarps * 16 * ldp * 2;
  static constexpr int total = q_bytes + 2 * kv_bytes + s_bytes + p_bytes;
};

// rows x D bf16 from packed global rows [row0, row0 + rows) (zero past `len`) into a tile of
// pitch ldq, 8 elements per 16-byte load.
template <int D, int kThreadsPerBlock>
__device__ void load_tile(__nv_bfloat16* tile, int ldq, const __nv_bfloat16* src, i64 row0,
                          int rows, i64 len) {
  constexpr int kVec = D / 8;
  for (int i = threadIdx.x; i < rows * kVec; i += kThreadsPerBlock) {
    const int r = i / kVec, c = (i - r * kVec) * 8;
    uint4 v = make_uint4(0, 0, 0, 0);
    if (row0 + r < len) v = *reinterpret_cast<const uint4*>(src + (row0 + r) * D + c);
    *reinterpret_cast<uint4*>(tile + r * ldq + c) = v;
  }
}

template <int D>
__global__ void __launch_bounds__(kWarps * 32)
    attention_flash_kernel(AttnArgs a, const __nv_bfloat16* qb, const __nv_bfloat16* kb,
                           const __nv_bfloat16* vb) {
  using namespace nvcuda;
  using S = FlashSmem<D>;
  constexpr int kT = kWarps * 32;
  constexpr int kColsPerLane = D / 32;
  extern __shared__ __align__(128) unsigned char smem[];
  __nv_bfloat16* Qs = reinterpret_cast<__nv_bfloat16*>(smem);
  __nv_bfloat16* Ks = reinterpret_cast<__nv_bfloat16*>(smem + S::q_bytes);
  __nv_bfloat16* Vs = reinterpret_cast<__nv_bfloat16*>(smem + S::q_bytes + S::kv_bytes);
  const int warp = threadIdx.x / 32, lane = threadIdx.x % 32;
  float* Sw = reinterpret_cast<float*>(smem + S::q_bytes + 2 * S::kv_bytes) + warp * 16 * S::lds;
  __nv_bfloat16* Pw =
      reinterpret_cast<__nv_bfloat16*>(smem + S::q_bytes + 2 * S::kv_bytes + S::s_bytes) +
      warp * 16 * S::ldp;
  const i64 q0 = static_cast<i64>(blockIdx.x) * kBM, h = blockIdx.y, b = blockIdx.z;
  const i64 bh = b * a.heads + h;
  load_tile<D, kT>(Qs, S::ldq, qb + bh * a.lq * D, q0, kBM, a.lq);

  float o[16][kColsPerLane];
  float m[16], l[16];
  for (int r = 0; r < 16; ++r) {
    m[r] = -INFINITY;
    l[r] = 0.0f;
    for (int j = 0; j < kColsPerLane; ++j) o[r][j] = 0.0f;
  }

  for (i64 k0 = 0; k0 < a.lk; k0 += kBN) {
    __syncthreads();  // the previous tile is no longer read
    load_tile<D, kT>(Ks, S::ldq, kb + bh * a.lk * D, k0, kBN, a.lk);
    load_tile<D, kT>(Vs, S::ldq, vb + bh * a.lk * D, k0, kBN, a.lk);
    __syncthreads();

    // S (16 x 64) = Q_w K^T
    for (int nt = 0; nt < kBN / 16; ++nt) {
      wmma::fragment<wmma::accumulator, 16, 16, 16, float> acc;
      wmma::fill_fragment(acc, 0.0f);
      for (int kk = 0; kk < D / 16; ++kk) {
        wmma::fragment<wmma::matrix_a, 16, 16, 16, __nv_bfloat16, wmma::row_major> fa;
        wmma::fragment<wmma::matrix_b, 16, 16, 16, __nv_bfloat16, wmma::col_major> fb;
        wmma::load_matrix_sync(fa, Qs + warp * 16 * S::ldq + kk * 16, S::ldq);
        wmma::load_matrix_sync(fb, Ks + nt * 16 * S::ldq + kk * 16, S::ldq);
        wmma::mma_sync(acc, fa, fb, acc);
      }
      wmma::store_matrix_sync(Sw + nt * 16, acc, S::lds, wmma::mem_row_major);
    }
    __syncwarp();

    // Online softmax, one row at a time across the warp.
    const bool valid0 = k0 + lane < a.lk, valid1 = k0 + lane + 32 < a.lk;
    float alpha[16];
#pragma unroll
    for (int r = 0; r < 16; ++r) {
      const float s0 = valid0 ? Sw[r * S::lds + lane] * a.scale : -INFINITY;
      const float s1 = valid1 ? Sw[r * S::lds + lane + 32] * a.scale : -INFINITY;
      float mx = fmaxf(s0, s1);
      for (int off = 16; off > 0; off >>= 1) mx = fmaxf(mx, __shfl_xor_sync(0xffffffffu, mx, off));
      const float m_new = fmaxf(m[r], mx);  // finite: every key tile holds a valid key
      alpha[r] = expf(m[r] - m_new);
      const float p0 = expf(s0 - m_new), p1 = expf(s1 - m_new);
      float sum = p0 + p1;
      for (int off = 16; off > 0; off >>= 1) sum += __shfl_xor_sync(0xffffffffu, sum, off);
      l[r] = l[r] * alpha[r] + sum;
      m[r] = m_new;
      Pw[r * S::ldp + lane] = __float2bfloat16_rn(p0);
      Pw[r * S::ldp + lane + 32] = __float2bfloat16_rn(p1);
    }
    __syncwarp();

    // PV (16 x D) = P_w V, into the S scratch.
    for (int dt = 0; dt < D / 16; ++dt) {
      wmma::fragment<wmma::accumulator, 16, 16, 16, float> acc;
      wmma::fill_fragment(acc, 0.0f);
      for (int kk = 0; kk < kBN / 16; ++kk) {
        wmma::fragment<wmma::matrix_a, 16, 16, 16, __nv_bfloat16, wmma::row_major> fa;
        wmma::fragment<wmma::matrix_b, 16, 16, 16, __nv_bfloat16, wmma::row_major> fb;
        wmma::load_matrix_sync(fa, Pw + kk * 16, S::ldp);
        wmma::load_matrix_sync(fb, Vs + kk * 16 * S::ldq + dt * 16, S::ldq);
        wmma::mma_sync(acc, fa, fb, acc);
      }
      wmma::store_matrix_sync(Sw + dt * 16, acc, S::lds, wmma::mem_row_major);
    }
    __syncwarp();
#pragma unroll
    for (int r = 0; r < 16; ++r)
#pragma unroll
      for (int j = 0; j < kColsPerLane; ++j)
        o[r][j] = o[r][j] * alpha[r] + Sw[r * S::lds + lane + 32 * j];
    __syncwarp();
  }

#pragma unroll
  for (int r = 0; r < 16; ++r) {
    const i64 qi = q0 + warp * 16 + r;
    if (qi >= a.lq) continue;
    float* op = a.o + b * a.o_bs + qi * a.o_ts + h * a.o_hs;
    const float inv = 1.0f / l[r];
#pragma unroll
    for (int j = 0; j < kColsPerLane; ++j) op[lane + 32 * j] = o[r][j] * inv;
  }
}

template <int D>
void launch_flash(const AttnArgs& a, i64 batch) {
  // q, k, v as packed bf16, in pool memory freed in stream order after the kernel.
  const i64 nq = batch * a.heads * a.lq * D, nk = batch * a.heads * a.lk * D;
  __nv_bfloat16* buf = nullptr;
  check(cudaMallocAsync(reinterpret_cast<void**>(&buf),
                        static_cast<size_t>(nq + 2 * nk) * sizeof(__nv_bfloat16), stream()),
        "attention: bf16 staging");
  __nv_bfloat16 *qb = buf, *kb = buf + nq, *vb = buf + nq + nk;
  const unsigned by = static_cast<unsigned>(batch);
  pack_heads_kernel<<<dim3(blocks_for(a.heads * a.lq * D), by), kThreads, 0, stream()>>>(
      qb, a.q, a.q_bs, a.q_ts, a.q_hs, a.heads, a.lq, D);
  pack_heads_kernel<<<dim3(blocks_for(a.heads * a.lk * D), by), kThreads, 0, stream()>>>(
      kb, a.k, a.k_bs, a.k_ts, a.k_hs, a.heads, a.lk, D);
  pack_heads_kernel<<<dim3(blocks_for(a.heads * a.lk * D), by), kThreads, 0, stream()>>>(
      vb, a.v, a.v_bs, a.v_ts, a.v_hs, a.heads, a.lk, D);
  check_launch("attention: packing q, k, v");
  const int bytes = FlashSmem<D>::total;
  static const bool configured = [&] {
    check(cudaFuncSetAttribute(attention_flash_kernel<D>,
                               cudaFuncAttributeMaxDynamicSharedMemorySize, bytes),
          "attention: shared memory size");
    return true;
  }();
  (void)configured;
  const dim3 grid(static_cast<unsigned>((a.lq + kBM - 1) / kBM), static_cast<unsigned>(a.heads),
                  by);
  attention_flash_kernel<D><<<grid, kWarps * 32, bytes, stream()>>>(a, qb, kb, vb);
  check_launch("attention (tiled)");
  check(cudaFreeAsync(buf, stream()), "attention: bf16 staging");
}

}  // namespace

void to_bf16(__nv_bfloat16* dst, const float* src, i64 ld_src, i64 rows, i64 cols) {
  if (rows * cols == 0) return;
  to_bf16_kernel<<<blocks_for(rows * cols), kThreads, 0, stream()>>>(dst, src, ld_src, rows, cols);
  check_launch("to_bf16");
}

void bias_act(float* y, i64 ldy, i64 rows, i64 cols, const float* bias, Act act) {
  if (rows * cols == 0) return;
  bias_act_kernel<<<blocks_for(rows * cols), kThreads, 0, stream()>>>(y, ldy, rows, cols, bias,
                                                                      static_cast<int>(act));
  check_launch("bias_act");
}

void act_copy(Act act, float* dst, i64 ld_dst, const float* src, i64 ld_src, i64 rows, i64 cols) {
  if (rows * cols == 0) return;
  act_copy_kernel<<<blocks_for(rows * cols), kThreads, 0, stream()>>>(
      static_cast<int>(act), dst, ld_dst, src, ld_src, rows, cols);
  check_launch("act_copy");
}

void add(float* y, const float* x, i64 n) {
  if (n == 0) return;
  add_kernel<<<blocks_for(n), kThreads, 0, stream()>>>(y, x, n);
  check_launch("add");
}

void ln_modulate(float* y, i64 ysb, const float* x, i64 xsb, i64 batch, i64 tokens, i64 dim,
                 const float* shift, const float* scale, i64 mod_stride, float eps) {
  if (batch * tokens == 0) return;
  ln_modulate_kernel<<<static_cast<unsigned>(batch * tokens), kThreads, 0, stream()>>>(
      y, ysb, x, xsb, tokens, dim, shift, scale, mod_stride, eps);
  check_launch("ln_modulate");
}

void gated_residual(float* h, i64 hsb, const float* y, i64 ysb, i64 batch, i64 tokens, i64 dim,
                    const float* gate, i64 gate_stride) {
  const i64 n = batch * tokens * dim;
  if (n == 0) return;
  gated_residual_kernel<<<blocks_for(n), kThreads, 0, stream()>>>(h, hsb, y, ysb, batch, tokens,
                                                                  dim, gate, gate_stride);
  check_launch("gated_residual");
}

void qk_rmsnorm(float* qkv, i64 rows, i64 ld, i64 heads, i64 head_dim, i64 head_stride,
                i64 q_offset, i64 k_offset, const float* q_scale, const float* k_scale, float eps) {
  const i64 warps = rows * heads * 2;
  if (warps == 0) return;
  const i64 blocks = (warps * 32 + kThreads - 1) / kThreads;
  qk_rmsnorm_kernel<<<static_cast<unsigned>(blocks), kThreads, 0, stream()>>>(
      qkv, rows, ld, heads, head_dim, head_stride, q_offset, k_offset, q_scale, k_scale, eps);
  check_launch("qk_rmsnorm");
}

void attention(const kernels::HeadsOut& out, const kernels::HeadsView& q,
               const kernels::HeadsView& k, const kernels::HeadsView& v,
               const kernels::AttentionShape& s) {
  if (s.batch * s.heads * s.q_len == 0) return;
  if (s.kv_len <= 0) throw ModelError("attention on the GPU: no keys");
  AttnArgs a{out.data,
             out.batch_stride,
             out.token_stride,
             out.head_stride,
             q.data,
             k.data,
             v.data,
             q.batch_stride,
             q.token_stride,
             q.head_stride,
             k.batch_stride,
             k.token_stride,
             k.head_stride,
             v.batch_stride,
             v.token_stride,
             v.head_stride,
             s.heads,
             s.q_len,
             s.kv_len,
             s.head_dim,
             s.scale != 0.0f ? s.scale : 1.0f / std::sqrt(static_cast<float>(s.head_dim))};
  if (s.head_dim == 64) return launch_flash<64>(a, s.batch);
  if (s.head_dim == 128) return launch_flash<128>(a, s.batch);
  const i64 bytes = (s.head_dim + 32 + s.kv_len) * static_cast<i64>(sizeof(float));
  constexpr i64 kMaxShared = 200 * 1024;
  if (bytes > kMaxShared)
    throw ModelError("attention on the GPU: head dim " + std::to_string(s.head_dim) + " with " +
                     std::to_string(s.kv_len) +
                     " keys is not supported (the tiled kernel takes head dims 64 and 128)");
  if (bytes > 48 * 1024)
    check(cudaFuncSetAttribute(attention_plain_kernel, cudaFuncAttributeMaxDynamicSharedMemorySize,
                               static_cast<int>(kMaxShared)),
          "attention: shared memory size");
  const dim3 grid(static_cast<unsigned>(s.q_len), static_cast<unsigned>(s.heads),
                  static_cast<unsigned>(s.batch));
  attention_plain_kernel<<<grid, 128, static_cast<size_t>(bytes), stream()>>>(a);
  check_launch("attention (plain)");
}

}  // namespace gen3d::models::cuda
