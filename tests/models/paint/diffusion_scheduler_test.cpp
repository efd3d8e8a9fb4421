// Scheduler configs as diffusers writes them (strict on the keys a scheduler reads, every problem
// named), and the UniPC scheduler's contract: steps in order, one sample size, the last step lands
// on the predicted x0.

#include <gtest/gtest.h>

#include <cmath>
#include <string>
#include <vector>

#include "models/core/error.h"
#include "models/paint/diffusion_scheduler.h"

namespace gen3d::models {
namespace {

std::string error_of(const std::string& json_text) {
  try {
    SchedulerConfig::parse(json_text, "scheduler_config.json");
  } catch (const ModelError& e) {
    return e.what();
  }
  return "no error";
}

constexpr const char* kSd2 = R"({"_class_name": "UniPCMultistepScheduler",
  "_diffusers_version": "0.30.0", "beta_end": 0.012, "beta_schedule": "scaled_linear",
  "beta_start": 0.00085, "clip_sample": false, "num_train_timesteps": 1000,
  "prediction_type": "v_prediction", "set_alpha_to_one": false, "steps_offset": 1,
  "timestep_spacing": "trailing", "solver_order": 2, "solver_type": "bh2", "predict_x0": true,
  "lower_order_final": true, "disable_corrector": [], "solver_p": null,
  "use_karras_sigmas": false, "final_sigmas_type": "zero", "thresholding": false,
  "dynamic_thresholding_ratio": 0.995, "sample_max_value": 1.0})";

TEST(SchedulerConfig, UniPCKeysAreRead) {
  const SchedulerConfig c = SchedulerConfig::parse(kSd2, "scheduler_config.json");
  EXPECT_EQ(c.prediction_type, "v_prediction");
  EXPECT_EQ(c.timestep_spacing, "trailing");
  EXPECT_EQ(c.solver_order, 2);
  EXPECT_EQ(c.solver_type, "bh2");
  EXPECT_TRUE(c.predict_x0);
  EXPECT_TRUE(c.lower_order_final);
  EXPECT_TRUE(c.disable_corrector.empty());
  EXPECT_EQ(c.final_sigmas_type, "zero");
  // diffusers maps the older solver names to bh2.
  EXPECT_EQ(SchedulerConfig::parse(R"({"solver_type": "midpoint"})", "s").solver_type, "bh2");
  EXPECT_EQ(SchedulerConfig::parse(R"({"solver_type": "bh1"})", "s").solver_type, "bh1");
}

TEST(SchedulerConfig, UniPCProblemsAreNamedByKey) {
  const std::string m = error_of(
      R"({"solver_order": "2", "solver_type": "euler", "use_karras_sigmas": true,
          "disable_corrector": [0, "1"], "final_sigmas_type": "max", "solver_p": {},
          "lower_order_final": 1})");
  EXPECT_EQ(m.rfind("scheduler_config.json", 0), 0u) << m;
  for (const char* needle :
       {"solver_order: expected an integer", "solver_type: \"euler\" is not supported",
        "use_karras_sigmas: true is not supported", "disable_corrector: expected a list",
        "final_sigmas_type: \"max\" is not supported", "solver_p: {} is not supported",
        "lower_order_final: expected true/false"})
    EXPECT_NE(m.find(needle), std::string::npos) << needle << "\n" << m;
  EXPECT_NE(error_of(R"({"solver_order": 4})").find("solver_order must be in [1, 3]"),
            std::string::npos);
}

TEST(UniPCScheduler, StepsRunInOrderOnOneSize) {
  UniPCScheduler s(SchedulerConfig::parse(kSd2, "scheduler_config.json"));
  std::vector<float> x(8, 0.5f), mo(8, 0.1f);
  EXPECT_THROW(s.step(x.data(), mo.data(), 8, 0), ModelError);  // before set_timesteps
  s.set_timesteps(15);
  ASSERT_EQ(s.size(), 15);
  EXPECT_EQ(s.timesteps_int().front(), 999);
  EXPECT_EQ(s.sigmas().size(), 16u);
  EXPECT_EQ(s.sigmas().back(), 0.0f);
  EXPECT_THROW(s.step(x.data(), mo.data(), 8, 1), ModelError);  // out of order
  s.step(x.data(), mo.data(), 8, 0);
  EXPECT_THROW(s.step(x.data(), mo.data(), 4, 1), ModelError);  // another size
  for (int i = 1; i < s.size(); ++i) s.step(x.data(), mo.data(), 8, i);
  EXPECT_THROW(s.step(x.data(), mo.data(), 8, 15), ModelError);
  for (float v : x) EXPECT_TRUE(std::isfinite(v));
  s.set_timesteps(3);  // a fresh run
  EXPECT_NO_THROW(s.step(x.data(), mo.data(), 8, 0));
}

// A model that always predicts the same clean sample x0 (as v or as epsilon at each step's
// noise level) is sampled to exactly that x0: the last step returns the predicted x0.
TEST(UniPCScheduler, AConsistentModelIsSampledToItsX0) {
  for (const char* pt : {"epsilon", "v_prediction"}) {
    SCOPED_TRACE(pt);
    SchedulerConfig c = SchedulerConfig::parse(kSd2, "scheduler_config.json");
    c.prediction_type = pt;
    UniPCScheduler s(c);
    s.set_timesteps(10);
    const std::vector<float> x0{0.3f, -0.7f, 1.2f};
    std::vector<float> x{0.9f, -1.1f, 0.4f}, mo(3);
    for (int i = 0; i < s.size(); ++i) {
      const float sigma = s.sigmas()[static_cast<std::size_t>(i)];
      const float alpha_t = 1.0f / std::sqrt(sigma * sigma + 1.0f), sigma_t = sigma * alpha_t;
      for (std::size_t k = 0; k < x.size(); ++k) {
        const float eps = (x[k] - alpha_t * x0[k]) / sigma_t;
        mo[k] = c.prediction_type == "epsilon" ? eps : alpha_t * eps - sigma_t * x0[k];
      }
      s.step(x.data(), mo.data(), 3, i);
    }
    for (std::size_t k = 0; k < x.size(); ++k) EXPECT_NEAR(x[k], x0[k], 1e-4) << k;
  }
}

}  // namespace
}  // namespace gen3d::models
