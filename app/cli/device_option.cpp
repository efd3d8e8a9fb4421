#include "app/cli/device_option.h"

#include <exception>

#include "pipeline/error.h"
#ifdef GEN3D_HAVE_CUDA
#include "models/cuda/backend.h"
#endif

namespace gen3d::app::cli {

void use_device(models::Device d) {
  if (d == models::Device::kCpu) return;
#ifdef GEN3D_HAVE_CUDA
  try {
    models::cuda::install();
  } catch (const std::exception& e) {
    throw pipeline::ConfigError(std::string("--device cuda: ") + e.what());
  }
#else
  throw pipeline::ConfigError(
      "--device cuda: this gen3d was built without the CUDA backend (no nvcc at build time, or "
      "GEN3D_CUDA=OFF)");
#endif
}

std::vector<std::pair<std::string, double>> profile_device(models::Device d,
                                                           const std::function<void()>& f) {
#ifdef GEN3D_HAVE_CUDA
  if (d == models::Device::kCuda) {
    models::cuda::set_profiling(true);
    f();
    models::cuda::set_profiling(false);
    return models::cuda::take_profile();
  }
#endif
  (void)d;
  (void)f;
  return {};
}

std::string device_description(models::Device d) {
#ifdef GEN3D_HAVE_CUDA
  if (d == models::Device::kCuda) return models::cuda::describe_gpu();
#endif
  return models::device_name(d);
}

}  // namespace gen3d::app::cli
