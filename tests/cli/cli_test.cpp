// End to end through the gen3d executable: exit codes, messages, and the files a run leaves.

#include <filesystem>
#include <fstream>

#include <gtest/gtest.h>
#include <nlohmann/json.hpp>

#include "support/paths.h"
#include "support/run_command.h"

namespace gen3d::test {
namespace {

namespace fs = std::filesystem;
using nlohmann::json;

void write(const std::string& path, const std::string& text) {
  std::ofstream(path) << text;
}

// The GPU's libraries are loaded when a network first runs there, never at start-up: cuBLASLt
// alone would cost every process about 70 ms and 200 MB resident.
TEST(Cli, StartsWithoutTheGpuLibraries) {
  const auto needed = run_command("readelf -d '" + gen3d_executable() + "'");
  ASSERT_EQ(needed.exit_code, 0) << needed.output;
  EXPECT_NE(needed.output.find("(NEEDED)"), std::string::npos) << needed.output;
  EXPECT_EQ(needed.output.find("libcublas"), std::string::npos) << needed.output;
  EXPECT_EQ(needed.output.find("libcudnn"), std::string::npos) << needed.output;
}

TEST(Cli, EveryShippedConfigValidates) {
  int configs = 0;
  for (const auto& entry : fs::directory_iterator(source_dir() + "/assets/pipelines")) {
    if (entry.path().extension() != ".json") continue;
    ++configs;
    const auto r = run_gen3d("validate " + entry.path().string());
    EXPECT_EQ(r.exit_code, 0) << entry.path() << "\n" << r.output;
  }
  EXPECT_GT(configs, 0);
}

TEST(Cli, BrokenConfigExitsTwoWithEveryProblem) {
  const std::string dir = temp_dir("cli_broken");
  write(dir + "/broken.json", R"({"nodes": [
      {"id": "load", "stage": "load_mesh", "params": {"path": "assets/meshes/BoxTextured.glb", "size": 3}},
      {"id": "save", "stage": "save_meshh", "inputs": {"mesh": "load.mesh"}}]})");
  const auto r = run_gen3d("validate " + dir + "/broken.json");
  EXPECT_EQ(r.exit_code, 2) << r.output;
  EXPECT_NE(r.output.find("/nodes/0/params/size: node \"load\": stage load_mesh has no parameter"),
            std::string::npos)
      << r.output;
  EXPECT_NE(r.output.find("unknown stage \"save_meshh\" (did you mean \"save_mesh\"?)"),
            std::string::npos)
      << r.output;
}

TEST(Cli, BadOverrideExitsTwo) {
  const auto r = run_gen3d("validate assets/pipelines/mesh_info.json --set meshh=x.obj");
  EXPECT_EQ(r.exit_code, 2) << r.output;
  EXPECT_NE(r.output.find("unknown variable \"meshh\" (did you mean \"mesh\"?)"), std::string::npos)
      << r.output;
}

TEST(Cli, MissingConfigFileExitsTwo) {
  const auto r = run_gen3d("validate no/such/config.json");
  EXPECT_EQ(r.exit_code, 2);
  EXPECT_NE(r.output.find("no/such/config.json"), std::string::npos) << r.output;
}

TEST(Cli, StagesAndSchemaPrintValidJson) {
  const auto stages = run_gen3d("stages --json 2>/dev/null");
  ASSERT_EQ(stages.exit_code, 0) << stages.output;
  const json s = json::parse(stages.output);
  bool has_load = false;
  for (const json& st : s["stages"]) has_load = has_load || st["name"] == "load_mesh";
  EXPECT_TRUE(has_load);

  const auto schema = run_gen3d("schema 2>/dev/null");
  ASSERT_EQ(schema.exit_code, 0);
  const json sc = json::parse(schema.output);
  EXPECT_EQ(sc["type"], "object");
  EXPECT_EQ(sc["properties"]["nodes"]["items"]["oneOf"].size(), s["stages"].size());
}

TEST(Cli, GraphPrintsDot) {
  const auto r = run_gen3d("graph assets/pipelines/mesh_info.json 2>/dev/null");
  ASSERT_EQ(r.exit_code, 0) << r.output;
  EXPECT_NE(r.output.find("\"load\" -> \"info\""), std::string::npos) << r.output;
}

