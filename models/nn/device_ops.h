#pragma once
// The operations a network's forward pass runs, dispatched on the device it runs on. A network
// is written once against DeviceOps; device_ops(Device::kCpu) runs the kernels in models/kernels
// (exactly the calls the networks made before), device_ops(Device::kCuda) the CUDA backend when
// the build has one and it was installed (models/cuda/backend.h). Activation pointers live on
// the ops' device; layers are passed whole so a device backend can keep its own copy of their
// parameters (uploaded on first use, kept while the layer lives: see DeviceCopy).

#include <chrono>
#include <cstdint>
#include <span>
#include <string>
#include <vector>

#include "models/core/device.h"
#include "models/core/tensor.h"
#include "models/kernels/activations.h"
#include "models/kernels/attention.h"

namespace gen3d::models::nn {

struct Conv2d;
class DeviceCopy;
struct GroupNorm;
struct LayerNorm;
struct Linear;
struct RMSNorm;
using i64 = std::int64_t;

class DeviceOps {
 public:
  virtual ~DeviceOps() = default;
  virtual Device device() const = 0;

  // y[rows, out] (row stride ldy) = act(x[rows, in] (row stride ldx) W^T + b), as Linear does.
  virtual void linear(const Linear& layer, float* y, i64 ldy, const float* x, i64 ldx, i64 rows,
                      kernels::Act act = kernels::Act::kNone) const = 0;
  // kernels::ln_modulate, gated_residual (fused.h) on this device.
  virtual void ln_modulate(float* y, i64 y_batch_stride, const float* x, i64 x_batch_stride,
                           i64 batch, i64 tokens, i64 dim, const float* shift, const float* scale,
                           i64 mod_stride, float eps) const = 0;
  virtual void gated_residual(float* h, i64 h_batch_stride, const float* y, i64 y_batch_stride,
                              i64 batch, i64 tokens, i64 dim, const float* gate,
                              i64 gate_stride) const = 0;
  // kernels::qk_rmsnorm with the two norms' scales.
  virtual void qk_rmsnorm(float* qkv, i64 rows, i64 ld, i64 heads, i64 head_dim, i64 head_stride,
                          i64 q_offset, i64 k_offset, const RMSNorm& q_norm,
                          const RMSNorm& k_norm) const = 0;
  virtual void attention(const kernels::HeadsOut& out, const kernels::HeadsView& q,
                         const kernels::HeadsView& k, const kernels::HeadsView& v,
                         const kernels::AttentionShape& s) const = 0;
  // y[rows, dim] (row stride ldy) = the layer's LayerNorm of x (row stride ldx); y may alias x.
  virtual void layer_norm(const LayerNorm& norm, float* y, i64 ldy, const float* x, i64 ldx,
                          i64 rows) const = 0;
  // g[r, c] = silu(z[r, c]) * z[r, hidden + c] for c < hidden (SwiGLU's gate; row strides ldg,
  // ldz).
  virtual void swiglu(float* g, i64 ldg, const float* z, i64 ldz, i64 rows, i64 hidden) const = 0;
  // Fourier features of points xyz [points, 3] (FourierEmbedder with its input):
  // out[p] = [x y z | sin(x f_j) j < F, sin(y f_j).., sin(z f_j).. | cos(..) likewise], each
  // product in float32, sin and cos in double rounded to float. freqs [F] on this device.
  virtual void fourier(float* out, const float* xyz, i64 points, const float* freqs,
                       i64 num_freqs) const = 0;
  virtual void act_inplace(kernels::Act a, float* x, i64 n) const = 0;
  // dst[r, c] = act(src[r, c]) for a rows x cols block.
  virtual void act_copy(kernels::Act a, float* dst, i64 ld_dst, const float* src, i64 ld_src,
                        i64 rows, i64 cols) const = 0;
  // y[i] += x[i]
  virtual void add(float* y, const float* x, i64 n) const = 0;
  // y[i] += s * x[i] (one product, then the sum; the UNet2.5D wrappers' scaled branches)
  virtual void add_scaled(float* y, const float* x, float s, i64 n) const = 0;
  // Rotary position embedding in place over rows (batch · len) of x (row stride ld) with `heads`
  // heads of head_dim each: elements (2i, 2i+1) of every head of token t of item b rotate by
  // row ((b / per_table) · len + t) of cos and sin (head_dim each), as
  // y[2i] = x[2i]·cos[2i] − x[2i+1]·sin[2i], y[2i+1] = x[2i+1]·cos[2i+1] + x[2i]·sin[2i+1], each
  // product and sum rounded on its own. Tables on this device.
  virtual void rotate_pairs(float* x, i64 ld, i64 rows, i64 len, i64 heads, i64 head_dim,
                            const float* cos, const float* sin, i64 per_table) const = 0;
  // dst[r, 0..cols) = src[r, 0..cols) for `rows` rows (row strides in floats), both on this
  // device.
  virtual void copy_rows(float* dst, i64 ld_dst, const float* src, i64 ld_src, i64 rows,
                         i64 cols) const = 0;
  // y[rows, dim] (row stride ldy) = the layer's RMSNorm of x (row stride ldx); y may alias x.
  virtual void rms_norm(const RMSNorm& norm, float* y, i64 ldy, const float* x, i64 ldx,
                        i64 rows) const = 0;
  // y[rows, out] (row stride ldy) = x[rows, in] (row stride ldx) w[out, in]^T, float32 throughout
  // (no bf16 rounding): for small products whose outputs pick a discrete choice, such as a
  // mixture of experts' router. `w` is a host parameter, kept on the device in `slot`.
  virtual void linear_f32(float* y, i64 ldy, const float* x, i64 ldx, i64 rows, const Tensor& w,
                          const DeviceCopy& slot) const = 0;
  // dst[i, 0..cols) = src[rows[i], 0..cols) for i < n; `rows` is on the host.
  virtual void gather_rows(float* dst, i64 ld_dst, const float* src, i64 ld_src, const i64* rows,
                           i64 n, i64 cols) const = 0;
  // dst[rows[i], c] += weight[i] * src[i, c] for i < n, c < cols; the rows are distinct; `rows`
  // and `weight` are on the host.
  virtual void scatter_add_rows(float* dst, i64 ld_dst, const float* src, i64 ld_src,
                                const i64* rows, const float* weight, i64 n, i64 cols) const = 0;
  // x[0..n) = 0
  virtual void zero(float* x, i64 n) const = 0;
  // FlashVDM's selected-key attention (kernels/key_selection.h; specs/volume-decoding.md 6.2):
  // the query rows (batch 1) fall into groups [offsets[g], offsets[g + 1]) (offsets on the host,
  // from 0 to s.q_len); for each group and head the top_k keys by the score of the mean of the
  // group's rows 0, stride, 2 stride, ... are kept (double precision, the lower index first on a
  // tie), and the group's queries attend to those keys only.
  virtual void selected_key_attention(const kernels::HeadsOut& out, const kernels::HeadsView& q,
                                      const kernels::HeadsView& k, const kernels::HeadsView& v,
                                      const kernels::AttentionShape& s,
                                      std::span<const i64> offsets, i64 top_k,
                                      i64 stride) const = 0;
  // A parameter tensor (on the host) readable by this device's kernels: its own data on the CPU;
  // on a device, a copy made on first use and kept in `slot`, so it lives as long as the layer
  // that owns the slot.
  virtual const float* parameter(const Tensor& t, const DeviceCopy& slot) const = 0;
  // Waits until every operation issued so far has finished (a no-op on the CPU).
  virtual void synchronize() const {}

