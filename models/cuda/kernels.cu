// The CUDA backend's kernels. Correctness first: every kernel mirrors the float32 formula of its
// CPU twin in models/kernels; the attention kernel follows FlashAttention-2's loop (online
// softmax over key tiles, bf16 tensor-core products (mma.sync), float32 accumulation).

#include <cfloat>
#include <climits>
#include <cmath>
#include <cstdint>
#include <optional>
#include <string>
#include <vector>

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

// 2-D launches for row-wise elementwise kernels: blockIdx.y walks rows (strided when there are
// more than the grid holds), x covers a row's columns, so no thread divides 64-bit indices.
constexpr unsigned kMaxGridY = 65535;

dim3 grid_rows(i64 rows, i64 cols, int per_thread = 1) {
  const i64 x = (cols + static_cast<i64>(kThreads) * per_thread - 1) /
                (static_cast<i64>(kThreads) * per_thread);
  return dim3(static_cast<unsigned>(x < 1 ? 1 : x),
              static_cast<unsigned>(rows < kMaxGridY ? (rows < 1 ? 1 : rows) : kMaxGridY));
}

bool aligned16(const void* p) {
  return reinterpret_cast<std::uintptr_t>(p) % 16 == 0;
}

__global__ void to_bf16_kernel(__nv_bfloat16* dst, i64 ldd, const float* src, i64 ld, i64 rows,
                               int cols) {
  for (i64 r = blockIdx.y; r < rows; r += gridDim.y)
    for (int c = blockIdx.x * blockDim.x + threadIdx.x; c < cols; c += gridDim.x * blockDim.x)
      dst[r * ldd + c] = __float2bfloat16_rn(src[r * ld + c]);
}

// Four columns per thread (cols, ld and ldd multiples of 4, src 16-byte aligned).
__global__ void to_bf16_x4_kernel(__nv_bfloat16* dst, i64 ldd, const float* src, i64 ld, i64 rows,
                                  int cols) {
  const int quads = cols / 4;
  for (i64 r = blockIdx.y; r < rows; r += gridDim.y)
    for (int c = blockIdx.x * blockDim.x + threadIdx.x; c < quads; c += gridDim.x * blockDim.x) {
      const float4 v = reinterpret_cast<const float4*>(src + r * ld)[c];
      const __nv_bfloat162 lo = __floats2bfloat162_rn(v.x, v.y),
                           hi = __floats2bfloat162_rn(v.z, v.w);
      uint2 packed;
      packed.x = *reinterpret_cast<const unsigned*>(&lo);
      packed.y = *reinterpret_cast<const unsigned*>(&hi);
      reinterpret_cast<uint2*>(dst + r * ldd)[c] = packed;
    }
}

// y[r, o] = sum_k x[r, k] w[o, k], one output per thread: for the shapes cuBLASLt takes no
// algorithm for (a single output column, odd strides).
__global__ void gemm_simt_kernel(float* y, i64 ldy, const __nv_bfloat16* x, i64 ldx,
                                 const __nv_bfloat16* w, i64 ldw, i64 rows, int in, int out) {
  for (i64 r = blockIdx.y; r < rows; r += gridDim.y)
    for (int o = blockIdx.x * blockDim.x + threadIdx.x; o < out; o += gridDim.x * blockDim.x) {
      const __nv_bfloat16* xr = x + r * ldx;
      const __nv_bfloat16* wr = w + o * ldw;
      float acc = 0.0f;
      for (int k = 0; k < in; ++k)
        acc = fmaf(__bfloat162float(xr[k]), __bfloat162float(wr[k]), acc);
      y[r * ldy + o] = acc;
    }
}

__global__ void bias_act_kernel(float* y, i64 ld, i64 rows, int cols, const float* bias, int act) {
  for (i64 r = blockIdx.y; r < rows; r += gridDim.y)
    for (int c = blockIdx.x * blockDim.x + threadIdx.x; c < cols; c += gridDim.x * blockDim.x) {
      float v = y[r * ld + c];
      if (bias) v += bias[c];
      y[r * ld + c] = act_fn(act, v);
    }
}

__global__ void act_copy_kernel(int act, float* dst, i64 ldd, const float* src, i64 lds, i64 rows,
                                int cols) {
  for (i64 r = blockIdx.y; r < rows; r += gridDim.y)
    for (int c = blockIdx.x * blockDim.x + threadIdx.x; c < cols; c += gridDim.x * blockDim.x)
      dst[r * ldd + c] = act_fn(act, src[r * lds + c]);
}

__global__ void add_kernel(float* y, const float* x, i64 n) {
  for (i64 i = blockIdx.x * static_cast<i64>(blockDim.x) + threadIdx.x; i < n;
       i += static_cast<i64>(gridDim.x) * blockDim.x)
    y[i] += x[i];
}

// Without contraction, as the CPU computes it.
__global__ void add_scaled_kernel(float* y, const float* x, float s, i64 n) {
  for (i64 i = blockIdx.x * static_cast<i64>(blockDim.x) + threadIdx.x; i < n;
       i += static_cast<i64>(gridDim.x) * blockDim.x)
    y[i] = __fadd_rn(y[i], __fmul_rn(s, x[i]));
}

// One thread per (row, pair of a head); products and sums rounded apart, as on the CPU.
__global__ void rotate_pairs_kernel(float* x, i64 ld, i64 rows, i64 len, int heads, int hd,
                                    const float* cs_all, const float* sn_all, i64 per_table) {
  const int half = hd / 2;
  const i64 total = rows * heads * half;
  for (i64 j = blockIdx.x * static_cast<i64>(blockDim.x) + threadIdx.x; j < total;
       j += static_cast<i64>(gridDim.x) * blockDim.x) {
    const i64 row = j / (static_cast<i64>(heads) * half);
    const int rem = static_cast<int>(j - row * heads * half);
    const int h = rem / half, i = 2 * (rem - h * half);
    const i64 b = row / len, t = row - b * len;
    const i64 off = ((b / per_table) * len + t) * hd + i;
    float* e = x + row * ld + static_cast<i64>(h) * hd + i;
    const float a = e[0], bb = e[1];
    const float p0 = __fmul_rn(a, cs_all[off]), r0 = __fmul_rn(-bb, sn_all[off]);
    const float p1 = __fmul_rn(bb, cs_all[off + 1]), r1 = __fmul_rn(a, sn_all[off + 1]);
    e[0] = __fadd_rn(p0, r0);
    e[1] = __fadd_rn(p1, r1);
  }
}

// g[r, c] = silu(z[r, c]) * z[r, hidden + c] (SwiGLU's gate).
__global__ void swiglu_kernel(float* g, i64 ldg, const float* z, i64 ldz, i64 rows, int hidden) {
  for (i64 r = blockIdx.y; r < rows; r += gridDim.y)
    for (int c = blockIdx.x * blockDim.x + threadIdx.x; c < hidden; c += gridDim.x * blockDim.x) {
      const float a = z[r * ldz + c];
      g[r * ldg + c] = a / (1.0f + expf(-a)) * z[r * ldz + hidden + c];
    }
}

// g[r, c] = z[r, c] * gelu_erf(z[r, hidden + c]) (GEGLU's gate). With g == z (and ldg == ldz)
// each thread overwrites only the value it read; the gate half is never written.
__global__ void geglu_kernel(float* g, i64 ldg, const float* z, i64 ldz, i64 rows, int hidden) {
  for (i64 r = blockIdx.y; r < rows; r += gridDim.y)
    for (int c = blockIdx.x * blockDim.x + threadIdx.x; c < hidden; c += gridDim.x * blockDim.x) {
      const float gate = z[r * ldz + hidden + c];
      g[r * ldg + c] = z[r * ldz + c] * act_fn(static_cast<int>(Act::kGeluErf), gate);
    }
}

