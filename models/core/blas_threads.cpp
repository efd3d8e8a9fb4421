#include "models/core/blas_threads.h"

#include <dlfcn.h>

#include <spdlog/spdlog.h>
#include <mutex>

namespace gen3d::models {

namespace {

using SetFn = void (*)(int);
using GetFn = int (*)();

struct BlasApi {
  SetFn set = nullptr;
  GetFn get = nullptr;
};

const BlasApi& api() {
  static const BlasApi a = [] {
    BlasApi r;
    r.set = reinterpret_cast<SetFn>(::dlsym(RTLD_DEFAULT, "openblas_set_num_threads"));
    r.get = reinterpret_cast<GetFn>(::dlsym(RTLD_DEFAULT, "openblas_get_num_threads"));
    return r;
  }();
  return a;
}

}  // namespace

void ensure_serial_blas() {
  static std::once_flag once;
  std::call_once(once, [] {
    if (api().set) {
      api().set(1);
      spdlog::debug("models: OpenBLAS set to 1 thread (TBB partitions the GEMMs)");
    } else {
      spdlog::debug("models: BLAS thread API not found; assuming a single-threaded BLAS");
    }
  });
}

bool set_blas_threads(int n) {
  ensure_serial_blas();
  if (!api().set) return false;
  api().set(n);
  return true;
}

int blas_threads() {
  return api().get ? api().get() : -1;
}

}  // namespace gen3d::models
