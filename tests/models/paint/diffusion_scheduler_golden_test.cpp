// Golden tests of the Euler-ancestral and LCM schedulers against diffusers v0.32.2
// (golden/texmodels/README.md §4a, scheduler.safetensors). Data-driven: $GEN3D_GOLDEN_DIR
// (default tests/data/golden) + /texmodels; the config comes from config.json
// ["scheduler_config"], step counts and tensor sizes from the file. Timesteps must match
// exactly, everything else to 1e-6 relative.

#include <gtest/gtest.h>

#include <algorithm>
#include <cmath>
#include <cstdio>
#include <cstring>
#include <filesystem>
#include <fstream>
#include <nlohmann/json.hpp>
#include <sstream>
#include <string>
#include <vector>

#include "models/core/error.h"
#include "models/core/safetensors.h"
#include "models/paint/diffusion_scheduler.h"
#include "support/paths.h"

namespace gen3d::models {
namespace {

using i64 = std::int64_t;
constexpr double kRel = 1e-6;  // README §4a

std::string golden_file(const std::string& name) {
  return test::env_or("GEN3D_GOLDEN_DIR", test::source_dir() + "/tests/data/golden") +
         "/texmodels/" + name;
}

#define REQUIRE_GOLDEN(path)                                                              \
  do {                                                                                    \
    if (!std::filesystem::exists(path)) GTEST_SKIP() << "golden file absent: " << (path); \
  } while (0)

// Element-wise relative error against the golden value, with an absolute floor of kRel * 1e-3
// of the tensor's largest magnitude (values crossing zero have no meaningful relative error).
double rel_usage(const float* a, const float* g, i64 n) {
  double gmax = 0.0;
  for (i64 i = 0; i < n; ++i) gmax = std::max(gmax, std::abs(static_cast<double>(g[i])));
  double u = 0.0;
  for (i64 i = 0; i < n; ++i) {
    if (!std::isfinite(a[i])) return INFINITY;
    const double tol = kRel * std::max(std::abs(static_cast<double>(g[i])), 1e-3 * gmax);
    u = std::max(u, std::abs(static_cast<double>(a[i]) - g[i]) / std::max(tol, 1e-30));
  }
  return u;
}

class SchedulerGolden : public ::testing::Test {
 protected:
  void SetUp() override {
    const std::string data = golden_file("scheduler.safetensors");
    const std::string cfg = golden_file("config.json");
    if (!std::filesystem::exists(data) || !std::filesystem::exists(cfg))
      GTEST_SKIP() << "golden files absent under " << golden_file("");
    file_ = SafetensorsFile::open(data);
    std::ifstream in(cfg);
    const auto j = nlohmann::json::parse(in);
    base_ = SchedulerConfig::parse(j.at("scheduler_config").dump(), "config.json");
  }

  Tensor get(const std::string& name) const {
    const TensorInfo* info = file_->find(name);
    if (!info) throw ModelError("golden tensor missing: " + name);
    // Loops are (steps, 1, C, H, W): read as (steps, numel per step).
    if (info->shape.size() > 4) {
      i64 per = 1;
      for (std::size_t d = 1; d < info->shape.size(); ++d) per *= info->shape[d];
      return file_->to_f32_as(name, Shape{info->shape[0], per});
    }
    return file_->to_f32(*info);
  }
  std::vector<double> get_f64(const std::string& name) const {
    const TensorInfo* info = file_->find(name);
    if (!info) throw ModelError("golden tensor missing: " + name);
    if (info->dtype != DType::kF64) {
      const Tensor t = file_->to_f32(*info);
      return {t.data(), t.data() + t.numel()};
    }
    const auto bytes = file_->bytes(*info);
    std::vector<double> v(static_cast<std::size_t>(info->numel()));
    std::memcpy(v.data(), bytes.data(), v.size() * sizeof(double));
    return v;
  }
  std::vector<int> get_int(const std::string& name) const {
    const TensorInfo* info = file_->find(name);
    if (!info) throw ModelError("golden tensor missing: " + name);
    std::vector<int> v;
    if (info->dtype == DType::kI64) {
      const auto bytes = file_->bytes(*info);
      std::vector<std::int64_t> raw(static_cast<std::size_t>(info->numel()));
      std::memcpy(raw.data(), bytes.data(), raw.size() * sizeof(std::int64_t));
      for (auto x : raw) v.push_back(static_cast<int>(x));
    } else {
      const Tensor t = file_->to_f32(*info);
      for (i64 i = 0; i < t.numel(); ++i) v.push_back(static_cast<int>(t.data()[i]));
    }
    return v;
  }