TEST(Cli, VersionAndHelp) {
  EXPECT_NE(run_gen3d("--version").output.find("gen3d "), std::string::npos);
  const auto help = run_gen3d("run --help");
  EXPECT_EQ(help.exit_code, 0);
  EXPECT_NE(help.output.find("--trace"), std::string::npos);
}

TEST(Cli, RunWritesOutputTraceAndMetrics) {
  const std::string dir = temp_dir("cli_run");
  const auto r = run_gen3d("run assets/pipelines/mesh_info.json --set out=" + dir +
                           "/box.glb --set mesh=assets/meshes/BoxTextured.glb --trace " + dir +
                           "/t.json --metrics " + dir + "/m.json");
  ASSERT_EQ(r.exit_code, 0) << r.output;
  EXPECT_TRUE(fs::file_size(dir + "/box.glb") > 0);
  EXPECT_NE(r.output.find("critical path"), std::string::npos) << "summary table on stderr";
  std::ifstream trace(dir + "/t.json"), metrics(dir + "/m.json");
  const json t = json::parse(trace);
  EXPECT_FALSE(t["traceEvents"].empty());
  const json m = json::parse(metrics);
  EXPECT_EQ(m["pipeline"], "mesh_info");
  EXPECT_EQ(m["nodes"].size(), 3u);
  EXPECT_EQ(m["counters"]["mesh.faces"], 12.0) << "BoxTextured is a 12-triangle cube";
}

TEST(Cli, FailedRunExitsOneNamesTheNodeAndLeavesNoOutput) {
  const std::string dir = temp_dir("cli_fail");
  write(dir + "/corrupt.obj", "v 0 0 0\nv 1 0 0\nf 1 2 7\n");
  const auto r = run_gen3d("run assets/pipelines/mesh_info.json --set mesh=" + dir +
                           "/corrupt.obj --set out=" + dir + "/never.glb");
  EXPECT_EQ(r.exit_code, 1) << r.output;
  EXPECT_NE(r.output.find("node \"load\" (stage load_mesh) failed"), std::string::npos) << r.output;
  EXPECT_NE(r.output.find("corrupt.obj"), std::string::npos) << r.output;
  EXPECT_FALSE(fs::exists(dir + "/never.glb"));
  for (const auto& e : fs::directory_iterator(dir))
    EXPECT_EQ(e.path().filename(), "corrupt.obj") << "stray file " << e.path();
}

TEST(Cli, MissingInputFileIsAConfigError) {
  const auto r = run_gen3d("run assets/pipelines/mesh_info.json --set mesh=no/such.obj");
  EXPECT_EQ(r.exit_code, 2) << r.output;
  EXPECT_NE(r.output.find("/nodes/0/params: node \"load\": mesh file not found: no/such.obj"),
            std::string::npos)
      << r.output;
}

// cache-study runs its shipped config: the table on stdout, the rows as JSON, --set on top.
TEST(Cli, CacheStudyRunsThroughItsStage) {
  const std::string dir = temp_dir("cli_cache_study");
  const auto r = run_gen3d(
      "-q cache-study --random-config small --steps 4 --latent-tokens 32 --method taylorseer "
      "--json " +
      dir + "/rows.json");
  ASSERT_EQ(r.exit_code, 0) << r.output;
  EXPECT_NE(r.output.find("cache study: DiT H 128"), std::string::npos) << r.output;
  EXPECT_NE(r.output.find("taylorseer"), std::string::npos) << r.output;
  std::ifstream in(dir + "/rows.json");
  const json rows = json::parse(in);
  ASSERT_GE(rows.size(), 2u);
  EXPECT_EQ(rows[0]["method"], "none");

  const auto usage = run_gen3d("cache-study --steps 4");
  EXPECT_EQ(usage.exit_code, 2) << usage.output;
  EXPECT_NE(usage.output.find("exactly one of --model and --random-config"), std::string::npos);
  const auto set = run_gen3d("cache-study --random-config small --set study.steps=0");
  EXPECT_EQ(set.exit_code, 2) << set.output;
  EXPECT_NE(set.output.find("/nodes/0/params/steps"), std::string::npos) << set.output;
}

}  // namespace
}  // namespace gen3d::test
