// Executor: data flow, concurrency of independent nodes, the model-class limit, failure handling.

#include <gtest/gtest.h>

#include <map>
#include <mutex>

#include "pipeline/executor.h"
#include "pipeline/log.h"
#include "progress/progress.h"
#include "test_stages.h"

namespace gen3d::test {
namespace {

using pipeline::NodeStatus;
using pipeline::RunResult;

struct Ran {
  pipeline::Graph graph;
  RunResult result;
};

Ran run(const std::string& config, pipeline::ExecutorOptions options = {}) {
  Ran r{graph_from(config), {}};
  pipeline::Profiler profiler;
  r.result = pipeline::execute(r.graph, profiler, options);
  return r;
}

const pipeline::NodeRun& node(const Ran& r, const std::string& id) {
  for (const auto& n : r.result.nodes)
    if (n.id == id) return n;
  throw std::runtime_error("no node " + id);
}

bool overlap(const pipeline::NodeRun& a, const pipeline::NodeRun& b) {
  return a.start_ms < b.start_ms + b.wall_ms && b.start_ms < a.start_ms + a.wall_ms;
}

TEST(Executor, ValuesFlowAlongEdges) {
  const auto r = run(R"({"nodes": [
      {"id": "x", "stage": "test_const", "params": {"value": 2}},
      {"id": "y", "stage": "test_const", "params": {"value": 3.5}},
      {"id": "s", "stage": "test_add", "inputs": {"a": "x.value", "b": "y.value"}}]})");
  ASSERT_TRUE(r.result.ok()) << *r.result.error;
  auto sum = r.result.output<Number>(r.graph, "s", "sum");
  ASSERT_TRUE(sum);
  EXPECT_EQ(sum->value, 5.5);
  for (const auto& n : r.result.nodes) EXPECT_EQ(n.status, NodeStatus::Done) << n.id;
}

TEST(Executor, IndependentNodesOverlapInTime) {
  const auto r = run(R"({"nodes": [
      {"id": "a", "stage": "test_sleep", "params": {"sleep_ms": 300}},
      {"id": "b", "stage": "test_sleep", "params": {"sleep_ms": 300}}]})");
  ASSERT_TRUE(r.result.ok());
  EXPECT_TRUE(overlap(node(r, "a"), node(r, "b")))
      << "a: " << node(r, "a").start_ms << "+" << node(r, "a").wall_ms
      << " b: " << node(r, "b").start_ms << "+" << node(r, "b").wall_ms;
  EXPECT_NE(node(r, "a").thread, node(r, "b").thread);
}

TEST(Executor, ModelClassStagesRunOneAtATime) {
  const auto r = run(R"({"nodes": [
      {"id": "a", "stage": "test_model_sleep", "params": {"sleep_ms": 150}},
      {"id": "b", "stage": "test_model_sleep", "params": {"sleep_ms": 150}},
      {"id": "c", "stage": "test_sleep", "params": {"sleep_ms": 150}}]})");
  ASSERT_TRUE(r.result.ok());
  EXPECT_FALSE(overlap(node(r, "a"), node(r, "b")));
  // A CPU stage is not held back by the model limit.
  EXPECT_TRUE(overlap(node(r, "c"), node(r, "a")) || overlap(node(r, "c"), node(r, "b")));
}

TEST(Executor, ModelLimitIsConfigurable) {
  pipeline::ExecutorOptions options;
  options.model_concurrency = 2;
  const auto r = run(R"({"nodes": [
      {"id": "a", "stage": "test_model_sleep", "params": {"sleep_ms": 300}},
      {"id": "b", "stage": "test_model_sleep", "params": {"sleep_ms": 300}}]})",
                     options);
  ASSERT_TRUE(r.result.ok());
  EXPECT_TRUE(overlap(node(r, "a"), node(r, "b")));
}

TEST(Executor, FailureCancelsDownstreamAndNamesTheNode) {
  const auto r = run(R"({"nodes": [
      {"id": "x", "stage": "test_const"},
      {"id": "bad", "stage": "test_fail", "params": {"message": "disk on fire"},
       "inputs": {"in": "x.value"}},
      {"id": "after", "stage": "test_sleep", "inputs": {"in": "bad.out"}},
      {"id": "later", "stage": "test_sleep", "inputs": {"in": "after.out"}}]})");
  ASSERT_FALSE(r.result.ok());
  EXPECT_EQ(*r.result.error, "node \"bad\" (stage test_fail) failed: disk on fire");
  EXPECT_EQ(node(r, "x").status, NodeStatus::Done);
  EXPECT_EQ(node(r, "bad").status, NodeStatus::Failed);
  EXPECT_EQ(node(r, "after").status, NodeStatus::Skipped);
  EXPECT_EQ(node(r, "later").status, NodeStatus::Skipped);
}

TEST(Executor, FailureStopsNodesThatHaveNotStarted) {
  // "slow" is independent of "bad" but sits behind "nap", which is still sleeping when "bad" fails.
  const auto r = run(R"({"nodes": [
      {"id": "pre", "stage": "test_sleep", "params": {"sleep_ms": 50}},
      {"id": "bad", "stage": "test_fail", "inputs": {"in": "pre.out"}},
      {"id": "nap", "stage": "test_sleep", "params": {"sleep_ms": 400}},
      {"id": "slow", "stage": "test_sleep", "inputs": {"in": "nap.out"}}]})");
  ASSERT_FALSE(r.result.ok());
  EXPECT_EQ(node(r, "nap").status, NodeStatus::Done) << "a running node finishes";
  EXPECT_EQ(node(r, "slow").status, NodeStatus::Skipped);
}

