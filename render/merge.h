#pragma once
// The reference's `fast` multi-view merge (README §9, fast_bake_texture) and its weight maps.

#include <cstdint>
#include <span>
#include <vector>

#include "image/image.h"
#include "render/back_project.h"

namespace gen3d::render {

// Per-view merge weight: float(view_weight) * cos^exponent (pow evaluated in double, rounded).
// cos: T x T x 1 (BackProjection::cos).  Returns T x T x 1.
image::Image bake_weight(const image::Image& cos, double view_weight, float exponent = 4.0f);

struct MergeViewStat {
  uint64_t texels_with_weight = 0;  // a: texels where this view's weight > 0
  uint64_t already_painted = 0;     // b: of those, texels with accumulated weight > 0 already
  float ratio = 0.0f;               // float(b) / float(a) (NaN when a = 0)
  bool skipped = false;             // ratio > 0.99f: the view was not merged (Q4)
};

struct MergeResult {
  image::Image texture;              // T x T x C: sum(tex * w) / max(sum(w), 1e-8)
  image::Image weight;               // T x T x 1: accumulated weight
  std::vector<uint8_t> trust_mask;   // T x T: 255 where the accumulated weight > 1e-8, else 0
  std::vector<MergeViewStat> views;  // one per input view, in order
};

// Merges per-view textures (T x T x C each) with their weight maps (T x T x 1, already
// weight * cos^4) in view order, skipping a view when more than 99% of its weighted texels are
// already painted. Texels are processed in parallel; the result does not depend on threads.
// Throws RenderError on mismatched sizes or an empty input.
MergeResult merge_fast(std::span<const image::Image> textures,
                       std::span<const image::Image> weights);

// The same merge straight from back-projections: view v's weight is
// bake_weight(views[v].cos, view_weights[v], exponent), computed on the fly (no weight images).
MergeResult merge_fast(std::span<const BackProjection> views, std::span<const double> view_weights,
                       float exponent = 4.0f);

// The same merge from sparse back-projections (back_project_sparse): bit-identical result, without
// any dense per-view image.
MergeResult merge_fast(std::span<const SparseBackProjection> views,
                       std::span<const double> view_weights, float exponent = 4.0f);

}  // namespace gen3d::render