// y[row, c] += x[row / rows_per_item, c] over rows of `cols` values.
__global__ void add_broadcast_kernel(float* y, const float* x, i64 total_rows, i64 rows_per_item,
                                     int cols) {
  for (i64 r = blockIdx.y; r < total_rows; r += gridDim.y) {
    const float* xr = x + (r / rows_per_item) * cols;
    for (int c = blockIdx.x * blockDim.x + threadIdx.x; c < cols; c += gridDim.x * blockDim.x)
      y[r * cols + c] += xr[c];
  }
}

// h[b, t, c] += gate[b, c] * y[b, t, c] over rows r = b * tokens + t.
__global__ void gated_residual_kernel(float* h, i64 hsb, const float* y, i64 ysb, i64 rows,
                                      i64 tokens, int dim, const float* gate, i64 gs) {
  for (i64 r = blockIdx.y; r < rows; r += gridDim.y) {
    const i64 b = r / tokens, t = r - b * tokens;
    float* hr = h + b * hsb + t * dim;
    const float* yr = y + b * ysb + t * dim;
    const float* gr = gate + b * gs;
    for (int c = blockIdx.x * blockDim.x + threadIdx.x; c < dim; c += gridDim.x * blockDim.x)
      hr[c] += gr[c] * yr[c];
  }
}

