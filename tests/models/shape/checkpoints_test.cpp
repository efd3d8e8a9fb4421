// Official shape model folders resolve to their weights and config: config.yaml as published, or
// a config.json beside the weights; `gen3d models check` reads the same.

#include <gtest/gtest.h>

#include <filesystem>
#include <fstream>
#include <string>

#include "models/core/error.h"
#include "models/model_folder.h"
#include "models/shape/checkpoints.h"
#include "support/paths.h"
#include "support/tiny_models.h"

namespace gen3d::models {
namespace {

namespace fs = std::filesystem;

TEST(Checkpoints, OfficialFolderWithConfigYamlResolvesAndLoads) {
  const std::string root = test::temp_dir("checkpoints_yaml");
  const std::string dir = root + "/hunyuan3d-dit-v2-0";
  const test::TinyModelFolder f =
      test::write_tiny_model_folder(dir, 3, test::TinyConfigFile::kYaml);
  ASSERT_FALSE(fs::exists(dir + "/config.json"));

  const CheckpointSource src = resolve_checkpoint(dir);
  EXPECT_EQ(src.config, dir + "/config.yaml");
  EXPECT_EQ(src.weights, f.weights);
  const auto contents = inspect_checkpoint(dir);
  ASSERT_TRUE(contents.has_value());
  EXPECT_EQ(contents->config, dir + "/config.yaml");
  EXPECT_TRUE(contents->has_vae);
  EXPECT_TRUE(contents->has_conditioner);
  EXPECT_EQ(conditioner_section_of(src.config), "conditioner");

  // The networks load from it: the VAE's section is found in the YAML.
  EXPECT_EQ(shared_dit(src)->config().hidden_size, 32);
  CheckpointSource vae = src;
  vae.section = "";
  EXPECT_EQ(shared_shape_vae(vae)->config().num_latents, f.latent_tokens);

  const auto checks = check_model_folder(root);
  ASSERT_EQ(checks.size(), 1u);
  EXPECT_TRUE(checks[0].problems.empty()) << format_model_check(checks);
  EXPECT_EQ(checks[0].files.at(1), dir + "/config.yaml");
}

TEST(Checkpoints, ConfigJsonBesideTheYamlIsPreferredAndNoConfigIsAClearError) {
  const std::string dir = test::temp_dir("checkpoints_json_yaml");
  test::write_tiny_model_folder(dir, 3, test::TinyConfigFile::kYaml);
  std::ofstream(dir + "/config.json") << test::tiny_model_config_json();
  EXPECT_EQ(resolve_checkpoint(dir).config, dir + "/config.json");

  fs::remove(dir + "/config.json");
  fs::remove(dir + "/config.yaml");
  try {
    resolve_checkpoint(dir);
    ADD_FAILURE() << "no error";
  } catch (const ModelError& e) {
    EXPECT_NE(std::string(e.what()).find("no config.json or config.yaml next to"),
              std::string::npos)
        << e.what();
  }
}

// Hunyuan3D-2.1's folder: model.fp16.ckpt (nested state dicts, read flattened) + config.yaml.
TEST(Checkpoints, TorchSaveCheckpointOfNestedStateDictsIsFound) {
  const std::string dir = test::temp_dir("checkpoints_ckpt");
  fs::copy_file(test::data_dir() + "/golden/torchbin/nested_shape.ckpt", dir + "/model.fp16.ckpt");
  std::ofstream(dir + "/config.yaml") << test::tiny_model_config_yaml();
  const CheckpointSource src = resolve_checkpoint(dir);
  EXPECT_EQ(src.weights, dir + "/model.fp16.ckpt");
  EXPECT_EQ(src.config, dir + "/config.yaml");
  const auto contents = inspect_checkpoint(dir);
  ASSERT_TRUE(contents.has_value());
  EXPECT_TRUE(contents->has_vae);
  EXPECT_TRUE(contents->has_conditioner);
}

}  // namespace
}  // namespace gen3d::models
