#pragma once
// bf16 linear layers on oneDNN: y = act(x W^T + b) with bf16 operands and float32 accumulation
// and output. The weight is rounded to bf16 once, reordered into the layout the matmul primitive
// prefers and kept only in that form (half the memory of float32); activations are rounded to
// bf16 on the way in. Primitives are cached by shape. oneDNN runs on its own (OpenMP) threads:
// each call gets the cores the current TBB arena allows, minus those other calls in flight hold,
// so the flow graph and oneDNN never together ask for more threads than the arena has.
// ref:: is the scalar twin: the same bf16 roundings, products summed in double.
// int8 (W8A8) linear layers run on oneDNN's int8 matmul (AVX512-VNNI where the CPU has it); see
// Int8Weight. No oneDNN header is included here.

#include <cstdint>
#include <memory>
#include <vector>

#include "models/kernels/activations.h"

namespace gen3d::models::kernels {

class Bf16Weight {
 public:
  // Packs w[N, K] (row-major, PyTorch's Linear layout) rounded to bf16.
  Bf16Weight(const float* w, std::int64_t N, std::int64_t K);
  ~Bf16Weight();
  Bf16Weight(const Bf16Weight&) = delete;
  Bf16Weight& operator=(const Bf16Weight&) = delete;

  std::int64_t n() const { return n_; }
  std::int64_t k() const { return k_; }
  // Bytes held (the packed layout may pad).
  std::size_t bytes() const;
  // The bf16 bits in plain [N, K] order (unpacked on demand; tests and the reference twin).
  std::vector<std::uint16_t> plain() const;

  struct Impl;
  Impl& impl() const { return *impl_; }

 private:
  std::int64_t n_, k_;
  std::unique_ptr<Impl> impl_;
};

// A linear layer's weight w[N, K] quantized to int8 once, symmetric per output channel
// (quantize.h: scale[n] = max_k |w[n, k]| / 127), kept as plain [N, K] int8 (a quarter of float32)
// with its N float32 scales.
class Int8Weight {
 public:
  Int8Weight(const float* w, std::int64_t N, std::int64_t K);
  Int8Weight(const Int8Weight&) = delete;
  Int8Weight& operator=(const Int8Weight&) = delete;

  std::int64_t n() const { return n_; }
  std::int64_t k() const { return k_; }
  std::size_t bytes() const { return q_.size() + scales_.size() * sizeof(float); }
  const std::int8_t* data() const { return q_.data(); }   // [N, K]
  const float* scales() const { return scales_.data(); }  // [N]

 private:
  std::int64_t n_, k_;
  std::vector<std::int8_t> q_;
  std::vector<float> scales_;
};

// A convolution's weight (PyTorch (O, I, kh, kw) values, given packed as (O, kh, kw, I)) rounded
// to bf16 and kept in oneDNN's preferred layout; bias float32.
class Bf16ConvWeight {
 public:
  Bf16ConvWeight(const float* ohwi, const float* bias, std::int64_t cout, std::int64_t cin,
                 std::int64_t kh, std::int64_t kw);
  ~Bf16ConvWeight();
  Bf16ConvWeight(const Bf16ConvWeight&) = delete;
  Bf16ConvWeight& operator=(const Bf16ConvWeight&) = delete;
  std::int64_t cout, cin, kh, kw;
  std::vector<float> bias;  // cout, or empty
  // The bf16 bits in (O, kh, kw, I) order (tests and the reference twin).
  std::vector<std::uint16_t> plain() const;
  std::size_t bytes() const;
  struct Impl;
  Impl& impl() const { return *impl_; }

