// The published shape folders by name (`gen3d shape --models DIR --model NAME`), the turbo VAE a
// turbo DiT is run with, and the sampling schedule a folder's config names.

#include <gtest/gtest.h>

#include <filesystem>
#include <fstream>
#include <functional>
#include <set>
#include <string>

#include "models/core/error.h"
#include "models/shape/checkpoints.h"
#include "models/shape/shape_models.h"
#include "support/paths.h"

namespace gen3d::models {
namespace {

namespace fs = std::filesystem;

std::string error_of(const std::function<void()>& f) {
  try {
    f();
  } catch (const ModelError& e) {
    return e.what();
  }
  return "";
}

TEST(ShapeModels, EveryPublishedFolderHasOneNameAndNetwork) {
  std::set<std::string_view> names, networks;
  for (const ShapeModelInfo& m : shape_models()) {
    EXPECT_TRUE(names.insert(m.name).second) << m.name;
    EXPECT_TRUE(networks.insert(m.network).second) << m.network;
    EXPECT_EQ(find_shape_model_info(m.folder), &m);
    if (!m.turbo_vae.empty()) {
      EXPECT_TRUE(find_shape_vae_info(m.turbo_vae)) << m.turbo_vae;
    }
  }
  EXPECT_EQ(find_shape_model_info("hunyuan3d-dit-v2-0-turbo")->name, "turbo");
  EXPECT_EQ(find_shape_model_info("hunyuan3d-dit-v2-0-fast")->network, "shape-fast");
  EXPECT_EQ(find_shape_model_info("hunyuan3d-dit-v2-2"), nullptr);
}

// A models folder holding two repository downloads side by side.
TEST(ShapeModels, FindsFoldersByShortOrPublishedNameAndTheTurboVae) {
  const fs::path root = test::temp_dir("shape_models_find");
  for (const char* d :
       {"hy2/hunyuan3d-dit-v2-0-turbo", "hy2/hunyuan3d-dit-v2-0", "hy2/hunyuan3d-vae-v2-0-turbo",
        "hy2mv/hunyuan3d-dit-v2-mv-turbo", "hy2mini/hunyuan3d-dit-v2-mini-turbo"})
    fs::create_directories(root / d);
  EXPECT_EQ(find_shape_model(root.string(), "turbo"), (root / "hy2/hunyuan3d-dit-v2-0-turbo"));
  EXPECT_EQ(find_shape_model(root.string(), "hunyuan3d-dit-v2-0"),
            (root / "hy2/hunyuan3d-dit-v2-0"));
  EXPECT_EQ(find_shape_model((root / "hy2mv").string(), "mv-turbo"),
            (root / "hy2mv/hunyuan3d-dit-v2-mv-turbo"));
  const std::string e = error_of([&] { find_shape_model(root.string(), "fast"); });
  EXPECT_NE(e.find("\"fast\""), std::string::npos) << e;
  EXPECT_NE(e.find("hy2/hunyuan3d-dit-v2-0-turbo"), std::string::npos) << e;

  // The turbo VAE beside the DiT, or in a sibling download (2mv uses Hunyuan3D-2's); none for
  // the models that keep their own, or when it is not there.
  EXPECT_EQ(find_turbo_vae((root / "hy2/hunyuan3d-dit-v2-0-turbo").string()),
            (root / "hy2/hunyuan3d-vae-v2-0-turbo"));
  EXPECT_EQ(find_turbo_vae((root / "hy2mv/hunyuan3d-dit-v2-mv-turbo/").string()),
            (root / "hy2/hunyuan3d-vae-v2-0-turbo"));
  EXPECT_EQ(find_turbo_vae((root / "hy2/hunyuan3d-dit-v2-0").string()), "");
  EXPECT_EQ(find_turbo_vae((root / "hy2mini/hunyuan3d-dit-v2-mini-turbo").string()), "");
}

std::string write_config(const std::string& name, const std::string& yaml) {
  const std::string path = test::temp_dir("shape_models_sched_" + name) + "/config.yaml";
  std::ofstream(path) << yaml;
  return path;
}

TEST(ShapeModels, SchedulerFromTheConfig) {
  const auto turbo = scheduler_of(write_config("turbo", R"(scheduler:
  target: hy3dgen.shapegen.schedulers.ConsistencyFlowMatchEulerDiscreteScheduler
  params:
    num_train_timesteps: 1000
    pcm_timesteps: 100
)"));
  ASSERT_TRUE(turbo);
  EXPECT_EQ(turbo->kind, ScheduleKind::kConsistency);
  EXPECT_EQ(turbo->pcm_timesteps, 100);
  const auto flow = scheduler_of(write_config("flow", R"(scheduler:
  target: hy3dshape.schedulers.FlowMatchEulerDiscreteScheduler
  params:
    num_train_timesteps: 1000
    shift: 3.0
)"));
  ASSERT_TRUE(flow);
  EXPECT_EQ(flow->kind, ScheduleKind::kFlowMatch);
  EXPECT_DOUBLE_EQ(flow->shift, 3.0);
  EXPECT_FALSE(scheduler_of(write_config("none", "model:\n  params: {}\n")));
  const std::string other = error_of([] {
    scheduler_of(write_config("ddim", "scheduler:\n  target: diffusers.DDIMScheduler\n"));
  });
  EXPECT_NE(other.find("DDIMScheduler"), std::string::npos) << other;
  const std::string dynamic = error_of([] {
    scheduler_of(write_config("dyn", R"(scheduler:
  target: x.FlowMatchEulerDiscreteScheduler
  params: {use_dynamic_shifting: true}
)"));
  });
  EXPECT_NE(dynamic.find("use_dynamic_shifting"), std::string::npos) << dynamic;
}

}  // namespace
}  // namespace gen3d::models
