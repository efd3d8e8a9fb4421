// cache_study run alone through StageRunner on the small random DiT.

#include <filesystem>
#include <fstream>

#include <gtest/gtest.h>

#include "pipeline/error.h"
#include "stage_test_helpers.h"
#include "support/paths.h"

namespace gen3d::test {
namespace {

using nlohmann::json;

TEST(CacheStudy, ComparesTheCachesWithTheBaselineAndWritesTheRows) {
  const std::string out = temp_dir("cache_study") + "/rows.json";
  pipeline::StageRunner r = runner("cache_study");
  r.param("random_config", "small").param("steps", 4).param("latent_tokens", 32);
  r.param("methods", json::array({"teacache"})).param("json", out);
  r.run();
  const auto table = r.output<stages::TextReport>("table");
  ASSERT_TRUE(table);
  EXPECT_NE(table->text.find("random DiT \"small\""), std::string::npos) << table->text;
  EXPECT_NE(table->text.find("latents [1, 32, "), std::string::npos) << table->text;
  EXPECT_NE(table->text.find("\nnone "), std::string::npos) << table->text;
  EXPECT_EQ(table->text.find("fbcache"), std::string::npos) << "only the methods asked for";

  std::ifstream in(out);
  const json rows = json::parse(in);
  ASSERT_GE(rows.size(), 2u);
  EXPECT_EQ(rows[0]["method"], "none") << "the baseline comes first";
  EXPECT_EQ(rows[0]["rel_l2"], 0.0);
  for (size_t i = 1; i < rows.size(); ++i)
    EXPECT_EQ(rows[i]["method"].get<std::string>().rfind("teacache", 0), 0u) << rows[i];
}

TEST(CacheStudy, ParamsAreCheckedBeforeAnythingRuns) {
  const auto problem = [](const json& params) {
    pipeline::StageRunner r = runner("cache_study");
    try {
      for (const auto& [name, value] : params.items()) r.param(name, value);
      r.run();
    } catch (const pipeline::ConfigError& e) {
      return std::string(e.what());
    }
    return std::string();
  };
  EXPECT_NE(problem(json::object()).find("exactly one of \"model\" and \"random_config\""),
            std::string::npos);
  EXPECT_NE(problem({{"random_config", "small"}, {"model", "m.safetensors"}}).find("exactly one"),
            std::string::npos);
  EXPECT_NE(problem({{"model", "m.safetensors"}}).find("needs \"cond\""), std::string::npos);
  EXPECT_NE(problem({{"random_config", "small"}, {"cond", "no/such.safetensors"}})
                .find("condition file not found"),
            std::string::npos);
  EXPECT_NE(problem({{"random_config", "small"}, {"methods", json::array({"fastcache"})}})
                .find("unknown cache method \"fastcache\""),
            std::string::npos);
  const std::string file = temp_dir("cache_study_bad") + "/file";
  std::ofstream(file) << "x";
  EXPECT_FALSE(problem({{"random_config", "small"}, {"json", file + "/rows.json"}}).empty());
  EXPECT_NE(problem({{"random_config", "large"}}).find("/params/random_config"), std::string::npos);
}

}  // namespace
}  // namespace gen3d::test
