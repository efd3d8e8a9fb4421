#pragma once
// The device a command's networks run on: the CPU always; CUDA where this gen3d was built with
// the CUDA backend and a GPU is visible.

#include <functional>
#include <string>
#include <utility>
#include <vector>

#include "models/core/device.h"

namespace gen3d::app::cli {

// Registers the backends this program links (models::ensure_device installs them on first use,
// e.g. when a pipeline node asks for `device: cuda`). Called once at startup.
void register_devices();
// Makes `d` usable in this process (installs the CUDA backend once); throws
// pipeline::ConfigError saying why it cannot be.
void use_device(models::Device d);
// Runs `f` with the device's per-operation profiling on and returns milliseconds per operation
// kind (empty on the CPU).
std::vector<std::pair<std::string, double>> profile_device(models::Device d,
                                                           const std::function<void()>& f);
// The GPU's name and size, or "cpu".
std::string device_description(models::Device d);

}  // namespace gen3d::app::cli
