// Safetensors files from arbitrary bytes: header, offsets, dtypes; small tensors are widened.
#include <cstddef>
#include <cstdint>

#include "models/core/error.h"
#include "models/core/safetensors.h"

extern "C" int LLVMFuzzerTestOneInput(const uint8_t* data, size_t size) {
  try {
    auto file = gen3d::models::SafetensorsFile::from_bytes(
        std::vector<unsigned char>(data, data + size), "fuzz");
    for (const auto& info : file->tensors())
      if (info.numel() <= 4096) (void)file->to_f32(info);
  } catch (const gen3d::models::ModelError&) {
  }
  return 0;
}
