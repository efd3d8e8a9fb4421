#include "models/kernels/conv.h"

#include <cblas.h>
#include <tbb/blocked_range.h>
#include <tbb/blocked_range2d.h>
#include <tbb/enumerable_thread_specific.h>
#include <tbb/parallel_for.h>
#include <tbb/task_arena.h>

#include <algorithm>
#include <cmath>
#include <cstring>
#include <string>
#include <vector>

#include "models/core/blas_threads.h"
#include "models/core/error.h"
#include "models/kernels/dnnl_matmul.h"
#include "models/kernels/elementwise.h"
#include "models/kernels/flops.h"
#include "models/kernels/linear.h"

namespace gen3d::models::kernels {

namespace {

// im2col scratch per task is bounded (4 MiB) so that full-size maps never materialize their
// whole patch matrix; within that bound bigger blocks amortize OpenBLAS's packing of the weight.
constexpr std::int64_t kScratchFloats = (4 << 20) / sizeof(float);
constexpr std::int64_t kMaxBlockRows = 512;
constexpr std::int64_t kMinBlockRows = 64;
constexpr std::int64_t kMinPanel = 64;
// Elements per task of the memory-bound loops.
constexpr std::int64_t kGrain = 1 << 15;

inline float silu(float v) {
  return v / (1.0f + std::exp(-v));
}

// Task blocking: pixel blocks as large as the scratch bound allows, shrunk (not below
// kMinBlockRows) until there are several tasks per worker; small maps with many channels then
// also split the output channels into panels (each panel task re-gathers its pixels, which is
// cheap next to the GEMM).
void conv_blocking(std::int64_t pixels, std::int64_t k, std::int64_t cout, std::int64_t* rows,
                   std::int64_t* panel) {
  const std::int64_t want = 4 * static_cast<std::int64_t>(tbb::this_task_arena::max_concurrency());
  std::int64_t r =
      std::clamp<std::int64_t>(kScratchFloats / std::max<std::int64_t>(k, 1), 1, kMaxBlockRows);
  auto blocks = [&] { return (pixels + r - 1) / r; };
  while (r > kMinBlockRows && blocks() < want) r /= 2;
  std::int64_t n = cout;
  while (n > kMinPanel && blocks() * ((cout + n - 1) / n) < want) n = (n + 1) / 2;
  *rows = std::max<std::int64_t>(r, 1);
  *panel = n;
}

// Copies the receptive fields of output pixels [p0, p0 + m) (flat over batch, oh, ow) into
// `cols` as rows of (kh, kw, cin), zeros where the window leaves the padded image.
void gather_patches(float* cols, const float* x, std::int64_t h, std::int64_t w, std::int64_t oh,
                    std::int64_t ow, const ConvWeight& wt, const ConvGeometry& g, std::int64_t p0,
                    std::int64_t m) {
  const std::int64_t cin = wt.cin, k = wt.kh * wt.kw * cin;
  const std::size_t row_bytes = static_cast<std::size_t>(cin) * sizeof(float);
  for (std::int64_t i = 0; i < m; ++i) {
    const std::int64_t p = p0 + i;
    const std::int64_t n = p / (oh * ow), rem = p % (oh * ow);
    const std::int64_t oy = rem / ow, ox = rem % ow;
    const std::int64_t iy0 = oy * g.stride - g.pad_top, ix0 = ox * g.stride - g.pad_left;
    const float* xn = x + n * h * w * cin;
    float* dst = cols + i * k;
    for (std::int64_t ky = 0; ky < wt.kh; ++ky) {
      const std::int64_t iy = iy0 + ky;
      if (iy < 0 || iy >= h) {
        std::memset(dst, 0, row_bytes * static_cast<std::size_t>(wt.kw));
        dst += wt.kw * cin;
        continue;
      }
      for (std::int64_t kx = 0; kx < wt.kw; ++kx, dst += cin) {
        const std::int64_t ix = ix0 + kx;
        if (ix < 0 || ix >= w) {
          std::memset(dst, 0, row_bytes);
        } else {
          std::memcpy(dst, xn + (iy * w + ix) * cin, row_bytes);
        }
      }
    }
  }
}

void add_bias(float* y, std::int64_t ldy, const float* bias, std::int64_t m, std::int64_t n) {
  if (!bias) return;
  for (std::int64_t i = 0; i < m; ++i) {
    float* row = y + i * ldy;
    for (std::int64_t j = 0; j < n; ++j) row[j] += bias[j];
  }
}

}  // namespace

ConvWeight pack_conv_weight(const float* oihw, const float* bias, std::int64_t cout,
                            std::int64_t cin, std::int64_t kh, std::int64_t kw) {
  ConvWeight p;
  p.cout = cout;
  p.cin = cin;
  p.kh = kh;
  p.kw = kw;
  p.w.resize(static_cast<std::size_t>(cout * kh * kw * cin));
  for (std::int64_t o = 0; o < cout; ++o)
    for (std::int64_t i = 0; i < cin; ++i)
      for (std::int64_t a = 0; a < kh; ++a)
        for (std::int64_t b = 0; b < kw; ++b)
          p.w[static_cast<std::size_t>(((o * kh + a) * kw + b) * cin + i)] =
              oihw[((o * cin + i) * kh + a) * kw + b];
  if (bias) p.bias.assign(bias, bias + cout);
  return p;
}

void to_bf16(ConvWeight& wt) {
  if (wt.w.empty()) return;
  wt.bf16 = std::make_shared<const Bf16ConvWeight>(
      wt.w.data(), wt.bias.empty() ? nullptr : wt.bias.data(), wt.cout, wt.cin, wt.kh, wt.kw);
  std::vector<float>().swap(wt.w);  // release the float32 copy (`= {}` would keep its capacity)
  std::vector<float>().swap(wt.bias);
}

void conv2d(float* y, const float* x, std::int64_t batch, std::int64_t h, std::int64_t w,
            const ConvWeight& wt, const ConvGeometry& g) {
  const std::int64_t oh = g.out_h(h, wt.kh), ow = g.out_w(w, wt.kw);
  if (batch <= 0 || oh <= 0 || ow <= 0 || wt.cout <= 0) return;
  if (wt.bf16) {
    conv2d_bf16(y, x, batch, h, w, *wt.bf16, g.stride, g.pad_top, g.pad_bottom, g.pad_left,
                g.pad_right);
    return;
  }
  const std::int64_t pixels = batch * oh * ow, cout = wt.cout;
  const float* bias = wt.bias.empty() ? nullptr : wt.bias.data();
  const bool pointwise = wt.kh == 1 && wt.kw == 1 && g.stride == 1 && g.pad_top == 0 &&
                         g.pad_bottom == 0 && g.pad_left == 0 && g.pad_right == 0;
  if (pointwise) {  // x already is the (pixels, cin) patch matrix
    linear(y, cout, x, wt.cin, wt.w.data(), bias, pixels, wt.cin, cout);
    return;
  }
  const std::int64_t k = wt.kh * wt.kw * wt.cin;
  count_flops(2.0 * static_cast<double>(pixels) * k * cout);
  if (k == 0) {
    for (std::int64_t p = 0; p < pixels; ++p)
      for (std::int64_t o = 0; o < cout; ++o) y[p * cout + o] = bias ? bias[o] : 0.0f;
    return;
  }
  ensure_serial_blas();
  static tbb::enumerable_thread_specific<std::vector<float>> scratch;
  std::int64_t rows, panel;
  conv_blocking(pixels, k, cout, &rows, &panel);
  auto run = [&](std::int64_t p0, std::int64_t p1, std::int64_t o0, std::int64_t o1) {
    std::vector<float>& cols = scratch.local();
    for (std::int64_t b0 = p0; b0 < p1; b0 += rows) {
      const std::int64_t m = std::min(rows, p1 - b0);
      if (cols.size() < static_cast<std::size_t>(m * k))
        cols.resize(static_cast<std::size_t>(m * k));
      gather_patches(cols.data(), x, h, w, oh, ow, wt, g, b0, m);
      float* yb = y + b0 * cout + o0;
      cblas_sgemm(CblasRowMajor, CblasNoTrans, CblasTrans, static_cast<int>(m),
                  static_cast<int>(o1 - o0), static_cast<int>(k), 1.0f, cols.data(),
                  static_cast<int>(k), wt.w.data() + o0 * k, static_cast<int>(k), 0.0f, yb,
                  static_cast<int>(cout));
      add_bias(yb, cout, bias ? bias + o0 : nullptr, m, o1 - o0);
    }
  };
  if (pixels <= rows && panel >= cout) {
    run(0, pixels, 0, cout);
    return;
  }
  tbb::parallel_for(
      tbb::blocked_range2d<std::int64_t>(0, pixels, rows, 0, cout, panel),
      [&](const tbb::blocked_range2d<std::int64_t>& r) {
        run(r.rows().begin(), r.rows().end(), r.cols().begin(), r.cols().end());
      },
      tbb::simple_partitioner());
}

void group_norm(float* y, const float* x, std::int64_t batch, std::int64_t hw, std::int64_t c,
                std::int64_t groups, float eps, const float* gamma, const float* beta,
                bool silu_out) {
  if (groups <= 0 || c % groups != 0)
    throw ModelError("group_norm: " + std::to_string(c) + " channels do not split into " +
                     std::to_string(groups) + " groups");
  if (batch <= 0 || hw <= 0 || c <= 0) return;
  const std::int64_t cg = c / groups;
  // Statistics: per (sample, block of pixels) partial sums per channel, reduced in block order
  // (deterministic). Blocks of pixels rather than one task per group keep the reads contiguous
  // (a group is a narrow strided slice of every pixel). Sums are of (x - shift) in double, with
  // a per-group shift taken from the data, so E[d^2] - E[d]^2 does not cancel.
  const std::int64_t bpx = std::max<std::int64_t>(1, kGrain / c);
  const std::int64_t nblk = (hw + bpx - 1) / bpx;
  std::vector<double> part(static_cast<std::size_t>(batch * nblk * 2 * c));
  std::vector<float> shift(static_cast<std::size_t>(batch * c));
  for (std::int64_t n = 0; n < batch; ++n)
    for (std::int64_t ch = 0; ch < c; ++ch)
      shift[static_cast<std::size_t>(n * c + ch)] = x[n * hw * c + (ch / cg) * cg];
  tbb::parallel_for(tbb::blocked_range<std::int64_t>(0, batch * nblk, 1),
                    [&](const tbb::blocked_range<std::int64_t>& r) {
                      for (std::int64_t t = r.begin(); t < r.end(); ++t) {
                        const std::int64_t n = t / nblk, b = t % nblk;
                        const std::int64_t q0 = b * bpx, q1 = std::min(hw, q0 + bpx);
                        double* s = part.data() + t * 2 * c;
                        double* sq = s + c;
                        const float* sh = shift.data() + n * c;
                        for (std::int64_t q = q0; q < q1; ++q) {
                          const float* row = x + (n * hw + q) * c;
                          for (std::int64_t ch = 0; ch < c; ++ch) {
                            const double d = static_cast<double>(row[ch] - sh[ch]);
                            s[ch] += d;
                            sq[ch] += d * d;
                          }
                        }
                      }
                    });
  // Per-channel y = ((x - shift) - (mean - shift)) * scale + beta: x - shift is exact for data
  // near the shift and mean - shift is small, so float rounding stays relative to the
  // normalized value even when the mean is large.
  std::vector<float> mu(static_cast<std::size_t>(batch * c)), a(mu.size()), off(mu.size());
  const double count = static_cast<double>(hw * cg);
  for (std::int64_t n = 0; n < batch; ++n) {
    for (std::int64_t gi = 0; gi < groups; ++gi) {
      double s = 0.0, sq = 0.0;
      for (std::int64_t b = 0; b < nblk; ++b) {
        const double* p = part.data() + (n * nblk + b) * 2 * c;
        for (std::int64_t ch = gi * cg; ch < (gi + 1) * cg; ++ch) {
          s += p[ch];
          sq += p[c + ch];
        }
      }
      const double md = s / count;
      const double var = std::max(0.0, sq / count - md * md);
      const double rstd = 1.0 / std::sqrt(var + static_cast<double>(eps));
      for (std::int64_t ch = gi * cg; ch < (gi + 1) * cg; ++ch) {
        const auto i = static_cast<std::size_t>(n * c + ch);
        mu[i] = static_cast<float>(md);
        a[i] = static_cast<float>(rstd * (gamma ? gamma[ch] : 1.0f));
        off[i] = beta ? beta[ch] : 0.0f;
      }
    }
  }
  const std::int64_t rows = batch * hw;
  parallel_chunks(
      rows,
      [&](std::int64_t r0, std::int64_t r1) {
        for (std::int64_t r = r0; r < r1; ++r) {
          const std::int64_t n = r / hw;
          const float* m = mu.data() + n * c;
          const float* sh = shift.data() + n * c;
          const float* sc = a.data() + n * c;
          const float* of = off.data() + n * c;
          const float* xi = x + r * c;
          float* yo = y + r * c;
          if (silu_out) {
            for (std::int64_t ch = 0; ch < c; ++ch)
              yo[ch] = silu(((xi[ch] - sh[ch]) - m[ch]) * sc[ch] + of[ch]);
          } else {
            for (std::int64_t ch = 0; ch < c; ++ch)
              yo[ch] = ((xi[ch] - sh[ch]) - m[ch]) * sc[ch] + of[ch];
          }
        }
      },
      bpx);
}

void upsample_nearest2x(float* y, const float* x, std::int64_t batch, std::int64_t h,
                        std::int64_t w, std::int64_t c) {
  const std::size_t bytes = static_cast<std::size_t>(c) * sizeof(float);
  parallel_chunks(
      batch * h,
      [&](std::int64_t r0, std::int64_t r1) {
        for (std::int64_t r = r0; r < r1; ++r) {  // r = n * h + iy
          const float* src = x + r * w * c;
          float* d0 = y + (2 * r) * (2 * w) * c;
          for (std::int64_t ix = 0; ix < w; ++ix) {
            std::memcpy(d0 + (2 * ix) * c, src + ix * c, bytes);
            std::memcpy(d0 + (2 * ix + 1) * c, src + ix * c, bytes);
          }
          std::memcpy(d0 + 2 * w * c, d0, 2 * static_cast<std::size_t>(w) * bytes);
        }
      },
      std::max<std::int64_t>(1, kGrain / std::max<std::int64_t>(1, w * c)));
}

void nchw_to_nhwc(float* y, const float* x, std::int64_t batch, std::int64_t c, std::int64_t h,
                  std::int64_t w) {
  const std::int64_t hw = h * w;
  parallel_chunks(
      batch * hw,
      [&](std::int64_t p0, std::int64_t p1) {
        for (std::int64_t p = p0; p < p1; ++p) {
          const std::int64_t n = p / hw, q = p % hw;
          const float* src = x + n * c * hw + q;
          float* dst = y + p * c;
          for (std::int64_t ch = 0; ch < c; ++ch) dst[ch] = src[ch * hw];
        }
      },
      std::max<std::int64_t>(1, kGrain / std::max<std::int64_t>(1, c)));
}

void nhwc_to_nchw(float* y, const float* x, std::int64_t batch, std::int64_t c, std::int64_t h,
                  std::int64_t w) {
  const std::int64_t hw = h * w;
  parallel_chunks(
      batch * c,
      [&](std::int64_t r0, std::int64_t r1) {
        for (std::int64_t r = r0; r < r1; ++r) {
          const std::int64_t n = r / c, ch = r % c;
          const float* src = x + n * hw * c + ch;
          float* dst = y + r * hw;
          for (std::int64_t q = 0; q < hw; ++q) dst[q] = src[q * c];
        }
      },
      std::max<std::int64_t>(1, kGrain / std::max<std::int64_t>(1, hw)));
}

namespace ref {

void conv2d(float* y, const float* x, std::int64_t batch, std::int64_t h, std::int64_t w,
            const ConvWeight& wt, const ConvGeometry& g) {
  const std::int64_t oh = g.out_h(h, wt.kh), ow = g.out_w(w, wt.kw), cin = wt.cin;
  for (std::int64_t n = 0; n < batch; ++n)
    for (std::int64_t oy = 0; oy < oh; ++oy)
      for (std::int64_t ox = 0; ox < ow; ++ox)
        for (std::int64_t o = 0; o < wt.cout; ++o) {
          double acc = wt.bias.empty() ? 0.0 : wt.bias[static_cast<std::size_t>(o)];
          for (std::int64_t ky = 0; ky < wt.kh; ++ky) {
            const std::int64_t iy = oy * g.stride - g.pad_top + ky;
            if (iy < 0 || iy >= h) continue;
            for (std::int64_t kx = 0; kx < wt.kw; ++kx) {
              const std::int64_t ix = ox * g.stride - g.pad_left + kx;
              if (ix < 0 || ix >= w) continue;
              const float* xp = x + ((n * h + iy) * w + ix) * cin;
              const float* wp = wt.w.data() + ((o * wt.kh + ky) * wt.kw + kx) * cin;
              for (std::int64_t i = 0; i < cin; ++i)
                acc += static_cast<double>(xp[i]) * static_cast<double>(wp[i]);
            }
          }
          y[((n * oh + oy) * ow + ox) * wt.cout + o] = static_cast<float>(acc);
        }
}

void group_norm(float* y, const float* x, std::int64_t batch, std::int64_t hw, std::int64_t c,
                std::int64_t groups, float eps, const float* gamma, const float* beta,
                bool silu_out) {
  const std::int64_t cg = c / groups;
  for (std::int64_t n = 0; n < batch; ++n)
    for (std::int64_t gi = 0; gi < groups; ++gi) {
      double mean = 0.0;
      for (std::int64_t q = 0; q < hw; ++q)
        for (std::int64_t ch = gi * cg; ch < (gi + 1) * cg; ++ch) mean += x[(n * hw + q) * c + ch];
      mean /= static_cast<double>(hw * cg);
      double var = 0.0;
      for (std::int64_t q = 0; q < hw; ++q)
        for (std::int64_t ch = gi * cg; ch < (gi + 1) * cg; ++ch) {
          const double d = x[(n * hw + q) * c + ch] - mean;
          var += d * d;
        }
      var /= static_cast<double>(hw * cg);
      const double rstd = 1.0 / std::sqrt(var + static_cast<double>(eps));
      for (std::int64_t q = 0; q < hw; ++q)
        for (std::int64_t ch = gi * cg; ch < (gi + 1) * cg; ++ch) {
          const std::int64_t i = (n * hw + q) * c + ch;
          double v = (x[i] - mean) * rstd;
          if (gamma) v *= gamma[ch];
          if (beta) v += beta[ch];
          if (silu_out) v = v / (1.0 + std::exp(-v));
          y[i] = static_cast<float>(v);
        }
    }
}

}  // namespace ref

}  // namespace gen3d::models::kernels
