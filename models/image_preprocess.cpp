#include "models/image_preprocess.h"

#include <algorithm>
#include <cmath>
#include <cstdint>
#include <string>

#include "models/error.h"

// Float steps below are written one operation per statement on purpose: the recipes are exact
// float32 operation sequences, and a fused multiply-add would change the last bit.

namespace gen3d::models {

namespace {

using u8 = std::uint8_t;
using i64 = std::int64_t;

constexpr int kCoefBits = 11;  // OpenCV INTER_RESIZE_COEF_BITS
constexpr int kCoefScale = 1 << kCoefBits;

// OpenCV cvRound / saturate_cast<T>(float): round half to even (default FP environment).
inline int rne(double v) {
  return static_cast<int>(std::nearbyint(v));
}
inline u8 clamp_u8(int v) {
  return static_cast<u8>(std::clamp(v, 0, 255));
}

void check_image(const ImageU8& img, const char* what) {
  if (img.width <= 0 || img.height <= 0 || img.channels <= 0 ||
      img.pixels.size() != static_cast<std::size_t>(img.width) * img.height * img.channels)
    throw ModelError(std::string(what) + ": invalid image " + std::to_string(img.width) + "x" +
                     std::to_string(img.height) + "x" + std::to_string(img.channels) + " with " +
                     std::to_string(img.pixels.size()) + " bytes");
}

void check_size(int w, int h, const char* what) {
  if (w <= 0 || h <= 0)
    throw ModelError(std::string(what) + ": invalid output size " + std::to_string(w) + "x" +
                     std::to_string(h));
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

ImageU8::ImageU8(int w, int h, int c, std::uint8_t fill)
    : width(w), height(h), channels(c), pixels(static_cast<std::size_t>(w) * h * c, fill) {}

ImageU8 image_u8_from_unit(const float* pixels, int width, int height, int channels) {
  if (width <= 0 || height <= 0 || channels <= 0 || pixels == nullptr)
    throw ModelError("image_u8_from_unit: empty image");
  ImageU8 out(width, height, channels);
  for (std::size_t i = 0; i < out.pixels.size(); ++i) {
    const float v = std::clamp(pixels[i], 0.0f, 1.0f);
    out.pixels[i] = static_cast<u8>(std::lround(v * 255.0f));
  }
  return out;
}

ImageU8 to_rgba(const ImageU8& image) {
  check_image(image, "to_rgba");
  const int cn = image.channels;
  if (cn == 4) return image;
  if (cn != 1 && cn != 3)
    throw ModelError("to_rgba: unsupported channel count " + std::to_string(cn));
  ImageU8 out(image.width, image.height, 4);
  const std::size_t n = static_cast<std::size_t>(image.width) * image.height;
  for (std::size_t p = 0; p < n; ++p) {
    for (int c = 0; c < 3; ++c) out.pixels[p * 4 + c] = image.pixels[p * cn + (cn == 1 ? 0 : c)];
    out.pixels[p * 4 + 3] = 255;
  }
  return out;
}

ImageU8 resize_area(const ImageU8& src, int width, int height) {
  check_image(src, "resize_area");
  check_size(width, height, "resize_area");
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
  check_image(src, "resize_cubic");
  check_size(width, height, "resize_cubic");
  if (width == src.width && height == src.height) return src;
  return resize_fixed(src, width, height, cubic_axis(src.width, width),
                      cubic_axis(src.height, height));
}

ImageU8 resize_nearest(const ImageU8& src, int width, int height) {
  check_image(src, "resize_nearest");
  check_size(width, height, "resize_nearest");
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

Recentered recenter(const ImageU8& rgba, double border_ratio) {
  check_image(rgba, "recenter");
  if (rgba.channels != 4)
    throw ModelError("recenter: expected an RGBA image, got " + std::to_string(rgba.channels) +
                     " channels");
  const int H = rgba.height, W = rgba.width;
  Recentered out;
  RecenterInfo& r = out.info;
  r.size = std::max(H, W);
  r.row_min = H;
  r.row_max = -1;
  r.col_min = W;
  r.col_max = -1;
  for (int y = 0; y < H; ++y) {
    const u8* row = rgba.row(y);
    for (int x = 0; x < W; ++x)
      if (row[x * 4 + 3] > 0) {
        r.row_min = std::min(r.row_min, y);
        r.row_max = std::max(r.row_max, y);
        r.col_min = std::min(r.col_min, x);
        r.col_max = std::max(r.col_max, x);
      }
  }
  if (r.row_max < 0) throw ModelError("recenter: the image is fully transparent");
  r.h = r.row_max - r.row_min;
  r.w = r.col_max - r.col_min;
  if (r.h == 0 || r.w == 0)
    throw ModelError("recenter: the alpha bounding box is degenerate (" + std::to_string(r.h + 1) +
                     "x" + std::to_string(r.w + 1) + " pixels)");
  const double S = r.size;
  r.desired = static_cast<int>(S * (1.0 - border_ratio));
  r.scale = static_cast<double>(r.desired) / std::max(r.h, r.w);
  r.h2 = static_cast<int>(r.h * r.scale);
  r.w2 = static_cast<int>(r.w * r.scale);
  if (r.h2 <= 0 || r.w2 <= 0)
    throw ModelError("recenter: the object is too thin to resize (" + std::to_string(r.h) + "x" +
                     std::to_string(r.w) + " -> " + std::to_string(r.h2) + "x" +
                     std::to_string(r.w2) + ")");
  r.row2_min = (r.size - r.h2) / 2;
  r.col2_min = (r.size - r.w2) / 2;

  // Crop rows r0 .. r1-1, columns c0 .. c1-1 (the reference's half-open slice).
  ImageU8 crop(r.w, r.h, 4);
  for (int y = 0; y < r.h; ++y)
    std::copy_n(rgba.row(r.row_min + y) + r.col_min * 4, r.w * 4, crop.row(y));
  out.crop_resized = resize_area(crop, r.w2, r.h2);

  out.rgb = ImageU8(r.size, r.size, 3, 0);
  out.mask = ImageU8(r.size, r.size, 1, 0);
  // Outside the pasted crop the canvas is RGBA 0: alpha 0 composites to pure white.
  std::fill(out.rgb.pixels.begin(), out.rgb.pixels.end(), u8{255});
  for (int y = 0; y < r.h2; ++y) {
    const u8* s = out.crop_resized.row(y);
    u8* d = out.rgb.row(r.row2_min + y) + r.col2_min * 3;
    u8* m = out.mask.row(r.row2_min + y) + r.col2_min;
    for (int x = 0; x < r.w2; ++x) {
      const float a = static_cast<float>(s[x * 4 + 3]) / 255.0f;
      const float one_minus = 1.0f - a;
      const float white = 255.0f * one_minus;
      for (int c = 0; c < 3; ++c) {
        const float fg = static_cast<float>(s[x * 4 + c]) * a;
        const float v = std::clamp(fg + white, 0.0f, 255.0f);
        d[x * 3 + c] = static_cast<u8>(v);  // truncation, as numpy astype(uint8)
      }
      m[x] = static_cast<u8>(std::clamp(a * 255.0f, 0.0f, 255.0f));
    }
  }
  return out;
}

Tensor array_to_tensor(const ImageU8& image) {
  check_image(image, "array_to_tensor");
  const int H = image.height, W = image.width, C = image.channels;
  Tensor t({1, C, H, W});
  float* o = t.data();
  for (int c = 0; c < C; ++c)
    for (int y = 0; y < H; ++y) {
      const u8* s = image.row(y);
      for (int x = 0; x < W; ++x) {
        float v = static_cast<float>(s[x * C + c]) / 255.0f;
        v = v * 2.0f;
        v = v - 1.0f;
        o[(static_cast<i64>(c) * H + y) * W + x] = v;
      }
    }
  return t;
}

PreprocessedImage preprocess_image(const ImageU8& image, const ImagePreprocessOptions& opt) {
  if (opt.size <= 0) throw ModelError("preprocess_image: size must be positive");
  PreprocessedImage out;
  out.recentered = recenter(to_rgba(image), opt.border_ratio);
  out.rgb = resize_cubic(out.recentered.rgb, opt.size, opt.size);
  out.mask = resize_nearest(out.recentered.mask, opt.size, opt.size);
  out.image = array_to_tensor(out.rgb);
  out.mask_tensor = array_to_tensor(out.mask);
  return out;
}

// ---- torchvision transform --------------------------------------------------------------------

namespace {

struct AaTaps {
  std::vector<int> lo;     // [m] first source index
  std::vector<int> count;  // [m] taps
  std::vector<double> w;   // [m * max_taps] normalized weights
  int max_taps = 0;
};

// torchvision/ATen antialiased bilinear ("triangle") filter along one axis.
AaTaps aa_axis(int n, int m) {
  const double scale = static_cast<double>(n) / m;
  const double support = scale >= 1.0 ? scale : 1.0;
  const double inv = scale >= 1.0 ? 1.0 / scale : 1.0;
  AaTaps t;
  t.max_taps = static_cast<int>(std::ceil(support)) * 2 + 1;
  t.lo.resize(static_cast<std::size_t>(m));
  t.count.resize(static_cast<std::size_t>(m));
  t.w.assign(static_cast<std::size_t>(m) * t.max_taps, 0.0);
  for (int i = 0; i < m; ++i) {
    const double center = scale * (i + 0.5);
    const int lo = std::max(static_cast<int>(center - support + 0.5), 0);
    const int hi = std::min(static_cast<int>(center + support + 0.5), n);
    const int cnt = std::min(hi - lo, t.max_taps);
    double total = 0.0;
    double* w = &t.w[static_cast<std::size_t>(i) * t.max_taps];
    for (int j = 0; j < cnt; ++j) {
      w[j] = std::max(0.0, 1.0 - std::abs((j + lo - center + 0.5) * inv));
      total += w[j];
    }
    if (total > 0.0)
      for (int j = 0; j < cnt; ++j) w[j] /= total;
    t.lo[static_cast<std::size_t>(i)] = lo;
    t.count[static_cast<std::size_t>(i)] = cnt;
  }
  return t;
}

}  // namespace

Tensor resize_bilinear_antialias(const Tensor& x, int out_h, int out_w) {
  if (x.rank() != 4 || x.empty())
    throw ModelError("resize_bilinear_antialias: expected [B, C, H, W], got " + x.shape().str());
  check_size(out_w, out_h, "resize_bilinear_antialias");
  const i64 B = x.dim(0), C = x.dim(1), H = x.dim(2), W = x.dim(3);
  const i64 planes = B * C;
  // Width pass: [planes, H, W] -> [planes, H, out_w].
  Tensor tmp({B, C, H, out_w});
  if (out_w == W) {
    tmp = x.clone();
  } else {
    const AaTaps t = aa_axis(static_cast<int>(W), out_w);
    for (i64 p = 0; p < planes * H; ++p) {
      const float* s = x.data() + p * W;
      float* d = tmp.data() + p * out_w;
      for (int i = 0; i < out_w; ++i) {
        const double* w = &t.w[static_cast<std::size_t>(i) * t.max_taps];
        const int lo = t.lo[static_cast<std::size_t>(i)];
        double acc = 0.0;
        for (int j = 0; j < t.count[static_cast<std::size_t>(i)]; ++j) acc += w[j] * s[lo + j];
        d[i] = static_cast<float>(acc);
      }
    }
  }
  if (out_h == H) return tmp;
  // Height pass: [planes, H, out_w] -> [planes, out_h, out_w].
  Tensor out({B, C, out_h, out_w});
  const AaTaps t = aa_axis(static_cast<int>(H), out_h);
  for (i64 p = 0; p < planes; ++p) {
    const float* s = tmp.data() + p * H * out_w;
    float* d = out.data() + p * out_h * out_w;
    for (int i = 0; i < out_h; ++i) {
      const double* w = &t.w[static_cast<std::size_t>(i) * t.max_taps];
      const int lo = t.lo[static_cast<std::size_t>(i)];
      for (i64 x0 = 0; x0 < out_w; ++x0) {
        double acc = 0.0;
        for (int j = 0; j < t.count[static_cast<std::size_t>(i)]; ++j)
          acc += w[j] * s[(lo + j) * out_w + x0];
        d[i * out_w + x0] = static_cast<float>(acc);
      }
    }
  }
  return out;
}

Tensor encoder_transform(const Tensor& x, int image_size, EncoderTransformTrace* trace) {
  if (x.rank() != 4 || x.empty() || x.dim(1) != 3)
    throw ModelError("encoder_transform: expected images [B, 3, H, W], got " + x.shape().str());
  if (image_size <= 0) throw ModelError("encoder_transform: image_size must be positive");
  const i64 B = x.dim(0), H = x.dim(2), W = x.dim(3);
  // Value range [-1, 1] -> [0, 1]: (x - (-1)) / (1 - (-1)), float32 ops.
  Tensor u({B, 3, H, W});  // [B, 3, H, W]
  for (i64 i = 0; i < x.numel(); ++i) {
    const float v = x.data()[i] + 1.0f;
    u.data()[i] = v / 2.0f;
  }
  // Resize(image_size): the shorter side becomes image_size, the longer int(size * long / short).
  i64 rh = image_size, rw = image_size;
  if (W < H)
    rh = static_cast<i64>(static_cast<double>(image_size) * H / W);
  else if (H < W)
    rw = static_cast<i64>(static_cast<double>(image_size) * W / H);
  Tensor r =
      resize_bilinear_antialias(u, static_cast<int>(rh), static_cast<int>(rw));  // [B,3,rh,rw]
  if (trace) trace->resized = r.clone();
  // CenterCrop(image_size): offsets int(round((len - size) / 2)) (half to even).
  const i64 top = static_cast<i64>(std::nearbyint((rh - image_size) / 2.0));
  const i64 left = static_cast<i64>(std::nearbyint((rw - image_size) / 2.0));
  static constexpr float kMean[3] = {0.485f, 0.456f, 0.406f};
  static constexpr float kStd[3] = {0.229f, 0.224f, 0.225f};
  const i64 S = image_size;
  Tensor out({B, 3, S, S});  // [B, 3, S, S]
  for (i64 b = 0; b < B; ++b)
    for (i64 c = 0; c < 3; ++c)
      for (i64 y = 0; y < S; ++y)
        for (i64 xx = 0; xx < S; ++xx) {
          const float v = r.data()[((b * 3 + c) * rh + top + y) * rw + left + xx];
          const float centered = v - kMean[c];
          out.data()[((b * 3 + c) * S + y) * S + xx] = centered / kStd[c];
        }
  return out;
}

}  // namespace gen3d::models
