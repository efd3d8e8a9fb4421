#pragma once
// cuBLASLt's entry points, resolved from its shared library when the backend is installed. gen3d
// does not link cuBLASLt: loading the library costs a process about 70 ms and 200 MB resident at
// start-up, which every run on the CPU would pay.

#include <cublasLt.h>

namespace gen3d::models::cuda {

struct CublasLt {
  decltype(&::cublasLtCreate) cublasLtCreate;
  decltype(&::cublasLtMatmul) cublasLtMatmul;
  decltype(&::cublasLtMatmulAlgoGetHeuristic) cublasLtMatmulAlgoGetHeuristic;
  decltype(&::cublasLtMatmulDescCreate) cublasLtMatmulDescCreate;
  decltype(&::cublasLtMatmulDescDestroy) cublasLtMatmulDescDestroy;
  decltype(&::cublasLtMatmulDescSetAttribute) cublasLtMatmulDescSetAttribute;
  decltype(&::cublasLtMatmulPreferenceCreate) cublasLtMatmulPreferenceCreate;
  decltype(&::cublasLtMatmulPreferenceDestroy) cublasLtMatmulPreferenceDestroy;
  decltype(&::cublasLtMatmulPreferenceSetAttribute) cublasLtMatmulPreferenceSetAttribute;
  decltype(&::cublasLtMatrixLayoutCreate) cublasLtMatrixLayoutCreate;
  decltype(&::cublasLtMatrixLayoutDestroy) cublasLtMatrixLayoutDestroy;
};

// The library (libcublasLt.so.<major> of the toolkit gen3d was built with), loaded on the first
// call; throws ModelError naming it and the loader's message when it cannot be loaded.
const CublasLt& cublaslt();

}  // namespace gen3d::models::cuda