  SchedulerConfig with(const std::string& spacing, const std::string& prediction = "") const {
    SchedulerConfig c = base_;
    if (!spacing.empty()) c.timestep_spacing = spacing;
    if (!prediction.empty()) c.prediction_type = prediction;
    return c;
  }

  // set_timesteps(len(timesteps)) reproduces the recorded timestep and sigma tables.
  void expect_tables(const std::string& prefix, const SchedulerConfig& cfg) {
    SCOPED_TRACE(prefix);
    const Tensor t = get(prefix + ".timesteps"), s = get(prefix + ".sigmas");
    EulerAncestralScheduler sch(cfg);
    sch.set_timesteps(static_cast<int>(t.numel()));
    ASSERT_EQ(sch.size(), t.numel());
    for (i64 i = 0; i < t.numel(); ++i)
      EXPECT_EQ(sch.timesteps()[static_cast<std::size_t>(i)], t.data()[i]) << "timestep " << i;
    ASSERT_EQ(static_cast<i64>(sch.sigmas().size()), s.numel());
    EXPECT_EQ(sch.sigmas().back(), 0.0f);
    const double u = rel_usage(sch.sigmas().data(), s.data(), s.numel());
    EXPECT_LE(u, 1.0) << "sigmas";
    i64 exact = 0;
    for (i64 i = 0; i < s.numel(); ++i)
      exact += sch.sigmas()[static_cast<std::size_t>(i)] == s.data()[i];
    std::printf("[ info ] %s: sigmas usage %.4f, %lld of %lld bit-identical\n", prefix.c_str(), u,
                static_cast<long long>(exact), static_cast<long long>(s.numel()));
    if (const TensorInfo* ins = file_->find(prefix + ".init_noise_sigma")) {
      const float g = file_->to_f32(*ins).data()[0];
      const float a = sch.init_noise_sigma();
      EXPECT_LE(std::abs(a - g), kRel * std::abs(g)) << "init_noise_sigma " << a << " vs " << g;
    }
  }

  void euler_loop(const std::string& prediction) {
    const std::string p = "euler_a30_" + prediction;
    SCOPED_TRACE(p);
    if (!file_->find(p + ".x_init")) GTEST_SKIP() << p << " not in this set";
    const Tensor x0 = get(p + ".x_init"), mo = get(p + ".model_outputs"),
                 noises = get(p + ".noises"), scaled = get(p + ".scaled_inputs"),
                 after = get(p + ".x_after_step");
    const i64 steps = mo.dim(0), n = x0.numel();
    ASSERT_EQ(mo.dim(1), n);
    EulerAncestralScheduler sch(with("trailing", prediction));
    sch.set_timesteps(static_cast<int>(steps));
    std::vector<float> x(x0.data(), x0.data() + n), in(static_cast<std::size_t>(n));
    double worst_in = 0.0, worst_x = 0.0;
    for (i64 i = 0; i < steps; ++i) {
      sch.scale_model_input(x.data(), n, static_cast<int>(i), in.data());
      worst_in = std::max(worst_in, rel_usage(in.data(), scaled.data() + i * n, n));
      sch.step(x.data(), mo.data() + i * n, noises.data() + i * n, n, static_cast<int>(i));
      worst_x = std::max(worst_x, rel_usage(x.data(), after.data() + i * n, n));
    }
    EXPECT_LE(worst_in, 1.0) << "scaled_inputs (usage of 1e-6 relative)";
    EXPECT_LE(worst_x, 1.0) << "x_after_step (usage of 1e-6 relative)";
    std::printf("[ info ] %s: usage of 1e-6 relative: scaled_inputs %.4f, x_after_step %.4f\n",
                p.c_str(), worst_in, worst_x);
  }

