#pragma once
// bf16 GEMMs on cuBLASLt: y[rows, out] (row stride ldy, float32) = act(bf16(x)[rows, in] W^T + b)
// with W bf16 [out, in] on the GPU and float32 accumulation. The bias rides in cuBLASLt's
// epilogue; activations run as one pass of this backend's kernel (its formulas are the CPU's).

#include <cstdint>

#include "models/kernels/activations.h"

namespace gen3d::models::cuda {

void gemm_bf16(float* y, std::int64_t ldy, const float* x, std::int64_t ldx,
               const std::uint16_t* weight, const float* bias, std::int64_t rows, std::int64_t in,
               std::int64_t out, kernels::Act act);

}  // namespace gen3d::models::cuda
