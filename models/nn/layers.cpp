#include "models/nn/layers.h"

#include <mutex>

#include "models/core/dtype.h"
#include "models/core/error.h"
#include "models/kernels/linear.h"
#include "models/kernels/norms.h"

namespace gen3d::models::nn {

struct DeviceCopy::Slot {
  std::mutex mutex;
  std::shared_ptr<const void> value;
};

DeviceCopy::DeviceCopy() : slot_(std::make_shared<Slot>()) {}

std::shared_ptr<const void> DeviceCopy::get(
    const std::function<std::shared_ptr<const void>()>& make) const {
  std::lock_guard lock(slot_->mutex);
  if (!slot_->value) slot_->value = make();
  return slot_->value;
}

void Linear::load(ParamSource& p, const std::string& name, i64 in_features, i64 out_features,
                  bool has_bias, Quantize quantize) {
  // A weight kept narrower is read only to be converted: the source's reused buffer will do.
  const bool converted = (p.storage() == WeightStorage::kInt8 && quantize == Quantize::kInt8) ||
                         p.storage() == WeightStorage::kF16 || bf16_storage(p.storage());
  const std::string wname = name + ".weight";
  Tensor w = converted ? p.take_transient(wname, {out_features, in_features})
                       : p.take(wname, {out_features, in_features});
  Tensor b = has_bias ? p.take(name + ".bias", {out_features}) : Tensor();
  set(p, std::move(w), std::move(b), in_features, out_features, quantize);
}

void Linear::set(ParamSource& p, Tensor w, Tensor b, i64 in_features, i64 out_features,
                 Quantize quantize) {
  in = in_features;
  out = out_features;
  bias = std::move(b);
  device_copy = DeviceCopy();
  weight16.clear();
  weight_bf16.reset();
  weight_int8.reset();
  if (p.storage() == WeightStorage::kInt8 && quantize == Quantize::kInt8 && !w.empty() && in > 0 &&
      out > 0) {
    weight_int8 = std::make_shared<const kernels::Int8Weight>(w.data(), out, in);
    p.kept_as(w.numel(), 1);
    p.add_bytes(static_cast<std::size_t>(out) * sizeof(float));  // the scales
    weight = Tensor();
  } else if (p.storage() == WeightStorage::kF16 && !w.empty()) {
    weight16.resize(static_cast<std::size_t>(w.numel()));
    for (std::size_t i = 0; i < weight16.size(); ++i) weight16[i] = float_to_half(w.data()[i]);
    p.kept_as(w.numel(), sizeof(std::uint16_t));
    weight = Tensor();
  } else if (bf16_storage(p.storage()) && !w.empty() && in > 0 && out > 0) {
    weight_bf16 = std::make_shared<const kernels::Bf16Weight>(w.data(), out, in);
    p.kept_as(w.numel(), sizeof(std::uint16_t));
    weight = Tensor();
  } else {
    weight = std::move(w);
  }
}

void Linear::operator()(float* y, i64 ldy, const float* x, i64 ldx, i64 rows,
                        kernels::Act act) const {
  const float* b = bias.empty() ? nullptr : bias.data();
  if (weight_int8)
    kernels::linear_int8(y, ldy, x, ldx, *weight_int8, b, rows, act);
  else if (weight_bf16)
    kernels::linear_bf16(y, ldy, x, ldx, *weight_bf16, b, rows, act);
  else if (!weight16.empty())
    kernels::linear_f16w(y, ldy, x, ldx, weight16.data(), b, rows, in, out, act);
  else
    kernels::linear(y, ldy, x, ldx, weight.data(), b, rows, in, out, act);
}

void LayerNorm::load(ParamSource& p, const std::string& name, i64 features, float epsilon) {
  dim = features;
  eps = epsilon;
  weight = p.take(name + ".weight", {features});
  bias = p.take(name + ".bias", {features});
  device_copy = DeviceCopy();
}

void LayerNorm::operator()(float* y, i64 ldy, const float* x, i64 ldx, i64 rows) const {
  kernels::layer_norm(y, ldy, x, ldx, rows, dim, eps, weight.data(), bias.data());
}

void RMSNorm::load(ParamSource& p, const std::string& name, i64 features, float epsilon) {
  dim = features;
  eps = epsilon;
  scale = p.take(name + ".scale", {features});
  device_copy = DeviceCopy();
}

void RMSNorm::operator()(float* y, i64 ldy, const float* x, i64 ldx, i64 rows) const {
  kernels::rms_norm(y, ldy, x, ldx, rows, dim, eps, scale.data());
}

void GroupNorm::load(ParamSource& p, const std::string& name, i64 num_channels, i64 num_groups,
                     float epsilon) {
  channels = num_channels;
  groups = num_groups;
  eps = epsilon;
  weight = p.take(name + ".weight", {num_channels});
  bias = p.take(name + ".bias", {num_channels});
  device_copy = DeviceCopy();
}

void GroupNorm::operator()(float* y, const float* x, i64 batch, i64 pixels, bool silu) const {
  kernels::group_norm(y, x, batch, pixels, channels, groups, eps, weight.data(), bias.data(), silu);
}

void Conv2d::load_padded(ParamSource& p, const std::string& name, i64 cout, i64 cin, i64 k,
                         i64 stride) {
  load(p, name, cout, cin, k, kernels::ConvGeometry::same((k - 1) / 2, stride));
}

void Conv2d::load(ParamSource& p, const std::string& name, i64 cout, i64 cin, i64 k,
                  kernels::ConvGeometry g) {
  geometry = g;
  device_copy = DeviceCopy();
  const Tensor& w = p.take_transient(name + ".weight", {cout, cin, k, k});  // packed below
  const Tensor b = p.take(name + ".bias", {cout});
  if (w.empty()) {  // a shape recorder: nothing to pack
    weight = {};
    weight.cout = cout;
    weight.cin = cin;
    weight.kh = weight.kw = k;
    return;
  }
  weight = kernels::pack_conv_weight(w.data(), b.data(), cout, cin, k, k);
  if (bf16_storage(p.storage())) {
    kernels::to_bf16(weight);
    p.kept_as(w.numel(), sizeof(std::uint16_t));
  }
}

void Conv2d::operator()(float* y, const float* x, i64 batch, i64 h, i64 w) const {
  kernels::conv2d(y, x, batch, h, w, weight, geometry);
}

Tensor Conv2d::operator()(const Tensor& x) const {
  const i64 B = x.dim(0), h = x.dim(1), w = x.dim(2);
  Tensor y({B, out_h(h), out_w(w), weight.cout});
  (*this)(y.data(), x.data(), B, h, w);
  return y;
}

void check_shape(const Tensor& t, std::string_view where, std::string_view what,
                 std::initializer_list<i64> expect) {
  bool ok = !t.empty() && t.rank() == static_cast<int>(expect.size());
  int i = 0;
  for (i64 d : expect) {
    if (ok && d >= 0 && t.shape()[i] != d) ok = false;
    ++i;
  }
  if (ok) return;
  std::string want = "[";
  i = 0;
  for (i64 d : expect) want += (i++ ? ", " : "") + (d < 0 ? std::string("*") : std::to_string(d));
  throw ModelError(std::string(where) + ": " + std::string(what) + " has shape " + t.shape().str() +
                   ", expected " + want + "]");
}

}  // namespace gen3d::models::nn
