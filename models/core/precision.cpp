#include "models/core/precision.h"

#include <spdlog/spdlog.h>

#include <mutex>
#include <string>

#include "models/core/error.h"
#include "models/kernels/dnnl_matmul.h"

namespace gen3d::models {

Precision parse_precision(std::string_view s) {
  if (s == "auto") return Precision::kAuto;
  if (s == "fp32") return Precision::kFp32;
  if (s == "bf16") return Precision::kBf16;
  if (s == "int8") return Precision::kInt8;
  throw ModelError("precision '" + std::string(s) + "' is not one of auto, fp32, bf16, int8");
}

std::string_view precision_name(Precision p) {
  switch (p) {
    case Precision::kAuto:
      return "auto";
    case Precision::kFp32:
      return "fp32";
    case Precision::kBf16:
      return "bf16";
    case Precision::kInt8:
      return "int8";
  }
  return "?";
}

Precision resolve_precision(Precision p) {
  if (p == Precision::kInt8) {
    static const bool warned = [] {
      if (!kernels::cpu_has_vnni())
        spdlog::warn(
            "models: int8 on a CPU without AVX512-VNNI or AVX-VNNI: oneDNN sums int8 products in "
            "int16 there, which can saturate; bf16 or fp32 is safer ({})",
            kernels::dnnl_description());
      return true;
    }();
    (void)warned;
  }
  if (p != Precision::kAuto) return p;
  static const Precision chosen = [] {
    const bool native = kernels::cpu_has_native_bf16();
    const Precision c = native ? Precision::kBf16 : Precision::kFp32;
    spdlog::info("models: precision auto -> {} ({} bf16 instructions; {})", precision_name(c),
                 native ? "CPU has" : "CPU lacks", kernels::dnnl_description());
    return c;
  }();
  return chosen;
}

WeightStorage storage_for(Precision p, WeightStorage fp32_storage) {
  switch (resolve_precision(p)) {
    case Precision::kBf16:
      return WeightStorage::kBF16;
    case Precision::kInt8:
      return WeightStorage::kInt8;
    default:
      return fp32_storage;
  }
}

WeightStorage storage_on(Device device, WeightStorage storage, const std::string& what) {
  if (device == Device::kCpu || storage == WeightStorage::kBF16) return storage;
  if (storage == WeightStorage::kInt8)
    throw ModelError(what + ": int8 runs on the CPU only, not on " + device_name(device));
  // The device rounds every weight to bf16 anyway (and the SD VAE runs there from bf16 storage
  // only): bf16 on the host is the same network at half the memory.
  spdlog::info("{}: {} runs the networks in bf16: {} weights kept as bf16", what,
               device_name(device), storage_name(storage));
  return WeightStorage::kBF16;
}

}  // namespace gen3d::models
