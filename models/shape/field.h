#pragma once
// Field: a scalar function of 3-D points (points -> values), the one thing the volume decoders
// and marching cubes need. The ShapeVAE geometry decoder is a Field (models/shape_vae.h); so are
// the analytic signed-distance fields below (positive inside), which let the decoders be tested
// and benchmarked without weights.

#include <array>
#include <cstdint>
#include <functional>
#include <span>

namespace gen3d::models {

// FlashVDM adaptive key selection for one evaluation (see specs/volume-decoding.md 6.2/6.3).
struct KeySelection {
  std::int64_t top_k = 0;          // keys kept per head; <= 0 or >= key count keeps every key
  std::int64_t sample_stride = 1;  // sampled queries of a group: positions 0, s, 2s, ...
};

class Field {
 public:
  virtual ~Field() = default;

  // out[i] = f(xyz[3i], xyz[3i+1], xyz[3i+2]) for i < n. Thread-safe (const); may parallelize.
  virtual void evaluate(const float* xyz, std::int64_t n, float* out) const = 0;

  // Points in attention groups: group g is points [offsets[g], offsets[g+1]) (offsets[0] = 0).
  // A field with keys restricts each group's attention to the keys selected for that group;
  // fields without keys ignore the grouping (the default).
  virtual void evaluate_groups(const float* xyz, std::span<const std::int64_t> offsets,
                               const KeySelection& selection, float* out) const {
    (void)selection;
    if (!offsets.empty()) evaluate(xyz, offsets.back(), out);
  }

  // Number of attention keys (latent tokens) a group could select from; 0 for analytic fields.
  virtual std::int64_t key_count() const { return 0; }
};

// logit = scale * d(p), d = signed distance, positive inside. d evaluated in double, rounded to
// float. Parallel over points (oneTBB).
class AnalyticField : public Field {
 public:
  using Sdf = std::function<double(double x, double y, double z)>;
  AnalyticField(Sdf sdf, double scale) : sdf_(std::move(sdf)), scale_(scale) {}
  void evaluate(const float* xyz, std::int64_t n, float* out) const override;

 private:
  Sdf sdf_;
  double scale_;
};

// Sphere of `radius` around `center`.
AnalyticField sphere_field(double radius, double scale, std::array<double, 3> center = {0, 0, 0});
// Torus around the y axis: ring radius `major`, tube radius `minor`.
AnalyticField torus_field(double major, double minor, double scale);
// Axis-aligned box with half extents `half`.
AnalyticField box_field(std::array<double, 3> half, double scale);
// Slab |y - center_y| < half_thickness (the spec's thin plate, V9).
AnalyticField plate_field(double center_y, double half_thickness, double scale);

}  // namespace gen3d::models
