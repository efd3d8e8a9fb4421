// OpenCV's u8 cv::resize, re-implemented from the recipes of the reference build (OpenCV 4.6,
// x86 SSE2). Float steps are written one operation per statement on purpose: the recipes are
// exact float32 operation sequences, and a fused multiply-add would change the last bit (the
// library is also built with -ffp-contract=off).
#include "image/resize_u8.h"

#include <algorithm>
#include <cmath>
#include <cstdint>
#include <vector>

#include "image/check.h"

namespace gen3d::image {

namespace {

using u8 = std::uint8_t;

constexpr int kCoefBits = 11;  // OpenCV INTER_RESIZE_COEF_BITS
constexpr int kCoefScale = 1 << kCoefBits;

// OpenCV cvRound / saturate_cast<T>(float): round half to even (default FP environment).
inline int rne(double v) {
  return static_cast<int>(std::nearbyint(v));
}
inline u8 clamp_u8(int v) {
  return static_cast<u8>(std::clamp(v, 0, 255));
}

// ---- INTER_AREA, regime A (box averaging, float32) -------------------------------------------

struct AreaTap {
  int dst;
  int src;
  float weight;
};

// Taps of one axis, grouped by destination index, in OpenCV's order (computeResizeAreaTab).
std::vector<AreaTap> area_taps(int n, int m) {
  const double inv = static_cast<double>(m) / n;
  const double s = 1.0 / inv;
  std::vector<AreaTap> taps;
  for (int d = 0; d < m; ++d) {
    const double f1 = d * s;
    const double f2 = f1 + s;
    const double cell = std::min(s, n - f1);
    int i1 = static_cast<int>(std::ceil(f1));
    const int i2 = std::min(static_cast<int>(std::floor(f2)), n - 1);
    i1 = std::min(i1, i2);
    if (i1 - f1 > 1e-3) taps.push_back({d, i1 - 1, static_cast<float>((i1 - f1) / cell)});
    for (int i = i1; i < i2; ++i) taps.push_back({d, i, static_cast<float>(1.0 / cell)});
    if (f2 - i2 > 1e-3)
      taps.push_back({d, i2, static_cast<float>(std::min(std::min(f2 - i2, 1.0), cell) / cell)});
  }
  return taps;
}

ImageU8 area_shrink(const ImageU8& src, int W, int H) {
  const int cn = src.channels;
  const std::vector<AreaTap> xt = area_taps(src.width, W);
  const std::vector<AreaTap> yt = area_taps(src.height, H);
  ImageU8 dst(W, H, cn);
  const std::size_t row_len = static_cast<std::size_t>(W) * cn;
  std::vector<float> buf(row_len), sum(row_len);
  std::size_t j = 0;
  for (int dy = 0; dy < H; ++dy) {
    bool first = true;
    for (; j < yt.size() && yt[j].dst == dy; ++j) {
      const u8* s = src.row(yt[j].src);
      std::fill(buf.begin(), buf.end(), 0.0f);
      for (const AreaTap& t : xt)
        for (int c = 0; c < cn; ++c) {
          const float p = static_cast<float>(s[t.src * cn + c]) * t.weight;
          buf[static_cast<std::size_t>(t.dst) * cn + c] += p;
        }
      const float beta = yt[j].weight;
      for (std::size_t k = 0; k < row_len; ++k) {
        const float p = beta * buf[k];
        sum[k] = first ? p : sum[k] + p;
      }
      first = false;
    }
    u8* d = dst.row(dy);
    for (std::size_t k = 0; k < row_len; ++k) d[k] = clamp_u8(rne(sum[k]));
  }
  return dst;
}

// Integer scale factors in both axes (resizeAreaFast): block sums; 2x2 rounds half up like
// OpenCV's dedicated path, other factors round sum * float(1 / area) half to even.
ImageU8 area_fast(const ImageU8& src, int W, int H, int kx, int ky) {
  const int cn = src.channels;
  ImageU8 dst(W, H, cn);
  const float scale = 1.0f / static_cast<float>(kx * ky);
  for (int dy = 0; dy < H; ++dy) {
    u8* d = dst.row(dy);
    for (int dx = 0; dx < W; ++dx)
      for (int c = 0; c < cn; ++c) {
        int sum = 0;
        for (int y = 0; y < ky; ++y) {
          const u8* s = src.row(dy * ky + y);
          for (int x = 0; x < kx; ++x) sum += s[(dx * kx + x) * cn + c];
        }
        d[dx * cn + c] = (kx == 2 && ky == 2) ? static_cast<u8>((sum + 2) >> 2)
                                              : clamp_u8(rne(static_cast<float>(sum) * scale));
      }
  }
  return dst;
}

// ---- fixed-point separable resizes (INTER_AREA enlarging = linear, INTER_CUBIC) ---------------

struct AxisTaps {
  int ksize = 0;
  std::vector<int> index;   // [m * ksize] clamped source indices
  std::vector<short> coef;  // [m * ksize] 11-bit weights
};

// OpenCV's "area" linear coordinates (resize() with INTER_AREA when not shrinking in both axes).
AxisTaps area_linear_axis(int n, int m) {
  const double inv = static_cast<double>(m) / n;
  const double s = 1.0 / inv;
  AxisTaps t;
  t.ksize = 2;
  for (int d = 0; d < m; ++d) {
    int i = static_cast<int>(std::floor(d * s));
    float f = static_cast<float>((d + 1) - (i + 1) * inv);
    f = f <= 0 ? 0.0f : f - std::floor(f);
    if (i < 0) {
      i = 0;
      f = 0.0f;
    }
    if (i >= n - 1) {
      i = n - 1;
      f = 0.0f;
    }
    const float one_minus = 1.0f - f;
    t.index.push_back(i);
    t.index.push_back(std::min(i + 1, n - 1));
    t.coef.push_back(static_cast<short>(rne(one_minus * kCoefScale)));
    t.coef.push_back(static_cast<short>(rne(f * kCoefScale)));
  }
  return t;
}

// Keys cubic weights (A = -0.75), float32 ops as OpenCV's interpolateCubic.
void cubic_coeffs(float x, float c[4]) {
  const float A = -0.75f;
  const float x1 = x + 1.0f;
  const float ox = 1.0f - x;
  c[0] = ((A * x1 - 5.0f * A) * x1 + 8.0f * A) * x1 - 4.0f * A;
  c[1] = ((A + 2.0f) * x - (A + 3.0f)) * x * x + 1.0f;
  c[2] = ((A + 2.0f) * ox - (A + 3.0f)) * ox * ox + 1.0f;
  c[3] = 1.0f - c[0] - c[1] - c[2];
}

AxisTaps cubic_axis(int n, int m) {
  const double inv = static_cast<double>(m) / n;
  const double s = 1.0 / inv;
  AxisTaps t;
  t.ksize = 4;
  for (int d = 0; d < m; ++d) {
    float f = static_cast<float>((d + 0.5) * s - 0.5);
    const int i = static_cast<int>(std::floor(f));
    f -= static_cast<float>(i);
    float c[4];
    cubic_coeffs(f, c);
    for (int k = 0; k < 4; ++k) {
      t.index.push_back(std::clamp(i - 1 + k, 0, n - 1));
      t.coef.push_back(static_cast<short>(rne(c[k] * kCoefScale)));
    }
  }
  return t;
}

// Horizontal pass of one source row: D[dx * cn + c] = sum_k w_k src[idx_k * cn + c] (int32).
void horizontal(const u8* s, int cn, const AxisTaps& xt, int W, int* D) {
  for (int dx = 0; dx < W; ++dx) {
    const int* idx = &xt.index[static_cast<std::size_t>(dx) * xt.ksize];
    const short* w = &xt.coef[static_cast<std::size_t>(dx) * xt.ksize];
    for (int c = 0; c < cn; ++c) {
      int acc = 0;
      for (int k = 0; k < xt.ksize; ++k) acc += w[k] * s[idx[k] * cn + c];
      D[dx * cn + c] = acc;
    }
  }
}

// OpenCV's cubic vertical pass is vectorized (float32, SSE2: 8 outputs per block while
// x <= width - 8) with a scalar integer tail for the last width % 8 values of a row; both are
// reproduced (checked against cv::resize 4.6 on random sizes). The linear ("area enlarge")
// vertical pass uses the SIMD rounding on every value (checked against the goldens and cv::resize).
int cubic_simd_end(int width) {
  int x = 0;
  for (; x <= width - 8; x += 8) {
  }
  return x;
}

ImageU8 resize_fixed(const ImageU8& src, int W, int H, const AxisTaps& xt, const AxisTaps& yt) {
  const int cn = src.channels;
  const int width = W * cn;
  ImageU8 dst(W, H, cn);
  // Horizontal rows cached per source row (a source row feeds several output rows).
  std::vector<std::vector<int>> rows(static_cast<std::size_t>(src.height));
  auto hrow = [&](int y) -> const int* {
    auto& r = rows[static_cast<std::size_t>(y)];
    if (r.empty()) {
      r.resize(static_cast<std::size_t>(width));
      horizontal(src.row(y), cn, xt, W, r.data());
    }
    return r.data();
  };
  const int k = yt.ksize;
  if (k == 2) {
    for (int dy = 0; dy < H; ++dy) {
      const int* D0 = hrow(yt.index[static_cast<std::size_t>(dy) * 2]);
      const int* D1 = hrow(yt.index[static_cast<std::size_t>(dy) * 2 + 1]);
      const int b0 = yt.coef[static_cast<std::size_t>(dy) * 2];
      const int b1 = yt.coef[static_cast<std::size_t>(dy) * 2 + 1];
      u8* d = dst.row(dy);
      for (int x = 0; x < width; ++x) {
        // v_mul_hi on (D >> 4) as int16, then a rounding shift by 2 (not (sum + 2^21) >> 22).
        d[x] = clamp_u8(((((D0[x] >> 4) * b0) >> 16) + (((D1[x] >> 4) * b1) >> 16) + 2) >> 2);
      }
    }
  } else {
    const int simd_end = cubic_simd_end(width);
    const float unit = 1.0f / static_cast<float>(kCoefScale * kCoefScale);
    for (int dy = 0; dy < H; ++dy) {
      const int* D[4];
      int b[4];
      float bf[4];
      for (int j = 0; j < 4; ++j) {
        D[j] = hrow(yt.index[static_cast<std::size_t>(dy) * 4 + j]);
        b[j] = yt.coef[static_cast<std::size_t>(dy) * 4 + j];
        bf[j] = static_cast<float>(b[j]) * unit;
      }
      u8* d = dst.row(dy);
      for (int x = 0; x < width; ++x) {
        int v;
        if (x < simd_end) {  // float32 muladd chain, innermost term first
          float acc = static_cast<float>(D[3][x]) * bf[3];
          for (int j = 2; j >= 0; --j) {
            const float p = static_cast<float>(D[j][x]) * bf[j];
            acc = p + acc;
          }
          v = rne(acc);
        } else {
          v = (D[0][x] * b[0] + D[1][x] * b[1] + D[2][x] * b[2] + D[3][x] * b[3] + (1 << 21)) >> 22;
        }
        d[x] = clamp_u8(v);
      }
    }
  }
  return dst;
}

bool is_integer_scale(double s, int* k) {
  const int r = static_cast<int>(std::lround(s));
  *k = r;
  return std::abs(s - r) < 2.220446049250313e-16;
}

}  // namespace

ImageU8 resize_area(const ImageU8& src, int width, int height) {
  detail::check_consistent(src, "resize_area");
  detail::check_output_size(width, height, "resize_area");
  const double sx = 1.0 / (static_cast<double>(width) / src.width);
  const double sy = 1.0 / (static_cast<double>(height) / src.height);
  if (sx >= 1.0 && sy >= 1.0) {
    int kx = 0, ky = 0;
    if (is_integer_scale(sx, &kx) && is_integer_scale(sy, &ky)) {
      if (kx == 1 && ky == 1) return src;
      return area_fast(src, width, height, kx, ky);
    }
    return area_shrink(src, width, height);
  }
  return resize_fixed(src, width, height, area_linear_axis(src.width, width),
                      area_linear_axis(src.height, height));
}

ImageU8 resize_cubic(const ImageU8& src, int width, int height) {
  detail::check_consistent(src, "resize_cubic");
  detail::check_output_size(width, height, "resize_cubic");
  if (width == src.width && height == src.height) return src;
  return resize_fixed(src, width, height, cubic_axis(src.width, width),
                      cubic_axis(src.height, height));
}

ImageU8 resize_nearest(const ImageU8& src, int width, int height) {
  detail::check_consistent(src, "resize_nearest");
  detail::check_output_size(width, height, "resize_nearest");
  const int cn = src.channels;
  const double sx = 1.0 / (static_cast<double>(width) / src.width);
  const double sy = 1.0 / (static_cast<double>(height) / src.height);
  ImageU8 dst(width, height, cn);
  std::vector<int> xo(static_cast<std::size_t>(width));
  for (int x = 0; x < width; ++x)
    xo[static_cast<std::size_t>(x)] = std::min(static_cast<int>(std::floor(x * sx)), src.width - 1);
  for (int y = 0; y < height; ++y) {
    const u8* s = src.row(std::min(static_cast<int>(std::floor(y * sy)), src.height - 1));
    u8* d = dst.row(y);
    for (int x = 0; x < width; ++x)
      for (int c = 0; c < cn; ++c) d[x * cn + c] = s[xo[static_cast<std::size_t>(x)] * cn + c];
  }
  return dst;
}

}  // namespace gen3d::image
