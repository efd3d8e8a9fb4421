#include "models/core/device.h"

#include <array>
#include <atomic>
#include <cstdlib>
#include <cstring>
#include <new>

#include "models/core/error.h"

namespace gen3d::models {

namespace {

// Host memory: 64-byte aligned, as the CPU kernels' vector loads prefer.
class HostMemory final : public DeviceMemory {
 public:
  void* allocate(std::size_t bytes) const override {
    const std::size_t rounded = bytes == 0 ? 64 : ((bytes + 63) / 64) * 64;
    void* p = std::aligned_alloc(64, rounded);
    if (!p) throw std::bad_alloc();
    std::memset(p, 0, rounded);
    return p;
  }
  void release(void* p) const override { std::free(p); }
  void copy(void* dst, Device dst_device, const void* src, Device src_device,
            std::size_t bytes) const override {
    if (dst_device != Device::kCpu || src_device != Device::kCpu)
      throw ModelError("host memory cannot copy to or from a device");
    std::memcpy(dst, src, bytes);
  }
  void copy_2d(void* dst, std::size_t dst_pitch, Device dst_device, const void* src,
               std::size_t src_pitch, Device src_device, std::size_t width,
               std::size_t rows) const override {
    if (dst_device != Device::kCpu || src_device != Device::kCpu)
      throw ModelError("host memory cannot copy to or from a device");
    for (std::size_t r = 0; r < rows; ++r)
      std::memcpy(static_cast<char*>(dst) + r * dst_pitch,
                  static_cast<const char*>(src) + r * src_pitch, width);
  }
};

const HostMemory kHost;
std::array<std::atomic<const DeviceMemory*>, 2> g_memory{&kHost, nullptr};

}  // namespace

const char* device_name(Device d) {
  return d == Device::kCuda ? "cuda" : "cpu";
}

Device parse_device(std::string_view name) {
  if (name == "cpu") return Device::kCpu;
  if (name == "cuda") return Device::kCuda;
  throw ModelError("unknown device '" + std::string(name) + "' (expected cpu or cuda)");
}

const DeviceMemory& device_memory(Device d) {
  const DeviceMemory* m = g_memory[static_cast<std::size_t>(d)].load();
  if (!m)
    throw ModelError(std::string("no ") + device_name(d) +
                     " backend in this process: gen3d was built without CUDA (GEN3D_CUDA=OFF or "
                     "no nvcc at build time), or no GPU is visible");
  return *m;
}

void register_device_memory(Device d, const DeviceMemory* memory) {
  g_memory[static_cast<std::size_t>(d)].store(memory);
}

bool has_device_memory(Device d) {
  return g_memory[static_cast<std::size_t>(d)].load() != nullptr;
}

namespace {
std::array<std::atomic<void (*)()>, 2> g_installers{nullptr, nullptr};
}  // namespace

void register_device_installer(Device d, void (*install)()) {
  g_installers[static_cast<std::size_t>(d)].store(install);
}

void ensure_device(Device d) {
  if (d == Device::kCpu || has_device_memory(d)) return;
  void (*install)() = g_installers[static_cast<std::size_t>(d)].load();
  if (!install)
    throw ModelError(std::string("no ") + device_name(d) +
                     " backend in this program: gen3d was built without CUDA (GEN3D_CUDA=OFF or "
                     "no nvcc at build time)");
  install();  // throws ModelError when no GPU is visible
}

}  // namespace gen3d::models
