#pragma once
// Shared pieces of the texture-model golden tests (golden/texmodels): where the data is, its
// config, NCHW <-> NHWC conversion of stored tensors, and a tolerant comparison.

#include <gtest/gtest.h>

#include <algorithm>
#include <cmath>
#include <fstream>
#include <nlohmann/json.hpp>
#include <string>

#include "models/core/error.h"
#include "models/core/safetensors.h"
#include "models/kernels/conv.h"
#include "models/paint/multiview_diffusion.h"
#include "support/paths.h"

namespace gen3d::models::texmodels_golden {

inline std::string golden_dir() {
  return test::env_or("GEN3D_GOLDEN_DIR", test::source_dir() + "/tests/data/golden") + "/texmodels";
}
inline std::string golden_file(const std::string& name) {
  return golden_dir() + "/" + name;
}

inline nlohmann::json load_config() {
  std::ifstream in(golden_file("config.json"));
  return nlohmann::json::parse(in);
}

inline Tensor to_nhwc(const Tensor& x) {
  Tensor y(Shape{x.dim(0), x.dim(2), x.dim(3), x.dim(1)});
  kernels::nchw_to_nhwc(y.data(), x.data(), x.dim(0), x.dim(1), x.dim(2), x.dim(3));
  return y;
}
inline Tensor to_nchw(const Tensor& x) {
  Tensor y(Shape{x.dim(0), x.dim(3), x.dim(1), x.dim(2)});
  kernels::nhwc_to_nchw(y.data(), x.data(), x.dim(0), x.dim(3), x.dim(1), x.dim(2));
  return y;
}

// A stored (..., C, H, W) tensor, its leading dims folded into one (e.g. (B, N, C, H, W) ->
// B·N rows), as NHWC.
inline Tensor read_nhwc(const SafetensorsFile& f, const std::string& name) {
  const TensorInfo* info = f.find(name);
  if (!info) throw ModelError("golden tensor absent: " + name);
  const auto& s = info->shape;
  const std::size_t r = s.size();
  if (r < 3) throw ModelError(name + ": rank < 3");
  std::int64_t lead = 1;
  for (std::size_t i = 0; i + 3 < r; ++i) lead *= s[i];
  return to_nhwc(f.to_f32_as(name, Shape{lead, s[r - 3], s[r - 2], s[r - 1]}));
}

// The recorded paint run's inputs and injected noise (sampler.safetensors, README §4b); `mv` is
// the config's "mv" section (camera ids, steps).
struct PaintRun {
  PaintInputs in;
  PaintNoise noise;
};
inline PaintRun read_paint_run(const SafetensorsFile& rec, const nlohmann::json& mv) {
  PaintRun r;
  r.in.reference = read_nhwc(rec, "in.ref_image");
  r.in.normals = read_nhwc(rec, "in.normal_images");
  r.in.positions = read_nhwc(rec, "in.position_images");
  for (const auto& id : mv["camera_info_gen"]) r.in.cameras.push_back(id.get<int>());
  r.noise.vae_ref = read_nhwc(rec, "in.noise.vae_ref");
  r.noise.vae_normal = read_nhwc(rec, "in.noise.vae_normal");
  r.noise.vae_position = read_nhwc(rec, "in.noise.vae_position");
  r.noise.init = read_nhwc(rec, "in.noise.init");
  const int steps = mv["steps"].get<int>();
  const Tensor all = read_nhwc(rec, "in.noise.steps");  // (steps·N, h, w, 4)
  const std::int64_t per = all.numel() / steps;
  for (int i = 0; i < steps; ++i) {
    Tensor t(Shape{all.dim(0) / steps, all.dim(1), all.dim(2), all.dim(3)});
    std::copy(all.data() + i * per, all.data() + (i + 1) * per, t.data());
    r.noise.steps.push_back(std::move(t));
  }
  return r;
}

// max |got − want| <= atol over equal element counts (layouts matched by the caller); NaN fails.
// `max_err` (optional) receives the worst difference.
inline ::testing::AssertionResult close(const Tensor& got, const Tensor& want, double atol,
                                        double* max_err = nullptr) {
  if (got.numel() != want.numel())
    return ::testing::AssertionFailure()
           << "shape " << got.shape().str() << ", expected " << want.shape().str();
  double worst = 0.0;
  std::int64_t at = 0;
  for (std::int64_t i = 0; i < want.numel(); ++i) {
    const double d = std::fabs(static_cast<double>(got.data()[i]) - want.data()[i]);
    if (!(d <= worst)) {
      worst = std::isnan(d) ? INFINITY : d;
      at = i;
    }
  }
  if (max_err) *max_err = worst;
  if (worst <= atol) return ::testing::AssertionSuccess() << "max |diff| " << worst;
  return ::testing::AssertionFailure()
         << "max |diff| " << worst << " > " << atol << " at flat " << at << " (got "
         << got.data()[at] << ", expected " << want.data()[at] << ")";
}

}  // namespace gen3d::models::texmodels_golden
