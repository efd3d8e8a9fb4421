#pragma once
// The layers every network is built from. Each loads its tensors under PyTorch's names
// (`<name>.weight`, `<name>.bias`, ...) from a ParamSource and runs on the kernels in
// models/kernels. Feature maps are NHWC, so a map is also a (B·H·W, C) token matrix.

#include <cstdint>
#include <functional>
#include <initializer_list>
#include <memory>
#include <string>
#include <string_view>
#include <vector>

#include "models/core/tensor.h"
#include "models/kernels/activations.h"
#include "models/kernels/conv.h"
#include "models/kernels/dnnl_matmul.h"
#include "models/nn/params.h"

namespace gen3d::models::nn {

using i64 = std::int64_t;

// A device backend's copy of a layer's parameters, made on first use and freed with the layer, so
// weights are uploaded once and stay on the device while the model stays loaded. Copies of a
// layer share it; loading new parameters starts a new one.
class DeviceCopy {
 public:
  DeviceCopy();
  // The copy `make` builds, made once per layer (thread-safe).
  std::shared_ptr<const void> get(const std::function<std::shared_ptr<const void>()>& make) const;

 private:
  struct Slot;
  std::shared_ptr<Slot> slot_;
};

// Whether a Linear may run in int8 when the source's storage is WeightStorage::kInt8: a network
// marks its big products (attention projections, MLPs) kInt8; embedders, modulation, output and
// gate layers stay bf16.
enum class Quantize : bool { kNo = false, kInt8 = true };

// nn.Linear(in, out): weight [out, in], optional bias [out]; y = act(x W^T + b). The weight is
// kept as the source's storage says (float32, IEEE half, bf16 packed for oneDNN when the product
// takes bf16 activations too, or int8 with per-channel scales for the int8 layers of kInt8).
struct Linear {
  i64 in = 0, out = 0;
  Tensor weight;                                           // [out, in] (float32 storage)
  std::vector<std::uint16_t> weight16;                     // [out, in] half bits (half storage)
  std::shared_ptr<const kernels::Bf16Weight> weight_bf16;  // bf16 storage
  std::shared_ptr<const kernels::Int8Weight> weight_int8;  // int8 storage, quantizable layers
  Tensor bias;                                             // [out] or empty
  DeviceCopy device_copy;

  void load(ParamSource& p, const std::string& name, i64 in_features, i64 out_features,
            bool has_bias = true, Quantize quantize = Quantize::kNo);
  // A weight the network assembled itself (e.g. q, k and v fused into one projection) from
  // tensors it took from `p`; `b` may be empty.
  void set(ParamSource& p, Tensor w, Tensor b, i64 in_features, i64 out_features,
           Quantize quantize = Quantize::kNo);

  // y[rows, out] (row stride ldy) = act(x[rows, in] (row stride ldx) W^T + b)
  void operator()(float* y, i64 ldy, const float* x, i64 ldx, i64 rows,
                  kernels::Act act = kernels::Act::kNone) const;
  void operator()(float* y, const float* x, i64 rows,
                  kernels::Act act = kernels::Act::kNone) const {
    (*this)(y, out, x, in, rows, act);
  }
  // Whether products run in reduced precision, bf16 or int8 (the attention over this projection's
  // output then runs in bf16).
  bool bf16() const { return weight_bf16 != nullptr || weight_int8 != nullptr; }
  bool int8() const { return weight_int8 != nullptr; }
};

// nn.LayerNorm(dim) with an affine weight and bias.
struct LayerNorm {
  Tensor weight, bias;  // [dim]
  DeviceCopy device_copy;
  i64 dim = 0;
  float eps = 1e-5f;

  void load(ParamSource& p, const std::string& name, i64 features, float epsilon);
  // y[rows, dim] (stride ldy) = LayerNorm(x[rows, dim] (stride ldx)); y may alias x.
  void operator()(float* y, i64 ldy, const float* x, i64 ldx, i64 rows) const;
  void operator()(float* y, const float* x, i64 rows) const { (*this)(y, dim, x, dim, rows); }
};

// RMSNorm(dim) with a learned `scale` [dim].
struct RMSNorm {
  Tensor scale;
  DeviceCopy device_copy;
  i64 dim = 0;
  float eps = 1e-6f;

  void load(ParamSource& p, const std::string& name, i64 features, float epsilon);
  void operator()(float* y, i64 ldy, const float* x, i64 ldx, i64 rows) const;
};

// nn.GroupNorm(groups, channels) over NHWC maps, optionally fused with SiLU.
struct GroupNorm {
  Tensor weight, bias;  // [channels]
  DeviceCopy device_copy;
  i64 channels = 0, groups = 0;
  float eps = 1e-5f;

  void load(ParamSource& p, const std::string& name, i64 num_channels, i64 num_groups,
            float epsilon);
  // y (batch, pixels, channels) from x; y may alias x.
  void operator()(float* y, const float* x, i64 batch, i64 pixels, bool silu) const;
};

// nn.Conv2d(cin, cout, k) with bias over NHWC maps; weights packed once at load.
struct Conv2d {
  kernels::ConvWeight weight;
  kernels::ConvGeometry geometry;
  DeviceCopy device_copy;

  void load(ParamSource& p, const std::string& name, i64 cout, i64 cin, i64 k,
            kernels::ConvGeometry g);
  // With PyTorch's padding=(k - 1) / 2 on every side and the given stride.
  void load_padded(ParamSource& p, const std::string& name, i64 cout, i64 cin, i64 k,
                   i64 stride = 1);

  i64 out_h(i64 h) const { return geometry.out_h(h, weight.kh); }
  i64 out_w(i64 w) const { return geometry.out_w(w, weight.kw); }
  // y (B, out_h, out_w, cout) from x (B, h, w, cin).
  void operator()(float* y, const float* x, i64 batch, i64 h, i64 w) const;
  Tensor operator()(const Tensor& x) const;
};

// Throws ModelError "<where>: <what> has shape [..], expected [..]" unless `t` is non-empty with
// the expected rank and dims (a negative expected dim matches any size).
void check_shape(const Tensor& t, std::string_view where, std::string_view what,
                 std::initializer_list<i64> expect);

}  // namespace gen3d::models::nn
