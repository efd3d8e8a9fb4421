#include "models/kernels/quantize.h"

#include <tbb/blocked_range.h>
#include <tbb/parallel_for.h>

#include <algorithm>
#include <bit>
#include <cmath>
#include <limits>

#include "models/core/vector_clones.h"

namespace gen3d::models::kernels {

namespace {

using i64 = std::int64_t;

constexpr float kQMax = 127.0f;
constexpr i64 kGrain = 1 << 15;  // elements per task

// The largest |x| of a row, by the bits of |x|: for non-negative floats the integer order is the
// float order (a NaN compares above infinity), and an integer max reduction vectorizes.
GEN3D_VECTOR_CLONES std::uint32_t abs_max_bits(const float* x, i64 n) {
  std::uint32_t m = 0;
  for (i64 i = 0; i < n; ++i) m = std::max(m, std::bit_cast<std::uint32_t>(x[i]) & 0x7fffffffu);
  return m;
}

GEN3D_VECTOR_CLONES void scale_round(std::int8_t* q, const float* x, i64 n, float inv) {
  for (i64 i = 0; i < n; ++i) {
    const float v = std::clamp(std::nearbyint(x[i] * inv), -kQMax, kQMax);
    q[i] = static_cast<std::int8_t>(static_cast<int>(v));
  }
}

constexpr std::uint32_t kInfBits = 0x7f800000u;

void quantize_row(std::int8_t* q, float* scale, const float* x, i64 n) {
  const std::uint32_t bits = abs_max_bits(x, n);
  if (bits == 0 || bits >= kInfBits) {
    std::fill_n(q, n, std::int8_t{0});
    *scale = bits == 0 ? 0.0f : std::numeric_limits<float>::quiet_NaN();
    return;
  }
  const float amax = std::bit_cast<float>(bits);
  *scale = amax / kQMax;
  scale_round(q, x, n, kQMax / amax);
}

}  // namespace

void quantize_rows_s8(std::int8_t* q, i64 ldq, float* scale, const float* x, i64 ldx, i64 rows,
                      i64 cols) {
  if (rows <= 0 || cols <= 0) return;
  auto run = [&](i64 r0, i64 r1) {
    for (i64 r = r0; r < r1; ++r) quantize_row(q + r * ldq, scale + r, x + r * ldx, cols);
  };
  const i64 rows_per_task = std::max<i64>(1, kGrain / cols);
  if (rows <= rows_per_task) {
    run(0, rows);
    return;
  }
  tbb::parallel_for(tbb::blocked_range<i64>(0, rows, rows_per_task),
                    [&](const tbb::blocked_range<i64>& r) { run(r.begin(), r.end()); });
}

namespace ref {

void quantize_rows_s8(std::int8_t* q, i64 ldq, float* scale, const float* x, i64 ldx, i64 rows,
                      i64 cols) {
  for (i64 r = 0; r < rows; ++r) {
    const float* xr = x + r * ldx;
    std::int8_t* qr = q + r * ldq;
    float amax = 0.0f;
    bool finite = true;
    for (i64 c = 0; c < cols; ++c) {
      if (!std::isfinite(xr[c])) finite = false;
      amax = std::max(amax, std::abs(xr[c]));
    }
    if (!finite || amax == 0.0f) {
      for (i64 c = 0; c < cols; ++c) qr[c] = 0;
      scale[r] = finite ? 0.0f : std::numeric_limits<float>::quiet_NaN();
      continue;
    }
    scale[r] = amax / kQMax;
    const float inv = kQMax / amax;
    for (i64 c = 0; c < cols; ++c) {
      const long v = std::lrint(xr[c] * inv);  // ties to even (the default rounding mode)
      qr[c] = static_cast<std::int8_t>(std::clamp(v, -127L, 127L));
    }
  }
}

}  // namespace ref

}  // namespace gen3d::models::kernels
