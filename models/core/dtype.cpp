#include "models/core/dtype.h"

#if defined(__x86_64__)
#include <immintrin.h>
#endif

#include <algorithm>
#include <array>
#include <bit>
#include <cstring>
#include <memory>

#include "models/core/vector_clones.h"

namespace gen3d::models {

namespace {

struct DTypeInfo {
  DType type;
  std::string_view name;
  std::size_t size;
};

constexpr std::array<DTypeInfo, 10> kDTypes{{{DType::kF32, "F32", 4},
                                             {DType::kF16, "F16", 2},
                                             {DType::kBF16, "BF16", 2},
                                             {DType::kF64, "F64", 8},
                                             {DType::kI64, "I64", 8},
                                             {DType::kI32, "I32", 4},
                                             {DType::kI16, "I16", 2},
                                             {DType::kI8, "I8", 1},
                                             {DType::kU8, "U8", 1},
                                             {DType::kBool, "BOOL", 1}}};

float half_bits_to_float(std::uint16_t h) {
  const std::uint32_t sign = static_cast<std::uint32_t>(h & 0x8000u) << 16;
  const std::uint32_t exp = (h >> 10) & 0x1fu;
  std::uint32_t mant = h & 0x3ffu;
  std::uint32_t bits;
  if (exp == 0) {
    if (mant == 0) {
      bits = sign;  // signed zero
    } else {        // subnormal: renormalize
      int e = -1;
      do {
        ++e;
        mant <<= 1;
      } while ((mant & 0x400u) == 0);
      bits = sign | (static_cast<std::uint32_t>(127 - 15 - e) << 23) | ((mant & 0x3ffu) << 13);
    }
  } else if (exp == 31) {
    bits = sign | 0x7f800000u | (mant << 13);  // inf / NaN (payload kept)
  } else {
    bits = sign | ((exp + 127 - 15) << 23) | (mant << 13);
  }
  return std::bit_cast<float>(bits);
}

// 64K-entry lookup table, built on first use (thread-safe static init).
const float* half_table() {
  static const std::unique_ptr<float[]> table = [] {
    auto t = std::make_unique<float[]>(65536);
    for (std::uint32_t i = 0; i < 65536; ++i)
      t[i] = half_bits_to_float(static_cast<std::uint16_t>(i));
    return t;
  }();
  return table.get();
}

// Branch-free bit conversion, exact for every half (subnormals, inf, NaN payloads). Vectorizes
// (dtype.cpp is built with -fno-trapping-math so the selects if-convert).
void widen_half_block(const std::uint16_t* __restrict src, std::size_t n, float* __restrict dst) {
  for (std::size_t i = 0; i < n; ++i) {
    const std::uint32_t h = src[i];
    const std::uint32_t sign = (h & 0x8000u) << 16;
    const std::uint32_t em = h & 0x7fffu;
    std::uint32_t bits = (em << 13) + 0x38000000u;     // rebias exponent by 127 - 15
    bits = em >= 0x7c00u ? bits + 0x38000000u : bits;  // inf / NaN: exponent 255
    const float sub = static_cast<float>(static_cast<std::int32_t>(em)) * 5.9604644775390625e-8f;
    bits = em < 0x0400u ? std::bit_cast<std::uint32_t>(sub) : bits;  // zero / subnormal: em * 2^-24
    dst[i] = std::bit_cast<float>(sign | bits);
  }
}

}  // namespace

void widen_f16(const std::uint16_t* src, std::size_t n, float* dst) {
  widen_half_block(src, n, dst);
}

bool parse_dtype(std::string_view name, DType* out) {
  for (const auto& d : kDTypes) {
    if (d.name == name) {
      *out = d.type;
      return true;
    }
  }
  return false;
}

std::string_view dtype_name(DType t) {
  for (const auto& d : kDTypes)
    if (d.type == t) return d.name;
  return "?";
}

std::size_t dtype_size(DType t) {
  for (const auto& d : kDTypes)
    if (d.type == t) return d.size;
  return 0;
}

bool is_float_dtype(DType t) {
  return t == DType::kF32 || t == DType::kF16 || t == DType::kBF16 || t == DType::kF64;
}

float half_to_float(std::uint16_t h) {
  return half_table()[h];
}

std::uint16_t float_to_half(float f) {
  const std::uint32_t x = std::bit_cast<std::uint32_t>(f);
  const std::uint32_t sign = (x >> 16) & 0x8000u;
  const std::uint32_t absx = x & 0x7fffffffu;
  if (absx >= 0x7f800000u) {  // inf or NaN
    return static_cast<std::uint16_t>(sign | 0x7c00u | (absx > 0x7f800000u ? 0x200u : 0u));
  }
  if (absx >= 0x477ff000u) return static_cast<std::uint16_t>(sign | 0x7c00u);  // overflow -> inf
  const int exp = static_cast<int>(absx >> 23) - 127 + 15;
  std::uint32_t mant = (absx & 0x7fffffu) | 0x800000u;
  if (exp <= 0) {  // subnormal half (or zero)
    if (exp < -10) return static_cast<std::uint16_t>(sign);
    const int shift = 14 - exp;  // 24-bit mantissa -> 10-bit subnormal
    std::uint32_t r = mant >> shift;
    const std::uint32_t rem = mant & ((1u << shift) - 1u);
    const std::uint32_t half = 1u << (shift - 1);
    if (rem > half || (rem == half && (r & 1u))) ++r;
    return static_cast<std::uint16_t>(sign | r);
  }
  std::uint32_t r = (static_cast<std::uint32_t>(exp) << 10) | ((mant >> 13) & 0x3ffu);
  const std::uint32_t rem = mant & 0x1fffu;
  if (rem > 0x1000u || (rem == 0x1000u && (r & 1u))) ++r;  // carry may bump the exponent: fine
  return static_cast<std::uint16_t>(sign | r);
}

std::string_view storage_name(WeightStorage s) {
  switch (s) {
    case WeightStorage::kF32:
      return "f32";
    case WeightStorage::kF16:
      return "f16";
    case WeightStorage::kBF16:
      return "bf16";
    case WeightStorage::kInt8:
      return "int8";
  }
  return "?";
}

float bf16_to_float(std::uint16_t b) {
  return std::bit_cast<float>(static_cast<std::uint32_t>(b) << 16);
}

namespace {
inline std::uint16_t to_bf16(float f) {
  std::uint32_t x = std::bit_cast<std::uint32_t>(f);
  if ((x & 0x7fffffffu) > 0x7f800000u) return static_cast<std::uint16_t>((x >> 16) | 0x40u);
  x += 0x7fffu + ((x >> 16) & 1u);
  return static_cast<std::uint16_t>(x >> 16);
}
}  // namespace

std::uint16_t float_to_bf16(float f) {
  return to_bf16(f);
}

// Rounding activations is a visible share of a bf16 attention: wider vector units too.
GEN3D_VECTOR_CLONES void round_to_bf16(const float* src, std::size_t n, std::uint16_t* dst) {
  for (std::size_t i = 0; i < n; ++i) dst[i] = to_bf16(src[i]);
}

#ifndef GEN3D_NO_VECTOR_CLONES
namespace {
[[gnu::target("avx512f,avx512bf16")]] std::size_t round_normal_avx512bf16(const float* src,
                                                                          std::size_t n,
                                                                          std::uint16_t* dst) {
  std::size_t i = 0;
  for (; i + 16 <= n; i += 16)
    _mm256_storeu_si256(reinterpret_cast<__m256i*>(dst + i),
                        reinterpret_cast<__m256i>(_mm512_cvtneps_pbh(_mm512_loadu_ps(src + i))));
  return i;
}
}  // namespace
#endif

void round_normal_to_bf16(const float* src, std::size_t n, std::uint16_t* dst) {
  std::size_t done = 0;
#ifndef GEN3D_NO_VECTOR_CLONES
  static const bool bf16_unit = __builtin_cpu_supports("avx512bf16");
  if (bf16_unit) done = round_normal_avx512bf16(src, n, dst);
#endif
  round_to_bf16(src + done, n - done, dst + done);
}

void widen_to_f32(DType t, const void* src, std::size_t n, float* dst) {
  const auto* bytes = static_cast<const unsigned char*>(src);
  switch (t) {
    case DType::kF32:
      std::memcpy(dst, bytes, n * sizeof(float));
      return;
    case DType::kF16: {
      // Through a small aligned staging buffer (the source may be unaligned file bytes).
      std::uint16_t stage[1024];
      for (std::size_t i = 0; i < n; i += 1024) {
        const std::size_t m = std::min<std::size_t>(1024, n - i);
        std::memcpy(stage, bytes + 2 * i, 2 * m);
        widen_half_block(stage, m, dst + i);
      }
      return;
    }
    case DType::kBF16:
      for (std::size_t i = 0; i < n; ++i) {
        std::uint16_t h;
        std::memcpy(&h, bytes + 2 * i, 2);
        dst[i] = bf16_to_float(h);
      }
      return;
    case DType::kF64:
      for (std::size_t i = 0; i < n; ++i) {
        double d;
        std::memcpy(&d, bytes + 8 * i, 8);
        dst[i] = static_cast<float>(d);
      }
      return;
    default:
      for (std::size_t i = 0; i < n; ++i) dst[i] = 0.0f;  // callers check is_float_dtype first
      return;
  }
}

}  // namespace gen3d::models
