#pragma once
// Seeded randomness shared by every network: the splitmix64 generator behind random weights
// (benchmarks, tests) and the counter-based Gaussian noise of the samplers. Results depend only
// on the seed (and shape), never on threads.

#include <cstdint>

#include "models/core/tensor.h"
#include "models/nn/params.h"

namespace gen3d::models::nn {

inline constexpr std::uint64_t kGoldenGamma = 0x9E3779B97F4A7C15ull;

// splitmix64's output for state `z` (it adds the golden gamma, then mixes).
std::uint64_t splitmix64(std::uint64_t z);
// (0, 1] from the top 53 bits.
double unit_interval(std::uint64_t bits);

// A sequence of splitmix64 draws from one seed.
class SplitMix {
 public:
  explicit SplitMix(std::uint64_t state) : state_(state) {}
  std::uint64_t next() {
    const std::uint64_t z = splitmix64(state_);
    state_ += kGoldenGamma;
    return z;
  }
  // Uniform in [-1, 1) from the top 53 bits.
  float symmetric() {
    return static_cast<float>(static_cast<double>(next() >> 11) * 0x1.0p-52 - 1.0);
  }

 private:
  std::uint64_t state_;
};

// Deterministic standard-normal noise. Generator (documented, not torch-compatible): element k of
// the flattened tensor comes from the pair p = k / 2 — u1, u2 = unit_interval of
// splitmix64(seed + (2p + 1)·γ) and splitmix64(seed + (2p + 2)·γ) (γ = kGoldenGamma);
// z = sqrt(−2 ln u1)·(cos 2πu2 for even k, sin 2πu2 for odd k), in double, rounded to float32.
Tensor gaussian_noise(const Shape& shape, std::uint64_t seed);

// Independent seeds from one seed (e.g. one noise stream per view or per step).
std::uint64_t stream_seed(std::uint64_t seed, std::uint64_t stream);

// A plain init for benchmarks of networks without a golden recipe: biases 0, weights of names
// containing "norm" 1, every other tensor uniform in ±scale (counter-based per element, so large
// tensors fill in parallel with the same values).
RandomParams::FillFn uniform_init(std::uint64_t seed, float scale = 0.02f);

}  // namespace gen3d::models::nn
