#pragma once
// The device a command's networks run on: the CPU always; CUDA where this gen3d was built with
// the CUDA backend and a GPU is visible.

#include <string>

#include "models/core/device.h"

namespace gen3d::cli {

// Makes `d` usable in this process (installs the CUDA backend once); throws
// pipeline::ConfigError saying why it cannot be.
void use_device(models::Device d);
// The GPU's name and size, or "cpu".
std::string device_description(models::Device d);

}  // namespace gen3d::cli