TEST(Executor, MissingOutputIsAFailure) {
  const auto r = run(R"({"nodes": [{"id": "n", "stage": "test_no_output"}]})");
  ASSERT_TRUE(r.result.error);
  EXPECT_NE(r.result.error->find("without writing its output \"out\""), std::string::npos);
}

TEST(Executor, InterruptSkipsEverythingNotStarted) {
  std::atomic<bool> interrupt{true};
  pipeline::ExecutorOptions options;
  options.interrupt = &interrupt;
  const auto r = run(R"({"nodes": [{"id": "a", "stage": "test_sleep"}]})", options);
  EXPECT_TRUE(r.result.interrupted);
  EXPECT_EQ(node(r, "a").status, NodeStatus::Skipped);
}

TEST(Executor, ThreadCapOfOneSerializes) {
  pipeline::ExecutorOptions options;
  options.max_threads = 1;
  const auto r = run(R"({"nodes": [
      {"id": "a", "stage": "test_sleep", "params": {"sleep_ms": 100}},
      {"id": "b", "stage": "test_sleep", "params": {"sleep_ms": 100}}]})",
                     options);
  ASSERT_TRUE(r.result.ok());
  EXPECT_FALSE(overlap(node(r, "a"), node(r, "b")));
}

// What the progress hub delivered during one run.
std::vector<progress::Event> run_events(const std::string& config,
                                        pipeline::ExecutorOptions options = {}) {
  std::mutex mutex;
  std::vector<progress::Event> events;
  auto subscription = progress::hub().subscribe([&](const progress::Event& e) {
    std::lock_guard lock(mutex);
    events.push_back(e);
  });
  run(config, options);
  subscription.reset();
  return events;
}

TEST(Executor, ReportsRunsNodesStepsAndLogsToTheProgressHub) {
  pipeline::init_logging(0);  // log messages become events too
  pipeline::ExecutorOptions options;
  options.run_id = "job7";
  const auto events = run_events(R"({"nodes": [
      {"id": "a", "stage": "test_const"},
      {"id": "count", "stage": "test_steps", "inputs": {"in": "a.value"}, "params": {"steps": 4}},
      {"id": "b", "stage": "test_sleep", "params": {"sleep_ms": 20}},
      {"id": "unused", "stage": "test_const", "params": {"value": 2}}]})",
                                 options);
  ASSERT_GE(events.size(), 2u);
  EXPECT_EQ(events.front().kind, progress::EventKind::kRunStarted);
  EXPECT_EQ(events.front().n, 4);
  EXPECT_EQ(events.back().kind, progress::EventKind::kRunFinished);
  EXPECT_EQ(events.back().status, "ok");
  std::map<std::string, std::vector<std::string>> per_node;  // what each node reported, in order
  std::int64_t finished = 0;
  std::vector<std::int64_t> steps;
  for (const auto& e : events) {
    EXPECT_EQ(e.run, "job7");
    switch (e.kind) {
      case progress::EventKind::kNodeStarted:
        per_node[e.node].push_back("started");
        break;
      case progress::EventKind::kNodeFinished:
        per_node[e.node].push_back("finished " + e.status);
        EXPECT_EQ(e.i, ++finished) << "finished counts go up one by one";
        EXPECT_EQ(e.n, 4);
        EXPECT_GE(e.seconds, 0.0);
        break;
      case progress::EventKind::kStep:
        per_node[e.node].push_back("step");
        EXPECT_EQ(e.label, "test step");
        EXPECT_EQ(e.n, 4);
        steps.push_back(e.i);
        break;
      case progress::EventKind::kLog:
        if (e.level == progress::Level::kWarning) {
          per_node[e.node].push_back("warning");
          EXPECT_EQ(e.message, "count: counted 4 steps");
        }
        break;
      default:
        break;
    }
  }
  EXPECT_EQ(finished, 4);
  EXPECT_EQ(steps, (std::vector<std::int64_t>{0, 1, 2, 3, 4}));
  const std::vector<std::string> plain{"started", "finished done"};
  EXPECT_EQ(per_node["a"], plain);
  EXPECT_EQ(per_node["b"], plain);
  EXPECT_EQ(per_node["unused"], plain);
  EXPECT_EQ(per_node["count"], (std::vector<std::string>{"started", "step", "step", "step", "step",
                                                         "step", "warning", "finished done"}));
}

TEST(Executor, AFailedNodesEventCarriesItsCause) {
  const auto events = run_events(R"({"nodes": [
      {"id": "f", "stage": "test_fail", "params": {"message": "no luck"}}]})");
  bool failed = false;
  for (const auto& e : events)
    if (e.kind == progress::EventKind::kNodeFinished) {
      EXPECT_EQ(e.node, "f");
      EXPECT_EQ(e.status, "failed");
      EXPECT_EQ(e.message, "no luck");
      failed = true;
    }
  EXPECT_TRUE(failed);
  ASSERT_FALSE(events.empty());
  EXPECT_EQ(events.back().kind, progress::EventKind::kRunFinished);
  EXPECT_EQ(events.back().status, "failed");
}

}  // namespace
}  // namespace gen3d::test
