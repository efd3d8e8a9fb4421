#include "models/cuda/gemm.h"

#include <cublasLt.h>
#include <cuda_bf16.h>
#include <cuda_runtime.h>

#include <map>
#include <memory>
#include <string>
#include <tuple>

#include "models/core/error.h"
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
  ~Plan() {
    if (d) cublasLtMatrixLayoutDestroy(d);
    if (b) cublasLtMatrixLayoutDestroy(b);
    if (a) cublasLtMatrixLayoutDestroy(a);
    if (op) cublasLtMatmulDescDestroy(op);
  }
};

using Key = std::tuple<std::int64_t, std::int64_t, std::int64_t, std::int64_t, bool>;

// Row-major y[n, m] = x[n, k] W^T is column-major Y (m x n) = W^T-as-stored (k x m, transposed)
// times X (k x n). Returns null when cuBLASLt offers no algorithm.
std::unique_ptr<Plan> make_plan(std::int64_t m, std::int64_t n, std::int64_t k, std::int64_t ldd,
                                bool bias) {
  auto p = std::make_unique<Plan>();
  check(cublasLtMatmulDescCreate(&p->op, CUBLAS_COMPUTE_32F, CUDA_R_32F), "matmul desc");
  const cublasOperation_t ta = CUBLAS_OP_T, tb = CUBLAS_OP_N;
  check(cublasLtMatmulDescSetAttribute(p->op, CUBLASLT_MATMUL_DESC_TRANSA, &ta, sizeof ta),
        "transa");
  check(cublasLtMatmulDescSetAttribute(p->op, CUBLASLT_MATMUL_DESC_TRANSB, &tb, sizeof tb),
        "transb");
  if (bias) {
    const cublasLtEpilogue_t epi = CUBLASLT_EPILOGUE_BIAS;
    const cudaDataType_t bt = CUDA_R_32F;
    check(cublasLtMatmulDescSetAttribute(p->op, CUBLASLT_MATMUL_DESC_EPILOGUE, &epi, sizeof epi),
          "epilogue");
    check(
        cublasLtMatmulDescSetAttribute(p->op, CUBLASLT_MATMUL_DESC_BIAS_DATA_TYPE, &bt, sizeof bt),
        "bias type");
  }
  check(cublasLtMatrixLayoutCreate(&p->a, CUDA_R_16BF, static_cast<std::uint64_t>(k),
                                   static_cast<std::uint64_t>(m), k),
        "layout A");
  check(cublasLtMatrixLayoutCreate(&p->b, CUDA_R_16BF, static_cast<std::uint64_t>(k),
                                   static_cast<std::uint64_t>(n), k),
        "layout B");
  check(cublasLtMatrixLayoutCreate(&p->d, CUDA_R_32F, static_cast<std::uint64_t>(m),
                                   static_cast<std::uint64_t>(n), ldd),
        "layout D");
  cublasLtMatmulPreference_t pref = nullptr;
  check(cublasLtMatmulPreferenceCreate(&pref), "preference");
  const std::size_t ws = kWorkspaceBytes;
  cublasLtMatmulPreferenceSetAttribute(pref, CUBLASLT_MATMUL_PREF_MAX_WORKSPACE_BYTES, &ws,
                                       sizeof ws);
  cublasLtMatmulHeuristicResult_t result{};
  int found = 0;
  const cublasStatus_t st = cublasLtMatmulAlgoGetHeuristic(lt_handle(), p->op, p->a, p->b, p->d,
                                                           p->d, pref, 1, &result, &found);
  cublasLtMatmulPreferenceDestroy(pref);
  if (st != CUBLAS_STATUS_SUCCESS || found == 0) return nullptr;
  p->algo = result.algo;
  p->fused_bias = bias;
  return p;
}

struct State {
  std::map<Key, std::unique_ptr<Plan>> plans;
  void* workspace = nullptr;
  __nv_bfloat16* staging = nullptr;  // bf16 copy of the activations
  std::size_t staging_elems = 0;
};

State& state() {
  static State s;
  return s;
}

const Plan& plan_for(std::int64_t m, std::int64_t n, std::int64_t k, std::int64_t ldd, bool bias) {
  auto& plans = state().plans;
  const Key key{m, n, k, ldd, bias};
  if (auto it = plans.find(key); it != plans.end())
    return it->second ? *it->second : plan_for(m, n, k, ldd, false);
  auto p = make_plan(m, n, k, ldd, bias);
  if (!p && bias) {
    // No fused-bias algorithm for this shape: a plain GEMM, the bias added by bias_act.
    plans.emplace(key, nullptr);
    return plan_for(m, n, k, ldd, false);
  }
  if (!p)
    throw ModelError("cuBLASLt offers no bf16 GEMM for [" + std::to_string(n) + " x " +
                     std::to_string(k) + "] x [" + std::to_string(k) + " x " + std::to_string(m) +
                     "]");
  return *plans.emplace(key, std::move(p)).first->second;
}

}  // namespace

void gemm_bf16(float* y, std::int64_t ldy, const float* x, std::int64_t ldx,
               const std::uint16_t* weight, const float* bias, std::int64_t rows, std::int64_t in,
               std::int64_t out, kernels::Act act) {
  State& s = state();
  if (!s.workspace)
    check(cudaMallocAsync(&s.workspace, kWorkspaceBytes, stream()), "GEMM workspace");
  const auto need = static_cast<std::size_t>(rows * in);
  if (need > s.staging_elems) {
    if (s.staging) cudaFreeAsync(s.staging, stream());
    check(cudaMallocAsync(reinterpret_cast<void**>(&s.staging), need * sizeof(__nv_bfloat16),
                          stream()),
          "GEMM staging buffer");
    s.staging_elems = need;
  }
  to_bf16(s.staging, x, ldx, rows, in);
  const Plan& p = plan_for(out, rows, in, ldy, bias != nullptr);
  if (p.fused_bias)
    check(
        cublasLtMatmulDescSetAttribute(p.op, CUBLASLT_MATMUL_DESC_BIAS_POINTER, &bias, sizeof bias),
        "bias pointer");
  const float alpha = 1.0f, beta = 0.0f;
  check(cublasLtMatmul(lt_handle(), p.op, &alpha, weight, p.a, s.staging, p.b, &beta, y, p.d, y,
                       p.d, &p.algo, s.workspace, kWorkspaceBytes, stream()),
        "cublasLtMatmul");
  const float* rest_bias = p.fused_bias ? nullptr : bias;
  if (rest_bias || act != kernels::Act::kNone) bias_act(y, ldy, rows, out, rest_bias, act);
}

}  // namespace gen3d::models::cuda
