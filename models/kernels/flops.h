#pragma once
// A process-wide count of the floating-point operations the GEMM-shaped kernels (linear, conv,
// attention) performed — 2 per multiply-add — so benchmarks report achieved GFLOP/s from what
// actually ran. One relaxed atomic add per kernel call.

#include <atomic>
#include <cstdint>

namespace gen3d::models::kernels {

inline std::atomic<std::uint64_t>& flop_counter() {
  static std::atomic<std::uint64_t> count{0};
  return count;
}

inline void count_flops(double flops) {
  flop_counter().fetch_add(static_cast<std::uint64_t>(flops), std::memory_order_relaxed);
}

}  // namespace gen3d::models::kernels
