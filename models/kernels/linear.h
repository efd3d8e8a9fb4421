#pragma once
// Linear layers y = act(x W^T + b) with PyTorch's weight layout W[N, K] (out x in, row-major).
// ref:: is a plain triple loop; the fast path is cblas_sgemm on tiles partitioned over TBB
// (BLAS itself single-threaded) with a fused bias + activation epilogue per tile.

#include <cstdint>

#include "models/kernels/activations.h"

namespace gen3d::models::kernels {

// y[M, N] (row stride ldy) = act(x[M, K] (row stride ldx) · w[N, K]^T + b[N]); b may be null.
void linear(float* y, std::int64_t ldy, const float* x, std::int64_t ldx, const float* w,
            const float* b, std::int64_t M, std::int64_t K, std::int64_t N, Act act = Act::kNone);

// Same with IEEE-half weights (raw bits), widened to float32 panel by panel inside each task, so
// the weights stay half-size in memory.
void linear_f16w(float* y, std::int64_t ldy, const float* x, std::int64_t ldx,
                 const std::uint16_t* w, const float* b, std::int64_t M, std::int64_t K,
                 std::int64_t N, Act act = Act::kNone);

// How the fast GEMM uses threads (benchmarks compare them; models use kTbbTiles).
enum class GemmThreading {
  kTbbTiles,    // TBB tasks over output tiles, serial BLAS in each (default)
  kSingleCall,  // one cblas_sgemm call; threads are whatever BLAS is set to
};
void set_gemm_threading(GemmThreading t);  // process-wide (bench only)

namespace ref {
void linear(float* y, std::int64_t ldy, const float* x, std::int64_t ldx, const float* w,
            const float* b, std::int64_t M, std::int64_t K, std::int64_t N, Act act = Act::kNone);
}  // namespace ref

}  // namespace gen3d::models::kernels
