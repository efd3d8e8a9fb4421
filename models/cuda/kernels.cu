// The CUDA backend's kernels. Correctness first: every kernel mirrors the float32 formula of its
// CPU twin in models/kernels; the attention kernel follows FlashAttention-2's loop (online
// softmax over key tiles, bf16 tensor-core products (mma.sync), float32 accumulation).

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

// q, k or v of every (batch, head) as bf16, zero-padded to `padded` tokens: [batch * heads,
// padded, d], or transposed [batch * heads, d, padded] (v, so the P V product reads key pairs as
// one 32-bit word).
__global__ void pack_heads_kernel(__nv_bfloat16* dst, const float* src, i64 bs, i64 ts, i64 hs,
                                  i64 heads, i64 len, i64 padded, i64 d, bool transpose) {
  const i64 per_batch = heads * padded * d;
  const i64 b = blockIdx.y;
  for (i64 i = blockIdx.x * static_cast<i64>(blockDim.x) + threadIdx.x; i < per_batch;
       i += static_cast<i64>(gridDim.x) * blockDim.x) {
    i64 h, t, c;
    if (transpose) {  // i = (h, c, t)
      h = i / (d * padded);
      const i64 rem = i - h * d * padded;
      c = rem / padded;
      t = rem - c * padded;
    } else {  // i = (h, t, c)
      h = i / (padded * d);
      const i64 rem = i - h * padded * d;
      t = rem / d;
      c = rem - t * d;
    }
    const float x = t < len ? src[b * bs + t * ts + h * hs + c] : 0.0f;
    dst[b * per_batch + i] = __float2bfloat16_rn(x);
  }
}

// FlashAttention-2 on the tensor cores' mma.sync (m16n8k16, bf16 in, float32 accumulate). A block
// of 4 warps takes 64 queries (16 per warp) of one (batch, head); key tiles of 64 stream through
// shared memory, double-buffered with cp.async. S = Q K^T stays in registers; the online softmax
// runs there (each row's 4 lanes combine by shuffles); the accumulator layout of S is the operand
// layout of P for O += P V, so P never leaves registers. Inputs come packed and zero-padded to
// whole tiles (pack_heads_kernel), so only the scores of padded keys need masking.
constexpr int kBM = 64, kBN = 64, kWarps = 4;