// The same with four columns per thread (dim, strides multiples of 4, pointers 16-byte aligned).
__global__ void gated_residual_x4_kernel(float* h, i64 hsb, const float* y, i64 ysb, i64 rows,
                                         i64 tokens, int dim, const float* gate, i64 gs) {
  const int quads = dim / 4;
  for (i64 r = blockIdx.y; r < rows; r += gridDim.y) {
    const i64 b = r / tokens, t = r - b * tokens;
    float4* hr = reinterpret_cast<float4*>(h + b * hsb + t * dim);
    const float4* yr = reinterpret_cast<const float4*>(y + b * ysb + t * dim);
    const float4* gr = reinterpret_cast<const float4*>(gate + b * gs);
    for (int c = blockIdx.x * blockDim.x + threadIdx.x; c < quads; c += gridDim.x * blockDim.x) {
      float4 hv = hr[c];
      const float4 yv = yr[c], gv = gr[c];
      hv.x += gv.x * yv.x;
      hv.y += gv.y * yv.y;
      hv.z += gv.z * yv.z;
      hv.w += gv.w * yv.w;
      hr[c] = hv;
    }
  }
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

__device__ __forceinline__ float warp_sum(float v) {
  for (int o = 16; o > 0; o >>= 1) v += __shfl_xor_sync(0xffffffffu, v, o);
  return v;
}

// What a row normalisation applies after (x - mean) * rstd: LayerNorm's affine weight and bias
// (either may be null), or adaLN's modulation (1 + scale[b]) * n + shift[b].
struct NormArgs {
  float* y;
  i64 ysb;
  const float* x;
  i64 xsb;
  i64 rows, tokens;
  int dim;
  const float *shift, *scale;  // modulation rows [batch, mod_stride] (null: affine)
  i64 ms;
  const float *weight, *bias;  // affine (null: none)
  float eps;
};

__device__ __forceinline__ float norm_out(const NormArgs& a, i64 b, int c, float n) {
  if (a.scale) return (1.0f + a.scale[b * a.ms + c]) * n + a.shift[b * a.ms + c];
  if (a.weight) n = n * a.weight[c];
  return a.bias ? n + a.bias[c] : n;
}

// One warp per row, the row held in registers (dim <= 32 V); y may alias x.
template <int V>
__global__ void row_norm_warp_kernel(NormArgs a) {
  const i64 row = blockIdx.x * static_cast<i64>(blockDim.x / 32) + threadIdx.x / 32;
  const int lane = threadIdx.x % 32;
  if (row >= a.rows) return;
  const i64 b = row / a.tokens, t = row - b * a.tokens;
  const float* xr = a.x + b * a.xsb + t * a.dim;
  float v[V];
  float s = 0.0f;
#pragma unroll
  for (int i = 0; i < V; ++i) {
    const int c = lane + 32 * i;
    v[i] = c < a.dim ? xr[c] : 0.0f;
    s += v[i];
  }
  const float mean = warp_sum(s) / static_cast<float>(a.dim);
  float q = 0.0f;
#pragma unroll
  for (int i = 0; i < V; ++i) {
    const int c = lane + 32 * i;
    const float d = c < a.dim ? v[i] - mean : 0.0f;
    q += d * d;
  }
  const float rstd = 1.0f / sqrtf(warp_sum(q) / static_cast<float>(a.dim) + a.eps);
  float* yr = a.y + b * a.ysb + t * a.dim;
#pragma unroll
  for (int i = 0; i < V; ++i) {
    const int c = lane + 32 * i;
    if (c < a.dim) yr[c] = norm_out(a, b, c, (v[i] - mean) * rstd);
  }
}

// One block per row, for rows too wide for a warp's registers; y may alias x.
__global__ void row_norm_block_kernel(NormArgs a) {
  __shared__ float scratch[32];
  for (i64 row = blockIdx.x; row < a.rows; row += gridDim.x) {
    const i64 b = row / a.tokens, t = row - b * a.tokens;
    const float* xr = a.x + b * a.xsb + t * a.dim;
    float s = 0.0f;
    for (int i = threadIdx.x; i < a.dim; i += blockDim.x) s += xr[i];
    const float mean = block_sum(s, scratch) / static_cast<float>(a.dim);
    float q = 0.0f;
    for (int i = threadIdx.x; i < a.dim; i += blockDim.x) {
      const float d = xr[i] - mean;
      q += d * d;
    }
    const float rstd = 1.0f / sqrtf(block_sum(q, scratch) / static_cast<float>(a.dim) + a.eps);
    float* yr = a.y + b * a.ysb + t * a.dim;
    for (int i = threadIdx.x; i < a.dim; i += blockDim.x)
      yr[i] = norm_out(a, b, i, (xr[i] - mean) * rstd);
    __syncthreads();  // y may alias x: the next row's reads start after every write
  }
}

void row_norm(const NormArgs& a) {
  if (a.rows == 0) return;
  constexpr int kWarpsPerBlock = kThreads / 32;
  const unsigned warp_blocks =
      static_cast<unsigned>((a.rows + kWarpsPerBlock - 1) / kWarpsPerBlock);
  const int v = (a.dim + 31) / 32;
  if (v <= 8)
    row_norm_warp_kernel<8><<<warp_blocks, kThreads, 0, stream()>>>(a);
  else if (v <= 16)
    row_norm_warp_kernel<16><<<warp_blocks, kThreads, 0, stream()>>>(a);
  else if (v <= 32)
    row_norm_warp_kernel<32><<<warp_blocks, kThreads, 0, stream()>>>(a);
  else if (v <= 48)
    row_norm_warp_kernel<48><<<warp_blocks, kThreads, 0, stream()>>>(a);
  else if (v <= 64)
    row_norm_warp_kernel<64><<<warp_blocks, kThreads, 0, stream()>>>(a);
  else
    row_norm_block_kernel<<<static_cast<unsigned>(a.rows < 65535 * 16 ? a.rows : 65535 * 16),
                            kThreads, 0, stream()>>>(a);
  check_launch("row norm");
}

// One warp per (row, head, q or k): x * rsqrt(mean(x^2) + eps) * scale, in place.
// Rows walk blockIdx.y; the block's warps take the row's (head, q or k) pairs: warp w is head
// w / 2, q when w is even. x * rsqrt(mean(x^2) + eps) * scale, in place.
__global__ void qk_rmsnorm_kernel(float* qkv, i64 rows, i64 ld, int heads, int head_dim,
                                  i64 head_stride, i64 q_off, i64 k_off, const float* q_scale,
                                  const float* k_scale, float eps) {
  const int lane = threadIdx.x % 32, warps = blockDim.x / 32;
  for (i64 r = blockIdx.y; r < rows; r += gridDim.y)
    for (int w = blockIdx.x * warps + threadIdx.x / 32; w < 2 * heads; w += gridDim.x * warps) {
      const bool is_k = (w & 1) != 0;
      float* p = qkv + r * ld + (is_k ? k_off : q_off) + (w >> 1) * head_stride;
      const float* sc = is_k ? k_scale : q_scale;
      float s = 0.0f;
      for (int d = lane; d < head_dim; d += 32) s += p[d] * p[d];
      s = warp_sum(s);
      const float r_ = 1.0f / sqrtf(s / static_cast<float>(head_dim) + eps);
      for (int d = lane; d < head_dim; d += 32) p[d] = (p[d] * r_) * sc[d];
    }
}

// One warp per row: x * rsqrt(mean(x^2) + eps) * scale, as kernels::rms_norm_row. Each lane
// writes only the columns it read, after the warp's sum, so y may alias x.
__global__ void rms_norm_kernel(float* y, i64 ldy, const float* x, i64 ldx, i64 rows, int dim,
                                const float* scale, float eps) {
  const int lane = threadIdx.x % 32, warps = blockDim.x / 32;
  for (i64 r = blockIdx.x * static_cast<i64>(warps) + threadIdx.x / 32; r < rows;
       r += static_cast<i64>(gridDim.x) * warps) {
    const float* xr = x + r * ldx;
    float s = 0.0f;
    for (int d = lane; d < dim; d += 32) s += xr[d] * xr[d];
    const float rr = 1.0f / sqrtf(warp_sum(s) / static_cast<float>(dim) + eps);
    float* yr = y + r * ldy;
    for (int d = lane; d < dim; d += 32) {
      const float n = xr[d] * rr;
      yr[d] = scale ? n * scale[d] : n;
    }
  }
}

// One warp per output element, float32 throughout: for narrow products (a router's few
// columns), where a tiled GEMM would leave the GPU idle anyway.
__global__ void linear_f32_kernel(float* y, i64 ldy, const float* x, i64 ldx, const float* w,
                                  i64 rows, int in, int out) {
  const int lane = threadIdx.x % 32, warps = blockDim.x / 32;
  const i64 n = rows * out;
  for (i64 e = blockIdx.x * static_cast<i64>(warps) + threadIdx.x / 32; e < n;
       e += static_cast<i64>(gridDim.x) * warps) {
    const i64 r = e / out;
    const int o = static_cast<int>(e - r * out);
    const float* xr = x + r * ldx;
    const float* wr = w + static_cast<i64>(o) * in;
    float s = 0.0f;
    for (int i = lane; i < in; i += 32) s += xr[i] * wr[i];
    s = warp_sum(s);
    if (lane == 0) y[r * ldy + o] = s;
  }
}

// Rows walk blockIdx.y, columns x (grid_rows).
__global__ void gather_rows_kernel(float* dst, i64 ldd, const float* src, i64 lds, const i64* rows,
                                   i64 n, int cols) {
  const int c = blockIdx.x * blockDim.x + threadIdx.x;
  if (c >= cols) return;
  for (i64 i = blockIdx.y; i < n; i += gridDim.y) dst[i * ldd + c] = src[rows[i] * lds + c];
}

__global__ void scatter_add_rows_kernel(float* dst, i64 ldd, const float* src, i64 lds,
                                        const i64* rows, const float* weight, i64 n, int cols) {
  const int c = blockIdx.x * blockDim.x + threadIdx.x;
  if (c >= cols) return;
  for (i64 i = blockIdx.y; i < n; i += gridDim.y)
    dst[rows[i] * ldd + c] += weight[i] * src[i * lds + c];
}

// Fourier features of points, as the CPU computes them: out[p] = [x y z | sin(x f_j).., sin(y
// f_j).., sin(z f_j).. | cos(..)], each product x f_j in float32, sin and cos in double.
__global__ void fourier_kernel(float* out, const float* xyz, i64 points, const float* freqs,
                               int F) {
  const int E = 3 * (2 * F + 1), per_point = 3 * F;
  const i64 n = points * per_point;
  for (i64 idx = blockIdx.x * static_cast<i64>(blockDim.x) + threadIdx.x; idx < n;
       idx += static_cast<i64>(gridDim.x) * blockDim.x) {
    const i64 p = idx / per_point;
    const int i = static_cast<int>(idx - p * per_point), a = i / F, j = i - a * F;
    const float v = xyz[p * 3 + a];
    const float arg = v * freqs[j];
    double sn, cs;
    sincos(static_cast<double>(arg), &sn, &cs);
    float* o = out + p * E;
    o[3 + i] = static_cast<float>(sn);
    o[3 + per_point + i] = static_cast<float>(cs);
    if (j == 0) o[a] = v;
  }
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

// q, k or v of every (batch, head) as bf16, zero-padded to `padded` tokens: [batch * heads,
// padded, d]. Rows r = b * padded + t; four columns of one head per thread.
__global__ void pack_heads_kernel(__nv_bfloat16* dst, const float* src, i64 bs, i64 ts, i64 hs,
                                  int heads, i64 len, i64 padded, int d, i64 rows, bool vec) {
  const int per_head = d / 4, quads = heads * per_head;
  for (i64 r = blockIdx.y; r < rows; r += gridDim.y) {
    const i64 b = r / padded, t = r - b * padded;
    for (int q = blockIdx.x * blockDim.x + threadIdx.x; q < quads; q += gridDim.x * blockDim.x) {
      const int h = q / per_head, c = (q - h * per_head) * 4;
      float4 v = make_float4(0.0f, 0.0f, 0.0f, 0.0f);
      if (t < len) {
        const float* p = src + b * bs + t * ts + h * hs + c;
        v = vec ? *reinterpret_cast<const float4*>(p) : make_float4(p[0], p[1], p[2], p[3]);
      }
      const __nv_bfloat162 lo = __floats2bfloat162_rn(v.x, v.y),
                           hi = __floats2bfloat162_rn(v.z, v.w);
      uint2 packed;
      packed.x = *reinterpret_cast<const unsigned*>(&lo);
      packed.y = *reinterpret_cast<const unsigned*>(&hi);
      *reinterpret_cast<uint2*>(dst + ((b * heads + h) * padded + t) * d + c) = packed;
    }
  }
}

// FlashAttention-2 on the tensor cores' mma.sync (m16n8k16, bf16 in, float32 accumulate). A block
// of 8 warps takes 128 queries (16 per warp) of one (batch, head); key and value tiles of 64 rows
// stream through shared memory, double-buffered with cp.async, and reach the tensor cores through
// ldmatrix (.trans for V, which stays row-major). S = Q K^T stays in registers; the online
// softmax runs there (each row's 4 lanes combine by shuffles); the accumulator layout of S is the
// operand layout of P for O += P V, so P never leaves registers. Inputs come packed and
// zero-padded to whole tiles (pack_heads_kernel), so only the scores of padded keys need masking.
constexpr int kBM = 128, kBN = 64, kWarps = 8;

template <int D>
struct FlashSmem {
  static constexpr int ld = D + 8;  // bf16 pitch: ldmatrix's 8 row addresses hit distinct banks
  static constexpr int q_elems = kBM * ld;
  static constexpr int kv_elems = kBN * ld;
  static constexpr int stage_elems = 2 * kv_elems;  // K then V
  static constexpr int bytes = (q_elems + 2 * stage_elems) * 2;
};

__device__ __forceinline__ void cp_async16(void* smem, const void* global) {
  const unsigned s = static_cast<unsigned>(__cvta_generic_to_shared(smem));
  asm volatile("cp.async.cg.shared.global [%0], [%1], 16;\n" ::"r"(s), "l"(global));
}
__device__ __forceinline__ void cp_async_commit() {
  asm volatile("cp.async.commit_group;\n" ::);
}
template <int N>
__device__ __forceinline__ void cp_async_wait() {
  asm volatile("cp.async.wait_group %0;\n" ::"n"(N));
}

__device__ __forceinline__ void ldmatrix_x4(unsigned* r, const __nv_bfloat16* p) {
  const unsigned s = static_cast<unsigned>(__cvta_generic_to_shared(p));
  asm volatile("ldmatrix.sync.aligned.m8n8.x4.shared.b16 {%0,%1,%2,%3}, [%4];\n"
               : "=r"(r[0]), "=r"(r[1]), "=r"(r[2]), "=r"(r[3])
               : "r"(s));
}
__device__ __forceinline__ void ldmatrix_x4_trans(unsigned* r, const __nv_bfloat16* p) {
  const unsigned s = static_cast<unsigned>(__cvta_generic_to_shared(p));
  asm volatile("ldmatrix.sync.aligned.m8n8.x4.trans.shared.b16 {%0,%1,%2,%3}, [%4];\n"
               : "=r"(r[0]), "=r"(r[1]), "=r"(r[2]), "=r"(r[3])
               : "r"(s));
}

__device__ __forceinline__ void mma_bf16(float* c, const unsigned* a, unsigned b0, unsigned b1) {
  asm volatile(
      "mma.sync.aligned.m16n8k16.row.col.f32.bf16.bf16.f32 {%0,%1,%2,%3}, {%4,%5,%6,%7}, "
      "{%8,%9}, {%0,%1,%2,%3};\n"
      : "+f"(c[0]), "+f"(c[1]), "+f"(c[2]), "+f"(c[3])
      : "r"(a[0]), "r"(a[1]), "r"(a[2]), "r"(a[3]), "r"(b0), "r"(b1));
}

__device__ __forceinline__ unsigned pack_bf16(float lo, float hi) {
  const __nv_bfloat162 v = __floats2bfloat162_rn(lo, hi);
  return *reinterpret_cast<const unsigned*>(&v);
}

// Copies `rows` rows of D bf16 starting at row r0 of `src` into `dst` (pitch FlashSmem::ld) with
// 16-byte cp.async.
template <int D, int kRows>
__device__ __forceinline__ void load_rows(__nv_bfloat16* dst, const __nv_bfloat16* src, i64 r0) {
  constexpr int kChunks = kRows * D / 8;
  for (int i = threadIdx.x; i < kChunks; i += kWarps * 32) {
    const int r = i / (D / 8), c = (i % (D / 8)) * 8;
    cp_async16(dst + r * FlashSmem<D>::ld + c, src + (r0 + r) * D + c);
  }
}

// kGrouped (FlashVDM's selected keys): block x is a tile of `q_tiles` instead, {group, first query,
// end of the group's queries}: the queries [first, min(first + 128, end)) of one packed batch,
// against the group's own packed keys and values (batch index = group); a tile never spans two
// groups, and the output rows are the queries' own.
template <int D, bool kGrouped>
__global__ void __launch_bounds__(kWarps * 32)
    attention_flash_kernel(AttnArgs a, const __nv_bfloat16* qb, const __nv_bfloat16* kb,
                           const __nv_bfloat16* vb, i64 lq_padded, i64 lk_padded,
                           const int4* q_tiles) {
  using S = FlashSmem<D>;
  constexpr int kNT = kBN / 8;  // key n-tiles of S
  constexpr int kDT = D / 8;    // d n-tiles of O
  constexpr int kKQ = D / 16;   // k-steps of Q K^T
  extern __shared__ __align__(128) unsigned char smem_raw[];
  __nv_bfloat16* smem = reinterpret_cast<__nv_bfloat16*>(smem_raw);
  __nv_bfloat16* Qs = smem;
  __nv_bfloat16* const stage0 = smem + S::q_elems;  // stage i at stage0 + i * stage_elems
  const int warp = threadIdx.x / 32, lane = threadIdx.x % 32;
  const int g = lane / 4, t = lane % 4;
  // ldmatrix.x4: lane l gives the address of row (l % 8) of matrix (l / 8).
  const int mat = lane / 8, mrow = lane % 8;
  const i64 h = blockIdx.y;
  i64 q0, q_end, b, kv_bh;
  const __nv_bfloat16* qg;
  if constexpr (kGrouped) {
    const int4 tile = q_tiles[blockIdx.x];
    q0 = tile.y;
    q_end = tile.z;
    b = 0;
    kv_bh = static_cast<i64>(tile.x) * a.heads + h;
    qg = qb + h * lq_padded * D;
  } else {
    q0 = static_cast<i64>(blockIdx.x) * kBM;
    q_end = a.lq;
    b = blockIdx.z;
    kv_bh = b * a.heads + h;
    qg = qb + kv_bh * lq_padded * D;
  }
  const __nv_bfloat16* kg = kb + kv_bh * lk_padded * D;
  const __nv_bfloat16* vg = vb + kv_bh * lk_padded * D;

  load_rows<D, kBM>(Qs, qg, q0);
  load_rows<D, kBN>(stage0, kg, 0);
  load_rows<D, kBN>(stage0 + S::kv_elems, vg, 0);
  cp_async_commit();

  unsigned qf[kKQ][4];
  float o[kDT][4];
#pragma unroll
  for (int j = 0; j < kDT; ++j) o[j][0] = o[j][1] = o[j][2] = o[j][3] = 0.0f;
  float m0 = -INFINITY, m1 = -INFINITY, l0 = 0.0f, l1 = 0.0f;  // rows g and g + 8
  const float sl2 = a.scale * 1.4426950408889634f;             // scores in log2 units

  const int tiles = static_cast<int>((a.lk + kBN - 1) / kBN);
  for (int j = 0; j < tiles; ++j) {
    if (j + 1 < tiles) {
      __nv_bfloat16* next = stage0 + ((j + 1) & 1) * S::stage_elems;
      load_rows<D, kBN>(next, kg, static_cast<i64>(j + 1) * kBN);
      load_rows<D, kBN>(next + S::kv_elems, vg, static_cast<i64>(j + 1) * kBN);
      cp_async_commit();
      cp_async_wait<1>();
    } else {
      cp_async_wait<0>();
    }
    __syncthreads();
    if (j == 0) {
      // A fragments of the warp's 16 query rows: matrices (rows 0-7 | 8-15) x (cols 0-7 | 8-15).
      const __nv_bfloat16* qw = Qs + (warp * 16 + (mat & 1) * 8 + mrow) * S::ld + (mat >> 1) * 8;
#pragma unroll
      for (int kk = 0; kk < kKQ; ++kk) ldmatrix_x4(qf[kk], qw + kk * 16);
    }
    const __nv_bfloat16* Ks = stage0 + (j & 1) * S::stage_elems;
    const __nv_bfloat16* Vs = Ks + S::kv_elems;

    float s[kNT][4];
#pragma unroll
    for (int nt = 0; nt < kNT; ++nt) s[nt][0] = s[nt][1] = s[nt][2] = s[nt][3] = 0.0f;
    // B fragments of K^T: matrices (keys of n-tile 2p | 2p + 1) x (d 0-7 | 8-15 of the k-step).
    const __nv_bfloat16* kw = Ks + ((mat >> 1) * 8 + mrow) * S::ld + (mat & 1) * 8;
#pragma unroll
    for (int p = 0; p < kNT / 2; ++p)
#pragma unroll
      for (int kk = 0; kk < kKQ; ++kk) {
        unsigned kf[4];
        ldmatrix_x4(kf, kw + p * 16 * S::ld + kk * 16);
        mma_bf16(s[2 * p], qf[kk], kf[0], kf[1]);
        mma_bf16(s[2 * p + 1], qf[kk], kf[2], kf[3]);
      }

    // Online softmax over this tile (keys past kv_len are padding: -inf).
    const i64 k0 = static_cast<i64>(j) * kBN;
    if (k0 + kBN > a.lk) {
#pragma unroll
      for (int nt = 0; nt < kNT; ++nt)
#pragma unroll
        for (int e = 0; e < 2; ++e)
          if (k0 + nt * 8 + 2 * t + e >= a.lk) s[nt][e] = s[nt][2 + e] = -INFINITY;
    }
    float mx0 = -INFINITY, mx1 = -INFINITY;
#pragma unroll
    for (int nt = 0; nt < kNT; ++nt) {
      mx0 = fmaxf(mx0, fmaxf(s[nt][0], s[nt][1]));
      mx1 = fmaxf(mx1, fmaxf(s[nt][2], s[nt][3]));
    }
    mx0 = fmaxf(mx0, __shfl_xor_sync(0xffffffffu, mx0, 1));
    mx0 = fmaxf(mx0, __shfl_xor_sync(0xffffffffu, mx0, 2));
    mx1 = fmaxf(mx1, __shfl_xor_sync(0xffffffffu, mx1, 1));
    mx1 = fmaxf(mx1, __shfl_xor_sync(0xffffffffu, mx1, 2));
    // In log2 units; finite: each tile has a valid key.
    const float n0 = fmaxf(m0, mx0 * sl2), n1 = fmaxf(m1, mx1 * sl2);
    const float alpha0 = exp2f(m0 - n0), alpha1 = exp2f(m1 - n1);
    m0 = n0;
    m1 = n1;
    float sum0 = 0.0f, sum1 = 0.0f;
#pragma unroll
    for (int nt = 0; nt < kNT; ++nt) {
      s[nt][0] = exp2f(fmaf(s[nt][0], sl2, -n0));
      s[nt][1] = exp2f(fmaf(s[nt][1], sl2, -n0));
      s[nt][2] = exp2f(fmaf(s[nt][2], sl2, -n1));
      s[nt][3] = exp2f(fmaf(s[nt][3], sl2, -n1));
      sum0 += s[nt][0] + s[nt][1];
      sum1 += s[nt][2] + s[nt][3];
    }
    l0 = l0 * alpha0 + sum0;  // this lane's share; the 4 lanes of a row add up at the end
    l1 = l1 * alpha1 + sum1;
#pragma unroll
    for (int dn = 0; dn < kDT; ++dn) {
      o[dn][0] *= alpha0;
      o[dn][1] *= alpha0;
      o[dn][2] *= alpha1;
      o[dn][3] *= alpha1;
    }

    // O += P V: the scores' accumulator layout is the A operand's layout. B fragments of V
    // through ldmatrix.trans: matrices (keys 0-7 | 8-15 of the k-step) x (d of n-tile 2p | 2p+1).
    const __nv_bfloat16* vw = Vs + ((mat & 1) * 8 + mrow) * S::ld + (mat >> 1) * 8;
#pragma unroll
    for (int kk = 0; kk < kBN / 16; ++kk) {
      const unsigned pa[4] = {pack_bf16(s[2 * kk][0], s[2 * kk][1]),
                              pack_bf16(s[2 * kk][2], s[2 * kk][3]),
                              pack_bf16(s[2 * kk + 1][0], s[2 * kk + 1][1]),
                              pack_bf16(s[2 * kk + 1][2], s[2 * kk + 1][3])};
#pragma unroll
      for (int p = 0; p < kDT / 2; ++p) {
        unsigned vf[4];
        ldmatrix_x4_trans(vf, vw + kk * 16 * S::ld + p * 16);
        mma_bf16(o[2 * p], pa, vf[0], vf[1]);
        mma_bf16(o[2 * p + 1], pa, vf[2], vf[3]);
      }
    }
    __syncthreads();  // this stage is refilled two tiles on
  }

  l0 += __shfl_xor_sync(0xffffffffu, l0, 1);
  l0 += __shfl_xor_sync(0xffffffffu, l0, 2);
  l1 += __shfl_xor_sync(0xffffffffu, l1, 1);
  l1 += __shfl_xor_sync(0xffffffffu, l1, 2);
  const i64 r0 = q0 + warp * 16 + g, r1 = r0 + 8;
  const float inv0 = 1.0f / l0, inv1 = 1.0f / l1;
#pragma unroll
  for (int dn = 0; dn < kDT; ++dn) {
    const int c = dn * 8 + 2 * t;
    if (r0 < q_end) {
      float* op = a.o + b * a.o_bs + r0 * a.o_ts + h * a.o_hs + c;
      op[0] = o[dn][0] * inv0;
      op[1] = o[dn][1] * inv0;
    }
    if (r1 < q_end) {
      float* op = a.o + b * a.o_bs + r1 * a.o_ts + h * a.o_hs + c;
      op[0] = o[dn][2] * inv1;
      op[1] = o[dn][3] * inv1;
    }
  }
}

// The tiled kernel's dynamic shared memory in bytes, allowed for it once per process.
template <int D, bool kGrouped>
int flash_smem_bytes() {
  static const int bytes = [] {
    check(cudaFuncSetAttribute(attention_flash_kernel<D, kGrouped>,
                               cudaFuncAttributeMaxDynamicSharedMemorySize, FlashSmem<D>::bytes),
          "attention: shared memory size");
    return FlashSmem<D>::bytes;
  }();
  return bytes;
}

void pack_heads(__nv_bfloat16* dst, const float* src, i64 bs, i64 ts, i64 hs, i64 batch, i64 heads,
                i64 len, i64 padded, int d) {
  const bool vec = aligned16(src) && bs % 4 == 0 && ts % 4 == 0 && hs % 4 == 0;
  const i64 rows = batch * padded;
  pack_heads_kernel<<<grid_rows(rows, heads * d / 4), kThreads, 0, stream()>>>(
      dst, src, bs, ts, hs, static_cast<int>(heads), len, padded, d, rows, vec);
}

template <int D>
void launch_flash(const AttnArgs& a, i64 batch) {
  // q, k and v as packed, tile-padded bf16 in pool memory, freed in stream order.
  const i64 lqp = (a.lq + kBM - 1) / kBM * kBM, lkp = (a.lk + kBN - 1) / kBN * kBN;
  const i64 nq = batch * a.heads * lqp * D, nk = batch * a.heads * lkp * D;
  __nv_bfloat16* buf = nullptr;
  check(cudaMallocAsync(reinterpret_cast<void**>(&buf),
                        static_cast<size_t>(nq + 2 * nk) * sizeof(__nv_bfloat16), stream()),
        "attention: bf16 staging");
  __nv_bfloat16 *qb = buf, *kb = buf + nq, *vb = buf + nq + nk;
  std::optional<ProfileSpan> span(std::in_place, "attention_pack");
  pack_heads(qb, a.q, a.q_bs, a.q_ts, a.q_hs, batch, a.heads, a.lq, lqp, D);
  pack_heads(kb, a.k, a.k_bs, a.k_ts, a.k_hs, batch, a.heads, a.lk, lkp, D);
  pack_heads(vb, a.v, a.v_bs, a.v_ts, a.v_hs, batch, a.heads, a.lk, lkp, D);
  check_launch("attention: packing q, k, v");
  span.emplace("attention");
  const int bytes = flash_smem_bytes<D, false>();
  const dim3 grid(static_cast<unsigned>(lqp / kBM), static_cast<unsigned>(a.heads),
                  static_cast<unsigned>(batch));
  attention_flash_kernel<D, false>
      <<<grid, kWarps * 32, bytes, stream()>>>(a, qb, kb, vb, lqp, lkp, nullptr);
  check_launch("attention (tiled)");
  check(cudaFreeAsync(buf, stream()), "attention: bf16 staging");
}

// ---- FlashVDM: selected keys per group (DeviceOps::selected_key_attention) ----------------------

// Sorts n (a power of two) pairs (s[i], id[i]) in shared memory so that before(a, b) holds for
// every a ahead of b; the block's threads share the work.
template <typename Before>
__device__ void bitonic_sort(double* s, int* id, int n, Before before) {
  for (int k = 2; k <= n; k <<= 1)
    for (int j = k >> 1; j > 0; j >>= 1) {
      for (int i = threadIdx.x; i < n; i += blockDim.x) {
        const int p = i ^ j;
        if (p <= i) continue;
        const bool ahead = (i & k) == 0;  // this run of k is sorted ahead-first
        if (ahead ? before(s[p], id[p], s[i], id[i]) : before(s[i], id[i], s[p], id[p])) {
          const double ts = s[i];
          s[i] = s[p];
          s[p] = ts;
          const int ti = id[i];
          id[i] = id[p];
          id[p] = ti;
        }
      }
      __syncthreads();
    }
}

// One block per (group, head): the mean of the group's sampled queries in double, summed in
// sample order as kernels::sampled_query_mean does; every key's score in double, each product
// and sum rounded on its own, d = 0..D-1 (the scores' definition in kernels/key_selection.h);
// the keys sorted by score (the lower index first on a tie), and the first top_k by index.
// Shared memory: mean [D] doubles, scores [np] doubles, indices [np] ints.
__global__ void select_keys_kernel(int* idx, const float* q, i64 q_ts, i64 q_hs, const float* k,
                                   i64 k_ts, i64 k_hs, const i64* offsets, int heads, int D, int N,
                                   int np, int top_k, int kp, i64 stride) {
  extern __shared__ __align__(16) unsigned char smem_keys[];
  double* mean = reinterpret_cast<double*>(smem_keys);
  double* score = mean + D;
  int* id = reinterpret_cast<int*>(score + np);
  const i64 g = blockIdx.x;
  const int h = blockIdx.y;
  const i64 g0 = offsets[g], n_q = offsets[g + 1] - g0;
  int* out = idx + (g * heads + h) * top_k;
  if (n_q <= 0) {  // no queries: any valid keys
    for (int t = threadIdx.x; t < top_k; t += blockDim.x) out[t] = t;
    return;
  }
  for (int d = threadIdx.x; d < D; d += blockDim.x) {
    const float* qd = q + g0 * q_ts + h * q_hs + d;
    double sum = 0.0;
    i64 ns = 0;
    for (i64 p = 0; p < n_q; p += stride, ++ns)
      sum = __dadd_rn(sum, static_cast<double>(qd[p * q_ts]));
    mean[d] = sum / static_cast<double>(ns);
  }
  __syncthreads();
  for (int j = threadIdx.x; j < np; j += blockDim.x) {
    if (j < N) {
      const float* kj = k + j * k_ts + h * k_hs;
      double acc = 0.0;
      for (int d = 0; d < D; ++d)
        acc = __dadd_rn(acc, __dmul_rn(mean[d], static_cast<double>(kj[d])));
      score[j] = acc;
      id[j] = j;
    } else {
      score[j] = -INFINITY;
      id[j] = INT_MAX;
    }
  }
  __syncthreads();
  bitonic_sort(score, id, np, [](double sa, int ia, double sb, int ib) {
    return sa > sb || (sa == sb && ia < ib);
  });
  for (int j = top_k + static_cast<int>(threadIdx.x); j < kp; j += blockDim.x) id[j] = INT_MAX;
  __syncthreads();
  bitonic_sort(score, id, kp, [](double, int ia, double, int ib) { return ia < ib; });
  for (int t = threadIdx.x; t < top_k; t += blockDim.x) out[t] = id[t];
}

__device__ __forceinline__ void store(float* p, float v) {
  *p = v;
}
__device__ __forceinline__ void store(__nv_bfloat16* p, float v) {
  *p = __float2bfloat16_rn(v);
}

// dst [groups * heads, padded, D]: row t < top_k of (group, head) is key idx[(group, head), t] of
// src (token stride ts, head stride hs); rows past top_k are zeros.
template <typename T>
__global__ void gather_keys_kernel(T* dst, const float* src, i64 ts, i64 hs, const int* idx,
                                   int heads, int top_k, i64 padded, int D, i64 rows) {
  for (i64 r = blockIdx.y; r < rows; r += gridDim.y) {
    const i64 gh = r / padded, t = r - gh * padded;
    const int h = static_cast<int>(gh % heads);
    const float* row =
        t < top_k ? src + static_cast<i64>(idx[gh * top_k + t]) * ts + h * hs : nullptr;
    for (int d = blockIdx.x * blockDim.x + threadIdx.x; d < D; d += gridDim.x * blockDim.x)
      store(dst + r * D + d, row ? row[d] : 0.0f);
  }
}

int next_pow2(i64 n) {
  int p = 1;
  while (p < n) p <<= 1;
  return p;
}

// The tiled kernel over every group at once: queries packed once, each group's selected keys
// and values packed apart, one block per (128-query tile of a group, head).
template <int D>
void launch_grouped_flash(const AttnArgs& a, const int* idx, const i64* offsets, i64 groups,
                          i64 top_k) {
  std::vector<int4> tiles;
  for (i64 g = 0; g < groups; ++g)
    for (i64 q0 = offsets[g]; q0 < offsets[g + 1]; q0 += kBM)
      tiles.push_back(make_int4(static_cast<int>(g), static_cast<int>(q0),
                                static_cast<int>(offsets[g + 1]), 0));
  if (tiles.empty()) return;
  // A tile may start at any query: pad the packed queries by one tile past the last.
  const i64 lqp = (a.lq + kBM - 1) / kBM * kBM + kBM, lkp = (top_k + kBN - 1) / kBN * kBN;
  const i64 nq = a.heads * lqp * D, nk = groups * a.heads * lkp * D;
  const std::size_t tile_bytes = tiles.size() * sizeof(int4);
  unsigned char* buf = nullptr;
  check(cudaMallocAsync(reinterpret_cast<void**>(&buf),
                        static_cast<std::size_t>(nq + 2 * nk) * sizeof(__nv_bfloat16) + tile_bytes,
                        stream()),
        "selected-key attention: staging");
  auto* qb = reinterpret_cast<__nv_bfloat16*>(buf);
  __nv_bfloat16 *kb = qb + nq, *vb = qb + nq + nk;
  auto* tiles_d =
      reinterpret_cast<int4*>(vb + nk);  // 16-byte aligned: the counts are multiples of 8
  check(cudaMemcpyAsync(tiles_d, tiles.data(), tile_bytes, cudaMemcpyHostToDevice, stream()),
        "selected-key attention: tiles");
  std::optional<ProfileSpan> span(std::in_place, "attention_pack");
  pack_heads(qb, a.q, 0, a.q_ts, a.q_hs, 1, a.heads, a.lq, lqp, D);
  const i64 rows = groups * a.heads * lkp;
  gather_keys_kernel<<<grid_rows(rows, D), kThreads, 0, stream()>>>(
      kb, a.k, a.k_ts, a.k_hs, idx, static_cast<int>(a.heads), static_cast<int>(top_k), lkp, D,
      rows);
  gather_keys_kernel<<<grid_rows(rows, D), kThreads, 0, stream()>>>(
      vb, a.v, a.v_ts, a.v_hs, idx, static_cast<int>(a.heads), static_cast<int>(top_k), lkp, D,
      rows);
  check_launch("selected-key attention: packing");
  span.emplace("attention");
  const int bytes = flash_smem_bytes<D, true>();
  AttnArgs g = a;
  g.lk = top_k;
  const dim3 grid(static_cast<unsigned>(tiles.size()), static_cast<unsigned>(a.heads), 1);
  attention_flash_kernel<D, true>
      <<<grid, kWarps * 32, bytes, stream()>>>(g, qb, kb, vb, lqp, lkp, tiles_d);
  check_launch("selected-key attention (tiled)");
  check(cudaFreeAsync(buf, stream()), "selected-key attention: staging");
}

}  // namespace

void to_bf16(__nv_bfloat16* dst, i64 ld_dst, const float* src, i64 ld_src, i64 rows, i64 cols) {
  if (rows * cols == 0) return;
  const int c = static_cast<int>(cols);
  if (cols % 4 == 0 && ld_src % 4 == 0 && ld_dst % 4 == 0 && aligned16(src) && aligned16(dst))
    to_bf16_x4_kernel<<<grid_rows(rows, cols, 4), kThreads, 0, stream()>>>(dst, ld_dst, src, ld_src,
                                                                           rows, c);
  else
    to_bf16_kernel<<<grid_rows(rows, cols), kThreads, 0, stream()>>>(dst, ld_dst, src, ld_src, rows,
                                                                     c);
  check_launch("to_bf16");
}

void gemm_simt(float* y, i64 ldy, const __nv_bfloat16* x, i64 ldx, const std::uint16_t* w, i64 ldw,
               i64 rows, i64 in, i64 out) {
  if (rows * out == 0) return;
  gemm_simt_kernel<<<grid_rows(rows, out), kThreads, 0, stream()>>>(
      y, ldy, x, ldx, reinterpret_cast<const __nv_bfloat16*>(w), ldw, rows, static_cast<int>(in),
      static_cast<int>(out));
  check_launch("gemm (plain)");
}

void bias_act(float* y, i64 ldy, i64 rows, i64 cols, const float* bias, Act act) {
  if (rows * cols == 0) return;
  bias_act_kernel<<<grid_rows(rows, cols), kThreads, 0, stream()>>>(
      y, ldy, rows, static_cast<int>(cols), bias, static_cast<int>(act));
  check_launch("bias_act");
}

void act_copy(Act act, float* dst, i64 ld_dst, const float* src, i64 ld_src, i64 rows, i64 cols) {
  if (rows * cols == 0) return;
  if (rows == 1 && cols > (i64{1} << 30))
    throw ModelError("activation on the GPU: a row of " + std::to_string(cols) +
                     " values is too long");
  act_copy_kernel<<<grid_rows(rows, cols), kThreads, 0, stream()>>>(
      static_cast<int>(act), dst, ld_dst, src, ld_src, rows, static_cast<int>(cols));
  check_launch("act_copy");
}

void add(float* y, const float* x, i64 n) {
  if (n == 0) return;
  add_kernel<<<blocks_for(n), kThreads, 0, stream()>>>(y, x, n);
  check_launch("add");
}

void add_scaled(float* y, const float* x, float s, i64 n) {
  if (n == 0) return;
  add_scaled_kernel<<<blocks_for(n), kThreads, 0, stream()>>>(y, x, s, n);
  check_launch("add_scaled");
}

void rotate_pairs(float* x, i64 ld, i64 rows, i64 len, i64 heads, i64 head_dim, const float* cos,
                  const float* sin, i64 per_table) {
  const i64 total = rows * heads * (head_dim / 2);
  if (total == 0) return;
  rotate_pairs_kernel<<<blocks_for(total), kThreads, 0, stream()>>>(
      x, ld, rows, len, static_cast<int>(heads), static_cast<int>(head_dim), cos, sin, per_table);
  check_launch("rotate_pairs");
}

void swiglu(float* g, i64 ldg, const float* z, i64 ldz, i64 rows, i64 hidden) {
  if (rows * hidden == 0) return;
  swiglu_kernel<<<grid_rows(rows, hidden), kThreads, 0, stream()>>>(g, ldg, z, ldz, rows,
                                                                    static_cast<int>(hidden));
  check_launch("swiglu");
}

void geglu(float* g, i64 ldg, const float* z, i64 ldz, i64 rows, i64 hidden) {
  if (rows * hidden == 0) return;
  geglu_kernel<<<grid_rows(rows, hidden), kThreads, 0, stream()>>>(g, ldg, z, ldz, rows,
                                                                   static_cast<int>(hidden));
  check_launch("geglu");
}

void add_broadcast(float* y, const float* x, i64 batch, i64 rows, i64 cols) {
  if (batch * rows * cols == 0) return;
  add_broadcast_kernel<<<grid_rows(batch * rows, cols), kThreads, 0, stream()>>>(
      y, x, batch * rows, rows, static_cast<int>(cols));
  check_launch("add_broadcast");
}

void ln_modulate(float* y, i64 ysb, const float* x, i64 xsb, i64 batch, i64 tokens, i64 dim,
                 const float* shift, const float* scale, i64 mod_stride, float eps) {
  row_norm({y, ysb, x, xsb, batch * tokens, tokens, static_cast<int>(dim), shift, scale, mod_stride,
            nullptr, nullptr, eps});
}

void layer_norm(float* y, i64 ldy, const float* x, i64 ldx, i64 rows, i64 dim, const float* weight,
                const float* bias, float eps) {
  // Rows as batches of one token, so each row keeps its own stride.
  row_norm(
      {y, ldy, x, ldx, rows, 1, static_cast<int>(dim), nullptr, nullptr, 0, weight, bias, eps});
}

void gated_residual(float* h, i64 hsb, const float* y, i64 ysb, i64 batch, i64 tokens, i64 dim,
                    const float* gate, i64 gate_stride) {
  const i64 rows = batch * tokens;
  if (rows * dim == 0) return;
  const bool vec = dim % 4 == 0 && hsb % 4 == 0 && ysb % 4 == 0 && gate_stride % 4 == 0 &&
                   aligned16(h) && aligned16(y) && aligned16(gate);
  if (vec)
    gated_residual_x4_kernel<<<grid_rows(rows, dim, 4), kThreads, 0, stream()>>>(
        h, hsb, y, ysb, rows, tokens, static_cast<int>(dim), gate, gate_stride);
  else
    gated_residual_kernel<<<grid_rows(rows, dim), kThreads, 0, stream()>>>(
        h, hsb, y, ysb, rows, tokens, static_cast<int>(dim), gate, gate_stride);
  check_launch("gated_residual");
}

void qk_rmsnorm(float* qkv, i64 rows, i64 ld, i64 heads, i64 head_dim, i64 head_stride,
                i64 q_offset, i64 k_offset, const float* q_scale, const float* k_scale, float eps) {
  if (rows * heads == 0) return;
  constexpr int kWarpsPerBlock = kThreads / 32;
  const i64 x = (2 * heads + kWarpsPerBlock - 1) / kWarpsPerBlock;
  const dim3 grid(static_cast<unsigned>(x),
                  static_cast<unsigned>(rows < kMaxGridY ? rows : kMaxGridY));
  qk_rmsnorm_kernel<<<grid, kThreads, 0, stream()>>>(qkv, rows, ld, static_cast<int>(heads),
                                                     static_cast<int>(head_dim), head_stride,
                                                     q_offset, k_offset, q_scale, k_scale, eps);
  check_launch("qk_rmsnorm");
}

void rms_norm(float* y, i64 ldy, const float* x, i64 ldx, i64 rows, i64 dim, const float* scale,
              float eps) {
  if (rows * dim == 0) return;
  constexpr int kWarpsPerBlock = kThreads / 32;
  rms_norm_kernel<<<blocks_for(rows, kWarpsPerBlock), kThreads, 0, stream()>>>(
      y, ldy, x, ldx, rows, static_cast<int>(dim), scale, eps);
  check_launch("rms_norm");
}

void linear_f32(float* y, i64 ldy, const float* x, i64 ldx, const float* w, i64 rows, i64 in,
                i64 out) {
  if (rows * out == 0) return;
  constexpr int kWarpsPerBlock = kThreads / 32;
  linear_f32_kernel<<<blocks_for(rows * out, kWarpsPerBlock), kThreads, 0, stream()>>>(
      y, ldy, x, ldx, w, rows, static_cast<int>(in), static_cast<int>(out));
  check_launch("linear_f32");
}

void gather_rows(float* dst, i64 ld_dst, const float* src, i64 ld_src, const i64* rows, i64 n,
                 i64 cols) {
  if (n * cols == 0) return;
  gather_rows_kernel<<<grid_rows(n, cols), kThreads, 0, stream()>>>(dst, ld_dst, src, ld_src, rows,
                                                                    n, static_cast<int>(cols));
  check_launch("gather_rows");
}

void scatter_add_rows(float* dst, i64 ld_dst, const float* src, i64 ld_src, const i64* rows,
                      const float* weight, i64 n, i64 cols) {
  if (n * cols == 0) return;
  scatter_add_rows_kernel<<<grid_rows(n, cols), kThreads, 0, stream()>>>(
      dst, ld_dst, src, ld_src, rows, weight, n, static_cast<int>(cols));
  check_launch("scatter_add_rows");
}

void fourier(float* out, const float* xyz, i64 points, const float* freqs, i64 num_freqs) {
  if (points * num_freqs == 0) return;
  fourier_kernel<<<blocks_for(points * 3 * num_freqs), kThreads, 0, stream()>>>(
      out, xyz, points, freqs, static_cast<int>(num_freqs));
  check_launch("fourier");
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
  const ProfileSpan span("attention");
  attention_plain_kernel<<<grid, 128, static_cast<size_t>(bytes), stream()>>>(a);
  check_launch("attention (plain)");
}

void select_keys(int* idx, const kernels::HeadsView& q, const kernels::HeadsView& k,
                 const i64* offsets, i64 groups, i64 heads, i64 head_dim, i64 kv_len, i64 top_k,
                 i64 stride) {
  if (groups * heads == 0) return;
  if (top_k < 1 || top_k > kv_len || stride < 1)
    throw ModelError("key selection on the GPU: top_k " + std::to_string(top_k) + " of " +
                     std::to_string(kv_len) + " keys, stride " + std::to_string(stride));
  const int np = next_pow2(kv_len), kp = next_pow2(top_k);
  const i64 bytes = head_dim * 8 + static_cast<i64>(np) * 12;
  constexpr i64 kMaxShared = 200 * 1024;
  if (bytes > kMaxShared)
    throw ModelError("key selection on the GPU: " + std::to_string(kv_len) +
                     " keys do not fit one block's shared memory (at most 16384)");
  static const bool configured = [] {
    check(cudaFuncSetAttribute(select_keys_kernel, cudaFuncAttributeMaxDynamicSharedMemorySize,
                               static_cast<int>(kMaxShared)),
          "key selection: shared memory size");
    return true;
  }();
  (void)configured;
  const ProfileSpan span("key_selection");
  select_keys_kernel<<<dim3(static_cast<unsigned>(groups), static_cast<unsigned>(heads)), 512,
                       static_cast<std::size_t>(bytes), stream()>>>(
      idx, q.data, q.token_stride, q.head_stride, k.data, k.token_stride, k.head_stride, offsets,
      static_cast<int>(heads), static_cast<int>(head_dim), static_cast<int>(kv_len), np,
      static_cast<int>(top_k), kp, stride);
  check_launch("key selection");
}

void grouped_attention(const kernels::HeadsOut& out, const kernels::HeadsView& q,
                       const kernels::HeadsView& k, const kernels::HeadsView& v,
                       const kernels::AttentionShape& s, const int* idx, const i64* offsets,
                       i64 groups, i64 top_k) {
  if (groups < 1 || offsets[groups] == 0) return;
  AttnArgs a{out.data,
             0,
             out.token_stride,
             out.head_stride,
             q.data,
             k.data,
             v.data,
             0,
             q.token_stride,
             q.head_stride,
             0,
             k.token_stride,
             k.head_stride,
             0,
             v.token_stride,
             v.head_stride,
             s.heads,
             s.q_len,
             s.kv_len,
             s.head_dim,
             s.scale != 0.0f ? s.scale : 1.0f / std::sqrt(static_cast<float>(s.head_dim))};
  if (s.head_dim == 64) return launch_grouped_flash<64>(a, idx, offsets, groups, top_k);
  if (s.head_dim == 128) return launch_grouped_flash<128>(a, idx, offsets, groups, top_k);
  // Other head dims (the small test models): each group's keys and values gathered in float32,
  // then the plain kernel per group.
  const i64 D = s.head_dim, rows = groups * s.heads * top_k;
  float* buf = nullptr;
  check(cudaMallocAsync(reinterpret_cast<void**>(&buf),
                        static_cast<std::size_t>(2 * rows * D) * sizeof(float), stream()),
        "selected-key attention: staging");
  float *kf = buf, *vf = buf + rows * D;
  gather_keys_kernel<<<grid_rows(rows, D), kThreads, 0, stream()>>>(
      kf, k.data, k.token_stride, k.head_stride, idx, static_cast<int>(s.heads),
      static_cast<int>(top_k), top_k, static_cast<int>(D), rows);
  gather_keys_kernel<<<grid_rows(rows, D), kThreads, 0, stream()>>>(
      vf, v.data, v.token_stride, v.head_stride, idx, static_cast<int>(s.heads),
      static_cast<int>(top_k), top_k, static_cast<int>(D), rows);
  check_launch("selected-key attention: gathering");
  const i64 per_group = s.heads * top_k * D;
  for (i64 g = 0; g < groups; ++g) {
    const i64 g0 = offsets[g], n = offsets[g + 1] - g0;
    if (n <= 0) continue;
    attention({out.data + g0 * out.token_stride, 0, out.token_stride, out.head_stride},
              {q.data + g0 * q.token_stride, 0, q.token_stride, q.head_stride},
              {kf + g * per_group, 0, D, top_k * D}, {vf + g * per_group, 0, D, top_k * D},
              {1, s.heads, n, top_k, D, s.scale, true});
  }
  check(cudaFreeAsync(buf, stream()), "selected-key attention: staging");
}

}  // namespace gen3d::models::cuda
