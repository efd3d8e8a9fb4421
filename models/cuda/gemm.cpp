#include "models/cuda/gemm.h"

#include <cublasLt.h>
#include <cuda_bf16.h>
#include <cuda_runtime.h>

#include <cstdint>
#include <map>
#include <memory>
#include <string>
#include <tuple>

#include "models/core/error.h"
#include "models/cuda/cublaslt.h"
#include "models/cuda/kernels.h"
#include "models/cuda/runtime.h"

namespace gen3d::models::cuda {

namespace {

constexpr std::size_t kWorkspaceBytes = 32u << 20;

// One matmul shape: its descriptors and the algorithm cuBLASLt's heuristic picked, made once.
struct Plan {
  cublasLtMatmulDesc_t op = nullptr;
  cublasLtMatrixLayout_t a = nullptr, b = nullptr, d = nullptr;
  cublasLtMatmulAlgo_t algo{};
  bool fused_bias = false;
  bool fused_gelu = false;  // tanh-approximated GELU in the epilogue
  ~Plan() {
    if (d) cublaslt().cublasLtMatrixLayoutDestroy(d);
    if (b) cublaslt().cublasLtMatrixLayoutDestroy(b);
    if (a) cublaslt().cublasLtMatrixLayoutDestroy(a);
    if (op) cublaslt().cublasLtMatmulDescDestroy(op);
  }
};

// m (out), n (rows), k (padded in), ldd, bias, gelu, the output pointer's alignment in bytes.
using Key =
    std::tuple<std::int64_t, std::int64_t, std::int64_t, std::int64_t, bool, bool, std::uint32_t>;

// Row-major y[n, m] = x[n, k] W^T is column-major Y (m x n) = W^T-as-stored (k x m, transposed)
// times X (k x n). Returns null when cuBLASLt offers no algorithm.
std::unique_ptr<Plan> make_plan(const Key& key) {
  const auto [m, n, k, ldd, bias, gelu, align_d] = key;
  auto p = std::make_unique<Plan>();
  check(cublaslt().cublasLtMatmulDescCreate(&p->op, CUBLAS_COMPUTE_32F, CUDA_R_32F), "matmul desc");
  const cublasOperation_t ta = CUBLAS_OP_T, tb = CUBLAS_OP_N;
  check(
      cublaslt().cublasLtMatmulDescSetAttribute(p->op, CUBLASLT_MATMUL_DESC_TRANSA, &ta, sizeof ta),
      "transa");
  check(
      cublaslt().cublasLtMatmulDescSetAttribute(p->op, CUBLASLT_MATMUL_DESC_TRANSB, &tb, sizeof tb),
      "transb");
  if (bias || gelu) {
    const cublasLtEpilogue_t epi = bias && gelu ? CUBLASLT_EPILOGUE_GELU_BIAS
                                   : gelu       ? CUBLASLT_EPILOGUE_GELU
                                                : CUBLASLT_EPILOGUE_BIAS;
    check(cublaslt().cublasLtMatmulDescSetAttribute(p->op, CUBLASLT_MATMUL_DESC_EPILOGUE, &epi,
                                                    sizeof epi),
          "epilogue");
  }
  if (bias) {
    const cudaDataType_t bt = CUDA_R_32F;
    check(cublaslt().cublasLtMatmulDescSetAttribute(p->op, CUBLASLT_MATMUL_DESC_BIAS_DATA_TYPE, &bt,
                                                    sizeof bt),
          "bias type");
  }
  check(cublaslt().cublasLtMatrixLayoutCreate(&p->a, CUDA_R_16BF, static_cast<std::uint64_t>(k),
                                              static_cast<std::uint64_t>(m), k),
        "layout A");
  check(cublaslt().cublasLtMatrixLayoutCreate(&p->b, CUDA_R_16BF, static_cast<std::uint64_t>(k),
                                              static_cast<std::uint64_t>(n), k),
        "layout B");
  check(cublaslt().cublasLtMatrixLayoutCreate(&p->d, CUDA_R_32F, static_cast<std::uint64_t>(m),
                                              static_cast<std::uint64_t>(n), ldd),
        "layout D");
  cublasLtMatmulPreference_t pref = nullptr;
  check(cublaslt().cublasLtMatmulPreferenceCreate(&pref), "preference");
  const std::size_t ws = kWorkspaceBytes;
  cublaslt().cublasLtMatmulPreferenceSetAttribute(pref, CUBLASLT_MATMUL_PREF_MAX_WORKSPACE_BYTES,
                                                  &ws, sizeof ws);
  // The output may start inside a larger buffer (a slice of rows or columns): algorithms must
  // not assume more alignment than it has. A and B are whole allocations.
  const std::uint32_t al = align_d;
  cublaslt().cublasLtMatmulPreferenceSetAttribute(pref, CUBLASLT_MATMUL_PREF_MIN_ALIGNMENT_C_BYTES,
                                                  &al, sizeof al);
  cublaslt().cublasLtMatmulPreferenceSetAttribute(pref, CUBLASLT_MATMUL_PREF_MIN_ALIGNMENT_D_BYTES,
                                                  &al, sizeof al);
  cublasLtMatmulHeuristicResult_t result{};
  int found = 0;
  const cublasStatus_t st = cublaslt().cublasLtMatmulAlgoGetHeuristic(
      lt_handle(), p->op, p->a, p->b, p->d, p->d, pref, 1, &result, &found);
  cublaslt().cublasLtMatmulPreferenceDestroy(pref);
  if (st != CUBLAS_STATUS_SUCCESS || found == 0) return nullptr;
  p->algo = result.algo;
  p->fused_bias = bias;
  p->fused_gelu = gelu;
  return p;
}

struct State {
  std::map<Key, std::unique_ptr<Plan>> plans;  // null: no algorithm for that key
  void* workspace = nullptr;
  __nv_bfloat16* staging = nullptr;  // bf16 copy of the activations
  std::size_t staging_elems = 0;
};

State& state() {
  static State s;
  return s;
}

// The plan for a shape with as much of bias and GELU in the epilogue as cuBLASLt offers an
// algorithm for: first both, then the bias alone, then neither (the rest runs in bias_act).
// Null when it offers none at all (the SIMT kernel runs the product).
const Plan* plan_for(Key key) {
  auto& plans = state().plans;
  auto it = plans.find(key);
  if (it == plans.end()) it = plans.emplace(key, make_plan(key)).first;
  if (it->second) return it->second.get();
  auto& [m, n, k, ldd, bias, gelu, align] = key;
  if (gelu) {
    gelu = false;
    return plan_for(key);
  }
  if (bias) {
    bias = false;
    return plan_for(key);
  }
  return nullptr;
}

std::uint32_t alignment(const void* p) {
  const auto v = reinterpret_cast<std::uintptr_t>(p);
  std::uint32_t a = 256;
  while (a > 4 && v % a != 0) a /= 2;
  return a;
}

}  // namespace

std::int64_t gemm_padded_in(std::int64_t in) {
  return (in + 7) / 8 * 8;
}

void gemm_bf16(float* y, std::int64_t ldy, const float* x, std::int64_t ldx,
               const std::uint16_t* weight, const float* bias, std::int64_t rows, std::int64_t in,
               std::int64_t out, kernels::Act act) {
  State& s = state();
  if (!s.workspace)
    check(cudaMallocAsync(&s.workspace, kWorkspaceBytes, stream()), "GEMM workspace");
  const std::int64_t k = gemm_padded_in(in);
  const auto need = static_cast<std::size_t>(rows * k);
  if (need > s.staging_elems) {
    if (s.staging) cudaFreeAsync(s.staging, stream());
    check(cudaMallocAsync(reinterpret_cast<void**>(&s.staging), need * sizeof(__nv_bfloat16),
                          stream()),
          "GEMM staging buffer");
    s.staging_elems = need;
  }
  // Rows padded to whole 16-byte groups: zeros times the weight's zero columns add nothing.
  if (k != in)
    check(cudaMemsetAsync(s.staging, 0, need * sizeof(__nv_bfloat16), stream()), "GEMM staging");
  to_bf16(s.staging, k, x, ldx, rows, in);
  const bool gelu = act == kernels::Act::kGeluTanh;
  const Plan* p = plan_for({out, rows, k, ldy, bias != nullptr, gelu, alignment(y)});
  if (!p) {
    gemm_simt(y, ldy, s.staging, k, weight, k, rows, in, out);
    if (bias || act != kernels::Act::kNone) bias_act(y, ldy, rows, out, bias, act);
    return;
  }
  if (p->fused_bias)
    check(cublaslt().cublasLtMatmulDescSetAttribute(p->op, CUBLASLT_MATMUL_DESC_BIAS_POINTER, &bias,
                                                    sizeof bias),
          "bias pointer");
  const float alpha = 1.0f, beta = 0.0f;
  check(
      cublaslt().cublasLtMatmul(lt_handle(), p->op, &alpha, weight, p->a, s.staging, p->b, &beta, y,
                                p->d, y, p->d, &p->algo, s.workspace, kWorkspaceBytes, stream()),
      "cublasLtMatmul");
  const float* rest_bias = p->fused_bias ? nullptr : bias;
  const kernels::Act rest_act = p->fused_gelu ? kernels::Act::kNone : act;
  if (rest_bias || rest_act != kernels::Act::kNone)
    bias_act(y, ldy, rows, out, rest_bias, rest_act);
}

void gemm_bf16_staged(float* y, std::int64_t ldy, const std::uint16_t* x,
                      const std::uint16_t* weight, const float* bias, std::int64_t rows,
                      std::int64_t in, std::int64_t out) {
  if (rows == 0) return;
  State& s = state();
  if (!s.workspace)
    check(cudaMallocAsync(&s.workspace, kWorkspaceBytes, stream()), "GEMM workspace");
  const std::int64_t k = gemm_padded_in(in);
  const auto* xb = reinterpret_cast<const __nv_bfloat16*>(x);
  const Plan* p = plan_for({out, rows, k, ldy, bias != nullptr, false, alignment(y)});
  if (!p) {
    gemm_simt(y, ldy, xb, k, weight, k, rows, in, out);
    if (bias) bias_act(y, ldy, rows, out, bias, kernels::Act::kNone);
    return;
  }
  if (p->fused_bias)
    check(cublaslt().cublasLtMatmulDescSetAttribute(p->op, CUBLASLT_MATMUL_DESC_BIAS_POINTER, &bias,
                                                    sizeof bias),
          "bias pointer");
  const float alpha = 1.0f, beta = 0.0f;
  check(cublaslt().cublasLtMatmul(lt_handle(), p->op, &alpha, weight, p->a, xb, p->b, &beta, y,
                                  p->d, y, p->d, &p->algo, s.workspace, kWorkspaceBytes, stream()),
        "cublasLtMatmul");
  if (!p->fused_bias && bias) bias_act(y, ldy, rows, out, bias, kernels::Act::kNone);
}

}  // namespace gen3d::models::cuda