template <int D>
struct FlashSmem {
  static constexpr int ldk = D + 8;    // bf16 pitch of Q and K rows (conflict-free 32-bit reads)
  static constexpr int ldv = kBN + 8;  // bf16 pitch of V^T rows
  static constexpr int q_elems = kBM * ldk;
  static constexpr int k_elems = kBN * ldk;
  static constexpr int v_elems = D * ldv;
  static constexpr int stage_elems = k_elems + v_elems;
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

__device__ __forceinline__ unsigned ld32(const __nv_bfloat16* p) {
  return *reinterpret_cast<const unsigned*>(p);
}

// Copies tile `j` of K ([kBN, D] rows) and V^T ([D, kBN]) into a stage with 16-byte cp.async.
template <int D>
__device__ void load_kv(__nv_bfloat16* stage, const __nv_bfloat16* kb, const __nv_bfloat16* vt,
                        i64 k0, i64 lk_padded) {
  using S = FlashSmem<D>;
  __nv_bfloat16* Ks = stage;
  __nv_bfloat16* Vs = stage + S::k_elems;
  constexpr int kChunksK = kBN * D / 8, kChunksV = D * kBN / 8;
  for (int i = threadIdx.x; i < kChunksK; i += kWarps * 32) {
    const int r = i / (D / 8), c = (i % (D / 8)) * 8;
    cp_async16(Ks + r * S::ldk + c, kb + (k0 + r) * D + c);
  }
  for (int i = threadIdx.x; i < kChunksV; i += kWarps * 32) {
    const int r = i / (kBN / 8), c = (i % (kBN / 8)) * 8;
    cp_async16(Vs + r * S::ldv + c, vt + r * lk_padded + k0 + c);
  }
}

template <int D>
__global__ void __launch_bounds__(kWarps * 32)
    attention_flash_kernel(AttnArgs a, const __nv_bfloat16* qb, const __nv_bfloat16* kb,
                           const __nv_bfloat16* vt, i64 lq_padded, i64 lk_padded) {
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
  const i64 q0 = static_cast<i64>(blockIdx.x) * kBM, h = blockIdx.y, b = blockIdx.z;
  const i64 bh = b * a.heads + h;
  const __nv_bfloat16* qg = qb + bh * lq_padded * D;
  const __nv_bfloat16* kg = kb + bh * lk_padded * D;
  const __nv_bfloat16* vg = vt + bh * D * lk_padded;

  for (int i = threadIdx.x; i < kBM * D / 8; i += kWarps * 32) {
    const int r = i / (D / 8), c = (i % (D / 8)) * 8;
    cp_async16(Qs + r * S::ldk + c, qg + (q0 + r) * D + c);
  }
  load_kv<D>(stage0, kg, vg, 0, lk_padded);
  cp_async_commit();

  unsigned qf[kKQ][4];
  float o[kDT][4];
  for (int j = 0; j < kDT; ++j) o[j][0] = o[j][1] = o[j][2] = o[j][3] = 0.0f;
  float m0 = -INFINITY, m1 = -INFINITY, l0 = 0.0f, l1 = 0.0f;  // rows g and g + 8
  const float sl2 = a.scale * 1.4426950408889634f;             // scores in log2 units

  const int tiles = static_cast<int>((a.lk + kBN - 1) / kBN);
  for (int j = 0; j < tiles; ++j) {
    if (j + 1 < tiles) {
      load_kv<D>(stage0 + ((j + 1) & 1) * S::stage_elems, kg, vg, static_cast<i64>(j + 1) * kBN,
                 lk_padded);
      cp_async_commit();
      cp_async_wait<1>();
    } else {
      cp_async_wait<0>();
    }
    __syncthreads();
    if (j == 0) {
      const __nv_bfloat16* qw = Qs + warp * 16 * S::ldk;
#pragma unroll
      for (int kk = 0; kk < kKQ; ++kk) {
        qf[kk][0] = ld32(qw + g * S::ldk + kk * 16 + 2 * t);
        qf[kk][1] = ld32(qw + (g + 8) * S::ldk + kk * 16 + 2 * t);
        qf[kk][2] = ld32(qw + g * S::ldk + kk * 16 + 2 * t + 8);
        qf[kk][3] = ld32(qw + (g + 8) * S::ldk + kk * 16 + 2 * t + 8);
      }
    }
    const __nv_bfloat16* Ks = stage0 + (j & 1) * S::stage_elems;
    const __nv_bfloat16* Vs = Ks + S::k_elems;

    float s[kNT][4];
#pragma unroll
    for (int nt = 0; nt < kNT; ++nt) {
      s[nt][0] = s[nt][1] = s[nt][2] = s[nt][3] = 0.0f;
      const __nv_bfloat16* kr = Ks + (nt * 8 + g) * S::ldk + 2 * t;
#pragma unroll
      for (int kk = 0; kk < kKQ; ++kk)
        mma_bf16(s[nt], qf[kk], ld32(kr + kk * 16), ld32(kr + kk * 16 + 8));
    }

    // Online softmax over this tile (keys past kv_len are padding: -inf).
    const i64 k0 = static_cast<i64>(j) * kBN;
    float mx0 = -INFINITY, mx1 = -INFINITY;
#pragma unroll
    for (int nt = 0; nt < kNT; ++nt)
#pragma unroll
      for (int e = 0; e < 2; ++e) {
        const bool valid = k0 + nt * 8 + 2 * t + e < a.lk;
        s[nt][e] = valid ? s[nt][e] * sl2 : -INFINITY;
        s[nt][2 + e] = valid ? s[nt][2 + e] * sl2 : -INFINITY;
        mx0 = fmaxf(mx0, s[nt][e]);
        mx1 = fmaxf(mx1, s[nt][2 + e]);
      }
    mx0 = fmaxf(mx0, __shfl_xor_sync(0xffffffffu, mx0, 1));
    mx0 = fmaxf(mx0, __shfl_xor_sync(0xffffffffu, mx0, 2));
    mx1 = fmaxf(mx1, __shfl_xor_sync(0xffffffffu, mx1, 1));
    mx1 = fmaxf(mx1, __shfl_xor_sync(0xffffffffu, mx1, 2));
    const float n0 = fmaxf(m0, mx0), n1 = fmaxf(m1, mx1);  // finite: each tile has a valid key
    const float alpha0 = exp2f(m0 - n0), alpha1 = exp2f(m1 - n1);
    m0 = n0;
    m1 = n1;
    float sum0 = 0.0f, sum1 = 0.0f;
#pragma unroll
    for (int nt = 0; nt < kNT; ++nt) {
      s[nt][0] = exp2f(s[nt][0] - n0);
      s[nt][1] = exp2f(s[nt][1] - n0);
      s[nt][2] = exp2f(s[nt][2] - n1);
      s[nt][3] = exp2f(s[nt][3] - n1);
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

    // O += P V: the scores' accumulator layout is the A operand's layout.
#pragma unroll
    for (int kk = 0; kk < kBN / 16; ++kk) {
      const unsigned pa[4] = {pack_bf16(s[2 * kk][0], s[2 * kk][1]),
                              pack_bf16(s[2 * kk][2], s[2 * kk][3]),
                              pack_bf16(s[2 * kk + 1][0], s[2 * kk + 1][1]),
                              pack_bf16(s[2 * kk + 1][2], s[2 * kk + 1][3])};
#pragma unroll
      for (int dn = 0; dn < kDT; ++dn) {
        const __nv_bfloat16* vr = Vs + (dn * 8 + g) * S::ldv + kk * 16 + 2 * t;
        mma_bf16(o[dn], pa, ld32(vr), ld32(vr + 8));
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
    if (r0 < a.lq) {
      float* op = a.o + b * a.o_bs + r0 * a.o_ts + h * a.o_hs + c;
      op[0] = o[dn][0] * inv0;
      op[1] = o[dn][1] * inv0;
    }
    if (r1 < a.lq) {
      float* op = a.o + b * a.o_bs + r1 * a.o_ts + h * a.o_hs + c;
      op[0] = o[dn][2] * inv1;
      op[1] = o[dn][3] * inv1;
    }
  }
}

template <int D>
void launch_flash(const AttnArgs& a, i64 batch) {
  // q, k and v^T as packed, tile-padded bf16 in pool memory, freed in stream order.
  const i64 lqp = (a.lq + kBM - 1) / kBM * kBM, lkp = (a.lk + kBN - 1) / kBN * kBN;
  const i64 nq = batch * a.heads * lqp * D, nk = batch * a.heads * lkp * D;
  __nv_bfloat16* buf = nullptr;
  check(cudaMallocAsync(reinterpret_cast<void**>(&buf),
                        static_cast<size_t>(nq + 2 * nk) * sizeof(__nv_bfloat16), stream()),
        "attention: bf16 staging");
  __nv_bfloat16 *qb = buf, *kb = buf + nq, *vt = buf + nq + nk;
  const unsigned by = static_cast<unsigned>(batch);
  pack_heads_kernel<<<dim3(blocks_for(a.heads * lqp * D), by), kThreads, 0, stream()>>>(
      qb, a.q, a.q_bs, a.q_ts, a.q_hs, a.heads, a.lq, lqp, D, false);
  pack_heads_kernel<<<dim3(blocks_for(a.heads * lkp * D), by), kThreads, 0, stream()>>>(
      kb, a.k, a.k_bs, a.k_ts, a.k_hs, a.heads, a.lk, lkp, D, false);
  pack_heads_kernel<<<dim3(blocks_for(a.heads * lkp * D), by), kThreads, 0, stream()>>>(
      vt, a.v, a.v_bs, a.v_ts, a.v_hs, a.heads, a.lk, lkp, D, true);
  check_launch("attention: packing q, k, v");
  const int bytes = FlashSmem<D>::bytes;
  static const bool configured = [&] {
    check(cudaFuncSetAttribute(attention_flash_kernel<D>,
                               cudaFuncAttributeMaxDynamicSharedMemorySize, bytes),
          "attention: shared memory size");
    return true;
  }();
  (void)configured;
  const dim3 grid(static_cast<unsigned>(lqp / kBM), static_cast<unsigned>(a.heads), by);
  attention_flash_kernel<D><<<grid, kWarps * 32, bytes, stream()>>>(a, qb, kb, vt, lqp, lkp);
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
