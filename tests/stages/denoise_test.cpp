// The shape stages (load_tensor, denoise, save_tensor), each run alone through StageRunner on the
// golden tiny DiT (tests/data/golden or $GEN3D_GOLDEN_DIR; skipped when absent).

#include <filesystem>

#include <gtest/gtest.h>

#include "models/core/safetensors.h"
#include "models/nn/model_cache.h"
#include "models/shape/checkpoints.h"
#include "pipeline/error.h"
#include "pipeline/stage_runner.h"
#include "stages/register.h"
#include "stages/types.h"
#include "support/paths.h"

namespace gen3d::test {
namespace {

using models::Tensor;

const pipeline::Registry& registry() {
  static const pipeline::Registry reg = [] {
    pipeline::Registry r;
    stages::register_shape_stages(r);
    return r;
  }();
  return reg;
}

std::string golden(const std::string& name) {
  return env_or("GEN3D_GOLDEN_DIR", source_dir() + "/tests/data/golden") + "/" + name;
}

#define REQUIRE_FILE(path)                                                         \
  do {                                                                             \
    if (!std::filesystem::exists(path)) GTEST_SKIP() << "file absent: " << (path); \
  } while (0)

std::shared_ptr<const Tensor> load(const std::string& file, const std::string& name) {
  pipeline::StageRunner r(*registry().find("load_tensor"));
  r.param("path", file).param("name", name);
  r.run();
  return r.output<Tensor>("tensor");
}

TEST(DenoiseStage, ContractIsAModelStage) {
  const auto* c = registry().contract("denoise");
  ASSERT_NE(c, nullptr);
  EXPECT_EQ(c->resource, pipeline::ResourceClass::Model);
  EXPECT_NE(c->find_input("cond"), nullptr);
  EXPECT_TRUE(c->find_input("uncond")->optional);
  EXPECT_NE(c->find_output("latents"), nullptr);
}

TEST(DenoiseStage, GoldenSamplerThroughTheStage) {
  const auto weights = golden("dit_weights.fp32.safetensors");
  const auto sampler = golden("sampler.safetensors");
  REQUIRE_FILE(weights);
  REQUIRE_FILE(sampler);
  REQUIRE_FILE(golden("config.json"));
  auto cond = load(sampler, "in.cond_context");
  auto noise = load(sampler, "in.initial_latents");
  ASSERT_TRUE(cond && noise);

  pipeline::StageRunner run(*registry().find("denoise"));
  run.input<Tensor>("cond", cond).input<Tensor>("noise", noise);
  run.param("model", weights).param("steps", 4).param("guidance_scale", 5.0);
  run.param("precision", "fp32");  // the float32 golden trajectory
  run.run();
  auto latents = run.output<Tensor>("latents");
  ASSERT_TRUE(latents);
  const Tensor want = models::SafetensorsFile::open(sampler)->to_f32("out.final_latents");
  ASSERT_EQ(latents->shape(), want.shape());
  for (std::int64_t i = 0; i < want.numel(); ++i)
    EXPECT_NEAR(latents->data()[i], want.data()[i], 1e-4 + 1e-4 * std::abs(want.data()[i]));
  const auto counters = run.profiler().counter_totals();
  EXPECT_EQ(counters.at("denoise.steps_full"), 3.0);
  EXPECT_EQ(counters.at("denoise.steps_elided"), 1.0);

  // A second run with a cache shares the loaded model and reports its skips; seeded noise.
  pipeline::StageRunner cached(*registry().find("denoise"));
  cached.input<Tensor>("cond", cond);
  cached.param("model", weights).param("steps", 12).param("latent_tokens", 32);
  cached.param("precision", "fp32");
  cached.param("cache", "taylorseer").param("seed", 3);
  cached.run();
  EXPECT_EQ(cached.output<Tensor>("latents")->shape(), want.shape());
  // N = 12: FULL {0, 1, 5, 9}, step 11 (cutoff) elided, the other 7 predicted.
  EXPECT_EQ(cached.profiler().counter_totals().at("denoise.steps_predicted"), 7.0);
  EXPECT_EQ(models::nn::shared_model_count(), 1u);

  // Same seed, same result (noise generator is deterministic).
  pipeline::StageRunner again(*registry().find("denoise"));
  again.input<Tensor>("cond", cond);
  again.param("model", weights).param("steps", 12).param("latent_tokens", 32);
  again.param("precision", "fp32");
  again.param("cache", "taylorseer").param("seed", 3);
  again.run();
  const auto a = cached.output<Tensor>("latents"), b = again.output<Tensor>("latents");
  for (std::int64_t i = 0; i < a->numel(); ++i) ASSERT_EQ(a->data()[i], b->data()[i]);

  // save_tensor writes a file load_tensor reads back.
  const std::string out = temp_dir("denoise_stage") + "/latents.safetensors";
  pipeline::StageRunner save(*registry().find("save_tensor"));
  save.input<Tensor>("tensor", a).param("path", out);
  save.run();
  EXPECT_EQ(load(out, "latents")->shape(), a->shape());
}

TEST(DenoiseStage, ChecksRejectBadCacheParamsAndMissingModel) {
  pipeline::StageRunner missing(*registry().find("denoise"));
  missing.input<Tensor>("cond", Tensor({1, 2, 12})).param("model", "no/such/dit.safetensors");
  EXPECT_THROW(missing.run(), pipeline::ConfigError);

  pipeline::StageRunner range(*registry().find("denoise"));
  EXPECT_THROW(range.param("taylorseer_warmup", 0), pipeline::ConfigError);  // W >= 1
  EXPECT_THROW(range.param("cache", "magic"), pipeline::ConfigError);

  const auto weights = golden("dit_weights.fp32.safetensors");
  REQUIRE_FILE(weights);
  pipeline::StageRunner coeffs(*registry().find("denoise"));
  coeffs.input<Tensor>("cond", Tensor({1, 2, 12})).param("model", weights);
  coeffs.param("cache", "teacache").param("teacache_coefficients", nlohmann::json::array());
  EXPECT_THROW(coeffs.run(), pipeline::ConfigError);

  pipeline::StageRunner load_bad(*registry().find("load_tensor"));
  load_bad.param("path", "no/such.safetensors").param("name", "x");
  EXPECT_THROW(load_bad.run(), pipeline::ConfigError);
}

}  // namespace
}  // namespace gen3d::test
