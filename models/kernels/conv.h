#pragma once
// Image-shaped kernels of the texture networks (UNets, SD VAE). Feature maps are NHWC: element
// (n, y, x, c) lives at data[((n * H + y) * W + x) * C + c], so a map is also a (N·H·W, C) token
// matrix and 1×1 convolutions, Linear projections and attention read it in place.
// Convolutions are implicit GEMMs: each TBB task gathers the patches of a block of output pixels
// into a thread-local buffer (im2col, bounded size) and runs one serial sgemm against the weight
// packed once as (Cout, kh, kw, Cin). ref:: are plain loops (double accumulation) for tests.

#include <cstdint>
#include <memory>
#include <vector>

namespace gen3d::models::kernels {

class Bf16ConvWeight;  // dnnl_matmul.h

// A convolution's weights, packed once at load time. With `bf16` set (the bf16 precision mode)
// `w` and `bias` are empty and conv2d runs oneDNN's bf16 convolution (float32 accumulation).
struct ConvWeight {
  std::int64_t cout = 0, cin = 0, kh = 0, kw = 0;
  std::vector<float> w;     // (cout, kh, kw, cin), row-major
  std::vector<float> bias;  // cout, or empty
  std::shared_ptr<const Bf16ConvWeight> bf16;
};

// Moves `wt`'s float32 weights into a bf16 oneDNN-packed copy (frees the float32 ones).
void to_bf16(ConvWeight& wt);

// Packs PyTorch's (O, I, kh, kw) weight (and optional bias[O]).
ConvWeight pack_conv_weight(const float* oihw, const float* bias, std::int64_t cout,
                            std::int64_t cin, std::int64_t kh, std::int64_t kw);

struct ConvGeometry {
  std::int64_t stride = 1;
  // Zero padding per side (PyTorch's `padding=p` is all four equal; the SD VAE downsampler pads
  // right and bottom by one only).
  std::int64_t pad_top = 0, pad_bottom = 0, pad_left = 0, pad_right = 0;
  static ConvGeometry same(std::int64_t pad, std::int64_t stride = 1) {
    return {stride, pad, pad, pad, pad};
  }
  std::int64_t out_h(std::int64_t h, std::int64_t kh) const {
    return (h + pad_top + pad_bottom - kh) / stride + 1;
  }
  std::int64_t out_w(std::int64_t w, std::int64_t kw) const {
    return (w + pad_left + pad_right - kw) / stride + 1;
  }
};

// y (batch, oh, ow, cout) = conv(x (batch, h, w, cin)) + bias. y must not alias x. Unpadded
// stride-1 1×1 convolutions are one GEMM on x in place; others gather at most 4 MiB of patches
// per task.
void conv2d(float* y, const float* x, std::int64_t batch, std::int64_t h, std::int64_t w,
            const ConvWeight& wt, const ConvGeometry& g);

// GroupNorm over (H·W, C/groups) per (sample, group), biased variance, then per-channel affine
// (gamma/beta may be null) and optional SiLU. y may alias x. Statistics are accumulated in double
// (deterministic: independent of the thread count). Throws ModelError unless groups divides c.
void group_norm(float* y, const float* x, std::int64_t batch, std::int64_t hw, std::int64_t c,
                std::int64_t groups, float eps, const float* gamma, const float* beta, bool silu);

// Nearest-neighbour ×2 upsampling: y (batch, 2h, 2w, c).
void upsample_nearest2x(float* y, const float* x, std::int64_t batch, std::int64_t h,
                        std::int64_t w, std::int64_t c);

// Layout conversions at the boundaries (golden files and image I/O are NCHW).
void nchw_to_nhwc(float* y, const float* x, std::int64_t batch, std::int64_t c, std::int64_t h,
                  std::int64_t w);
void nhwc_to_nchw(float* y, const float* x, std::int64_t batch, std::int64_t c, std::int64_t h,
                  std::int64_t w);

namespace ref {
void conv2d(float* y, const float* x, std::int64_t batch, std::int64_t h, std::int64_t w,
            const ConvWeight& wt, const ConvGeometry& g);
void group_norm(float* y, const float* x, std::int64_t batch, std::int64_t hw, std::int64_t c,
                std::int64_t groups, float eps, const float* gamma, const float* beta, bool silu);
}  // namespace ref

}  // namespace gen3d::models::kernels
