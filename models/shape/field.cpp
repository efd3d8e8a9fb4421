#include "models/shape/field.h"

#include <oneapi/tbb/blocked_range.h>
#include <oneapi/tbb/parallel_for.h>

#include <algorithm>
#include <cmath>

namespace gen3d::models {

void AnalyticField::evaluate(const float* xyz, std::int64_t n, float* out) const {
  tbb::parallel_for(tbb::blocked_range<std::int64_t>(0, n, 4096),
                    [&](const tbb::blocked_range<std::int64_t>& r) {
                      for (std::int64_t i = r.begin(); i < r.end(); ++i) {
                        const float* p = xyz + 3 * i;
                        out[i] = static_cast<float>(scale_ * sdf_(p[0], p[1], p[2]));
                      }
                    });
}

AnalyticField sphere_field(double radius, double scale, std::array<double, 3> c) {
  return AnalyticField(
      [=](double x, double y, double z) {
        return radius - std::sqrt((x - c[0]) * (x - c[0]) + (y - c[1]) * (y - c[1]) +
                                  (z - c[2]) * (z - c[2]));
      },
      scale);
}

AnalyticField torus_field(double major, double minor, double scale) {
  return AnalyticField(
      [=](double x, double y, double z) {
        const double q = std::sqrt(x * x + z * z) - major;
        return minor - std::sqrt(q * q + y * y);
      },
      scale);
}

AnalyticField box_field(std::array<double, 3> h, double scale) {
  return AnalyticField(
      [=](double x, double y, double z) {
        const double dx = std::abs(x) - h[0], dy = std::abs(y) - h[1], dz = std::abs(z) - h[2];
        const double outside = std::sqrt(std::max(dx, 0.0) * std::max(dx, 0.0) +
                                         std::max(dy, 0.0) * std::max(dy, 0.0) +
                                         std::max(dz, 0.0) * std::max(dz, 0.0));
        const double inside = std::min(std::max(dx, std::max(dy, dz)), 0.0);
        return -(outside + inside);
      },
      scale);
}

AnalyticField plate_field(double center_y, double half_thickness, double scale) {
  return AnalyticField(
      [=](double, double y, double) { return half_thickness - std::abs(y - center_y); }, scale);
}

}  // namespace gen3d::models
