// Profiler output: the Chrome trace and the metrics JSON.

#include <chrono>
#include <map>

#include <gtest/gtest.h>
#include <nlohmann/json.hpp>

#include "pipeline/executor.h"
#include "pipeline/run_report.h"
#include "test_stages.h"

namespace gen3d::test {
namespace {

using nlohmann::json;

struct Traced {
  pipeline::Graph graph;
  pipeline::RunResult result;
  std::unique_ptr<pipeline::Profiler> profiler = std::make_unique<pipeline::Profiler>();
};

Traced traced_run() {
  Traced t{graph_from(R"({"name": "diamond", "nodes": [
      {"id": "src", "stage": "test_const"},
      {"id": "left", "stage": "test_sleep", "params": {"sleep_ms": 60}, "inputs": {"in": "src.value"}},
      {"id": "right", "stage": "test_sleep", "params": {"sleep_ms": 20}, "inputs": {"in": "src.value"}},
      {"id": "join", "stage": "test_add", "inputs": {"a": "left.out", "b": "right.out"}}]})"),
           {}};
  t.result = pipeline::execute(t.graph, *t.profiler);
  return t;
}

TEST(Profiler, TraceIsChromeJsonWithWellNestedSpansPerThread) {
  const auto t = traced_run();
  ASSERT_TRUE(t.result.ok());
  const json trace = json::parse(t.profiler->chrome_trace_json());
  ASSERT_TRUE(trace.contains("traceEvents"));
  std::map<int, std::vector<std::pair<double, double>>> by_thread;
  std::set<std::string> node_spans;
  int thread_names = 0, counter_events = 0;
  for (const json& e : trace["traceEvents"]) {
    const std::string ph = e.at("ph");
    if (ph == "X") {
      ASSERT_TRUE(e.at("ts").is_number() && e.at("dur").is_number());
      EXPECT_GE(e["dur"].get<double>(), 0.0);
      by_thread[e.at("tid").get<int>()].emplace_back(
          e["ts"].get<double>(), e["ts"].get<double>() + e["dur"].get<double>());
      if (e.at("cat") == "node") node_spans.insert(e.at("name"));
    } else if (ph == "M" && e.at("name") == "thread_name") {
      ++thread_names;
    } else if (ph == "C") {
      ++counter_events;
      EXPECT_TRUE(e.at("args").at("value").is_number());
    }
  }
  EXPECT_EQ(node_spans, (std::set<std::string>{"src", "left", "right", "join"}));
  EXPECT_EQ(thread_names, static_cast<int>(by_thread.size()));
  EXPECT_EQ(counter_events, 2) << "one test.naps event per sleep node";
  // Within a thread, any two spans are disjoint or one contains the other.
  for (auto& [tid, spans] : by_thread) {
    for (size_t i = 0; i < spans.size(); ++i)
      for (size_t j = i + 1; j < spans.size(); ++j) {
        const auto [a0, a1] = spans[i];
        const auto [b0, b1] = spans[j];
        const bool disjoint = a1 <= b0 || b1 <= a0;
        const bool nested = (a0 <= b0 && b1 <= a1) || (b0 <= a0 && a1 <= b1);
        EXPECT_TRUE(disjoint || nested)
            << "thread " << tid << ": [" << a0 << "," << a1 << ") vs [" << b0 << "," << b1 << ")";
      }
  }
}

TEST(Profiler, MetricsHaveTheDocumentedKeys) {
  const auto t = traced_run();
  const json m = json::parse(pipeline::metrics_json(t.graph, t.result, *t.profiler));
  for (const char* key :
       {"pipeline", "wall_ms", "peak_rss_mb", "nodes", "counters", "critical_path"})
    EXPECT_TRUE(m.contains(key)) << key;
  EXPECT_EQ(m["pipeline"], "diamond");
  EXPECT_GT(m["peak_rss_mb"].get<double>(), 0.0);
  ASSERT_EQ(m["nodes"].size(), 4u);
  for (const json& n : m["nodes"])
    for (const char* key : {"id", "stage", "start_ms", "wall_ms", "thread"})
      EXPECT_TRUE(n.contains(key)) << key;
  EXPECT_EQ(m["counters"]["test.naps"], 2.0);
  // The 60 ms branch is the critical one.
  EXPECT_EQ(m["critical_path"], json({"src", "left", "join"}));
}

