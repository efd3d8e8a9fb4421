// GELU (tanh form) and SiLU over rows with AVX-512, for CPUs that have it (activations.cpp picks
// at run time). exp is evaluated as 2^n e^r with r in [-ln2/2, ln2/2] and Cephes' degree-6
// polynomial (about 1 ulp). GELU's 1 + tanh(v) is formed without cancellation (gelu_tanh_ps), so
// it is accurate to a few ulp of the result where the scalar formula loses digits (large negative
// x). Compiled with -mavx512f; nothing here runs unless the CPU reports AVX-512F.

#include <immintrin.h>

#include <cstdint>

#include "models/kernels/activations_avx512.h"

namespace gen3d::models::kernels::avx512 {

namespace {

// exp(a) for a <= 88.7 (larger saturates to +inf through scalef); a < -104 gives 0.
inline __m512 exp_ps(__m512 a) {
  const __m512 log2e = _mm512_set1_ps(1.44269504088896341f);
  const __m512 c1 = _mm512_set1_ps(0.693359375f), c2 = _mm512_set1_ps(-2.12194440e-4f);
  a = _mm512_max_ps(a, _mm512_set1_ps(-104.0f));
  const __m512 n =
      _mm512_roundscale_ps(_mm512_mul_ps(a, log2e), _MM_FROUND_TO_NEAREST_INT | _MM_FROUND_NO_EXC);
  __m512 r = _mm512_fnmadd_ps(n, c1, a);
  r = _mm512_fnmadd_ps(n, c2, r);
  __m512 p = _mm512_set1_ps(1.9875691500e-4f);
  p = _mm512_fmadd_ps(p, r, _mm512_set1_ps(1.3981999507e-3f));
  p = _mm512_fmadd_ps(p, r, _mm512_set1_ps(8.3334519073e-3f));
  p = _mm512_fmadd_ps(p, r, _mm512_set1_ps(4.1665795894e-2f));
  p = _mm512_fmadd_ps(p, r, _mm512_set1_ps(1.6666665459e-1f));
  p = _mm512_fmadd_ps(p, r, _mm512_set1_ps(5.0000001201e-1f));
  const __m512 r2 = _mm512_mul_ps(r, r);
  const __m512 e = _mm512_add_ps(_mm512_fmadd_ps(p, r2, r), _mm512_set1_ps(1.0f));
  return _mm512_scalef_ps(e, n);
}

// 0.5 x (1 + tanh v) without the cancellation of 1 + tanh v for negative v: with e = exp(-2|v|),
// 1 + tanh v = 2 / (1 + e) for v >= 0 and 2 e / (1 + e) for v < 0.
inline __m512 gelu_tanh_ps(__m512 x) {
  const __m512 k0 = _mm512_set1_ps(0.7978845608028654f), k1 = _mm512_set1_ps(0.044715f);
  const __m512 x3 = _mm512_mul_ps(_mm512_mul_ps(x, x), x);
  const __m512 v = _mm512_mul_ps(k0, _mm512_fmadd_ps(k1, x3, x));
  const __m512 av =
      _mm512_castsi512_ps(_mm512_and_si512(_mm512_castps_si512(v), _mm512_set1_epi32(0x7fffffff)));
  const __m512 e = exp_ps(_mm512_mul_ps(_mm512_set1_ps(-2.0f), av));
  const __mmask16 negative = _mm512_cmp_ps_mask(v, _mm512_setzero_ps(), _CMP_LT_OQ);
  const __m512 num = _mm512_mask_mul_ps(x, negative, x, e);  // x, or x e where v < 0
  return _mm512_div_ps(num, _mm512_add_ps(_mm512_set1_ps(1.0f), e));
}

inline __m512 silu_ps(__m512 x) {
  const __m512 e = exp_ps(_mm512_sub_ps(_mm512_setzero_ps(), x));
  return _mm512_div_ps(x, _mm512_add_ps(_mm512_set1_ps(1.0f), e));
}

template <class F>
void row(float* d, const float* s, std::int64_t n, const float* bias, F f) {
  std::int64_t c = 0;
  for (; c + 16 <= n; c += 16) {
    __m512 x = _mm512_loadu_ps(s + c);
    if (bias) x = _mm512_add_ps(x, _mm512_loadu_ps(bias + c));
    _mm512_storeu_ps(d + c, f(x));
  }
  if (c < n) {
    const __mmask16 m = static_cast<__mmask16>((1u << (n - c)) - 1u);
    __m512 x = _mm512_maskz_loadu_ps(m, s + c);
    if (bias) x = _mm512_add_ps(x, _mm512_maskz_loadu_ps(m, bias + c));
    _mm512_mask_storeu_ps(d + c, m, f(x));
  }
}

}  // namespace

void gelu_tanh_row(float* dst, const float* src, std::int64_t n, const float* bias) {
  row(dst, src, n, bias, gelu_tanh_ps);
}

void silu_row(float* dst, const float* src, std::int64_t n, const float* bias) {
  row(dst, src, n, bias, silu_ps);
}

}  // namespace gen3d::models::kernels::avx512
