#include "models/shape/image_preprocess.h"

#include <algorithm>
#include <cmath>
#include <cstdint>
#include <string>

#include "image/composite.h"
#include "image/convert.h"
#include "image/crop.h"
#include "image/resize_u8.h"
#include "models/core/error.h"

// Float steps below are written one operation per statement on purpose: the recipes are exact
// float32 operation sequences, and a fused multiply-add would change the last bit.

namespace gen3d::models {

namespace {

using u8 = std::uint8_t;
using i64 = std::int64_t;

void check_size(int w, int h, const char* what) {
  if (w <= 0 || h <= 0)
    throw ModelError(std::string(what) + ": invalid output size " + std::to_string(w) + "x" +
                     std::to_string(h));
}

}  // namespace

Tensor array_to_tensor(const image::ImageU8& image) {
  if (image.width <= 0 || image.height <= 0 || image.channels <= 0 ||
      image.pixels.size() != static_cast<std::size_t>(image.width) * image.height * image.channels)
    throw ModelError("array_to_tensor: invalid image " + std::to_string(image.width) + "x" +
                     std::to_string(image.height) + "x" + std::to_string(image.channels) +
                     " with " + std::to_string(image.pixels.size()) + " bytes");
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

PreprocessedImage preprocess_image(const image::ImageU8& input, const ImagePreprocessOptions& opt) {
  if (opt.size <= 0) throw ModelError("preprocess_image: size must be positive");
  PreprocessedImage out;
  Recentered& r = out.recentered;
  // ImageProcessorV2: canvas max(H, W), the crop (numpy's half-open box) fills 1 - border_ratio.
  const image::RecenterOptions recenter{.border_ratio = opt.border_ratio,
                                        .fit = image::RecenterFit::fit_canvas,
                                        .exclusive_box_end = true};
  const image::ImageU8 canvas = image::recenter(image::to_rgba(input), recenter, &r.info);
  r.crop_resized = image::crop(canvas, r.info.col2_min, r.info.row2_min, r.info.w2, r.info.h2);
  r.rgb = image::composite_over_white(canvas);
  r.mask = image::extract_channel(canvas, 3);
  out.rgb = image::resize_cubic(r.rgb, opt.size, opt.size);
  out.mask = image::resize_nearest(r.mask, opt.size, opt.size);
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
