#pragma once
// Storage dtypes of weight files and their widening to float32.

#include <cstddef>
#include <cstdint>
#include <string_view>

namespace gen3d::models {

enum class DType { kF32, kF16, kBF16, kF64, kI64, kI32, kI16, kI8, kU8, kBool };

// How a network keeps its large weight matrices in memory. kF16 halves their footprint and
// widens panels on use (norm scales and biases stay float32); values round to half. kBF16 is the
// bf16 precision mode: weights round to bf16 and are packed for oneDNN, and the GEMMs they feed
// take bf16 activations with float32 accumulation (norms, softmax and the residual stream stay
// float32). kInt8 is the int8 precision mode: the Linear layers a network marks as quantizable
// (the big products of its transformer blocks) keep int8 weights with one float32 scale per output
// channel and take int8 activations quantized per token (W8A8); every other weight is kept as
// kBF16 keeps it, so a network with no such layers runs in bf16.
enum class WeightStorage { kF32, kF16, kBF16, kInt8 };

// Whether weights are rounded to bf16 for oneDNN (kBF16, and kInt8's layers that stay bf16).
inline bool bf16_storage(WeightStorage s) {
  return s == WeightStorage::kBF16 || s == WeightStorage::kInt8;
}

// "f32", "f16", "bf16", "int8".
std::string_view storage_name(WeightStorage s);

// "F32" -> DType::kF32 etc. (safetensors spelling); returns false for unknown names.
bool parse_dtype(std::string_view name, DType* out);
std::string_view dtype_name(DType t);
std::size_t dtype_size(DType t);
// True for the dtypes that widen to float32 (F32, F16, BF16, F64).
bool is_float_dtype(DType t);

// IEEE half -> float (exact; handles subnormals, inf, NaN).
float half_to_float(std::uint16_t h);
// float -> IEEE half, round to nearest even (used by tests and writers).
std::uint16_t float_to_half(float f);
// bfloat16 -> float (exact) and float -> bfloat16 (round to nearest even).
float bf16_to_float(std::uint16_t b);
std::uint16_t float_to_bf16(float f);
// float_to_bf16 over `n` values (vectorized: every GEMM with bf16 activations rounds them).
void round_to_bf16(const float* src, std::size_t n, std::uint16_t* dst);
// The same for values that are zero or normal floats (no subnormal, infinity or NaN: softmax
// weights, for one), on the CPU's own bf16 conversion where it has one (AVX512-BF16). That
// conversion flushes subnormals, which such values never are, so the bits are round_to_bf16's.
void round_normal_to_bf16(const float* src, std::size_t n, std::uint16_t* dst);

// Widen `n` aligned IEEE halves to float32 (vectorized; the F16-weight GEMM uses it per panel).
void widen_f16(const std::uint16_t* src, std::size_t n, float* dst);

// Widen `n` little-endian elements of `src` (dtype t, unaligned bytes allowed) to float32.
void widen_to_f32(DType t, const void* src, std::size_t n, float* dst);

}  // namespace gen3d::models
