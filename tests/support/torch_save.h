#pragma once
// Writes torch.save files (the zip format PyTorch writes since 1.6: `archive/data.pkl`, a protocol
// 2 pickle, plus one raw storage per tensor under `archive/data/<key>`) for tests that need a
// checkpoint in the official layout: a state dict, or a dict of state dicts as Hunyuan3D-2.1's
// model.fp16.ckpt is.

#include <string>
#include <utility>
#include <vector>

#include "models/core/dtype.h"
#include "models/core/tensor.h"

namespace gen3d::test {

using NamedTensors = std::vector<std::pair<std::string, models::Tensor>>;

// `groups` empty names: the tensors are the top-level OrderedDict. Otherwise a dict
// {group: OrderedDict(tensors)}. Tensors are stored as `dtype` (F32 or F16).
void write_torch_save(const std::string& path,
                      const std::vector<std::pair<std::string, NamedTensors>>& groups,
                      models::DType dtype);

}  // namespace gen3d::test
