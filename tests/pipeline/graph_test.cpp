// Validation: every kind of config error is reported, with its JSON path and node id.

#include <gtest/gtest.h>

#include "pipeline/error.h"
#include "test_stages.h"

namespace gen3d::test {
namespace {

using pipeline::ConfigError;
using pipeline::Problem;

// Validates `config` and returns every problem; fails the test if it validates.
std::vector<Problem> problems_of(const std::string& config,
                                 const std::vector<std::string>& sets = {}) {
  try {
    graph_from(config, sets);
  } catch (const ConfigError& e) {
    return e.problems();
  }
  ADD_FAILURE() << "config validated but should not:\n" << config;
  return {};
}

// Asserts one problem sits at `path`, names `node`, and its message contains `fragment`.
void expect_problem(const std::vector<Problem>& problems, const std::string& path,
                    const std::string& node, const std::string& fragment) {
  for (const Problem& p : problems)
    if (p.path == path && p.node == node && p.message.find(fragment) != std::string::npos) return;
  std::string all;
  for (const Problem& p : problems) all += "\n  " + p.to_string();
  ADD_FAILURE() << "no problem at " << path << " for node " << node << " containing \"" << fragment
                << "\"; got:" << all;
}

TEST(GraphValidation, ValidConfigBuildsInTopologicalOrder) {
  const auto g = graph_from(R"({"nodes": [
      {"id": "sum", "stage": "test_add", "inputs": {"a": "x.value", "b": "y.value"}},
      {"id": "x", "stage": "test_const"},
      {"id": "y", "stage": "test_const", "params": {"value": 2}}]})");
  ASSERT_EQ(g.nodes.size(), 3u);
  ASSERT_EQ(g.order.size(), 3u);
  EXPECT_EQ(g.order.back(), 0u);  // "sum" waits for both producers
  EXPECT_EQ(std::get<double>(g.nodes[2].params.at("value")), 2.0);
  EXPECT_EQ(std::get<int64_t>(g.nodes[1].params.at("sleep_ms")), 0);  // default filled in
}

TEST(GraphValidation, UnknownStageSuggestsAName) {
  const auto p = problems_of(R"({"nodes": [{"id": "a", "stage": "test_konst"}]})");
  expect_problem(p, "/nodes/0/stage", "a",
                 "unknown stage \"test_konst\" (did you mean \"test_const\"?)");
}

TEST(GraphValidation, RetiredStageNamesItsReplacement) {
  const auto p = problems_of(R"({"nodes": [{"id": "a", "stage": "test_old"}]})");
  expect_problem(p, "/nodes/0/stage", "a",
                 "stage \"test_old\" no longer exists: it became test_const");
}

TEST(GraphValidation, DuplicateId) {
  const auto p = problems_of(R"({"nodes": [{"id": "a", "stage": "test_const"},
                                            {"id": "a", "stage": "test_const"}]})");
  expect_problem(p, "/nodes/1/id", "a", "duplicate node id (first used at /nodes/0)");
}

TEST(GraphValidation, UnknownInputPort) {
  const auto p = problems_of(R"({"nodes": [{"id": "x", "stage": "test_const"},
      {"id": "s", "stage": "test_add", "inputs": {"a": "x.value", "b": "x.value", "c": "x.value"}}]})");
  expect_problem(p, "/nodes/1/inputs/c", "s", "stage test_add has no input \"c\"");
}

TEST(GraphValidation, MissingRequiredInput) {
  const auto p = problems_of(R"({"nodes": [{"id": "x", "stage": "test_const"},
      {"id": "s", "stage": "test_add", "inputs": {"a": "x.value"}}]})");
  expect_problem(p, "/nodes/1/inputs", "s", "required input \"b\" (Number) is not connected");
}

TEST(GraphValidation, UnknownOutputOfProducer) {
  const auto p = problems_of(R"({"nodes": [{"id": "x", "stage": "test_const"},
      {"id": "s", "stage": "test_add", "inputs": {"a": "x.valeu", "b": "x.value"}}]})");
  expect_problem(p, "/nodes/1/inputs/a", "s",
                 "node \"x\" (stage test_const) has no output \"valeu\" (did you mean \"value\"?)");
}

TEST(GraphValidation, UnknownProducerNode) {
  const auto p = problems_of(R"({"nodes": [{"id": "x", "stage": "test_const"},
      {"id": "s", "stage": "test_add", "inputs": {"a": "z.value", "b": "x.value"}}]})");
  expect_problem(p, "/nodes/1/inputs/a", "s", "refers to unknown node \"z\"");
}

TEST(GraphValidation, MalformedInputReference) {
  const auto p = problems_of(R"({"nodes": [{"id": "x", "stage": "test_const"},
      {"id": "s", "stage": "test_add", "inputs": {"a": "x", "b": "x.value"}}]})");
  expect_problem(p, "/nodes/1/inputs/a", "s", "expected \"node.port\"");
}

TEST(GraphValidation, TypeMismatchOnAnEdge) {
  const auto p = problems_of(R"({"nodes": [{"id": "t", "stage": "test_text"},
      {"id": "x", "stage": "test_const"},
      {"id": "s", "stage": "test_add", "inputs": {"a": "t.text", "b": "x.value"}}]})");
  expect_problem(p, "/nodes/2/inputs/a", "s",
                 "type mismatch: input \"a\" expects Number but t.text is Text");
}

TEST(GraphValidation, UnknownParameter) {
  const auto p = problems_of(R"({"nodes": [{"id": "p", "stage": "test_params",
      "params": {"path": "a", "sise": 128}}]})");
  expect_problem(p, "/nodes/0/params/sise", "p",
                 "stage test_params has no parameter \"sise\" (did you mean \"size\"?)");
}

