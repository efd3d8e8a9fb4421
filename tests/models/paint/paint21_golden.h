#pragma once
// Shared pieces of the 2.1 PBR paint UNet's golden tests (golden/hunyuan3d-2.1/paint21): where
// the set is, stored tensors as NHWC rows or flattened, and its half-precision position maps.

#include <cstdint>
#include <cstring>
#include <string>
#include <vector>

#include "models/core/error.h"
#include "models/core/safetensors.h"
#include "models/paint/pbr_unet.h"
#include "models/paint/texmodels_golden.h"
#include "support/paths.h"

namespace gen3d::models::paint21_golden {

using texmodels_golden::to_nchw;
using texmodels_golden::to_nhwc;

inline std::string set_file(const std::string& name) {
  return test::env_or("GEN3D_GOLDEN_H21_DIR",
                      test::source_dir() + "/tests/data/golden/hunyuan3d-2.1") +
         "/paint21/" + name;
}

// A stored (..., C, H, W) tensor with its leading dims folded into rows, as NHWC; `copies`
// repeats it along the rows (the CFG batch).
inline Tensor rows_nhwc(const SafetensorsFile& f, const std::string& name,
                        std::int64_t copies = 1) {
  const Tensor one = texmodels_golden::read_nhwc(f, name);
  Tensor all({copies * one.dim(0), one.dim(1), one.dim(2), one.dim(3)});
  for (std::int64_t c = 0; c < copies; ++c)
    std::memcpy(all.data() + c * one.numel(), one.data(), sizeof(float) * one.numel());
  return all;
}

// Any stored float tensor flattened (shapes of rank > 4 included).
inline Tensor flat(const SafetensorsFile& f, const std::string& name) {
  const TensorInfo* info = f.find(name);
  if (!info) throw ModelError("golden tensor absent: " + name);
  std::int64_t n = 1;
  for (std::int64_t d : info->shape) n *= d;
  return f.to_f32_as(name, Shape{n});
}

// in.position_maps as stored (F16 (B, N, 3, H, W)), with the view the UNet reads.
struct PositionMaps {
  std::vector<std::uint16_t> bits;
  HalfPositionMaps maps;
};

inline PositionMaps position_maps(const SafetensorsFile& f) {
  const TensorInfo* info = f.find("in.position_maps");
  if (!info || info->dtype != DType::kF16 || info->shape.size() != 5)
    throw ModelError("in.position_maps is not F16 (B, N, 3, H, W)");
  PositionMaps p;
  const auto bytes = f.bytes(*info);
  p.bits.resize(bytes.size() / 2);
  std::memcpy(p.bits.data(), bytes.data(), bytes.size());
  p.maps.data = p.bits;
  p.maps.batch = info->shape[0];
  p.maps.views = info->shape[1];
  p.maps.height = info->shape[3];
  p.maps.width = info->shape[4];
  return p;
}

}  // namespace gen3d::models::paint21_golden
