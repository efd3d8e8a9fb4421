#pragma once
// Volume decoding: sample a Field on the (R+1)^3 vertex grid over a box, densely or
// coarse-to-fine (hierarchical band refinement, FlashVDM with adaptive key selection).
// Normative text: specs/volume-decoding.md sections 3-6.

#include <array>
#include <cstdint>
#include <memory>
#include <string>
#include <vector>

#include "models/shape/field.h"

namespace gen3d::models {

enum class VolumeMethod { kDense, kHierarchical, kFlashVDM };
// "dense" | "hierarchical" | "flashvdm"; throws ModelError otherwise.
VolumeMethod parse_volume_method(const std::string& name);
const char* volume_method_name(VolumeMethod m);

struct VolumeDecodeOptions {
  VolumeMethod method = VolumeMethod::kDense;  // decoder
  int resolution = 384;                        // requested octree_resolution R (cells per axis)
  int min_resolution = 63;                     // hierarchical / FlashVDM level schedule floor
  std::array<double, 3> bbox_min{-1.01, -1.01, -1.01};  // box (default bounds 1.01)
  std::array<double, 3> bbox_max{1.01, 1.01, 1.01};
  std::int64_t num_chunks = 8000;  // points per field call: memory knob only, no effect on values
  int mini_grid_num = 4;           // FlashVDM level-0 blocks per axis (G)
  float band_abs_logit = 0.95f;    // refinement band |logit - level| < this
  float level = 0.0f;              // iso level (mc_level): bands use f = logit - level
  std::int64_t top_k = -1;         // FlashVDM keys per head; -1: spec rule (flashvdm_top_k)
  bool keep_levels = false;        // keep every level's grid in VolumeDecodeStats::level_grids
};

// Allocates like std::allocator, but a new element made without a value is left uninitialised,
// so a grid is filled once, in parallel: filling a fresh 228 MB grid (R 384) serially was a
// fifth of a FlashVDM decode's bookkeeping, and it stays serial however many cores there are.
template <class T>
struct UninitAllocator : std::allocator<T> {
  using value_type = T;
  template <class U>
  struct rebind {
    using other = UninitAllocator<U>;
  };
  UninitAllocator() = default;
  template <class U>
  UninitAllocator(const UninitAllocator<U>&) noexcept {}
  template <class U>
  void construct(U* p) noexcept {
    ::new (static_cast<void*>(p)) U;
  }
  template <class U, class... Args>
  void construct(U* p, Args&&... args) {
    ::new (static_cast<void*>(p)) U(std::forward<Args>(args)...);
  }
};
using GridValues = std::vector<float, UninitAllocator<float>>;

// Values on the (n)^3 vertex grid, n = resolution + 1, indexed [i][j][k] (k fastest), vertex
// (i, j, k) at bbox_min + (i, j, k) * (bbox_max - bbox_min) / resolution. Unqueried vertices
// hold NaN (marching cubes skips every cube that touches one).
struct VolumeGrid {
  int resolution = 0;
  std::array<double, 3> bbox_min{}, bbox_max{};
  GridValues values;
  std::int64_t n() const { return resolution + 1; }
  std::int64_t index(std::int64_t i, std::int64_t j, std::int64_t k) const {
    return (i * n() + j) * n() + k;
  }
  std::int64_t queried_count() const;  // non-NaN vertices
};

struct VolumeDecodeStats {
  std::vector<int> levels;                     // resolutions actually decoded
  std::vector<std::int64_t> points_per_level;  // points queried at each level
  std::int64_t points_queried = 0;             // total
  bool empty_band = false;                     // a refinement level selected nothing: no surface
  std::vector<VolumeGrid> level_grids;         // when keep_levels
};

// Level schedules (spec 5.1 and 6.1).
std::vector<int> hierarchical_levels(int resolution, int min_resolution);
std::vector<int> flashvdm_levels(int resolution, int min_resolution, int mini_grid_num);

// Float32 grid axis: linspace(lo, hi, r + 1) like numpy (float64 arithmetic, endpoint exact,
// then rounded to float32).
std::vector<float> grid_axis(double lo, double hi, int resolution);

// Decodes `field` with options.method. Throws ModelError on invalid options.
VolumeGrid decode_volume(const Field& field, const VolumeDecodeOptions& options,
                         VolumeDecodeStats* stats = nullptr);

}  // namespace gen3d::models
