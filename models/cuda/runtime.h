#pragma once
// The CUDA backend's process-wide state: one stream every operation is issued on (so the order
// of operations is the order of the calls), the cuBLASLt handle, and error checks that throw
// ModelError naming the call.

#include <cublasLt.h>
#include <cuda_runtime.h>

#include <string>

namespace gen3d::models::cuda {

cudaStream_t stream();
cublasLtHandle_t lt_handle();

// Throws ModelError "<what>: <CUDA's message>" unless `e` is cudaSuccess.
void check(cudaError_t e, const char* what);
void check(cublasStatus_t s, const char* what);
// Checks the last launch on the calling thread.
void check_launch(const char* what);

}  // namespace gen3d::models::cuda
