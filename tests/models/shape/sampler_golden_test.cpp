// Golden tests of the schedules and the CFG sampler against the official PyTorch reference
// (golden/README.md "Scheduler and sampler"). Data-driven: $GEN3D_GOLDEN_DIR (default
// tests/data/golden); sizes and settings come from its config.json and the tensors' shapes; a
// test skips only when its file is absent.

#include <gtest/gtest.h>

#include <cmath>
#include <filesystem>
#include <fstream>

#include <nlohmann/json.hpp>

#include "models/bf16_golden.h"
#include "models/core/safetensors.h"
#include "models/shape/dit.h"
#include "models/shape/sampler.h"
#include "support/paths.h"

namespace gen3d::models {
namespace {

constexpr double kSamplerStrict = 1e-4;  // README: sampler, multi-step (atol = rtol)

std::string golden_file(const std::string& name) {
  return test::env_or("GEN3D_GOLDEN_DIR", test::source_dir() + "/tests/data/golden") + "/" + name;
}

#define REQUIRE_GOLDEN(path)                                                              \
  do {                                                                                    \
    if (!std::filesystem::exists(path)) GTEST_SKIP() << "golden file absent: " << (path); \
  } while (0)

nlohmann::json golden_config() {
  std::ifstream f(golden_file("config.json"));
  return nlohmann::json::parse(f);
}

std::vector<float> values(const SafetensorsFile& f, const std::string& name) {
  const Tensor t = f.to_f32(name);
  return std::vector<float>(t.data(), t.data() + t.numel());
}

void expect_tables(const SafetensorsFile& f, const std::string& prefix, const Schedule& s) {
  EXPECT_EQ(values(f, prefix + "sigmas"), s.sigmas) << prefix;
  EXPECT_EQ(values(f, prefix + "timesteps"), s.timesteps) << prefix;
  EXPECT_EQ(values(f, prefix + "model_t"), s.model_t) << prefix;
  if (f.find(prefix + "dt")) {
    EXPECT_EQ(values(f, prefix + "dt"), s.dt) << prefix;
  }
}

TEST(SamplerGolden, SchedulerTablesExact) {
  const auto path = golden_file("scheduler.safetensors");
  REQUIRE_GOLDEN(path);
  REQUIRE_GOLDEN(golden_file("config.json"));
  const auto file = SafetensorsFile::open(path);
  const auto run = golden_config()["golden"]["scheduler"];
  int tables = 0;
  for (int n : run["flow_steps"]) {
    expect_tables(*file, "flowmatch.steps" + std::to_string(n) + ".", flow_match_schedule(n));
    ++tables;
  }
  for (const auto& c : run["consistency"]) {
    const int pcm = c["pcm_timesteps"], n = c["steps"];
    expect_tables(*file,
                  "consistency.pcm" + std::to_string(pcm) + ".steps" + std::to_string(n) + ".",
                  consistency_schedule(n, pcm));
    ++tables;
  }
  EXPECT_GT(tables, 0);
}

// max over elements of |a - g| / (atol + rtol |g|); <= 1 passes.
double usage(const Tensor& a, const Tensor& g, double tol) {
  EXPECT_EQ(a.shape(), g.shape());
  double u = 0.0;
  for (std::int64_t i = 0; i < g.numel(); ++i)
    u = std::max(u, std::abs(static_cast<double>(a.data()[i]) - g.data()[i]) /
                        (tol + tol * std::abs(static_cast<double>(g.data()[i]))));
  return u;
}

TEST(SamplerGolden, CfgTrajectory) {
  const auto path = golden_file("sampler.safetensors");
  REQUIRE_GOLDEN(path);
  REQUIRE_GOLDEN(golden_file("config.json"));
  const auto cfg = golden_config();
  const auto run = cfg["golden"]["sampler"];
  const auto weights = golden_file(run["dit_weights_file"].get<std::string>());
  REQUIRE_GOLDEN(weights);
  const auto file = SafetensorsFile::open(path);
  const auto model =
      Hunyuan3DDiT::load(DiTConfig::from_file(golden_file("config.json"), "model"), weights);

  SamplerOptions o;
  o.steps = run["steps"];
  o.guidance_scale = run["guidance_scale"];
  expect_tables(*file, "schedule.", flow_match_schedule(o.steps));

  const Tensor cond = file->to_f32("in.cond_context");
  const Tensor uncond = file->to_f32("in.uncond_context");
  for (float v : uncond.span()) ASSERT_EQ(v, 0.0f) << "the official unconditional context is zero";

  // Elision off: the golden has the DiT outputs of the last (dt = 0) step too.
  for (const bool elide : {false, true}) {
    o.elide_zero_dt_steps = elide;
    FlowMatchSampler s(model, o);
    EXPECT_EQ(s.cfg(), run["cfg"].get<bool>());
    s.start(file->to_f32("in.initial_latents"), cond, &uncond);
    double worst = 0.0;
    int compared = 0;
    StepObserver obs = [&](const StepObservation& ob) {
      const std::string p = "step." + std::to_string(ob.step) + ".";
      auto check = [&](const std::string& name, const Tensor* t) {
        if (!t || !file->find(p + name)) return;
        const double u = usage(*t, file->to_f32(p + name), kSamplerStrict);
        EXPECT_LE(u, 1.0) << p << name << (elide ? " (elided run)" : "");
        worst = std::max(worst, u);
        ++compared;
      };
      check("latents", ob.latents);
      check("pred_cond", ob.v_cond);
      check("pred_uncond", ob.v_uncond);
      check("pred_guided", ob.v);
    };
    while (!s.done()) s.step(&obs);
    const double u = usage(s.latents(), file->to_f32("out.final_latents"), kSamplerStrict);
    EXPECT_LE(u, 1.0) << "final latents";
    EXPECT_EQ(compared, elide ? 4 * o.steps - 3 : 4 * o.steps);
    std::printf("[ info ] sampler (elide %d): %d tensors, worst strict usage %.4f, final %.4f\n",
                elide ? 1 : 0, compared, worst, u);
  }
}

// bf16 and int8 modes: the DiT in bf16 (or int8) drives the same sampler (state float32); every
// step's latents and predictions against the same golden trajectory by normalized MSE (README
// "Precision").
void reduced_trajectory(WeightStorage storage, const std::string& label, double tolerance,
                        const std::string& mode) {
  const auto path = golden_file("sampler.safetensors");
  const auto cfg = golden_config();
  const auto run = cfg["golden"]["sampler"];
  const auto weights = golden_file(run["dit_weights_file"].get<std::string>());
  REQUIRE_GOLDEN(weights);
  const auto file = SafetensorsFile::open(path);
  const auto model = Hunyuan3DDiT::load(DiTConfig::from_file(golden_file("config.json"), "model"),
                                        weights, {storage});
  SamplerOptions o;
  o.steps = run["steps"];
  o.guidance_scale = run["guidance_scale"];
  o.elide_zero_dt_steps = false;
  const Tensor cond = file->to_f32("in.cond_context");
  const Tensor uncond = file->to_f32("in.uncond_context");
  FlowMatchSampler s(model, o);
  s.start(file->to_f32("in.initial_latents"), cond, &uncond);
  bf16test::NmseCheck check(label, tolerance, mode);
  StepObserver obs = [&](const StepObservation& ob) {
    const std::string p = "step." + std::to_string(ob.step) + ".";
    auto add = [&](const std::string& name, const Tensor* t) {
      if (!t || !file->find(p + name)) return;
      const Tensor g = file->to_f32(p + name);
      ASSERT_EQ(t->numel(), g.numel()) << p << name;
      check.add(p + name, t->data(), g.data(), g.numel());
    };
    add("latents", ob.latents);
    add("pred_cond", ob.v_cond);
    add("pred_uncond", ob.v_uncond);
    add("pred_guided", ob.v);
  };
  while (!s.done()) s.step(&obs);
  const Tensor g = file->to_f32("out.final_latents");
  check.add("out.final_latents", s.latents().data(), g.data(), g.numel());
  EXPECT_EQ(check.count(), 4 * o.steps + 1);
  check.report();
}

TEST(SamplerGolden, CfgTrajectory_bf16) {
  REQUIRE_GOLDEN(golden_file("sampler.safetensors"));
  REQUIRE_GOLDEN(golden_file("config.json"));
  reduced_trajectory(WeightStorage::kBF16, "sampler bf16", bf16test::kNetworkNmse, "bf16");
}

TEST(SamplerGolden, CfgTrajectory_int8) {
  REQUIRE_GOLDEN(golden_file("sampler.safetensors"));
  REQUIRE_GOLDEN(golden_file("config.json"));
  reduced_trajectory(WeightStorage::kInt8, "sampler int8", bf16test::kInt8NetworkNmse, "int8");
}

}  // namespace
}  // namespace gen3d::models
