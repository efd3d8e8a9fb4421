#pragma once
// The precision a network runs in. fp32: float32 weights and GEMMs (the golden-exact path).
// bf16: weights kept in bf16, GEMMs with bf16 operands and float32 accumulation (norms, softmax,
// the residual stream and sampler state stay float32). int8: bf16, except the Linear layers a
// network marks as quantizable (the attention and MLP products of the DiTs, the ShapeVAE and
// DINOv2), which run W8A8 with int32 accumulation (WeightStorage::kInt8). auto: bf16 where the CPU
// has AVX512-BF16 or AMX, fp32 elsewhere, decided at run time (the binary stays portable).

#include <string>
#include <string_view>

#include "models/core/device.h"
#include "models/core/dtype.h"

namespace gen3d::models {

enum class Precision { kAuto, kFp32, kBf16, kInt8 };

// "auto", "fp32", "bf16", "int8"; throws ModelError naming the value otherwise.
Precision parse_precision(std::string_view s);
std::string_view precision_name(Precision p);
// kAuto resolved for this CPU (logged once per process).
Precision resolve_precision(Precision p);
// The Linear weight storage of a precision (kAuto resolved); `fp32_storage` is what fp32 keeps
// (kF32, or kF16 to halve float32 weights with half rounding).
WeightStorage storage_for(Precision p, WeightStorage fp32_storage = WeightStorage::kF32);
// The storage a network that runs on `device` keeps: `storage` on the CPU; on a device, which
// runs bf16 layers, kBF16 for f32 / f16 (logged, naming `what`) and a ModelError for int8.
WeightStorage storage_on(Device device, WeightStorage storage, const std::string& what);

}  // namespace gen3d::models
