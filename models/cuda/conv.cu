// Convolutions (im2col + cuBLASLt), GroupNorm and nearest ×2 upsampling on NHWC maps. Each
// mirrors its CPU twin in models/kernels/conv.cpp: the convolution rounds patches and weights to
// bf16 and accumulates in float32 as oneDNN's bf16 convolution does; GroupNorm takes the CPU's
// shifted double sums and its float32 formula per element.

#include <cuda_bf16.h>
#include <cuda_runtime.h>

#include <algorithm>
#include <cstdint>
#include <memory>
#include <string>

#include "models/core/error.h"
#include "models/cuda/conv.h"
#include "models/cuda/gemm.h"
#include "models/cuda/runtime.h"

namespace gen3d::models::cuda {

namespace {

constexpr int kThreads = 256;
constexpr unsigned kMaxGridY = 65535;
// The im2col buffer's bound: rows of output pixels per GEMM are chunked to stay under it.
constexpr i64 kMaxPatchBytes = i64{256} << 20;

// blockIdx.y walks rows (strided past the grid's limit), x covers a row's columns.
dim3 grid_rows(i64 rows, i64 cols) {
  const i64 x = (cols + kThreads - 1) / kThreads;
  return dim3(static_cast<unsigned>(std::clamp<i64>(x, 1, 65535)),
              static_cast<unsigned>(std::clamp<i64>(rows, 1, kMaxGridY)));
}

// A stream-ordered device buffer, freed on the stream when it goes out of scope.
struct StreamBuffer {
  void* p = nullptr;
  explicit StreamBuffer(std::size_t bytes, const char* what) {
    check(cudaMallocAsync(&p, bytes == 0 ? 256 : bytes, stream()), what);
  }
  ~StreamBuffer() { cudaFreeAsync(p, stream()); }
  StreamBuffer(const StreamBuffer&) = delete;
  StreamBuffer& operator=(const StreamBuffer&) = delete;
  template <typename T>
  T* as() const {
    return static_cast<T*>(p);
  }
};

struct PatchArgs {
  __nv_bfloat16* cols;  // [rows, kpad]
  const float* x;       // (batch, h, w, cin)
  i64 p0, rows;         // output pixels [p0, p0 + rows), flat over (batch, oh, ow)
  i64 h, w, cin, oh, ow, kw, k, kpad, stride, pad_top, pad_left;
};

// cols[r, (ky, kx, ci)] = bf16(x[n, oy·s - pad_top + ky, ox·s - pad_left + kx, ci]), zero outside
// the image and past k.
__global__ void im2col_kernel(PatchArgs a) {
  for (i64 r = blockIdx.y; r < a.rows; r += gridDim.y) {
    const i64 p = a.p0 + r;
    const i64 n = p / (a.oh * a.ow), rem = p - n * a.oh * a.ow;
    const i64 oy = rem / a.ow, ox = rem - oy * a.ow;
    const i64 iy0 = oy * a.stride - a.pad_top, ix0 = ox * a.stride - a.pad_left;
    const float* xn = a.x + n * a.h * a.w * a.cin;
    __nv_bfloat16* dst = a.cols + r * a.kpad;
    for (i64 col = blockIdx.x * static_cast<i64>(blockDim.x) + threadIdx.x; col < a.kpad;
         col += static_cast<i64>(gridDim.x) * blockDim.x) {
      float v = 0.0f;
      if (col < a.k) {
        const i64 tap = col / a.cin, ci = col - tap * a.cin;
        const i64 ky = tap / a.kw, kx = tap - ky * a.kw;
        const i64 iy = iy0 + ky, ix = ix0 + kx;
        if (iy >= 0 && iy < a.h && ix >= 0 && ix < a.w) v = xn[(iy * a.w + ix) * a.cin + ci];
      }
      dst[col] = __float2bfloat16_rn(v);
    }
  }
}

// Partial sums of one (split of pixels, group, sample): s = sum d, sq = sum d², d = double(x -
// shift) with the group's first value of the sample as the shift (the CPU's sums).
__global__ void group_stats_kernel(double* part, const float* x, i64 hw, i64 c, i64 cg,
                                   i64 per_split) {
  const i64 split = blockIdx.x, g = blockIdx.y, n = blockIdx.z;
  const i64 q0 = split * per_split, q1 = q0 + per_split < hw ? q0 + per_split : hw;
  const float* xn = x + n * hw * c;
  const float shift = xn[g * cg];
  double s = 0.0, sq = 0.0;
  const i64 count = q1 > q0 ? (q1 - q0) * cg : 0;
  for (i64 e = threadIdx.x; e < count; e += blockDim.x) {
    const i64 q = q0 + e / cg, ch = g * cg + e % cg;
    const double d = static_cast<double>(xn[q * c + ch] - shift);
    s += d;
    sq += d * d;
  }
  for (int o = 16; o > 0; o >>= 1) {
    s += __shfl_xor_sync(0xffffffffu, s, o);
    sq += __shfl_xor_sync(0xffffffffu, sq, o);
  }
  __shared__ double ws[2][32];
  const int warp = threadIdx.x / 32, lane = threadIdx.x % 32;
  if (lane == 0) {
    ws[0][warp] = s;
    ws[1][warp] = sq;
  }
  __syncthreads();
  if (threadIdx.x == 0) {
    double ts = 0.0, tq = 0.0;
    for (int i = 0; i < static_cast<int>(blockDim.x / 32); ++i) {
      ts += ws[0][i];
      tq += ws[1][i];
    }
    double* out = part + ((n * gridDim.y + g) * gridDim.x + split) * 2;
    out[0] = ts;
    out[1] = tq;
  }
}

// Per (sample, group): mean and rstd from the partial sums (in split order), then per channel
// the CPU's float32 coefficients: mu, a = rstd·gamma, off = beta and the shift.
__global__ void group_coeffs_kernel(float* coef, const double* part, const float* x, i64 batch,
                                    i64 hw, i64 c, i64 groups, i64 splits, float eps,
                                    const float* gamma, const float* beta) {
  const i64 i = blockIdx.x * static_cast<i64>(blockDim.x) + threadIdx.x;
  if (i >= batch * groups) return;
  const i64 n = i / groups, g = i - n * groups, cg = c / groups;
  double s = 0.0, sq = 0.0;
  for (i64 b = 0; b < splits; ++b) {
    s += part[(i * splits + b) * 2];
    sq += part[(i * splits + b) * 2 + 1];
  }
  const double count = static_cast<double>(hw * cg);
  const double md = s / count;
  const double var = fmax(0.0, sq / count - md * md);
  const double rstd = 1.0 / sqrt(var + static_cast<double>(eps));
  const float shift = x[n * hw * c + g * cg];
  // coef: [4, batch, c] = mu, a, off, shift.
  const i64 plane = batch * c;
  for (i64 ch = g * cg; ch < (g + 1) * cg; ++ch) {
    const i64 j = n * c + ch;
    coef[j] = static_cast<float>(md);
    coef[plane + j] = static_cast<float>(rstd * (gamma ? gamma[ch] : 1.0f));
    coef[2 * plane + j] = beta ? beta[ch] : 0.0f;
    coef[3 * plane + j] = shift;
  }
}

// y = ((x - shift) - mu) · a + off (then SiLU), rounded step by step as the CPU does.
__global__ void group_apply_kernel(float* y, const float* x, const float* coef, i64 batch, i64 hw,
                                   i64 c, bool silu) {
  const i64 rows = batch * hw, plane = batch * c;
  for (i64 r = blockIdx.y; r < rows; r += gridDim.y) {
    const i64 n = r / hw;
    const float* m = coef + n * c;
    const float* sc = m + plane;
    const float* of = m + 2 * plane;
    const float* sh = m + 3 * plane;
    for (i64 ch = blockIdx.x * static_cast<i64>(blockDim.x) + threadIdx.x; ch < c;
         ch += static_cast<i64>(gridDim.x) * blockDim.x) {
      const float d = __fsub_rn(__fsub_rn(x[r * c + ch], sh[ch]), m[ch]);
      float v = __fadd_rn(__fmul_rn(d, sc[ch]), of[ch]);
      if (silu) v = v / (1.0f + expf(-v));
      y[r * c + ch] = v;
    }
  }
}

// y[n, oy, ox, ch] = x[n, oy / 2, ox / 2, ch]; rows are output rows (n, oy).
__global__ void upsample2x_kernel(float* y, const float* x, i64 batch, i64 h, i64 w, i64 c) {
  const i64 rows = batch * 2 * h, cols = 2 * w * c;
  for (i64 r = blockIdx.y; r < rows; r += gridDim.y) {
    const i64 n = r / (2 * h), oy = r - n * 2 * h;
    const float* src = x + (n * h + oy / 2) * w * c;
    float* dst = y + r * cols;
    for (i64 col = blockIdx.x * static_cast<i64>(blockDim.x) + threadIdx.x; col < cols;
         col += static_cast<i64>(gridDim.x) * blockDim.x) {
      const i64 ox = col / c, ch = col - ox * c;
      dst[col] = src[(ox / 2) * c + ch];
    }
  }
}

}  // namespace

void conv2d(float* y, const float* x, i64 batch, i64 h, i64 w, const std::uint16_t* weight,
            const float* bias, i64 cout, i64 cin, i64 kh, i64 kw, const kernels::ConvGeometry& g) {
  const i64 oh = g.out_h(h, kh), ow = g.out_w(w, kw);
  if (batch <= 0 || oh <= 0 || ow <= 0 || cout <= 0) return;
  const i64 k = kh * kw * cin;
  if (k <= 0) throw ModelError("conv2d on the GPU: a convolution without inputs");
  const i64 pixels = batch * oh * ow;
  const bool pointwise = kh == 1 && kw == 1 && g.stride == 1 && g.pad_top == 0 &&
                         g.pad_bottom == 0 && g.pad_left == 0 && g.pad_right == 0;
  if (pointwise) {  // x already is the (pixels, cin) patch matrix
    gemm_bf16(y, cout, x, cin, weight, bias, pixels, cin, cout, kernels::Act::kNone);
    return;
  }
  const i64 kpad = gemm_padded_in(k);
  const i64 row_bytes = kpad * static_cast<i64>(sizeof(__nv_bfloat16));
  const i64 chunk = std::clamp<i64>(kMaxPatchBytes / row_bytes, 1, pixels);
  const StreamBuffer cols(static_cast<std::size_t>(chunk * row_bytes), "conv2d patch buffer");
  for (i64 p0 = 0; p0 < pixels; p0 += chunk) {
    const i64 rows = std::min(chunk, pixels - p0);
    const PatchArgs a{cols.as<__nv_bfloat16>(),
                      x,
                      p0,
                      rows,
                      h,
                      w,
                      cin,
                      oh,
                      ow,
                      kw,
                      k,
                      kpad,
                      g.stride,
                      g.pad_top,
                      g.pad_left};
    im2col_kernel<<<grid_rows(rows, kpad), kThreads, 0, stream()>>>(a);
    check_launch("conv2d (im2col)");
    gemm_bf16_staged(y + p0 * cout, cout, cols.as<std::uint16_t>(), weight, bias, rows, k, cout);
  }
}

void group_norm(float* y, const float* x, i64 batch, i64 hw, i64 c, i64 groups, float eps,
                const float* gamma, const float* beta, bool silu) {
  if (groups <= 0 || c % groups != 0)
    throw ModelError("group_norm: " + std::to_string(c) + " channels do not split into " +
                     std::to_string(groups) + " groups");
  if (batch <= 0 || hw <= 0 || c <= 0) return;
  if (groups > 65535 || batch > 65535)
    throw ModelError("group_norm on the GPU: " + std::to_string(batch) + " maps of " +
                     std::to_string(groups) + " groups are too many");
  const i64 cg = c / groups;
  // Splits of pixels per group: about 8 Ki values each, so small batches still fill the GPU.
  const i64 splits = std::clamp<i64>((hw * cg + 8191) / 8192, 1, std::min<i64>(hw, 1024));
  const i64 per_split = (hw + splits - 1) / splits;
  const StreamBuffer part(static_cast<std::size_t>(batch * groups * splits * 2) * sizeof(double),
                          "group_norm partial sums");
  const StreamBuffer coef(static_cast<std::size_t>(4 * batch * c) * sizeof(float),
                          "group_norm coefficients");
  group_stats_kernel<<<dim3(static_cast<unsigned>(splits), static_cast<unsigned>(groups),
                            static_cast<unsigned>(batch)),
                       kThreads, 0, stream()>>>(part.as<double>(), x, hw, c, cg, per_split);
  check_launch("group_norm (statistics)");
  const i64 pairs = batch * groups;
  group_coeffs_kernel<<<static_cast<unsigned>((pairs + 127) / 128), 128, 0, stream()>>>(
      coef.as<float>(), part.as<double>(), x, batch, hw, c, groups, splits, eps, gamma, beta);
  check_launch("group_norm (coefficients)");
  group_apply_kernel<<<grid_rows(batch * hw, c), kThreads, 0, stream()>>>(y, x, coef.as<float>(),
                                                                          batch, hw, c, silu);
  check_launch("group_norm");
}

void upsample_nearest2x(float* y, const float* x, i64 batch, i64 h, i64 w, i64 c) {
  if (batch * h * w * c == 0) return;
  upsample2x_kernel<<<grid_rows(batch * 2 * h, 2 * w * c), kThreads, 0, stream()>>>(y, x, batch, h,
                                                                                    w, c);
  check_launch("upsample_nearest2x");
}

}  // namespace gen3d::models::cuda