 private:
  std::unique_ptr<Impl> impl_;
};

// y (batch, oh, ow, cout) f32 = conv(bf16(x) (batch, h, w, cin), W) + bias, NHWC, with zero
// padding (top, bottom, left, right) and the stride; oh and ow as in ConvGeometry.
void conv2d_bf16(float* y, const float* x, std::int64_t batch, std::int64_t h, std::int64_t w,
                 const Bf16ConvWeight& wt, std::int64_t stride, std::int64_t pad_top,
                 std::int64_t pad_bottom, std::int64_t pad_left, std::int64_t pad_right);

// y[M, N] (row stride ldy) = act(bf16(x)[M, K] (row stride ldx) · W^T + b[N]); b may be null.
void linear_bf16(float* y, std::int64_t ldy, const float* x, std::int64_t ldx, const Bf16Weight& w,
                 const float* b, std::int64_t M, Act act = Act::kNone);

// y[M, N] (row stride ldy) = act(acc[M, N] · w.scales[n] · sx[m] + b[N]) with acc the exact int32
// products of x quantized per row (quantize.h: sx[m] its scales) and the int8 weight; b may be
// null. oneDNN's matmul applies the weight scales; a binary primitive then applies the row scales
// (oneDNN 2.6's matmul has no fast per-row scale), the bias and the activation in one pass.
void linear_int8(float* y, std::int64_t ldy, const float* x, std::int64_t ldx, const Int8Weight& w,
                 const float* b, std::int64_t M, Act act = Act::kNone);

// c[M, N] (row stride ldc) = alpha · bf16(a)[M, K] (row stride lda) · bf16(b)[K, N] (row stride
// ldb, or b^T when trans_b with b [N, K]) — activations on both sides (attention blocks).
void matmul_bf16(float* c, std::int64_t ldc, const float* a, std::int64_t lda, const float* b,
                 std::int64_t ldb, bool trans_b, std::int64_t M, std::int64_t K, std::int64_t N,
                 float alpha = 1.0f);

// c[M, N] (row stride ldc) = alpha · a[M, K] · b[K, N] (+ c when accumulate), a and b already bf16
// bits (b^T when trans_b, b then [N, K]); float32 accumulation. Runs on the calling thread only:
// for the blocks of work that run inside parallel tasks (attention).
void gemm_bf16_serial(float* c, std::int64_t ldc, const std::uint16_t* a, std::int64_t lda,
                      const std::uint16_t* b, std::int64_t ldb, bool trans_b, std::int64_t M,
                      std::int64_t K, std::int64_t N, float alpha, bool accumulate);

// One owner of the cores, part two: oneDNN's OpenMP threads must not spin between calls while the
// TBB workers run the rest of a network (libgomp's default spin-wait made the bf16 delight UNet
// step 7x slower: 3.6-4.8 s against 0.6 s passive, 2 cores). libgomp reads OMP_WAIT_POLICY only
// when it is loaded, so executables call this first thing in main: unless the variable is set, it
// sets it to "passive" and re-executes the process (/proc/self/exe, same argv); on failure it
// returns and the process runs on.
void passive_omp_wait(char** argv);

// Whether this CPU runs bf16 matmuls natively (AVX512-BF16 or AMX), from oneDNN's ISA query.
bool cpu_has_native_bf16();
// Whether it has int8 dot products (AVX512-VNNI or AVX-VNNI): without them oneDNN sums pairs of
// int8 products in int16, which large activations can saturate.
bool cpu_has_vnni();
// oneDNN's version and CPU runtime, e.g. "oneDNN 2.6.3 (OpenMP)".
const char* dnnl_description();
// Threads the most recent oneDNN call was given (benchmarks report it).
int dnnl_last_threads();

namespace ref {
void linear_bf16(float* y, std::int64_t ldy, const float* x, std::int64_t ldx,
                 const std::uint16_t* w_bits, const float* b, std::int64_t M, std::int64_t K,
                 std::int64_t N, Act act = Act::kNone);
// The same quantization of x (ref::quantize_rows_s8), int32 sums, then the float32 epilogue in
// the fast path's order: float(acc) · w_scale[n] · sx[m] + b[n].
void linear_int8(float* y, std::int64_t ldy, const float* x, std::int64_t ldx,
                 const std::int8_t* wq, const float* w_scale, const float* b, std::int64_t M,
                 std::int64_t K, std::int64_t N, Act act = Act::kNone);
}  // namespace ref

}  // namespace gen3d::models::kernels
