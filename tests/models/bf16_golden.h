#pragma once
// The bf16 and int8 checks of the golden tests: a network run in bf16 (or int8) is compared with
// the same golden float32 outputs as the fp32 path, by normalized MSE per tensor,
// sum (a - g)^2 / sum g^2, against a stated tolerance; the worst tensor is reported as a fraction
// of it.

#include <gtest/gtest.h>

#include <cmath>
#include <cstdint>
#include <cstdio>
#include <string>

namespace gen3d::models::bf16test {

// Tolerances of a whole network's tensors in bf16 mode (README "Precision"). Every GEMM and
// convolution rounds both operands to bf16, as PyTorch's bf16 autocast does (one such product:
// nmse 8.3e-6 in PyTorch 1.13, 2.5e-6 to 8e-6 here); through a network the error grows with depth
// and with the gain of the normalizations. Transformers (DiT, ShapeVAE, DINOv2): PyTorch's autocast
// of the DiT makes nmse 4.5e-5 to 5.2e-5 (bench/dit_torch_bench.py's model), this runtime 4.3e-5
// on the golden DiT; the bound is 20x that. Convolutional UNets and the SD VAE (GroupNorm over
// tiny random networks amplifies most; measured up to 2.2e-3 on the UNet2.5D's deepest reference
// features; the 2.1 PBR UNet2.5D measures 1.1e-4 at worst, on out.sample) get 1e-2. A wrong
// layout, index or missing bias gives nmse of order 0.1 to 1.
inline constexpr double kNetworkNmse = 1e-3;
inline constexpr double kUNetNmse = 1e-2;

// int8 mode (the DiTs' attention and MLP products W8A8: weights per output channel, activations
// per token, symmetric, round to nearest). Each quantized operand carries a relative error of
// variance about (max / 127)^2 / 12 against its spread: 3e-5 to 1e-4 for Gaussian rows of 32 to
// 5120 values, so one product makes nmse 0.6e-4 to 2e-4, 20 to 40 times a bf16 product.
// Measured on the golden sets (2026-11-27): the 2.0 DiT's tensors 1.5e-4 at worst (bf16: 4.9e-5),
// its sampler trajectory 2.7e-3 (the step-1 guided velocity, where CFG's gain of 1 + s amplifies
// the difference of the two predictions; bf16: 3.5e-4 there), the 2.1 DiT 1.2e-3 (an MoE branch
// over the tokens routed as the reference) and its sampler steps 5.5e-4. The bound is 5e-3, so
// the worst tensor sits at 0.55 of it, as bf16's does of its own; a missing scale, bias or wrong
// layout gives 0.1 to 1.
inline constexpr double kInt8NetworkNmse = 5e-3;

inline double nmse(const float* a, const float* g, std::int64_t n) {
  double num = 0.0, den = 0.0;
  for (std::int64_t i = 0; i < n; ++i) {
    if (std::isnan(a[i]) != std::isnan(g[i])) return INFINITY;
    if (std::isnan(g[i])) continue;
    const double d = static_cast<double>(a[i]) - g[i];
    num += d * d;
    den += static_cast<double>(g[i]) * g[i];
  }
  return den > 0 ? num / den : num;
}

class NmseCheck {
 public:
  // `mode` names the precision in messages ("bf16", "int8").
  NmseCheck(std::string label, double tolerance, std::string mode = "bf16")
      : label_(std::move(label)), mode_(std::move(mode)), tol_(tolerance) {}
  // Checks one tensor; returns its nmse.
  double add(const std::string& name, const float* a, const float* g, std::int64_t n) {
    const double e = nmse(a, g, n);
    EXPECT_LE(e, tol_) << label_ << ": " << name << " nmse " << e << " over the " << mode_
                       << " tolerance";
    ++count_;
    if (e / tol_ > worst_) {
      worst_ = e / tol_;
      worst_name_ = name;
    }
    return e;
  }
  int count() const { return count_; }
  double worst_fraction() const { return worst_; }
  // Prints "[ info ] <label>: N tensors, worst nmse = f of tolerance T (name)".
  void report() const {
    std::printf("[ info ] %s: %d tensors in %s, worst nmse %.3g = %.4f of tolerance %.1e (%s)\n",
                label_.c_str(), count_, mode_.c_str(), worst_ * tol_, worst_, tol_,
                worst_name_.c_str());
  }

 private:
  std::string label_, mode_;
  double tol_;
  int count_ = 0;
  double worst_ = 0.0;
  std::string worst_name_;
};

}  // namespace gen3d::models::bf16test
