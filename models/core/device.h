#pragma once
// Where a tensor lives and where a network runs: the CPU, or an accelerator whose backend the
// build registered (models/cuda). The core knows no accelerator API: a backend registers how
// its memory is allocated and copied, and the layers' operations (nn/device_ops.h).

#include <cstddef>
#include <string>
#include <string_view>

namespace gen3d::models {

enum class Device { kCpu, kCuda };

const char* device_name(Device d);  // "cpu", "cuda"
// "cpu" or "cuda"; anything else throws ModelError naming the value.
Device parse_device(std::string_view name);

// Memory on one device. Copies name both sides' devices; a backend handles host <-> device.
class DeviceMemory {
 public:
  virtual ~DeviceMemory() = default;
  virtual void* allocate(std::size_t bytes) const = 0;  // zero-filled
  virtual void release(void* p) const = 0;
  virtual void copy(void* dst, Device dst_device, const void* src, Device src_device,
                    std::size_t bytes) const = 0;
  // 2-D copy: rows of `width` bytes, `dst_pitch` / `src_pitch` bytes apart.
  virtual void copy_2d(void* dst, std::size_t dst_pitch, Device dst_device, const void* src,
                       std::size_t src_pitch, Device src_device, std::size_t width,
                       std::size_t rows) const = 0;
};

// The backend for `d`; throws ModelError when this build or process has none for it.
const DeviceMemory& device_memory(Device d);
// Called once by a backend's install(); `memory` must live for the process.
void register_device_memory(Device d, const DeviceMemory* memory);
bool has_device_memory(Device d);

// Makes `d` usable in this process: nothing for the CPU; for a device, runs the installer a
// program registered for it (once; it registers the device's memory and operations), else throws
// ModelError saying this program has no backend for it.
void ensure_device(Device d);
// A program that links a backend registers how to install it (cheap: nothing runs until a
// network asks for the device).
void register_device_installer(Device d, void (*install)());

}  // namespace gen3d::models