  std::shared_ptr<const SafetensorsFile> file_;
  SchedulerConfig base_;
};

TEST_F(SchedulerGolden, AlphasCumprod) {
  const Tensor g = get("alphas_cumprod");
  EulerAncestralScheduler sch(base_);
  ASSERT_EQ(static_cast<i64>(sch.alphas_cumprod().size()), g.numel());
  i64 exact = 0;
  for (i64 i = 0; i < g.numel(); ++i)
    exact += sch.alphas_cumprod()[static_cast<std::size_t>(i)] == g.data()[i];
  EXPECT_LE(rel_usage(sch.alphas_cumprod().data(), g.data(), g.numel()), 1.0);
  // The table is reproduced bit for bit (torch's float linspace and double-accumulated cumprod).
  EXPECT_EQ(exact, g.numel());
  LcmScheduler lcm(base_);
  EXPECT_EQ(lcm.alphas_cumprod(), sch.alphas_cumprod());
}

TEST_F(SchedulerGolden, EulerAncestralTables) {
  expect_tables("euler_a30", with("trailing"));
  expect_tables("euler_a2", with("trailing"));
  expect_tables("euler_a50_leading", with(""));
}

TEST_F(SchedulerGolden, EulerAncestralEpsilonLoop) {
  euler_loop("epsilon");
}

TEST_F(SchedulerGolden, EulerAncestralVPredictionLoop) {
  euler_loop("v_prediction");
}

TEST_F(SchedulerGolden, LcmTablesAndLoop) {
  const std::vector<int> ts = get_int("lcm10.timesteps");
  EXPECT_EQ(LcmScheduler::turbo_timesteps(static_cast<int>(ts.size()), base_.num_train_timesteps),
            ts);
  LcmScheduler sch(with("trailing"));
  sch.set_timesteps(ts);
  ASSERT_EQ(sch.size(), static_cast<int>(ts.size()));
  const auto cs = get_f64("lcm10.c_skip"), co = get_f64("lcm10.c_out");
  ASSERT_EQ(cs.size(), ts.size());
  for (int i = 0; i < sch.size(); ++i) {
    EXPECT_LE(std::abs(sch.c_skip(i) - cs[static_cast<std::size_t>(i)]),
              kRel * std::abs(cs[static_cast<std::size_t>(i)]))
        << "c_skip " << i;
    EXPECT_LE(std::abs(sch.c_out(i) - co[static_cast<std::size_t>(i)]),
              kRel * std::abs(co[static_cast<std::size_t>(i)]))
        << "c_out " << i;
  }
  const Tensor x0 = get("lcm10_epsilon.x_init"), mo = get("lcm10_epsilon.model_outputs"),
               noises = get("lcm10_epsilon.noises"), den = get("lcm10_epsilon.denoised"),
               after = get("lcm10_epsilon.x_after_step");
  const i64 n = x0.numel();
  ASSERT_EQ(mo.dim(0), sch.size());
  LcmScheduler eps(with("trailing", "epsilon"));
  eps.set_timesteps(ts);
  std::vector<float> x(x0.data(), x0.data() + n), d(static_cast<std::size_t>(n));
  double worst_d = 0.0, worst_x = 0.0;
  for (int i = 0; i < eps.size(); ++i) {
    const bool last = i == eps.size() - 1;
    eps.step(x.data(), mo.data() + i * n, last ? nullptr : noises.data() + i * n, n, i, d.data());
    worst_d = std::max(worst_d, rel_usage(d.data(), den.data() + i * n, n));
    worst_x = std::max(worst_x, rel_usage(x.data(), after.data() + i * n, n));
  }
  std::printf("[ info ] lcm10_epsilon: usage of 1e-6 relative: denoised %.4f, x_after_step %.4f\n",
              worst_d, worst_x);
  EXPECT_LE(worst_d, 1.0) << "denoised (usage of 1e-6 relative)";
  EXPECT_LE(worst_x, 1.0) << "x_after_step (usage of 1e-6 relative)";
}

// A wrong sign in the ancestral update or a wrong sigma would be caught: perturbing one sigma's
// worth of the step shows up far outside the tolerance.
TEST_F(SchedulerGolden, LoopComparisonDetectsAnError) {
  const Tensor x0 = get("euler_a30_epsilon.x_init"), mo = get("euler_a30_epsilon.model_outputs"),
               noises = get("euler_a30_epsilon.noises"),
               after = get("euler_a30_epsilon.x_after_step");
  const i64 n = x0.numel();
  EulerAncestralScheduler sch(with("trailing", "epsilon"));
  sch.set_timesteps(static_cast<int>(mo.dim(0)));
  std::vector<float> x(x0.data(), x0.data() + n), wrong(static_cast<std::size_t>(n));
  for (i64 k = 0; k < n; ++k) wrong[static_cast<std::size_t>(k)] = -noises.data()[k];
  sch.step(x.data(), mo.data(), wrong.data(), n, 0);
  EXPECT_GT(rel_usage(x.data(), after.data(), n), 100.0);
}

}  // namespace
}  // namespace gen3d::models
