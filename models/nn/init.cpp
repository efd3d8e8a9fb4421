#include "models/nn/init.h"

#include <cmath>
#include <numbers>

#include <tbb/blocked_range.h>
#include <tbb/parallel_for.h>

namespace gen3d::models::nn {

std::uint64_t splitmix64(std::uint64_t z) {
  z += kGoldenGamma;
  z = (z ^ (z >> 30)) * 0xBF58476D1CE4E5B9ull;
  z = (z ^ (z >> 27)) * 0x94D049BB133111EBull;
  return z ^ (z >> 31);
}

double unit_interval(std::uint64_t bits) {
  return static_cast<double>((bits >> 11) + 1) * 0x1.0p-53;
}

Tensor gaussian_noise(const Shape& shape, std::uint64_t seed) {
  Tensor out(shape);
  const std::int64_t n = out.numel();
  for (std::int64_t k = 0; k < n; ++k) {
    const auto p = static_cast<std::uint64_t>(k / 2);
    const double u1 = unit_interval(splitmix64(seed + (2 * p + 1) * kGoldenGamma));
    const double u2 = unit_interval(splitmix64(seed + (2 * p + 2) * kGoldenGamma));
    const double r = std::sqrt(-2.0 * std::log(u1));
    const double a = 2.0 * std::numbers::pi * u2;
    out.data()[k] = static_cast<float>(k % 2 == 0 ? r * std::cos(a) : r * std::sin(a));
  }
  return out;
}

std::uint64_t stream_seed(std::uint64_t seed, std::uint64_t stream) {
  return splitmix64(seed + kGoldenGamma * stream);
}

RandomParams::FillFn uniform_init(std::uint64_t seed, float scale) {
  auto tensors = std::make_shared<std::uint64_t>(0);
  return [seed, scale, tensors](const std::string& name, Tensor& t) {
    if (name.ends_with(".bias")) return;  // zeros
    if (name.find("norm") != std::string::npos) {
      for (float& v : t.span()) v = 1.0f;
      return;
    }
    const std::uint64_t base = seed + kGoldenGamma * ++*tensors;
    float* d = t.data();
    tbb::parallel_for(
        tbb::blocked_range<std::int64_t>(0, t.numel(), 1 << 16),
        [&](const tbb::blocked_range<std::int64_t>& r) {
          for (std::int64_t i = r.begin(); i < r.end(); ++i) {
            const std::uint64_t z = splitmix64(base + static_cast<std::uint64_t>(i) * kGoldenGamma);
            d[i] = scale * static_cast<float>(static_cast<double>(z >> 11) * 0x1.0p-52 - 1.0);
          }
        });
  };
}

}  // namespace gen3d::models::nn
