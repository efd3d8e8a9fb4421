// The PBR paint runner's pieces against the Hunyuan3D-2.1 paint golden set (paint21/README.md):
// one step's guided prediction (the pipeline's CFG batch built by pbr_guided_prediction on the
// condition of pbr_paint_condition) against the stored CFG call, and the runner's scheduler
// (the folder config with the trailing override) against the stored UniPC tables and steps.
// Skipped when the golden files are absent. Tolerances (the set's README, fixed beforehand):
// rows 3e-4 absolute; the combination u + g·(r − u) + g·(f − r) of rows each within 3e-4 is
// within (1 + 4g)·3e-4; timesteps exact, sigmas 1e-6 relative, UniPC samples 1e-5.

#include <gtest/gtest.h>

#include <algorithm>
#include <cmath>
#include <cstring>
#include <filesystem>
#include <fstream>
#include <nlohmann/json.hpp>
#include <string>
#include <vector>

#include "models/core/error.h"
#include "models/core/safetensors.h"
#include "models/kernels/conv.h"
#include "models/paint/pbr_paint.h"
#include "support/paths.h"

namespace gen3d::models {
namespace {

using i64 = std::int64_t;
using nlohmann::json;
constexpr double kOutAbs = 3e-4;
constexpr float kGuidance = 3.0f;

std::string set_file(const std::string& name) {
  return test::env_or("GEN3D_GOLDEN_H21_DIR",
                      test::source_dir() + "/tests/data/golden/hunyuan3d-2.1") +
         "/paint21/" + name;
}

#define REQUIRE_GOLDEN(path)                                                              \
  do {                                                                                    \
    if (!std::filesystem::exists(path)) GTEST_SKIP() << "golden file absent: " << (path); \
  } while (0)

json golden_json() {
  std::ifstream f(set_file("config.json"));
  return json::parse(f);
}

// A stored (..., C, H, W) tensor with its leading dims folded into rows, as NHWC.
Tensor rows_nhwc(const SafetensorsFile& f, const std::string& name) {
  const TensorInfo* info = f.find(name);
  if (!info || info->shape.size() < 3) throw ModelError("golden tensor absent: " + name);
  const auto& s = info->shape;
  const std::size_t r = s.size();
  i64 lead = 1;
  for (std::size_t i = 0; i + 3 < r; ++i) lead *= s[i];
  const Tensor x = f.to_f32_as(name, Shape{lead, s[r - 3], s[r - 2], s[r - 1]});
  Tensor y(Shape{lead, s[r - 2], s[r - 1], s[r - 3]});
  kernels::nchw_to_nhwc(y.data(), x.data(), lead, s[r - 3], s[r - 2], s[r - 1]);
  return y;
}

TEST(PbrPaintGolden, GuidedPredictionOfTheCfgBatch) {
  REQUIRE_GOLDEN(set_file("paint21_unet.forward.safetensors"));
  const std::string wpath = set_file("paint21_unet.weights.fp16.safetensors");
  REQUIRE_GOLDEN(wpath);
  const json cfg = golden_json();
  const auto f = SafetensorsFile::open(set_file("paint21_unet.forward.safetensors"));
  const UNetConfig base = UNetConfig::parse(cfg.at("unet").dump(), "paint21 unet");
  const auto net = PbrUNet::load(base, wpath);

  // The runner's inputs: one row of latents (2·N), N condition latents, one reference row, the
  // DINO tokens of the reference alone, the half position maps.
  const Tensor latents = rows_nhwc(*f, "in.sample");  // (2·N, h, h, 4)
  const Tensor normals = rows_nhwc(*f, "in.embeds_normal");
  const Tensor positions = rows_nhwc(*f, "in.embeds_position");
  const Tensor ref = rows_nhwc(*f, "in.ref_latents");
  const Tensor dino = f->to_f32("in.dino_hidden_states");
  const TensorInfo* pi = f->find("in.position_maps");
  ASSERT_TRUE(pi && pi->dtype == DType::kF16 && pi->shape.size() == 5);
  const auto bytes = f->bytes(*pi);
  std::vector<std::uint16_t> bits(bytes.size() / 2);
  std::memcpy(bits.data(), bytes.data(), bytes.size());
  const HalfPositionMaps maps{bits, pi->shape[0], pi->shape[1], pi->shape[3], pi->shape[4]};
  const float t = f->to_f32("in.timestep").data()[0];
  // The stored call is the pipeline's: ref_scale [0, 1, 1].
  const Tensor rs = f->to_f32("in.ref_scale");
  ASSERT_EQ(rs.numel(), 3);
  EXPECT_EQ(rs.data()[0], 0.0f);
  EXPECT_EQ(rs.data()[1], 1.0f);
  EXPECT_EQ(rs.data()[2], 1.0f);

  const PbrCondition cond = pbr_paint_condition(*net, ref, dino, maps, latents.dim(1), 3);
  Tensor raw;
  const Tensor guided =
      pbr_guided_prediction(*net, cond, latents, normals, positions, t, kGuidance, 3, &raw);

  // Rows: the stored out.sample (3·2·N, 4, h, h) in NCHW.
  const Tensor want_rows = rows_nhwc(*f, "out.sample");
  ASSERT_EQ(raw.shape(), want_rows.shape());
  double worst_rows = 0.0;
  for (i64 k = 0; k < raw.numel(); ++k)
    worst_rows =
        std::max(worst_rows, std::abs(static_cast<double>(raw.data()[k]) - want_rows.data()[k]));
  EXPECT_LE(worst_rows, kOutAbs);

  // The combination of the stored rows, in double.
  const i64 count = guided.numel();
  ASSERT_EQ(3 * count, want_rows.numel());
  double worst = 0.0;
  for (i64 k = 0; k < count; ++k) {
    const double u = want_rows.data()[k], r = want_rows.data()[count + k],
                 fl = want_rows.data()[2 * count + k];
    const double want = u + kGuidance * (r - u) + kGuidance * (fl - r);
    worst = std::max(worst, std::abs(guided.data()[k] - want));
  }
  EXPECT_LE(worst, (1 + 4 * kGuidance) * kOutAbs);

  // Two rows [uncond | full]: the same guided prediction (the ref row cancels), within the same
  // bound; their rows are the stored rows 0 and 2.
  const PbrCondition cond2 = pbr_paint_condition(*net, ref, dino, maps, latents.dim(1), 2);
  Tensor raw2;
  const Tensor guided2 =
      pbr_guided_prediction(*net, cond2, latents, normals, positions, t, kGuidance, 2, &raw2);
  ASSERT_EQ(raw2.numel(), 2 * count);
  double worst2 = 0.0, worst_rows2 = 0.0;
  for (i64 k = 0; k < count; ++k) {
    const double u = want_rows.data()[k], r = want_rows.data()[count + k],
                 fl = want_rows.data()[2 * count + k];
    const double want = u + kGuidance * (r - u) + kGuidance * (fl - r);
    worst2 = std::max(worst2, std::abs(guided2.data()[k] - want));
    worst_rows2 = std::max(
        {worst_rows2, std::abs(raw2.data()[k] - u), std::abs(raw2.data()[count + k] - fl)});
  }
  EXPECT_LE(worst_rows2, kOutAbs);
  EXPECT_LE(worst2, (1 + 4 * kGuidance) * kOutAbs);
  std::printf(
      "[ info ] paint21 guided prediction: rows %.2e, combined %.2e; two rows %.2e, combined "
      "%.2e (abs)\n",
      worst_rows, worst, worst_rows2, worst2);
}

class PbrPaintSchedulerGolden : public ::testing::Test {
 protected:
  void SetUp() override {
    path_ = set_file("paint21_scheduler.safetensors");
    if (!std::filesystem::exists(path_) || !std::filesystem::exists(set_file("config.json")))
      GTEST_SKIP() << "golden files absent under " << set_file("");
    file_ = SafetensorsFile::open(path_);
    base_ = golden_json().at("golden").at("paint21_scheduler").at("base_scheduler_config_assumed");
  }
  // The folder's scheduler_config.json as the set assumed it (leading spacing: the runner must
  // override it).
  SchedulerConfig folder_config(const std::string& prediction_type) const {
    json c = base_;
    c["prediction_type"] = prediction_type;
    return SchedulerConfig::parse(c.dump(), "paint21 base scheduler config");
  }
  std::vector<std::int64_t> int64s(const std::string& name) const {
    const TensorInfo* info = file_->find(name);
    if (!info || info->dtype != DType::kI64) throw ModelError(name + " absent or not int64");
    const auto b = file_->bytes(*info);
    std::vector<std::int64_t> v(b.size() / 8);
    std::memcpy(v.data(), b.data(), b.size());
    return v;
  }
  std::string path_;
  std::shared_ptr<const SafetensorsFile> file_;
  json base_;
};

TEST_F(PbrPaintSchedulerGolden, TrailingTablesAndFirstSteps) {
  for (const std::string pt : {"epsilon", "v_prediction"}) {
    SCOPED_TRACE(pt);
    ASSERT_EQ(folder_config(pt).timestep_spacing, "leading");
    const UniPCScheduler s15 = pbr_paint_scheduler(folder_config(pt), 15);
    const auto ts = int64s("unipc15_" + pt + ".timesteps");
    ASSERT_EQ(s15.timesteps_int().size(), ts.size());
    for (std::size_t i = 0; i < ts.size(); ++i) EXPECT_EQ(s15.timesteps_int()[i], ts[i]) << i;
    const Tensor sig = file_->to_f32("unipc15_" + pt + ".sigmas");
    ASSERT_EQ(static_cast<i64>(s15.sigmas().size()), sig.numel());
    for (i64 i = 0; i < sig.numel(); ++i)
      EXPECT_NEAR(s15.sigmas()[static_cast<std::size_t>(i)], sig.data()[i],
                  1e-6 * std::abs(sig.data()[i]))
          << i;

    // The stored six-step loop, first two steps (predictor only, then with the corrector).
    UniPCScheduler s6 = pbr_paint_scheduler(folder_config(pt), 6);
    Tensor x = file_->to_f32("in.x_init");
    for (int i = 0; i < 2; ++i) {
      const Tensor mo = file_->to_f32("in.model_outputs." + std::to_string(i));
      s6.step(x.data(), mo.data(), x.numel(), i);
      const Tensor want = file_->to_f32("unipc6_" + pt + ".x." + std::to_string(i));
      for (i64 k = 0; k < x.numel(); ++k)
        ASSERT_NEAR(x.data()[k], want.data()[k], 1e-5 * (1 + std::abs(want.data()[k])))
            << "step " << i << " element " << k;
    }
  }
}

}  // namespace
}  // namespace gen3d::models