TEST(GraphValidation, WrongParameterType) {
  const auto p = problems_of(R"({"nodes": [{"id": "p", "stage": "test_params",
      "params": {"path": "a", "size": "2k", "flag": 1, "weights": [1, "x"]}}]})");
  expect_problem(p, "/nodes/0/params/size", "p", "expected integer 64..16384, got \"2k\"");
  expect_problem(p, "/nodes/0/params/flag", "p", "expected boolean, got 1");
  expect_problem(p, "/nodes/0/params/weights", "p", "expected list of numbers");
}

TEST(GraphValidation, ParameterOutOfRange) {
  const auto p = problems_of(R"({"nodes": [{"id": "p", "stage": "test_params",
      "params": {"path": "a", "size": 32, "scale": 10.5}}]})");
  expect_problem(p, "/nodes/0/params/size", "p", "expected integer 64..16384, got 32");
  expect_problem(p, "/nodes/0/params/scale", "p", "expected number 0..10, got 10.5");
}

TEST(GraphValidation, EnumValueNotAllowed) {
  const auto p = problems_of(R"({"nodes": [{"id": "p", "stage": "test_params",
      "params": {"path": "a", "mode": "fsat"}}]})");
  expect_problem(p, "/nodes/0/params/mode", "p",
                 "expected one of fast|exact, got \"fsat\" (did you mean \"fast\"?)");
}

TEST(GraphValidation, MissingRequiredParameter) {
  const auto p = problems_of(R"({"nodes": [{"id": "p", "stage": "test_params"}]})");
  expect_problem(p, "/nodes/0/params", "p", "missing required parameter \"path\"");
}

TEST(GraphValidation, CycleIsNamed) {
  const auto p = problems_of(R"({"nodes": [
      {"id": "a", "stage": "test_sleep", "inputs": {"in": "c.out"}},
      {"id": "b", "stage": "test_sleep", "inputs": {"in": "a.out"}},
      {"id": "c", "stage": "test_sleep", "inputs": {"in": "b.out"}},
      {"id": "d", "stage": "test_sleep", "inputs": {"in": "c.out"}}]})");
  ASSERT_EQ(p.size(), 1u);
  EXPECT_EQ(p[0].path, "/nodes");
  // The cycle is named in producer -> consumer order, starting anywhere on it; d is not on it.
  const std::string& m = p[0].message;
  EXPECT_TRUE(m == "cycle: a -> b -> c -> a" || m == "cycle: b -> c -> a -> b" ||
              m == "cycle: c -> a -> b -> c")
      << m;
}

TEST(GraphValidation, SelfLoopIsACycle) {
  const auto p =
      problems_of(R"({"nodes": [{"id": "a", "stage": "test_sleep", "inputs": {"in": "a.out"}}]})");
  expect_problem(p, "/nodes", "a", "cycle: a -> a");
}

TEST(GraphValidation, UnresolvedVariable) {
  const auto p =
      problems_of(R"({"vars": {"size": 256}, "nodes": [{"id": "p", "stage": "test_params",
      "params": {"path": "$pth", "size": "$size"}}]})");
  expect_problem(p, "/nodes/0/params/path", "p", "unresolved variable \"$pth\"");
}

TEST(GraphValidation, StageSpecificCheck) {
  const auto p =
      problems_of(R"({"nodes": [{"id": "c", "stage": "test_check", "params": {"mode": "bad"}}]})");
  expect_problem(p, "/nodes/0/params", "c", "mode \"bad\" is refused");
}

TEST(GraphValidation, ReportsEveryProblemAtOnce) {
  const auto p = problems_of(R"({"nodes": [
      {"id": "a", "stage": "nope"},
      {"id": "p", "stage": "test_params", "params": {"path": "x", "size": 1}},
      {"id": "p", "stage": "test_const"}]})");
  EXPECT_EQ(p.size(), 3u);
  expect_problem(p, "/nodes/0/stage", "a", "unknown stage");
  expect_problem(p, "/nodes/1/params/size", "p", "expected integer");
  expect_problem(p, "/nodes/2/id", "p", "duplicate node id");
}

TEST(GraphValidation, ErrorTextListsEveryProblemWithPathAndNode) {
  try {
    graph_from(R"({"nodes": [{"id": "a", "stage": "nope"}, {"id": "b", "stage": "nada"}]})");
    FAIL() << "should not validate";
  } catch (const ConfigError& e) {
    const std::string what = e.what();
    EXPECT_NE(what.find("test.json (2 problems)"), std::string::npos) << what;
    EXPECT_NE(what.find("/nodes/0/stage: node \"a\": unknown stage \"nope\""), std::string::npos)
        << what;
    EXPECT_NE(what.find("/nodes/1/stage: node \"b\": unknown stage \"nada\""), std::string::npos)
        << what;
  }
}

TEST(GraphValidation, DotNamesEveryNodeAndEdge) {
  const auto g = graph_from(R"({"name": "demo", "nodes": [{"id": "x", "stage": "test_const"},
      {"id": "m", "stage": "test_model_sleep", "inputs": {"in": "x.value"}}]})");
  const std::string dot = g.to_dot();
  EXPECT_NE(dot.find("digraph \"demo\""), std::string::npos);
  EXPECT_NE(dot.find("\"x\" -> \"m\" [label=\"value → in\"]"), std::string::npos) << dot;
  EXPECT_NE(dot.find("fillcolor"), std::string::npos) << "model-class nodes are highlighted";
}

}  // namespace
}  // namespace gen3d::test