TEST(Profiler, SummaryMarksTheCriticalPath) {
  const auto t = traced_run();
  const std::string s = pipeline::format_summary(t.graph, t.result, *t.profiler);
  EXPECT_NE(s.find("left"), std::string::npos);
  EXPECT_NE(s.find("concurrency"), std::string::npos);
  size_t marks = 0;
  for (size_t pos = 0; (pos = s.find("%  *", pos)) != std::string::npos; ++pos) ++marks;
  EXPECT_EQ(marks, 3u) << s;
}

TEST(Profiler, TrackSpansAreTheirOwnNamedThreadInTheTrace) {
  using std::chrono::microseconds;
  pipeline::Profiler p;
  EXPECT_FALSE(p.device_timelines()) << "off unless a trace is written";
  const int gpu = p.track("cuda:0");
  EXPECT_EQ(p.track("cuda:0"), gpu);
  const int other = p.track("other");
  EXPECT_NE(other, gpu);
  { auto cpu = p.span("work", "node", "denoise"); }
  // Timed elsewhere, on the profiler's clock: 1.5 ms and 4 ms after its origin.
  p.add_span(gpu, "linear", "gpu", "denoise", p.origin() + microseconds(1500),
             p.origin() + microseconds(2750));
  p.add_span(gpu, "attention", "gpu", "denoise", p.origin() + microseconds(4000),
             p.origin() + microseconds(4250));

  const json trace = json::parse(p.chrome_trace_json());
  std::map<int, std::string> thread_names;
  std::vector<json> on_gpu;
  int cpu_tid = -1;
  for (const json& e : trace.at("traceEvents")) {
    if (e.at("ph") == "M" && e.at("name") == "thread_name")
      thread_names[e.at("tid").get<int>()] = e.at("args").at("name");
    if (e.at("ph") != "X") continue;
    if (e.at("tid").get<int>() == gpu)
      on_gpu.push_back(e);
    else
      cpu_tid = e.at("tid").get<int>();
  }
  ASSERT_NE(cpu_tid, -1);
  EXPECT_NE(cpu_tid, gpu);
  EXPECT_EQ(thread_names.at(gpu), "cuda:0");
  EXPECT_EQ(thread_names.at(cpu_tid), "main");
  EXPECT_EQ(thread_names.count(other), 0u) << "a track with no spans is not shown";
  ASSERT_EQ(on_gpu.size(), 2u);
  EXPECT_EQ(on_gpu[0].at("name"), "linear");
  EXPECT_EQ(on_gpu[0].at("cat"), "gpu");
  EXPECT_EQ(on_gpu[0].at("args").at("node"), "denoise");
  EXPECT_DOUBLE_EQ(on_gpu[0].at("ts").get<double>(), 1500.0);
  EXPECT_DOUBLE_EQ(on_gpu[0].at("dur").get<double>(), 1250.0);
  EXPECT_EQ(on_gpu[1].at("name"), "attention");
  EXPECT_DOUBLE_EQ(on_gpu[1].at("ts").get<double>(), 4000.0);
  EXPECT_DOUBLE_EQ(on_gpu[1].at("dur").get<double>(), 250.0);
  // The records say the same, on the track.
  int records = 0;
  for (const pipeline::SpanRecord& r : p.spans())
    if (r.thread == gpu) {
      ++records;
      EXPECT_EQ(r.category, "gpu");
    }
  EXPECT_EQ(records, 2);
}

TEST(Profiler, GaugesKeepTheLastValueAndCountersAdd) {
  pipeline::Profiler p;
  p.count("hits", 2);
  p.count("hits", 3);
  p.gauge("bytes", 100);
  p.gauge("bytes", 40);
  const auto totals = p.counter_totals();
  EXPECT_EQ(totals.at("hits"), 5.0);
  EXPECT_EQ(totals.at("bytes"), 40.0);
}

}  // namespace
}  // namespace gen3d::test
