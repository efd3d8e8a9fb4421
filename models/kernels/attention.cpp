#include "models/kernels/attention.h"

#include <cblas.h>
#include <tbb/blocked_range.h>
#include <tbb/enumerable_thread_specific.h>
#include <tbb/parallel_for.h>

#if defined(__x86_64__)
#include <immintrin.h>
#endif

#include <algorithm>
#include <bit>
#include <cmath>
#include <cstdint>
#include <vector>

#include "models/core/blas_threads.h"
#include "models/core/dtype.h"
#include "models/core/vector_clones.h"
#include "models/kernels/dnnl_matmul.h"
#include "models/kernels/flops.h"

namespace gen3d::models::kernels {

namespace {

// Query x key tile of the online softmax. Larger tiles make the two block GEMMs (inner size
// head_dim, 64 in the texture UNets) more efficient: 256 x 256 ran 1.15x faster than 64 x 128 on
// a 6144-token, 5-head attention (2 cores); the score tile (256 KiB) stays cache-resident.
constexpr std::int64_t kBlockQ = 256;
constexpr std::int64_t kBlockK = 256;

// exp(x) for x <= 0 (softmax after max subtraction): range reduction x = n ln2 + r, degree-7
// Taylor polynomial on |r| <= ln2/2 (relative error < 1e-7, about 1 ulp), 2^n from the exponent
// bits. n is rounded by adding 1.5 * 2^23 (its low mantissa bits then hold n), so the loop below
// has no float-to-int conversion and vectorizes at any width; inputs below -87 flush to 0.
inline float exp_nonpositive(float x) {
  const float xc = x > -87.0f ? x : -87.0f;
  constexpr float kShifter = 12582912.0f;  // 1.5 * 2^23
  const float tn = xc * 1.4426950408889634f + kShifter;
  const float n = tn - kShifter;
  const float r = (xc - n * 0.693145751953125f) - n * 1.428606765330187e-06f;
  // exp(r) = 1 + (r + r^2 q(r)): the small terms are summed before the 1, so each rounding is
  // relative to them and the result is within about half an ulp with or without fused
  // multiply-adds (Horner's last steps, p * r + 1, cost an ulp and more without them).
  float q = 1.0f / 5040.0f;
  q = q * r + 1.0f / 720.0f;
  q = q * r + 1.0f / 120.0f;
  q = q * r + 1.0f / 24.0f;
  q = q * r + 1.0f / 6.0f;
  q = q * r + 0.5f;
  const float p = 1.0f + (r + (r * r) * q);
  const float scale = std::bit_cast<float>((std::bit_cast<std::uint32_t>(tn) + 127u) << 23);
  return x < -87.0f ? 0.0f : p * scale;
}

// The softmax loops are most of an attention's time once its products run in bf16, so they are
// compiled for the wider vector units too (models/core/vector_clones.h).

// s[j] = exp(s[j] - m) for j < n; returns the sum. Two loops so both vectorize (the sum uses
// 8 partial sums; a single float accumulator would pin the loop to sequential order).
GEN3D_VECTOR_CLONES float exp_shift_sum(float* s, std::int64_t n, float m) {
  for (std::int64_t j = 0; j < n; ++j) s[j] = exp_nonpositive(s[j] - m);
  float part[8] = {};
  std::int64_t j = 0;
  for (; j + 8 <= n; j += 8)
    for (int u = 0; u < 8; ++u) part[u] += s[j + u];
  float sum = 0.0f;
  for (; j < n; ++j) sum += s[j];
  for (float p : part) sum += p;
  return sum;
}

// The largest of s[0..n) (n >= 1). GCC leaves the portable loop scalar, so CPUs with AVX-512 take
// 16 lanes of vmaxps (the maximum is exact in any order).
float max_of_portable(const float* s, std::int64_t n) {
  float m = -INFINITY;
  for (std::int64_t j = 0; j < n; ++j) m = m > s[j] ? m : s[j];
  return m;
}

#ifndef GEN3D_NO_VECTOR_CLONES
[[gnu::target("avx512f")]] float max_of_avx512(const float* s, std::int64_t n) {
  __m512 m = _mm512_set1_ps(-INFINITY);
  std::int64_t j = 0;
  for (; j + 16 <= n; j += 16) m = _mm512_max_ps(m, _mm512_loadu_ps(s + j));
  if (j < n) {
    const __mmask16 tail = static_cast<__mmask16>((1u << (n - j)) - 1u);
    m = _mm512_max_ps(m, _mm512_mask_loadu_ps(_mm512_set1_ps(-INFINITY), tail, s + j));
  }
  return _mm512_reduce_max_ps(m);
}
#endif

float max_of(const float* s, std::int64_t n) {
#ifndef GEN3D_NO_VECTOR_CLONES
  static const bool avx512 = __builtin_cpu_supports("avx512f");
  if (avx512) return max_of_avx512(s, n);
#endif
  return max_of_portable(s, n);
}

float effective_scale(const AttentionShape& s) {
  return s.scale != 0.0f ? s.scale : 1.0f / std::sqrt(static_cast<float>(s.head_dim));
}

struct Scratch {
  std::vector<float> scores;  // [kBlockQ, kBlockK]
  std::vector<float> acc;     // [kBlockQ, head_dim]
  std::vector<float> row_max;
  std::vector<float> row_sum;
};

// One (batch, head, query block): online softmax over key blocks.
void attend_block(const HeadsOut& out, const HeadsView& q, const HeadsView& k, const HeadsView& v,
                  const AttentionShape& s, float scale, std::int64_t b, std::int64_t h,
                  std::int64_t q0, std::int64_t nq, Scratch& w) {
  const std::int64_t D = s.head_dim;
  w.scores.resize(static_cast<std::size_t>(kBlockQ * kBlockK));
  w.acc.assign(static_cast<std::size_t>(nq * D), 0.0f);
  w.row_max.assign(static_cast<std::size_t>(nq), -INFINITY);
  w.row_sum.assign(static_cast<std::size_t>(nq), 0.0f);
  const float* qb = q.data + b * q.batch_stride + h * q.head_stride + q0 * q.token_stride;
  const float* kb = k.data + b * k.batch_stride + h * k.head_stride;
  const float* vb = v.data + b * v.batch_stride + h * v.head_stride;
  float* S = w.scores.data();
  float* O = w.acc.data();

  for (std::int64_t k0 = 0; k0 < s.kv_len; k0 += kBlockK) {
    const std::int64_t nk = std::min(kBlockK, s.kv_len - k0);
    // S[nq, nk] = scale * Q[nq, D] · K[k0:k0+nk, D]^T
    cblas_sgemm(CblasRowMajor, CblasNoTrans, CblasTrans, static_cast<int>(nq), static_cast<int>(nk),
                static_cast<int>(D), scale, qb, static_cast<int>(q.token_stride),
                kb + k0 * k.token_stride, static_cast<int>(k.token_stride), 0.0f, S,
                static_cast<int>(kBlockK));
    for (std::int64_t i = 0; i < nq; ++i) {
      float* srow = S + i * kBlockK;
      const float m_blk = max_of(srow, nk);
      const float m_old = w.row_max[static_cast<std::size_t>(i)];
      const float m_new = std::max(m_old, m_blk);
      const float sum = exp_shift_sum(srow, nk, m_new);
      if (m_old != m_new) {  // rescale what was accumulated under the old max
        const float corr = std::exp(m_old - m_new);  // 0 on the first block
        w.row_sum[static_cast<std::size_t>(i)] *= corr;
        float* orow = O + i * D;
        for (std::int64_t d = 0; d < D; ++d) orow[d] *= corr;
      }
      w.row_sum[static_cast<std::size_t>(i)] += sum;
      w.row_max[static_cast<std::size_t>(i)] = m_new;
    }
    // O[nq, D] += P[nq, nk] · V[k0:k0+nk, D]
    cblas_sgemm(CblasRowMajor, CblasNoTrans, CblasNoTrans, static_cast<int>(nq),
                static_cast<int>(D), static_cast<int>(nk), 1.0f, S, static_cast<int>(kBlockK),
                vb + k0 * v.token_stride, static_cast<int>(v.token_stride), 1.0f, O,
                static_cast<int>(D));
  }
  for (std::int64_t i = 0; i < nq; ++i) {
    const float inv = 1.0f / w.row_sum[static_cast<std::size_t>(i)];
    float* dst =
        out.data + b * out.batch_stride + h * out.head_stride + (q0 + i) * out.token_stride;
    for (std::int64_t d = 0; d < D; ++d) dst[d] = O[i * D + d] * inv;
  }
}

// Keys and values of every (batch, head), rounded to bf16 once per call: [batch, heads, kv, D].
struct Bf16KV {
  std::vector<std::uint16_t> k, v;
};

Bf16KV round_kv(const HeadsView& k, const HeadsView& v, const AttentionShape& s) {
  const std::int64_t L = s.kv_len, D = s.head_dim;
  Bf16KV kv;
  kv.k.resize(static_cast<std::size_t>(s.batch * s.heads * L * D));
  kv.v.resize(kv.k.size());
  tbb::parallel_for(std::int64_t{0}, s.batch * s.heads * L, [&](std::int64_t row) {
    const std::int64_t t = row % L, h = (row / L) % s.heads, b = row / (L * s.heads);
    const auto at = static_cast<std::size_t>(row * D);
    round_to_bf16(k.data + b * k.batch_stride + h * k.head_stride + t * k.token_stride,
                  static_cast<std::size_t>(D), kv.k.data() + at);
    round_to_bf16(v.data + b * v.batch_stride + h * v.head_stride + t * v.token_stride,
                  static_cast<std::size_t>(D), kv.v.data() + at);
  });
  return kv;
}

struct Bf16Scratch {
  std::vector<std::uint16_t> q;  // [kBlockQ, D]
  std::vector<std::uint16_t> p;  // [kBlockQ, kBlockK] softmax weights
};

// attend_block with bf16 block products: S = Q K^T and O += P V on oneDNN, one thread each.
void attend_block_bf16(const HeadsOut& out, const HeadsView& q, const std::uint16_t* k_all,
                       const std::uint16_t* v_all, const AttentionShape& s, float scale,
                       std::int64_t b, std::int64_t h, std::int64_t q0, std::int64_t nq, Scratch& w,
                       Bf16Scratch& wb) {
  const std::int64_t D = s.head_dim, L = s.kv_len;
  w.scores.resize(static_cast<std::size_t>(kBlockQ * kBlockK));
  w.acc.assign(static_cast<std::size_t>(nq * D), 0.0f);
  w.row_max.assign(static_cast<std::size_t>(nq), -INFINITY);
  w.row_sum.assign(static_cast<std::size_t>(nq), 0.0f);
  wb.q.resize(static_cast<std::size_t>(kBlockQ * D));
  wb.p.resize(static_cast<std::size_t>(kBlockQ * kBlockK));
  for (std::int64_t i = 0; i < nq; ++i)
    round_to_bf16(q.data + b * q.batch_stride + h * q.head_stride + (q0 + i) * q.token_stride,
                  static_cast<std::size_t>(D), wb.q.data() + i * D);
  const std::uint16_t* kb = k_all + (b * s.heads + h) * L * D;
  const std::uint16_t* vb = v_all + (b * s.heads + h) * L * D;
  float* S = w.scores.data();
  float* O = w.acc.data();
  for (std::int64_t k0 = 0; k0 < L; k0 += kBlockK) {
    const std::int64_t nk = std::min(kBlockK, L - k0);
    gemm_bf16_serial(S, kBlockK, wb.q.data(), D, kb + k0 * D, D, true, nq, D, nk, scale, false);
    for (std::int64_t i = 0; i < nq; ++i) {
      float* srow = S + i * kBlockK;
      const float m_blk = max_of(srow, nk);
      const float m_old = w.row_max[static_cast<std::size_t>(i)];
      const float m_new = std::max(m_old, m_blk);
      const float sum = exp_shift_sum(srow, nk, m_new);
      if (m_old != m_new) {
        const float corr = std::exp(m_old - m_new);
        w.row_sum[static_cast<std::size_t>(i)] *= corr;
        float* orow = O + i * D;
        for (std::int64_t d = 0; d < D; ++d) orow[d] *= corr;
      }
      w.row_sum[static_cast<std::size_t>(i)] += sum;
      w.row_max[static_cast<std::size_t>(i)] = m_new;
      round_normal_to_bf16(srow, static_cast<std::size_t>(nk), wb.p.data() + i * kBlockK);
    }
    gemm_bf16_serial(O, D, wb.p.data(), kBlockK, vb + k0 * D, D, false, nq, nk, D, 1.0f, true);
  }
  for (std::int64_t i = 0; i < nq; ++i) {
    const float inv = 1.0f / w.row_sum[static_cast<std::size_t>(i)];
    float* dst =
        out.data + b * out.batch_stride + h * out.head_stride + (q0 + i) * out.token_stride;
    for (std::int64_t d = 0; d < D; ++d) dst[d] = O[i * D + d] * inv;
  }
}

}  // namespace

namespace {

// Zero output for a softmax over no keys; true when there is nothing else to do.
bool trivial_attention(const HeadsOut& out, const AttentionShape& s) {
  if (s.batch <= 0 || s.heads <= 0 || s.q_len <= 0 || s.head_dim <= 0) return true;
  count_flops(4.0 * static_cast<double>(s.batch) * s.heads * s.q_len * s.kv_len * s.head_dim);
  if (s.kv_len > 0) return false;
  for (std::int64_t b = 0; b < s.batch; ++b)
    for (std::int64_t h = 0; h < s.heads; ++h)
      for (std::int64_t t = 0; t < s.q_len; ++t)
        std::fill_n(out.data + b * out.batch_stride + h * out.head_stride + t * out.token_stride,
                    s.head_dim, 0.0f);
  return true;
}

// Every (batch, head, query block), in parallel when large enough. k16 / v16: keys and values
// already in bf16 ([batch, heads, kv, D]) for the bf16 path, null for float32.
void run_attention(const HeadsOut& out, const HeadsView& q, const HeadsView& k, const HeadsView& v,
                   const std::uint16_t* k16, const std::uint16_t* v16, const AttentionShape& s) {
  ensure_serial_blas();
  const float scale = effective_scale(s);
  const std::int64_t q_blocks = (s.q_len + kBlockQ - 1) / kBlockQ;
  const std::int64_t tasks = s.batch * s.heads * q_blocks;
  static tbb::enumerable_thread_specific<Scratch> scratch;
  static tbb::enumerable_thread_specific<Bf16Scratch> bf16_scratch;
  auto run = [&](std::int64_t task) {
    const std::int64_t qb = task % q_blocks;
    const std::int64_t h = (task / q_blocks) % s.heads;
    const std::int64_t b = task / (q_blocks * s.heads);
    const std::int64_t q0 = qb * kBlockQ;
    const std::int64_t nq = std::min(kBlockQ, s.q_len - q0);
    if (k16)
      attend_block_bf16(out, q, k16, v16, s, scale, b, h, q0, nq, scratch.local(),
                        bf16_scratch.local());
    else
      attend_block(out, q, k, v, s, scale, b, h, q0, nq, scratch.local());
  };
  if (tasks == 1 || s.q_len * s.kv_len * s.head_dim * s.batch * s.heads < (1 << 16)) {
    for (std::int64_t t = 0; t < tasks; ++t) run(t);
    return;
  }
  tbb::parallel_for(tbb::blocked_range<std::int64_t>(0, tasks, 1),
                    [&](const tbb::blocked_range<std::int64_t>& r) {
                      for (std::int64_t t = r.begin(); t < r.end(); ++t) run(t);
                    });
}

}  // namespace

void attention(const HeadsOut& out, const HeadsView& q, const HeadsView& k, const HeadsView& v,
               const AttentionShape& s) {
  if (trivial_attention(out, s)) return;
  if (!s.bf16) return run_attention(out, q, k, v, nullptr, nullptr, s);
  const Bf16KV kv = round_kv(k, v, s);
  run_attention(out, q, k, v, kv.k.data(), kv.v.data(), s);
}

void attention_bf16_kv(const HeadsOut& out, const HeadsView& q, const std::uint16_t* k,
                       const std::uint16_t* v, const AttentionShape& s) {
  if (trivial_attention(out, s)) return;
  run_attention(out, q, {}, {}, k, v, s);
}

namespace ref {

void attention(const HeadsOut& out, const HeadsView& q, const HeadsView& k, const HeadsView& v,
               const AttentionShape& s) {
  const double scale = effective_scale(s);
  std::vector<double> p(static_cast<std::size_t>(std::max<std::int64_t>(s.kv_len, 1)));
  std::vector<double> o(static_cast<std::size_t>(s.head_dim));
  for (std::int64_t b = 0; b < s.batch; ++b) {
    for (std::int64_t h = 0; h < s.heads; ++h) {
      for (std::int64_t i = 0; i < s.q_len; ++i) {
        const float* qi = q.data + b * q.batch_stride + h * q.head_stride + i * q.token_stride;
        double m = -INFINITY;
        for (std::int64_t j = 0; j < s.kv_len; ++j) {
          const float* kj = k.data + b * k.batch_stride + h * k.head_stride + j * k.token_stride;
          double dot = 0.0;
          for (std::int64_t d = 0; d < s.head_dim; ++d) dot += static_cast<double>(qi[d]) * kj[d];
          p[static_cast<std::size_t>(j)] = dot * scale;
          m = std::max(m, p[static_cast<std::size_t>(j)]);
        }
        double sum = 0.0;
        for (std::int64_t j = 0; j < s.kv_len; ++j) {
          p[static_cast<std::size_t>(j)] = std::exp(p[static_cast<std::size_t>(j)] - m);
          sum += p[static_cast<std::size_t>(j)];
        }
        std::fill(o.begin(), o.end(), 0.0);
        for (std::int64_t j = 0; j < s.kv_len; ++j) {
          const float* vj = v.data + b * v.batch_stride + h * v.head_stride + j * v.token_stride;
          for (std::int64_t d = 0; d < s.head_dim; ++d)
            o[static_cast<std::size_t>(d)] += p[static_cast<std::size_t>(j)] * vj[d];
        }
        float* dst = out.data + b * out.batch_stride + h * out.head_stride + i * out.token_stride;
        for (std::int64_t d = 0; d < s.head_dim; ++d)
          dst[d] = s.kv_len > 0 ? static_cast<float>(o[static_cast<std::size_t>(d)] / sum) : 0.0f;
      }
    }
  }
}

}  // namespace ref

}  // namespace gen3d::models::kernels
