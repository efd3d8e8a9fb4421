#pragma once
// Executor: runs a validated Graph on a oneTBB flow graph. A node fires when all of its producers
// have finished; independent nodes run concurrently; model-class stages share a concurrency limit.

#include <atomic>
#include <functional>
#include <memory>
#include <optional>
#include <string>
#include <vector>

#include "pipeline/graph.h"
#include "pipeline/profiler.h"
#include "pipeline/stage.h"

namespace gen3d::pipeline {

class StageCache;

struct ExecutorOptions {
  int max_threads = 0;        // 0: every core; otherwise caps TBB's worker count (the CLI's -j)
  int model_concurrency = 1;  // how many model-class stages may run at once
  // Set from outside (e.g. a SIGINT handler) to cancel: nodes not yet started are skipped.
  const std::atomic<bool>* interrupt = nullptr;
  // Called after each node finishes (any thread, one call at a time), with how many of the
  // nodes this run runs or loads have finished. The same moments (and node starts) also go to
  // the progress hub (progress/progress.h) as events, for whoever subscribed there.
  std::function<void(const struct NodeRun& node, size_t finished, size_t total)> on_node_done;
  // Names this run in its progress events (a batch or server job); empty for a lone run.
  std::string run_id;
  // Stage cache (stage_cache.h): nodes whose key has an entry are loaded instead of run, and
  // nodes that ran are stored by their contract's policy. Null: every node runs.
  StageCache* cache = nullptr;
  // Run only what some consumer or a side effect needs: a node whose outputs nothing reads
  // (no consumer) is not run, and with a cache the producers of a loaded node are not run either.
  // Off: every node's outputs are in RunResult::outputs (e.g. for a report).
  bool elide_unused = false;
};

// Pending: not reached; Done: ran; Failed; Skipped: cancelled before it started; Cached: its
// outputs came from the stage cache (or were not needed and are in the cache); Unused: nothing
// needed its outputs (elide_unused) and the cache does not hold them.
enum class NodeStatus { Pending, Done, Failed, Skipped, Cached, Unused };

struct NodeRun {
  std::string id;
  std::string stage;
  NodeStatus status = NodeStatus::Pending;
  int thread = -1;
  double start_ms = 0;  // since the run began
  double wall_ms = 0;   // running the stage, or loading its outputs from the cache
  // Stage cache: `cached` when the outputs came from the cache (`loaded`) or were not needed and
  // the cache holds them; `saved_ms` is the stored run's time minus the load; `stored` when this
  // run wrote the node's entry (`cache_bytes`, `store_ms` spent serializing and writing).
  bool cached = false;
  bool loaded = false;
  bool stored = false;
  double saved_ms = 0;
  double store_ms = 0;
  uint64_t cache_bytes = 0;
  std::string cache_key;  // hex, when the run had a cache
};

struct RunResult {
  std::string pipeline;
  double wall_ms = 0;
  std::vector<NodeRun> nodes;        // in config order
  std::optional<std::string> error;  // first failure: node, stage and cause
  bool interrupted = false;
  bool cache_enabled = false;
  double cache_key_ms = 0;  // hashing parameters and files into node keys
  // Outputs of every node that finished, by node then port: what a caller or a test reads back.
  std::vector<std::map<std::string, Value, std::less<>>> outputs;

  bool ok() const { return !error && !interrupted; }
  template <class T>
  std::shared_ptr<const T> output(const Graph& g, const std::string& node,
                                  const std::string& port) const;
};

// Runs `graph`, recording into `profiler`. Never throws for stage failures: they land in
// RunResult::error (the first one; later ones are logged). `shared` may be supplied to share
// heavy state across runs (e.g. loaded weights in a batch); a fresh one is used otherwise.
RunResult execute(const Graph& graph, Profiler& profiler, const ExecutorOptions& options = {},
                  SharedState* shared = nullptr);

template <class T>
std::shared_ptr<const T> RunResult::output(const Graph& g, const std::string& node,
                                           const std::string& port) const {
  for (size_t i = 0; i < g.nodes.size(); ++i) {
    if (g.nodes[i].id != node || i >= outputs.size()) continue;
    const auto it = outputs[i].find(port);
    if (it == outputs[i].end() || !(it->second.type == port_type<T>())) return nullptr;
    return std::static_pointer_cast<const T>(it->second.data);
  }
  return nullptr;
}

}  // namespace gen3d::pipeline
