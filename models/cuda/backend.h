#pragma once
// The CUDA backend: install() registers CUDA memory for models::Tensor and the CUDA DeviceOps
// (nn/device_ops.h), after which networks loaded with Device::kCuda run their layers on the GPU:
// bf16 GEMMs on cuBLASLt with fused bias epilogues, this backend's attention, norm and
// modulation kernels (kernels.h), one stream in call order, weights uploaded once per layer.

#include <string>

namespace gen3d::models::cuda {

// Whether a CUDA GPU is visible to this process (never throws).
bool gpu_visible();
// Registers the backend (once; later calls do nothing). Throws ModelError when no GPU is visible.
void install();
// "NVIDIA H100 80GB HBM3, 132 SMs, 79.1 GiB, driver 13.0, runtime 13.0" (empty when none).
std::string describe_gpu();

}  // namespace gen3d::models::cuda
