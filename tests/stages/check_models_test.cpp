// check_models through StageRunner: one weights file as JSON lines, a folder without official
// networks refused by name.

#include <gtest/gtest.h>

#include <sstream>
#include <string>

#include <nlohmann/json.hpp>

#include "pipeline/stage_runner.h"
#include "stages/register.h"
#include "stages/types.h"
#include "support/paths.h"

namespace gen3d::test {
namespace {

const pipeline::Registry& registry() {
  static const pipeline::Registry r = [] {
    pipeline::Registry reg;
    stages::register_all_stages(reg);
    return reg;
  }();
  return r;
}

TEST(CheckModelsStage, WeightsFileGivesOneJsonObjectPerTensor) {
  pipeline::StageRunner run(*registry().find("check_models"));
  run.param("path", data_dir() + "/golden/torchbin/state_dict.bin").param("json", true);
  run.run();
  std::istringstream lines(run.output<stages::TextReport>("report")->text);
  std::string line;
  std::size_t n = 0;
  while (std::getline(lines, line)) {
    const auto t = nlohmann::json::parse(line);
    if (t["name"] == "step") {
      EXPECT_EQ(t["dtype"], "I64");
      EXPECT_EQ(t["sum"], t["abs_sum"]);
    }
    ++n;
  }
  EXPECT_EQ(n, 10u);
  EXPECT_EQ(run.profiler().counter_totals().at("check.problems"), 0.0);
}

TEST(CheckModelsStage, FolderWithoutNetworksIsNamed) {
  pipeline::StageRunner run(*registry().find("check_models"));
  run.param("path", temp_dir("check_models_empty"));
  try {
    run.run();
    ADD_FAILURE() << "an empty folder passed";
  } catch (const std::exception& e) {
    EXPECT_NE(std::string(e.what()).find("holds no official network folder"), std::string::npos)
        << e.what();
  }
}

}  // namespace
}  // namespace gen3d::test
