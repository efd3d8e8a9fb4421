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

// While profiling is on (backend.h: set_profiling), the GPU time of the work issued in this
// object's lifetime is added to `name` (a string literal) in the profile. While a device timeline
// is recorded (DeviceOps::start_timeline), that work is also a span of the timeline.
class ProfileSpan {
 public:
  explicit ProfileSpan(const char* name);
  ~ProfileSpan();
  ProfileSpan(const ProfileSpan&) = delete;
  ProfileSpan& operator=(const ProfileSpan&) = delete;

 private:
  const char* name_;
  cudaEvent_t start_ = nullptr;
  cudaEvent_t timeline_start_ = nullptr;  // the timeline's own, apart from the profile's
};

}  // namespace gen3d::models::cuda
