#include "app/cli/device_option.h"

#include <exception>

#include "pipeline/error.h"
#ifdef GEN3D_HAVE_CUDA
#include "models/cuda/backend.h"
#endif

namespace gen3d::app::cli {

void register_devices() {
#ifdef GEN3D_HAVE_CUDA
  models::register_device_installer(models::Device::kCuda, &models::cuda::install);
#endif
}

void use_device(models::Device d) {
  try {
    models::ensure_device(d);
  } catch (const std::exception& e) {
    throw pipeline::ConfigError(std::string("--device ") + models::device_name(d) + ": " +
                                e.what());
  }
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
