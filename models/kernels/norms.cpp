#include "models/kernels/norms.h"

#include <tbb/blocked_range.h>
#include <tbb/parallel_for.h>

#include <algorithm>
#include <cmath>

namespace gen3d::models::kernels {

namespace {
constexpr std::int64_t kGrain = 1 << 14;  // elements per task

template <class F>
void for_rows(std::int64_t rows, std::int64_t dim, F f) {
  const std::int64_t per = std::max<std::int64_t>(1, kGrain / std::max<std::int64_t>(dim, 1));
  if (rows <= per) {
    for (std::int64_t r = 0; r < rows; ++r) f(r);
    return;
  }
  tbb::parallel_for(tbb::blocked_range<std::int64_t>(0, rows, per),
                    [&](const tbb::blocked_range<std::int64_t>& br) {
                      for (std::int64_t r = br.begin(); r < br.end(); ++r) f(r);
                    });
}
}  // namespace

void layer_norm_row(float* y, const float* x, std::int64_t dim, float eps, const float* gamma,
                    const float* beta) {
  float sum = 0.0f;
  for (std::int64_t i = 0; i < dim; ++i) sum += x[i];
  const float mean = sum / static_cast<float>(dim);
  float sq = 0.0f;
  for (std::int64_t i = 0; i < dim; ++i) {
    const float d = x[i] - mean;
    sq += d * d;
  }
  const float rstd = 1.0f / std::sqrt(sq / static_cast<float>(dim) + eps);
  if (gamma && beta) {
    for (std::int64_t i = 0; i < dim; ++i) y[i] = (x[i] - mean) * rstd * gamma[i] + beta[i];
  } else if (gamma) {
    for (std::int64_t i = 0; i < dim; ++i) y[i] = (x[i] - mean) * rstd * gamma[i];
  } else if (beta) {
    for (std::int64_t i = 0; i < dim; ++i) y[i] = (x[i] - mean) * rstd + beta[i];
  } else {
    for (std::int64_t i = 0; i < dim; ++i) y[i] = (x[i] - mean) * rstd;
  }
}

void rms_norm_row(float* y, const float* x, std::int64_t dim, float eps, const float* scale) {
  float sq = 0.0f;
  for (std::int64_t i = 0; i < dim; ++i) sq += x[i] * x[i];
  const float rrms = 1.0f / std::sqrt(sq / static_cast<float>(dim) + eps);
  if (scale) {
    for (std::int64_t i = 0; i < dim; ++i) y[i] = (x[i] * rrms) * scale[i];
  } else {
    for (std::int64_t i = 0; i < dim; ++i) y[i] = x[i] * rrms;
  }
}

void layer_norm(float* y, std::int64_t ldy, const float* x, std::int64_t ldx, std::int64_t rows,
                std::int64_t dim, float eps, const float* gamma, const float* beta) {
  for_rows(rows, dim, [&](std::int64_t r) {
    layer_norm_row(y + r * ldy, x + r * ldx, dim, eps, gamma, beta);
  });
}

void rms_norm(float* y, std::int64_t ldy, const float* x, std::int64_t ldx, std::int64_t rows,
              std::int64_t dim, float eps, const float* scale) {
  for_rows(rows, dim,
           [&](std::int64_t r) { rms_norm_row(y + r * ldy, x + r * ldx, dim, eps, scale); });
}

namespace ref {

void layer_norm(float* y, std::int64_t ldy, const float* x, std::int64_t ldx, std::int64_t rows,
                std::int64_t dim, float eps, const float* gamma, const float* beta) {
  for (std::int64_t r = 0; r < rows; ++r) {
    const float* xr = x + r * ldx;
    double mean = 0.0;
    for (std::int64_t i = 0; i < dim; ++i) mean += xr[i];
    mean /= static_cast<double>(dim);
    double var = 0.0;
    for (std::int64_t i = 0; i < dim; ++i) var += (xr[i] - mean) * (xr[i] - mean);
    var /= static_cast<double>(dim);
    const double rstd = 1.0 / std::sqrt(var + static_cast<double>(eps));
    for (std::int64_t i = 0; i < dim; ++i) {
      double v = (xr[i] - mean) * rstd;
      if (gamma) v *= gamma[i];
      if (beta) v += beta[i];
      y[r * ldy + i] = static_cast<float>(v);
    }
  }
}

void rms_norm(float* y, std::int64_t ldy, const float* x, std::int64_t ldx, std::int64_t rows,
              std::int64_t dim, float eps, const float* scale) {
  for (std::int64_t r = 0; r < rows; ++r) {
    const float* xr = x + r * ldx;
    double ms = 0.0;
    for (std::int64_t i = 0; i < dim; ++i) ms += static_cast<double>(xr[i]) * xr[i];
    ms /= static_cast<double>(dim);
    const double rrms = 1.0 / std::sqrt(ms + static_cast<double>(eps));
    for (std::int64_t i = 0; i < dim; ++i)
      y[r * ldy + i] = static_cast<float>(xr[i] * rrms * (scale ? scale[i] : 1.0f));
  }
}

}  // namespace ref

}  // namespace gen3d::models::kernels
