#include "models/kernels/fused.h"

#include <tbb/blocked_range2d.h>
#include <tbb/parallel_for.h>

#include <algorithm>
#include <cmath>
#include <vector>

#include "models/kernels/norms.h"

namespace gen3d::models::kernels {

namespace {
constexpr std::int64_t kGrain = 1 << 14;  // elements per task

// f(b, t) over batch x tokens, parallel when there is enough work.
template <class F>
void for_tokens(std::int64_t batch, std::int64_t tokens, std::int64_t dim, F f) {
  const std::int64_t per = std::max<std::int64_t>(1, kGrain / std::max<std::int64_t>(dim, 1));
  if (batch * tokens <= per) {
    for (std::int64_t b = 0; b < batch; ++b)
      for (std::int64_t t = 0; t < tokens; ++t) f(b, t);
    return;
  }
  tbb::parallel_for(tbb::blocked_range2d<std::int64_t>(0, batch, 1, 0, tokens, per),
                    [&](const tbb::blocked_range2d<std::int64_t>& r) {
                      for (std::int64_t b = r.rows().begin(); b < r.rows().end(); ++b)
                        for (std::int64_t t = r.cols().begin(); t < r.cols().end(); ++t) f(b, t);
                    });
}
}  // namespace

void ln_modulate(float* y, std::int64_t y_batch_stride, const float* x, std::int64_t x_batch_stride,
                 std::int64_t batch, std::int64_t tokens, std::int64_t dim, const float* shift,
                 const float* scale, std::int64_t mod_stride, float eps) {
  for_tokens(batch, tokens, dim, [&](std::int64_t b, std::int64_t t) {
    const float* xr = x + b * x_batch_stride + t * dim;
    float* yr = y + b * y_batch_stride + t * dim;
    const float* sh = shift + b * mod_stride;
    const float* sc = scale + b * mod_stride;
    float sum = 0.0f;
    for (std::int64_t i = 0; i < dim; ++i) sum += xr[i];
    const float mean = sum / static_cast<float>(dim);
    float sq = 0.0f;
    for (std::int64_t i = 0; i < dim; ++i) {
      const float d = xr[i] - mean;
      sq += d * d;
    }
    const float rstd = 1.0f / std::sqrt(sq / static_cast<float>(dim) + eps);
    for (std::int64_t i = 0; i < dim; ++i) yr[i] = (1.0f + sc[i]) * ((xr[i] - mean) * rstd) + sh[i];
  });
}

void gated_residual(float* h, std::int64_t h_batch_stride, const float* y,
                    std::int64_t y_batch_stride, std::int64_t batch, std::int64_t tokens,
                    std::int64_t dim, const float* gate, std::int64_t gate_stride) {
  for_tokens(batch, tokens, dim, [&](std::int64_t b, std::int64_t t) {
    float* hr = h + b * h_batch_stride + t * dim;
    const float* yr = y + b * y_batch_stride + t * dim;
    const float* g = gate + b * gate_stride;
    for (std::int64_t i = 0; i < dim; ++i) hr[i] += g[i] * yr[i];
  });
}

void qk_rmsnorm(float* qkv, std::int64_t rows, std::int64_t ld, std::int64_t heads,
                std::int64_t head_dim, std::int64_t head_stride, std::int64_t q_offset,
                std::int64_t k_offset, const float* q_scale, const float* k_scale, float eps) {
  for_tokens(1, rows, 2 * heads * head_dim, [&](std::int64_t, std::int64_t r) {
    float* row = qkv + r * ld;
    for (std::int64_t n = 0; n < heads; ++n) {
      float* q = row + q_offset + n * head_stride;
      float* k = row + k_offset + n * head_stride;
      rms_norm_row(q, q, head_dim, eps, q_scale);
      rms_norm_row(k, k, head_dim, eps, k_scale);
    }
  });
}

void bias_act(float* y, std::int64_t rows, std::int64_t cols, std::int64_t ld, const float* bias,
              Act act) {
  act_copy(act, y, ld, y, ld, rows, cols, bias);
}

namespace ref {

void ln_modulate(float* y, std::int64_t y_batch_stride, const float* x, std::int64_t x_batch_stride,
                 std::int64_t batch, std::int64_t tokens, std::int64_t dim, const float* shift,
                 const float* scale, std::int64_t mod_stride, float eps) {
  std::vector<float> ln(static_cast<std::size_t>(dim));
  for (std::int64_t b = 0; b < batch; ++b) {
    for (std::int64_t t = 0; t < tokens; ++t) {
      ref::layer_norm(ln.data(), dim, x + b * x_batch_stride + t * dim, dim, 1, dim, eps);
      float* yr = y + b * y_batch_stride + t * dim;
      for (std::int64_t i = 0; i < dim; ++i)
        yr[i] = (1.0f + scale[b * mod_stride + i]) * ln[static_cast<std::size_t>(i)] +
                shift[b * mod_stride + i];
    }
  }
}

void gated_residual(float* h, std::int64_t h_batch_stride, const float* y,
                    std::int64_t y_batch_stride, std::int64_t batch, std::int64_t tokens,
                    std::int64_t dim, const float* gate, std::int64_t gate_stride) {
  for (std::int64_t b = 0; b < batch; ++b)
    for (std::int64_t t = 0; t < tokens; ++t)
      for (std::int64_t i = 0; i < dim; ++i)
        h[b * h_batch_stride + t * dim + i] +=
            gate[b * gate_stride + i] * y[b * y_batch_stride + t * dim + i];
}

void qk_rmsnorm(float* qkv, std::int64_t rows, std::int64_t ld, std::int64_t heads,
                std::int64_t head_dim, std::int64_t head_stride, std::int64_t q_offset,
                std::int64_t k_offset, const float* q_scale, const float* k_scale, float eps) {
  for (std::int64_t r = 0; r < rows; ++r) {
    for (std::int64_t n = 0; n < heads; ++n) {
      float* q = qkv + r * ld + q_offset + n * head_stride;
      float* k = qkv + r * ld + k_offset + n * head_stride;
      ref::rms_norm(q, head_dim, q, head_dim, 1, head_dim, eps, q_scale);
      ref::rms_norm(k, head_dim, k, head_dim, 1, head_dim, eps, k_scale);
    }
  }
}

void bias_act(float* y, std::int64_t rows, std::int64_t cols, std::int64_t ld, const float* bias,
              Act act) {
  ref::act_copy(act, y, ld, y, ld, rows, cols, bias);
}

}  // namespace ref

}  // namespace gen3d::models::kernels
