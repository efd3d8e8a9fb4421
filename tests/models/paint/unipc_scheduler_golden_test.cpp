// Golden tests of the UniPC multistep scheduler against diffusers v0.30.0 (Hunyuan3D-2.1 paint
// set, paint21/README.md "Scheduler"). Data-driven: $GEN3D_GOLDEN_H21_DIR (default
// tests/data/golden/hunyuan3d-2.1) + /paint21; the configs are config.json's resolved scheduler
// configs (one per prediction type, parsed as a scheduler_config.json), step counts and sizes
// come from the tensor names and shapes. Tolerances (the set's README): timesteps exact, sigmas
// and alphas_cumprod 1e-6 relative, the samples of the loop 1e-5 (absolute + relative).

#include <gtest/gtest.h>

#include <algorithm>
#include <cmath>
#include <cstdio>
#include <cstring>
#include <filesystem>
#include <fstream>
#include <map>
#include <nlohmann/json.hpp>
#include <regex>
#include <string>
#include <vector>

#include "models/core/error.h"
#include "models/core/safetensors.h"
#include "models/paint/diffusion_scheduler.h"
#include "support/paths.h"

namespace gen3d::models {
namespace {

using i64 = std::int64_t;
constexpr double kTableRel = 1e-6;
constexpr double kSampleTol = 1e-5;

std::string paint21_file(const std::string& name) {
  return test::env_or("GEN3D_GOLDEN_H21_DIR",
                      test::source_dir() + "/tests/data/golden/hunyuan3d-2.1") +
         "/paint21/" + name;
}

// max |a - g| / (tol * (1 + |g|)): at most 1 passes.
double sample_usage(const float* a, const float* g, i64 n) {
  double u = 0.0;
  for (i64 i = 0; i < n; ++i) {
    if (!std::isfinite(a[i])) return INFINITY;
    const double d = std::abs(static_cast<double>(a[i]) - g[i]);
    u = std::max(u, d / (kSampleTol * (1.0 + std::abs(static_cast<double>(g[i])))));
  }
  return u;
}

class UniPCGolden : public ::testing::Test {
 protected:
  void SetUp() override {
    const std::string data = paint21_file("paint21_scheduler.safetensors");
    const std::string cfg = paint21_file("config.json");
    if (!std::filesystem::exists(data) || !std::filesystem::exists(cfg))
      GTEST_SKIP() << "golden files absent under " << paint21_file("");
    file_ = SafetensorsFile::open(data);
    std::ifstream in(cfg);
    const auto j = nlohmann::json::parse(in);
    for (const auto& [pt, c] :
         j.at("golden").at("paint21_scheduler").at("resolved_configs").items())
      configs_[pt] = SchedulerConfig::parse(c.dump(), "config.json: resolved_configs/" + pt);
    ASSERT_FALSE(configs_.empty());
  }

  Tensor get(const std::string& name) const {
    const TensorInfo* info = file_->find(name);
    if (!info) throw ModelError("golden tensor missing: " + name);
    return file_->to_f32(*info);
  }
  std::vector<int> get_int(const std::string& name) const {
    const TensorInfo* info = file_->find(name);
    if (!info) throw ModelError("golden tensor missing: " + name);
    if (info->dtype != DType::kI64) throw ModelError(name + " is not int64");
    const auto bytes = file_->bytes(*info);
    std::vector<std::int64_t> raw(static_cast<std::size_t>(info->numel()));
    std::memcpy(raw.data(), bytes.data(), raw.size() * sizeof(std::int64_t));
    return {raw.begin(), raw.end()};
  }

  // Every recorded run "unipc<K>_<prediction>": K and the prediction type.
  std::vector<std::pair<int, std::string>> runs() const {
    static const std::regex re(R"(unipc(\d+)_(\w+)\.timesteps)");
    std::vector<std::pair<int, std::string>> out;
    for (const TensorInfo& t : file_->tensors()) {
      std::smatch m;
      if (std::regex_match(t.name, m, re)) out.emplace_back(std::stoi(m[1]), m[2]);
    }
    return out;
  }

  // Runs the recorded loop from in.x_init; the usage per step.
  std::vector<double> loop(const std::string& prefix, const SchedulerConfig& cfg, int steps) const {
    const Tensor x0 = get("in.x_init");
    const i64 n = x0.numel();
    UniPCScheduler sch(cfg);
    sch.set_timesteps(steps);
    std::vector<float> x(x0.data(), x0.data() + n);
    std::vector<double> usage;
    for (int i = 0; i < steps; ++i) {
      const Tensor mo = get("in.model_outputs." + std::to_string(i));
      if (mo.numel() != n) throw ModelError("in.model_outputs." + std::to_string(i) + " size");
      sch.step(x.data(), mo.data(), n, i);
      const Tensor want = get(prefix + ".x." + std::to_string(i));
      usage.push_back(sample_usage(x.data(), want.data(), n));
    }
    return usage;
  }