  // Convolutional networks: NHWC maps.
  // y (batch, conv.out_h(h), conv.out_w(w), cout) = the layer's convolution of x (batch, h, w,
  // cin) plus its bias, as Conv2d does (on a device: bf16 operands, float32 accumulation, like
  // the CPU's bf16 convolution); y must not alias x.
  virtual void conv2d(const Conv2d& conv, float* y, const float* x, i64 batch, i64 h,
                      i64 w) const = 0;
  // y (batch, pixels, channels) = the layer's GroupNorm of x, then SiLU when `silu`; y may
  // alias x.
  virtual void group_norm(const GroupNorm& norm, float* y, const float* x, i64 batch, i64 pixels,
                          bool silu) const = 0;
  // y (batch, 2h, 2w, c) = nearest-neighbour ×2 upsampling of x (batch, h, w, c).
  virtual void upsample_nearest2x(float* y, const float* x, i64 batch, i64 h, i64 w,
                                  i64 c) const = 0;

  // Diffusion UNets.
  // g[r, c] = z[r, c] * GELU(z[r, hidden + c]) for c < hidden with the exact (erf) GELU, in
  // float32: diffusers' GEGLU, value times GELU(gate) (row strides ldg, ldz); g may alias z.
  virtual void geglu(float* g, i64 ldg, const float* z, i64 ldz, i64 rows, i64 hidden) const = 0;
  // y[b, r, c] += x[b, c] for b < batch, r < rows, c < cols: y (batch, rows, cols), x (batch,
  // cols), dense (a ResNet block's time embedding added to every pixel of its item).
  virtual void add_broadcast(float* y, const float* x, i64 batch, i64 rows, i64 cols) const = 0;

  // ---- The device's own timeline, for a trace ------------------------------------------------
  // A stretch of device work: the operation kind ("linear", "attention", ...) and when the device
  // ran it, on the host's steady_clock (the clock pipeline::Profiler records with).
  struct TimelineSpan {
    std::string name;
    std::chrono::steady_clock::time_point start, end;
  };
  // Starts timing this device's operations with its own events; returns a mark for
  // take_timeline. Callers may overlap (two nodes on one device): each takes back only the work
  // issued after its own start that no other caller took first. Nothing on the CPU (mark 0).
  virtual std::uint64_t start_timeline() const { return 0; }
  // Waits for the device, then returns the work issued since start_timeline(mark) returned, in
  // issue order, consecutive operations of one kind with gaps of a few microseconds merged.
  // Empty on the CPU. Call once per start.
  virtual std::vector<TimelineSpan> take_timeline(std::uint64_t /*mark*/) const { return {}; }
};

// The ops for `d`; throws ModelError when this process has no backend for it.
const DeviceOps& device_ops(Device d);
// Called once by a backend's install(); `ops` must live for the process.
void register_device_ops(Device d, const DeviceOps* ops);

}  // namespace gen3d::models::nn
