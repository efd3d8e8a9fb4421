#pragma once
// bf16 GEMMs on cuBLASLt: y[rows, out] (row stride ldy, float32) = act(bf16(x)[rows, in] W^T + b)
// with W bf16 [out, gemm_padded_in(in)] on the GPU (zero columns past `in`) and float32
// accumulation. The bias, and a tanh GELU, ride in cuBLASLt's epilogue where it offers an
// algorithm with them; what remains runs as one pass of this backend's kernel (its formulas are
// the CPU's). Shapes cuBLASLt takes no algorithm for run on a plain kernel.

#include <cstdint>

#include "models/kernels/activations.h"

namespace gen3d::models::cuda {

// The weight's row length on the GPU: `in` rounded up to 8 (16-byte rows for the tensor cores).
std::int64_t gemm_padded_in(std::int64_t in);

void gemm_bf16(float* y, std::int64_t ldy, const float* x, std::int64_t ldx,
               const std::uint16_t* weight, const float* bias, std::int64_t rows, std::int64_t in,
               std::int64_t out, kernels::Act act);

// gemm_bf16 without the staging pass or an activation: x is already bf16 bits
// [rows, gemm_padded_in(in)] (zeros past `in`), a whole allocation on the GPU.
void gemm_bf16_staged(float* y, std::int64_t ldy, const std::uint16_t* x,
                      const std::uint16_t* weight, const float* bias, std::int64_t rows,
                      std::int64_t in, std::int64_t out);

}  // namespace gen3d::models::cuda
