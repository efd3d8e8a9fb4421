#include "pipeline/run_report.h"

#include <sys/resource.h>

#include <algorithm>

#include <fmt/format.h>
#include <nlohmann/json.hpp>

namespace gen3d::pipeline {

namespace {

const char* status_name(NodeStatus s) {
  switch (s) {
    case NodeStatus::Pending:
      return "pending";
    case NodeStatus::Done:
      return "done";
    case NodeStatus::Failed:
      return "failed";
    case NodeStatus::Skipped:
      return "skipped";
    case NodeStatus::Cached:
      return "cached";
    case NodeStatus::Unused:
      return "unused";
  }
  return "?";
}

double node_sum_ms(const RunResult& run) {
  double sum = 0;
  for (const NodeRun& r : run.nodes) sum += r.wall_ms;
  return sum;
}

}  // namespace

double peak_rss_mb() {
  rusage usage{};
  getrusage(RUSAGE_SELF, &usage);
  return static_cast<double>(usage.ru_maxrss) / 1024.0;  // Linux reports KiB
}

std::vector<size_t> critical_path(const Graph& graph, const RunResult& run) {
  const size_t n = graph.nodes.size();
  std::vector<double> finish(n, 0);
  std::vector<long> prev(n, -1);
  for (size_t i : graph.order) {
    for (size_t p : graph.nodes[i].after)
      if (prev[i] < 0 || finish[p] > finish[static_cast<size_t>(prev[i])])
        prev[i] = static_cast<long>(p);
    const double best = prev[i] < 0 ? 0.0 : finish[static_cast<size_t>(prev[i])];
    finish[i] = best + run.nodes[i].wall_ms;
  }
  if (n == 0) return {};
  size_t last =
      static_cast<size_t>(std::max_element(finish.begin(), finish.end()) - finish.begin());
  std::vector<size_t> path;
  for (long k = static_cast<long>(last); k >= 0; k = prev[static_cast<size_t>(k)])
    path.push_back(static_cast<size_t>(k));
  std::reverse(path.begin(), path.end());
  return path;
}

std::string format_summary(const Graph& graph, const RunResult& run, const Profiler& profiler) {
  const auto path = critical_path(graph, run);
  size_t id_w = 4, stage_w = 5;
  for (const NodeRun& r : run.nodes) {
    id_w = std::max(id_w, r.id.size());
    stage_w = std::max(stage_w, r.stage.size());
  }
  std::string out = fmt::format("{:<{}}  {:<{}}  {:>10}  {:>6}  {}\n", "node", id_w, "stage",
                                stage_w, "wall ms", "share", "critical path");
  double saved = 0, store_ms = 0;
  size_t cached = 0, loaded = 0, stored = 0;
  for (size_t i : graph.order) {
    const NodeRun& r = run.nodes[i];
    const bool critical = std::find(path.begin(), path.end(), i) != path.end();
    const double share = run.wall_ms > 0 ? 100.0 * r.wall_ms / run.wall_ms : 0.0;
    std::string wall = r.status == NodeStatus::Done || r.status == NodeStatus::Failed || r.loaded
                           ? fmt::format("{:.1f}", r.wall_ms)
                           : std::string(status_name(r.status));
    std::string note = critical ? "*" : "";
    if (r.cached) {
      note += fmt::format("{}cached, {:.0f} ms saved", critical ? " " : "", r.saved_ms);
      saved += r.saved_ms;
      ++cached;
      loaded += r.loaded;
    } else if (r.stored) {
      note += fmt::format("{}stored", critical ? " " : "");
    }
    stored += r.stored;
    store_ms += r.store_ms;
    out += fmt::format("{:<{}}  {:<{}}  {:>10}  {:>5.1f}%  {}\n", r.id, id_w, r.stage, stage_w,
                       wall, share, note);
  }
  if (run.cache_enabled)
    out += fmt::format(
        "stage cache: {} nodes cached ({} loaded), about {:.0f} ms saved; {} stored ({:.1f} ms), "
        "keys {:.1f} ms\n",
        cached, loaded, saved, stored, store_ms, run.cache_key_ms);
  const double concurrency = run.wall_ms > 0 ? node_sum_ms(run) / run.wall_ms : 0.0;
  out += fmt::format("total {:.1f} ms wall, concurrency {:.2f}, peak RSS {:.0f} MiB\n", run.wall_ms,
                     concurrency, peak_rss_mb());
  const auto counters = profiler.counter_totals();
  if (!counters.empty()) {
    out += "counters:";
    for (const auto& [name, value] : counters) out += fmt::format(" {}={}", name, value);
    out += "\n";
  }
  return out;
}

std::string metrics_json(const Graph& graph, const RunResult& run, const Profiler& profiler) {
  using nlohmann::json;
  json nodes = json::array();
  for (const NodeRun& r : run.nodes) {
    json node = {{"id", r.id},
                 {"stage", r.stage},
                 {"status", status_name(r.status)},
                 {"start_ms", r.start_ms},
                 {"wall_ms", r.wall_ms},
                 {"thread", r.thread},
                 {"cached", r.cached}};
    if (run.cache_enabled) {
      node["loaded"] = r.loaded;
      node["saved_ms"] = r.saved_ms;
      node["stored"] = r.stored;
      node["store_ms"] = r.store_ms;
      node["cache_bytes"] = r.cache_bytes;
      node["cache_key"] = r.cache_key;
    }
    nodes.push_back(std::move(node));
  }
  json path = json::array();
  for (size_t i : critical_path(graph, run)) path.push_back(graph.nodes[i].id);
  json counters = json::object();
  for (const auto& [name, value] : profiler.counter_totals()) counters[name] = value;
  json doc = {{"pipeline", run.pipeline},
              {"ok", run.ok()},
              {"wall_ms", run.wall_ms},
              {"peak_rss_mb", peak_rss_mb()},
              {"concurrency", run.wall_ms > 0 ? node_sum_ms(run) / run.wall_ms : 0.0},
              {"critical_path", std::move(path)},
              {"nodes", std::move(nodes)},
              {"counters", std::move(counters)}};
  if (run.error) doc["error"] = *run.error;
  if (run.cache_enabled) {
    double saved = 0, store_ms = 0;
    size_t cached = 0;
    for (const NodeRun& r : run.nodes) {
      saved += r.saved_ms;
      store_ms += r.store_ms;
      cached += r.cached;
    }
    doc["cache"] = {{"enabled", true},
                    {"cached_nodes", cached},
                    {"saved_ms", saved},
                    {"store_ms", store_ms},
                    {"key_ms", run.cache_key_ms}};
  }
  return doc.dump(2);
}

}  // namespace gen3d::pipeline