  std::shared_ptr<const SafetensorsFile> file_;
  std::map<std::string, SchedulerConfig> configs_;
};

TEST_F(UniPCGolden, ConfigsAreTheOfficialPaintSettings) {
  for (const auto& [pt, c] : configs_) {
    SCOPED_TRACE(pt);
    EXPECT_EQ(c.prediction_type, pt);
    EXPECT_EQ(c.timestep_spacing, "trailing");
    EXPECT_EQ(c.solver_order, 2);
    EXPECT_EQ(c.solver_type, "bh2");
    EXPECT_TRUE(c.predict_x0);
    EXPECT_TRUE(c.lower_order_final);
  }
}

TEST_F(UniPCGolden, AlphasCumprod) {
  const Tensor g = get("const.alphas_cumprod");
  for (const auto& [pt, c] : configs_) {
    const UniPCScheduler sch(c);
    ASSERT_EQ(static_cast<i64>(sch.alphas_cumprod().size()), g.numel());
    i64 exact = 0;
    for (i64 i = 0; i < g.numel(); ++i) {
      const float a = sch.alphas_cumprod()[static_cast<std::size_t>(i)];
      exact += a == g.data()[i];
      EXPECT_LE(std::abs(a - g.data()[i]), kTableRel * std::abs(g.data()[i])) << i;
    }
    EXPECT_EQ(exact, g.numel()) << pt << ": the table is reproduced bit for bit";
  }
}

TEST_F(UniPCGolden, TimestepAndSigmaTables) {
  const auto all = runs();
  ASSERT_GE(all.size(), 2u);
  for (const auto& [steps, pt] : all) {
    const std::string prefix = "unipc" + std::to_string(steps) + "_" + pt;
    SCOPED_TRACE(prefix);
    ASSERT_TRUE(configs_.count(pt)) << "no resolved config for " << pt;
    UniPCScheduler sch(configs_.at(pt));
    sch.set_timesteps(steps);
    EXPECT_EQ(sch.timesteps_int(), get_int(prefix + ".timesteps"));
    const Tensor s = get(prefix + ".sigmas");
    ASSERT_EQ(static_cast<i64>(sch.sigmas().size()), s.numel());
    for (i64 i = 0; i < s.numel(); ++i)
      EXPECT_LE(std::abs(sch.sigmas()[static_cast<std::size_t>(i)] - s.data()[i]),
                kTableRel * std::abs(s.data()[i]))
          << "sigma " << i;
  }
}

TEST_F(UniPCGolden, StepByStepSamples) {
  int looped = 0;
  for (const auto& [steps, pt] : runs()) {
    const std::string prefix = "unipc" + std::to_string(steps) + "_" + pt;
    if (!file_->find(prefix + ".x.0")) continue;  // a table-only run
    SCOPED_TRACE(prefix);
    const std::vector<double> usage = loop(prefix, configs_.at(pt), steps);
    for (std::size_t i = 0; i < usage.size(); ++i) EXPECT_LE(usage[i], 1.0) << "step " << i;
    std::printf("[ info ] %s: usage of the 1e-5 tolerance %.4f\n", prefix.c_str(),
                *std::max_element(usage.begin(), usage.end()));
    ++looped;
  }
  EXPECT_GE(looped, 2);
}

// The comparison sees an error: without the corrector (or with B(h) = h) the samples leave the
// tolerance by far.
TEST_F(UniPCGolden, LoopComparisonDetectsAnError) {
  for (const auto& [steps, pt] : runs()) {
    const std::string prefix = "unipc" + std::to_string(steps) + "_" + pt;
    if (!file_->find(prefix + ".x.0")) continue;
    SchedulerConfig off = configs_.at(pt);
    for (int i = 0; i < steps; ++i) off.disable_corrector.push_back(i);
    SchedulerConfig bh1 = configs_.at(pt);
    bh1.solver_type = "bh1";
    const auto u_off = loop(prefix, off, steps), u_bh1 = loop(prefix, bh1, steps);
    EXPECT_GT(*std::max_element(u_off.begin(), u_off.end()), 100.0) << prefix;
    EXPECT_GT(*std::max_element(u_bh1.begin(), u_bh1.end()), 100.0) << prefix;
    return;
  }
  FAIL() << "no recorded loop";
}

}  // namespace
}  // namespace gen3d::models
