#pragma once
// The error of a FlashVDM band grid against a golden one, shared by the CPU and GPU golden tests.

#include <cmath>
#include <cstdint>
#include <vector>

#include "models/core/tensor.h"
#include "models/shape/volume_decoder.h"

namespace gen3d::models {

// Squared error of `a` against `g` over the vertices both queried (non-NaN), over the mean square
// of `scale` (every vertex of a dense grid of the same field): an nmse measured against the
// field's own size, so that a band of near-zero logits does not shrink the denominator. Also
// counts the vertices of `g` that `a` queried differently.
struct BandError {
  double nmse = 0.0;
  std::int64_t common = 0, golden_queried = 0, differ = 0;
};
inline BandError band_error(const GridValues& a, const Tensor& g, const Tensor& scale) {
  BandError e;
  double num = 0.0, den = 0.0;
  for (std::int64_t i = 0; i < g.numel(); ++i) {
    const bool qg = !std::isnan(g.data()[i]), qa = !std::isnan(a[static_cast<std::size_t>(i)]);
    e.golden_queried += qg;
    e.differ += qg != qa;
    if (qg && qa) {
      const double d = static_cast<double>(a[static_cast<std::size_t>(i)]) - g.data()[i];
      num += d * d;
      ++e.common;
    }
  }
  for (std::int64_t i = 0; i < scale.numel(); ++i)
    den += static_cast<double>(scale.data()[i]) * scale.data()[i];
  e.nmse = e.common > 0 && den > 0
               ? (num / static_cast<double>(e.common)) / (den / static_cast<double>(scale.numel()))
               : INFINITY;
  return e;
}

}  // namespace gen3d::models
