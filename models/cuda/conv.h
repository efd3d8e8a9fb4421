#pragma once
// The convolutional networks' operations on NHWC maps (conv.cu), launched on the backend's
// stream. Shapes mean what they mean in models/kernels/conv.h.
//
// A convolution gathers its patches (im2col) into a bf16 buffer, one row per output pixel in
// (kh, kw, cin) order, zero-padded to gemm_padded_in columns, and runs one cuBLASLt GEMM per
// chunk of rows against the weight (gemm.h; the bias rides in the epilogue). Chunks keep the
// buffer at most 256 MiB. Unpadded stride-1 1×1 convolutions are one GEMM on the map in place.
// No cuDNN: its libraries (about 500 MB) would have to travel with the binary.

#include <cstdint>

#include "models/kernels/conv.h"

namespace gen3d::models::cuda {

using i64 = std::int64_t;

// y (batch, oh, ow, cout) = conv(x (batch, h, w, cin)) + bias, oh and ow as ConvGeometry says.
// `weight`: bf16 bits [cout, gemm_padded_in(kh · kw · cin)], each row (kh, kw, cin) then zeros;
// `bias` [cout] or null; both on the GPU. y must not alias x.
void conv2d(float* y, const float* x, i64 batch, i64 h, i64 w, const std::uint16_t* weight,
            const float* bias, i64 cout, i64 cin, i64 kh, i64 kw, const kernels::ConvGeometry& g);

// kernels::group_norm on the GPU: statistics per (sample, group) summed in double from the
// group's first value as the shift, then the CPU's float32 formula per element
// (((x - shift) - mean) · rstd·gamma + beta, SiLU when `silu`). gamma / beta may be null; y may
// alias x. Throws ModelError unless groups divides c.
void group_norm(float* y, const float* x, i64 batch, i64 hw, i64 c, i64 groups, float eps,
                const float* gamma, const float* beta, bool silu);

// y (batch, 2h, 2w, c) = nearest-neighbour ×2 upsampling of x (batch, h, w, c).
void upsample_nearest2x(float* y, const float* x, i64 batch, i64 h, i64 w, i64 c);

}  // namespace gen3d::models::cuda
