#pragma once
// Symmetric int8 quantization of the rows of a float32 matrix, the form both operands of the int8
// linear layers take (dnnl_matmul.h): per row r, scale[r] = max_c |x[r, c]| / 127 and
// q[r, c] = x[r, c] · (127 / max_c |x[r, c]|) rounded to nearest (ties to even), so q spans
// [-127, 127] and q · scale ≈ x. A weight [N, K] quantized this way has one scale per output
// channel; an activation [M, K] one per token. An all-zero row gets scale 0 and zeros; a row
// holding an infinity or a NaN gets scale NaN (and zeros), so the product of that row is NaN as in
// float32. ref:: is the scalar twin and agrees bit for bit.

#include <cstdint>

namespace gen3d::models::kernels {

// q[rows, cols] (row stride ldq) and scale[rows] from x[rows, cols] (row stride ldx); rows run in
// parallel over the current TBB arena when the matrix is large.
void quantize_rows_s8(std::int8_t* q, std::int64_t ldq, float* scale, const float* x,
                      std::int64_t ldx, std::int64_t rows, std::int64_t cols);

namespace ref {
void quantize_rows_s8(std::int8_t* q, std::int64_t ldq, float* scale, const float* x,
                      std::int64_t ldx, std::int64_t rows, std::int64_t cols);
}  // namespace ref

}  // namespace gen3d::models::kernels
