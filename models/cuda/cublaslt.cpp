#include "models/cuda/cublaslt.h"

#include <dlfcn.h>

#include <mutex>
#include <string>

#include "models/core/error.h"

namespace gen3d::models::cuda {

namespace {

const std::string kLibrary = "libcublasLt.so." + std::to_string(CUBLAS_VER_MAJOR);

template <typename F>
void resolve(void* lib, F& f, const char* name) {
  void* p = dlsym(lib, name);
  if (!p) throw ModelError(kLibrary + " has no " + name + " (a cuBLASLt older than gen3d's)");
  f = reinterpret_cast<F>(p);
}

CublasLt load() {
  // The dynamic loader's search (LD_LIBRARY_PATH, ld.so.cache), then the toolkit gen3d was built
  // against.
  void* lib = dlopen(kLibrary.c_str(), RTLD_NOW | RTLD_LOCAL);
  if (!lib)
    lib = dlopen((std::string(GEN3D_CUDA_LIBRARY_DIR) + "/" + kLibrary).c_str(),
                 RTLD_NOW | RTLD_LOCAL);
  if (!lib) {
    const char* why = dlerror();
    throw ModelError("the CUDA backend needs " + kLibrary + ", which could not be loaded" +
                     (why ? std::string(": ") + why : std::string()) +
                     " (add its folder to LD_LIBRARY_PATH)");
  }
  CublasLt a{};
  resolve(lib, a.cublasLtCreate, "cublasLtCreate");
  resolve(lib, a.cublasLtMatmul, "cublasLtMatmul");
  resolve(lib, a.cublasLtMatmulAlgoGetHeuristic, "cublasLtMatmulAlgoGetHeuristic");
  resolve(lib, a.cublasLtMatmulDescCreate, "cublasLtMatmulDescCreate");
  resolve(lib, a.cublasLtMatmulDescDestroy, "cublasLtMatmulDescDestroy");
  resolve(lib, a.cublasLtMatmulDescSetAttribute, "cublasLtMatmulDescSetAttribute");
  resolve(lib, a.cublasLtMatmulPreferenceCreate, "cublasLtMatmulPreferenceCreate");
  resolve(lib, a.cublasLtMatmulPreferenceDestroy, "cublasLtMatmulPreferenceDestroy");
  resolve(lib, a.cublasLtMatmulPreferenceSetAttribute, "cublasLtMatmulPreferenceSetAttribute");
  resolve(lib, a.cublasLtMatrixLayoutCreate, "cublasLtMatrixLayoutCreate");
  resolve(lib, a.cublasLtMatrixLayoutDestroy, "cublasLtMatrixLayoutDestroy");
  return a;  // the library stays loaded for the process
}

}  // namespace

const CublasLt& cublaslt() {
  static const CublasLt api = load();  // a failed load throws, and the next call tries again
  return api;
}

}  // namespace gen3d::models::cuda
