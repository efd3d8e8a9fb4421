// Config parsing, variables and --set overrides.

#include <fstream>

#include <gtest/gtest.h>

#include "pipeline/error.h"
#include "support/paths.h"
#include "test_stages.h"

namespace gen3d::test {
namespace {

using pipeline::ConfigError;

const char* kConfig = R"({
  "name": "t",
  "vars": {"size": 256, "label": "run", "scale": 0.5},
  "nodes": [
    {"id": "p", "stage": "test_params",
     "params": {"path": "out/${label}_${size}.txt", "size": "$size", "scale": "$scale"}},
    {"id": "q", "stage": "test_params", "params": {"path": "q", "size": 128}}
  ]})";

// The first problem's text, or "" when the call succeeds.
template <class F>
std::string config_error(F&& f) {
  try {
    f();
  } catch (const ConfigError& e) {
    return e.problems().empty() ? e.what() : e.problems().front().to_string();
  }
  return "";
}

TEST(Config, VariablesKeepTheirTypeAndInterpolateInStrings) {
  const auto g = graph_from(kConfig);
  EXPECT_EQ(std::get<int64_t>(g.nodes[0].params.at("size")), 256);
  EXPECT_EQ(std::get<double>(g.nodes[0].params.at("scale")), 0.5);
  EXPECT_EQ(std::get<std::string>(g.nodes[0].params.at("path")), "out/run_256.txt");
}

TEST(Config, SetVariableChangesEveryUse) {
  const auto g = graph_from(kConfig, {"size=1024", "label=final"});
  EXPECT_EQ(std::get<int64_t>(g.nodes[0].params.at("size")), 1024);
  EXPECT_EQ(std::get<std::string>(g.nodes[0].params.at("path")), "out/final_1024.txt");
  EXPECT_EQ(std::get<int64_t>(g.nodes[1].params.at("size")), 128) << "a literal is not a variable";
}

TEST(Config, SetNodeParameterChangesOnlyThatNode) {
  const auto g = graph_from(kConfig, {"q.size=4096", "q.mode=exact"});
  EXPECT_EQ(std::get<int64_t>(g.nodes[1].params.at("size")), 4096);
  EXPECT_EQ(std::get<std::string>(g.nodes[1].params.at("mode")), "exact");
  EXPECT_EQ(std::get<int64_t>(g.nodes[0].params.at("size")), 256);
}

TEST(Config, NodeParameterOverrideBeatsItsVariable) {
  const auto g = graph_from(kConfig, {"size=512", "p.size=64"});
  EXPECT_EQ(std::get<int64_t>(g.nodes[0].params.at("size")), 64);
}

TEST(Config, StringParameterKeepsOverrideTextThatLooksLikeJson) {
  const auto g = graph_from(kConfig, {"q.path=123", "q.label=true"});
  EXPECT_EQ(std::get<std::string>(g.nodes[1].params.at("path")), "123");
  EXPECT_EQ(std::get<std::string>(g.nodes[1].params.at("label")), "true");
}

TEST(Config, SetVariableWithWrongTypeIsRejected) {
  const std::string msg = config_error([] { graph_from(kConfig, {"size=2k"}); });
  EXPECT_NE(msg.find("/vars/size"), std::string::npos) << msg;
  EXPECT_NE(msg.find("variable \"size\" is a number, got string \"2k\""), std::string::npos) << msg;
}

TEST(Config, SetNodeParameterWithWrongTypeNamesTheOverride) {
  const std::string msg = config_error([] { graph_from(kConfig, {"q.size=big"}); });
  EXPECT_NE(msg.find("/nodes/1/params/size: node \"q\": expected integer 64..16384, got \"big\""),
            std::string::npos)
      << msg;
  EXPECT_NE(msg.find("(set by --set q.size=big)"), std::string::npos) << msg;
}

TEST(Config, SetUnknownVariableSuggests) {
  const std::string msg = config_error([] { graph_from(kConfig, {"sise=3"}); });
  EXPECT_NE(msg.find("unknown variable \"sise\" (did you mean \"size\"?)"), std::string::npos)
      << msg;
}

TEST(Config, SetUnknownNodeOrParameter) {
  EXPECT_NE(config_error([] { graph_from(kConfig, {"z.size=3"}); }).find("no node with id \"z\""),
            std::string::npos);
  EXPECT_NE(
      config_error([] { graph_from(kConfig, {"q.sise=3"}); }).find("has no parameter \"sise\""),
      std::string::npos);
  EXPECT_NE(config_error([] { graph_from(kConfig, {"nonsense"}); }).find("expected key=value"),
            std::string::npos);
}

TEST(Config, StructuralProblemsAreAllReported) {
  try {
    config_from(R"({"nodez": [], "vars": 3})");
    FAIL();
  } catch (const ConfigError& e) {
    ASSERT_EQ(e.problems().size(), 3u) << e.what();
    EXPECT_NE(std::string(e.what()).find("unknown key \"nodez\" (did you mean \"nodes\"?)"),
              std::string::npos);
  }
  EXPECT_NE(config_error([] {
              config_from(R"({"nodes": [{"stage": "test_const"}]})");
            }).find("/nodes/0/id"),
            std::string::npos);
  EXPECT_NE(config_error([] {
              config_from(R"({"nodes": [{"id": "a.b", "stage": "x"}]})");
            }).find("may not contain '.'"),
            std::string::npos);
}

TEST(Config, FileErrorsNameTheFile) {
  const std::string dir = temp_dir("config_test");
  const std::string bad = dir + "/bad.json";
  std::ofstream(bad) << "{\"nodes\": [\n  {\"id\": \"a\",, }\n]}";
  std::string msg;
  try {
    pipeline::load_config(bad);
  } catch (const ConfigError& e) {
    msg = e.what();
  }
  EXPECT_NE(msg.find(bad + ": not valid JSON"), std::string::npos) << msg;
  EXPECT_NE(msg.find("line 2"), std::string::npos) << msg;
  try {
    pipeline::load_config(dir + "/missing.json");
    FAIL();
  } catch (const ConfigError& e) {
    EXPECT_NE(std::string(e.what()).find("missing.json"), std::string::npos);
  }
}

TEST(Config, ConfigDirVariableIsTheFilesDirectory) {
  const std::string dir = temp_dir("config_dir_test");
  std::ofstream(dir + "/p.json") << R"({"nodes": [{"id": "p", "stage": "test_params",
      "params": {"path": "${config_dir}/mesh.obj"}}]})";
  const auto cfg = pipeline::load_config(dir + "/p.json");
  const auto g = pipeline::build_graph(cfg, test_registry());
  EXPECT_EQ(std::get<std::string>(g.nodes[0].params.at("path")), dir + "/mesh.obj");
}

}  // namespace
}  // namespace gen3d::test
