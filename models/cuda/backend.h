#pragma once
// The CUDA backend: install() registers CUDA memory for models::Tensor and the CUDA DeviceOps
// (nn/device_ops.h), after which networks loaded with Device::kCuda run their layers on the GPU:
// bf16 GEMMs on cuBLASLt with fused bias epilogues, this backend's attention, norm and
// modulation kernels (kernels.h), one stream in call order, weights uploaded once per layer.

#include <string>
#include <utility>
#include <vector>

namespace gen3d::models::cuda {

// Whether a CUDA GPU is visible to this process (never throws).
bool gpu_visible();
// Registers the backend (once; later calls do nothing). Throws ModelError when no GPU is visible.
void install();
// While on, every operation is bracketed by CUDA events (for a breakdown run, not for timing the
// whole: the events add a little work). take_profile() waits for the GPU and returns the
// milliseconds per operation kind since the last call ("linear", "attention", ...), largest first.
void set_profiling(bool on);
std::vector<std::pair<std::string, double>> take_profile();

// "NVIDIA H100 80GB HBM3, 132 SMs, 79.1 GiB, driver 13.0, runtime 13.0" (empty when none).
std::string describe_gpu();

}  // namespace gen3d::models::cuda
