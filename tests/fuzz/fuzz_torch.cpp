// torch.save archives from arbitrary bytes: the zip directory, the restricted unpickler and the
// tensor views it rebuilds; small float tensors are widened.
#include <cstddef>
#include <cstdint>

#include "models/core/error.h"
#include "models/core/torch_file.h"

extern "C" int LLVMFuzzerTestOneInput(const uint8_t* data, size_t size) {
  try {
    auto file = gen3d::models::read_torch_bytes(data, size, "fuzz");
    for (const auto& info : file->tensors())
      if (info.numel() <= 4096 && gen3d::models::is_float_dtype(info.dtype))
        (void)file->to_f32(info);
  } catch (const gen3d::models::ModelError&) {
  }
  return 0;
}
