#include "models/shape/dit_config.h"

#include <gtest/gtest.h>

#include <fstream>

#include "models/core/error.h"
#include "support/paths.h"

namespace gen3d::models {
namespace {

TEST(DiTConfig, ParsesOfficialSection) {
  const auto c = DiTConfig::from_json(R"({"target": "hy3dgen.shapegen.models.Hunyuan3DDiT",
    "params": {"in_channels": 8, "context_in_dim": 12, "hidden_size": 32, "mlp_ratio": 4.0,
               "num_heads": 4, "depth": 2, "depth_single_blocks": 2, "axes_dim": [8],
               "theta": 10000, "qkv_bias": true, "guidance_embed": false}})");
  EXPECT_EQ(c.in_channels, 8);
  EXPECT_EQ(c.head_dim(), 8);
  EXPECT_EQ(c.mlp_hidden(), 128);
  EXPECT_EQ(c.time_factor, 1000);
  EXPECT_FALSE(c.guidance_embed);
}

TEST(DiTConfig, DefaultsAreTheFullSizeModel) {
  const auto c = DiTConfig::from_json("{}");
  EXPECT_EQ(c.hidden_size, 1024);
  EXPECT_EQ(c.num_heads, 16);
  EXPECT_EQ(c.depth, 16);
  EXPECT_EQ(c.depth_single_blocks, 32);
  EXPECT_EQ(c.context_in_dim, 1536);
}

TEST(DiTConfig, ReportsAllProblemsAtOnce) {
  try {
    DiTConfig::from_json(R"({"hidden_size": "big", "depht": 3, "qkv_bias": 1})");
    FAIL();
  } catch (const ModelError& e) {
    const std::string m = e.what();
    EXPECT_NE(m.find("hidden_size"), std::string::npos) << m;
    EXPECT_NE(m.find("unknown key 'depht'"), std::string::npos) << m;
    EXPECT_NE(m.find("qkv_bias"), std::string::npos) << m;
  }
  EXPECT_THROW(DiTConfig::from_json(R"({"hidden_size": 30, "num_heads": 4})"), ModelError);
  EXPECT_THROW(DiTConfig::from_json(R"({"hidden_size": 32, "num_heads": 4, "axes_dim": [4]})"),
               ModelError);
  EXPECT_THROW(DiTConfig::from_json("not json"), ModelError);
}

TEST(DiTConfig, FromFileSection) {
  const std::string dir = test::temp_dir("models_dit_config");
  {
    std::ofstream(dir + "/c.json") << R"({"model": {"target": "x", "params": {"hidden_size": 64,
      "num_heads": 4, "axes_dim": [16]}}, "vae": {}})";
  }
  const auto c = DiTConfig::from_file(dir + "/c.json");
  EXPECT_EQ(c.hidden_size, 64);
  EXPECT_THROW(DiTConfig::from_file(dir + "/c.json", "scheduler"), ModelError);
  EXPECT_THROW(DiTConfig::from_file(dir + "/missing.json"), ModelError);
}

}  // namespace
}  // namespace gen3d::models
