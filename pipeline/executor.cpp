#include "pipeline/executor.h"

#include <algorithm>
#include <memory>
#include <mutex>

#include <spdlog/spdlog.h>
#include <tbb/flow_graph.h>
#include <tbb/global_control.h>
#include <tbb/task_group.h>

#include "pipeline/error.h"
#include "pipeline/stage_cache.h"
#include "progress/progress.h"

namespace gen3d::pipeline {

namespace flow = tbb::flow;

namespace {

enum class Action { Run, Load, Elide };

// What each node does this run: nodes whose outputs something needs run, or load when the cache
// holds them (then what they need upstream is not needed for them); the rest are elided. Without
// elide_unused every node is needed.
std::vector<Action> plan(const Graph& graph, const ExecutorOptions& options,
                         const std::vector<CacheKey>& keys, std::vector<bool>& in_cache) {
  const size_t n = graph.nodes.size();
  std::vector<bool> needed(n, !options.elide_unused);
  std::vector<Action> action(n, Action::Elide);
  in_cache.assign(n, false);
  for (size_t i = 0; i < n; ++i) {
    const GraphNode& node = graph.nodes[i];
    // Side effects (no outputs: savers, reports) and results nobody consumes in a config that
    // names no consumer are what a run is for.
    if (node.contract->outputs.empty()) needed[i] = true;
    if (options.cache && node.contract->cache != CachePolicy::Never &&
        options.cache->has_codecs(node))
      in_cache[i] = options.cache->contains(keys[i]);
  }
  for (auto it = graph.order.rbegin(); it != graph.order.rend(); ++it) {
    const size_t i = *it;
    if (!needed[i]) continue;
    if (in_cache[i]) {
      action[i] = Action::Load;
      continue;
    }
    action[i] = Action::Run;
    for (size_t p : graph.nodes[i].after) needed[p] = true;
  }
  return action;
}

RunResult execute_once(const Graph& graph, Profiler& profiler, const ExecutorOptions& options,
                       SharedState& state, bool& replan) {
  const size_t n = graph.nodes.size();

  RunResult result;
  result.pipeline = graph.name;
  result.outputs.resize(n);
  result.nodes.resize(n);
  for (size_t i = 0; i < n; ++i) {
    result.nodes[i].id = graph.nodes[i].id;
    result.nodes[i].stage = graph.nodes[i].contract->name;
  }
  StageCache* cache = options.cache;
  result.cache_enabled = cache != nullptr;
  std::vector<CacheKey> keys(n);
  if (cache) {
    auto span = profiler.span("cache keys", "cache");
    const int64_t k0 = profiler.now_ns();
    keys = cache->node_keys(graph);
    result.cache_key_ms = static_cast<double>(profiler.now_ns() - k0) / 1e6;
  }
  std::vector<bool> in_cache;
  const std::vector<Action> action = plan(graph, options, keys, in_cache);
  if (cache)
    for (size_t i = 0; i < n; ++i) result.nodes[i].cache_key = keys[i].hex();
  // The keys this run computes are claimed first, so that concurrent runs of this process (a
  // batch's jobs on one mesh) compute each once: a run that finds one claimed waits here, on its
  // own thread before any task starts, and plans again. Each claim is released when its node's
  // result is stored or known not to be, and at the end whatever happened.
  struct Claims {
    StageCache* cache;
    std::vector<CacheKey> keys;
    ~Claims() {
      for (const CacheKey& k : keys) cache->release(k);
    }
  } claims{cache, {}};
  if (cache) {
    std::vector<CacheKey> mine, busy;
    for (size_t i = 0; i < n; ++i)
      if (action[i] == Action::Run && graph.nodes[i].contract->cache != CachePolicy::Never &&
          cache->has_codecs(graph.nodes[i]))
        mine.push_back(keys[i]);
    if (!cache->claim(mine, busy)) {
      spdlog::info("stage cache: another run is computing {} of this run's nodes; waiting for it",
                   busy.size());
      auto span = profiler.span("wait for another run", "cache");
      cache->wait_released(busy);
      replan = true;
      return result;
    }
    claims.keys = std::move(mine);
  }
  // Recomputing node i from what is stored: its time plus, for each producer, the time to load
  // it where it is stored and to recompute it where not (an estimate: shared producers count once
  // per path).
  std::vector<double> recompute_ms(n, 0.0);
  std::vector<double> load_ms(n, 0.0);  // estimated, of the nodes this run stores
  std::vector<char> stored(n, 0);       // char, not bool: nodes on different threads set their own
  tbb::task_group stores;
  std::mutex store_mutex;
  // What each node counted and gauged, stored with its entry and reported again when loaded.
  const auto metrics = std::make_unique<MetricLog[]>(n);

  std::atomic<bool> cancel{false};
  std::mutex error_mutex;
  std::mutex progress_mutex;
  size_t finished = 0;
  const size_t planned = static_cast<size_t>(
      std::count_if(action.begin(), action.end(), [](Action a) { return a != Action::Elide; }));
  const int64_t run_start = profiler.now_ns();
  progress::Hub& events = progress::hub();
  if (events.active()) {
    progress::Event e;
    e.kind = progress::EventKind::kRunStarted;
    e.run = options.run_id;
    e.stage = graph.name;
    e.n = static_cast<int64_t>(planned);
    events.emit(std::move(e));
  }
  const auto node_started = [&](size_t i) {
    if (!events.active()) return;
    progress::Event e;
    e.kind = progress::EventKind::kNodeStarted;
    e.run = options.run_id;
    e.node = graph.nodes[i].id;
    e.stage = graph.nodes[i].contract->name;
    e.n = static_cast<int64_t>(planned);
    events.emit(std::move(e));
  };
  // One call per node that ran or loaded, in the order they finish.
  const auto node_finished = [&](size_t i, const char* status, const std::string& failure) {
    std::lock_guard lock(progress_mutex);
    ++finished;
    if (options.on_node_done) options.on_node_done(result.nodes[i], finished, planned);
    if (!events.active()) return;
    progress::Event e;
    e.kind = progress::EventKind::kNodeFinished;
    e.run = options.run_id;
    e.node = graph.nodes[i].id;
    e.stage = graph.nodes[i].contract->name;
    e.status = status;
    e.seconds = result.nodes[i].wall_ms / 1e3;
    e.i = static_cast<int64_t>(finished);
    e.n = static_cast<int64_t>(planned);
    e.message = failure;
    events.emit(std::move(e));
  };

  // After node i ran: store its outputs when its policy says so, on a task of their own (the
  // values are immutable and shared, so consumers go on meanwhile).
  const auto consider_storing = [&](size_t i) {
    const GraphNode& node = graph.nodes[i];
    NodeRun& rec = result.nodes[i];
    double cost = rec.wall_ms;
    for (size_t p : node.after) cost += stored[p] ? load_ms[p] : recompute_ms[p];
    recompute_ms[i] = cost;
    const CachePolicy policy = node.contract->cache;
    if (policy == CachePolicy::Never || !cache->has_codecs(node)) return;
    const StageCacheOptions& co = cache->options();
    const double bytes = static_cast<double>(cache->estimate_bytes(result.outputs[i]));
    const double load = bytes / (co.load_mb_per_s * 1e6) * 1e3;
    if (policy == CachePolicy::Auto && (cost < co.min_store_ms || cost < co.store_factor * load)) {
      cache->release(keys[i]);
      return;
    }
    load_ms[i] = load;
    stored[i] = 1;
    auto outputs = result.outputs[i];
    stores.run([&, i, outputs = std::move(outputs)] {
      const GraphNode& nd = graph.nodes[i];
      auto span = profiler.span("store " + nd.id, "cache", nd.id);
      const int64_t s0 = profiler.now_ns();
      const uint64_t bytes =
          cache->store(keys[i], nd, outputs, result.nodes[i].wall_ms, metrics[i].items());
      const double ms = static_cast<double>(profiler.now_ns() - s0) / 1e6;
      cache->release(keys[i]);
      std::lock_guard lock(store_mutex);
      result.nodes[i].stored = bytes > 0;
      result.nodes[i].cache_bytes = bytes;
      result.nodes[i].store_ms = ms;
    });
  };

  // Runs node i on the calling thread; returns whether its consumers may fire.
  const auto run_node = [&](size_t i) -> bool {
    const GraphNode& node = graph.nodes[i];
    NodeRun& rec = result.nodes[i];
    if (options.interrupt && options.interrupt->load()) cancel = true;
    if (cancel.load()) {
      rec.status = NodeStatus::Skipped;
      return false;
    }
    if (action[i] == Action::Elide) {
      rec.cached = in_cache[i];
      rec.status = rec.cached ? NodeStatus::Cached : NodeStatus::Unused;
      if (rec.cached) {
        profiler.span(node.id, "cached", node.id).end();
        rec.saved_ms = cache->recorded_ms(keys[i]);
      }
      return true;
    }
    if (action[i] == Action::Load) {
      node_started(i);
      const int64_t l0 = profiler.now_ns();
      auto span = profiler.span(node.id, "cached", node.id);
      bool damaged = false;
      auto loaded = cache->load(keys[i], node, &damaged);
      span.end();
      const int64_t l1 = profiler.now_ns();
      if (loaded) {
        result.outputs[i] = std::move(loaded->outputs);
        for (const RecordedMetric& m : loaded->metrics) {
          if (m.gauge)
            profiler.gauge(m.name, m.value);
          else
            profiler.count(m.name, m.value);
        }
        rec.thread = Profiler::thread_index();
        rec.start_ms = static_cast<double>(l0 - run_start) / 1e6;
        rec.wall_ms = static_cast<double>(l1 - l0) / 1e6;
        rec.cached = rec.loaded = true;
        rec.cache_bytes = loaded->bytes;
        rec.saved_ms = std::max(0.0, loaded->compute_ms - rec.wall_ms);
        rec.status = NodeStatus::Cached;
        stored[i] = 1;
        node_finished(i, "cached", {});
        return true;
      }
      // Gone or damaged: run it when what it needs is at hand, else plan the run again.
      for (size_t p : node.after)
        if (result.outputs[p].empty() && !graph.nodes[p].contract->outputs.empty()) {
          replan = true;
          cancel = true;
          rec.status = NodeStatus::Skipped;
          return false;
        }
    }
    StageContext::Wiring w;
    w.node_id = node.id;
    w.contract = node.contract;
    for (const Edge& e : node.inputs) w.inputs[e.port] = result.outputs[e.from].at(e.from_port);
    w.params = &node.params;
    w.outputs = &result.outputs[i];
    w.profiler = &profiler;
    w.shared = &state;
    w.cancel = &cancel;
    w.interrupt = options.interrupt;
    if (cache) w.metrics = &metrics[i];
    StageContext ctx(std::move(w));

    rec.thread = Profiler::thread_index();
    // Steps and log messages from this thread name the node until it ends.
    const progress::NodeScope scope(options.run_id, node.id);
    if (action[i] != Action::Load) node_started(i);  // a failed load already said it started
    const int64_t t0 = profiler.now_ns();
    auto span = profiler.span(node.id, "node", node.id);
    spdlog::debug("node {} ({}) started", node.id, node.contract->name);
    std::string failure;
    try {
      node.stage->run(ctx);
      for (const PortSpec& out : node.contract->outputs)
        if (!result.outputs[i].count(out.name))
          failure = "the stage finished without writing its output \"" + out.name + "\"";
    } catch (const Cancelled&) {
      failure = "cancelled";
    } catch (const std::exception& e) {
      failure = e.what();
    } catch (...) {
      failure = "unknown exception";
    }
    span.end();
    const int64_t t1 = profiler.now_ns();
    rec.start_ms = static_cast<double>(t0 - run_start) / 1e6;
    rec.wall_ms = static_cast<double>(t1 - t0) / 1e6;
    node_finished(i, failure.empty() ? "done" : "failed", failure);
    if (options.interrupt && options.interrupt->load()) cancel = true;
    if (failure.empty()) {
      rec.status = NodeStatus::Done;
      spdlog::debug("node {} done in {:.1f} ms", node.id, rec.wall_ms);
      if (cache) consider_storing(i);
      return true;
    }
    rec.status = NodeStatus::Failed;
    result.outputs[i].clear();
    const bool was_cancelled = cancel.exchange(true);
    StageError err(node.id, node.contract->name, failure);
    std::lock_guard lock(error_mutex);
    if (!result.error && !(was_cancelled && failure == "cancelled")) {
      result.error = err.what();
    } else {
      spdlog::debug("{}", err.what());
    }
    return false;
  };

  {
    flow::graph g;
    // Per node: a gate that counts its producers, and a broadcast that tells its consumers it is
    // done. Model-class nodes hand their work to one shared runner whose concurrency is the model
    // limit, so waiting for a slot never blocks a worker thread.
    std::vector<std::unique_ptr<flow::broadcast_node<flow::continue_msg>>> done(n);
    std::vector<std::unique_ptr<flow::continue_node<flow::continue_msg>>> gates(n);
    flow::function_node<size_t> model_runner(
        g, static_cast<size_t>(std::max(1, options.model_concurrency)), [&](size_t i) {
          if (run_node(i)) done[i]->try_put(flow::continue_msg());
        });
    for (size_t i = 0; i < n; ++i)
      done[i] = std::make_unique<flow::broadcast_node<flow::continue_msg>>(g);
    for (size_t i = 0; i < n; ++i) {
      const bool model = graph.nodes[i].contract->resource == ResourceClass::Model;
      gates[i] = std::make_unique<flow::continue_node<flow::continue_msg>>(
          g, [&, i, model](const flow::continue_msg&) {
            if (model)
              model_runner.try_put(i);
            else if (run_node(i))
              done[i]->try_put(flow::continue_msg());
          });
    }
    for (size_t i = 0; i < n; ++i)
      for (size_t p : graph.nodes[i].after) flow::make_edge(*done[p], *gates[i]);
    for (size_t i = 0; i < n; ++i)
      if (graph.nodes[i].after.empty()) gates[i]->try_put(flow::continue_msg());
    g.wait_for_all();
  }
  stores.wait();
  if (cache) {
    bool any_stored = false;
    for (const NodeRun& rec : result.nodes) any_stored = any_stored || rec.stored;
    if (any_stored) {
      auto span = profiler.span("cache eviction", "cache");
      cache->evict();
    }
  }

  result.wall_ms = static_cast<double>(profiler.now_ns() - run_start) / 1e6;
  for (NodeRun& rec : result.nodes)
    if (rec.status == NodeStatus::Pending) rec.status = NodeStatus::Skipped;
  result.interrupted = options.interrupt && options.interrupt->load();
  return result;
}

}  // namespace

RunResult execute(const Graph& graph, Profiler& profiler, const ExecutorOptions& options,
                  SharedState* shared) {
  std::optional<tbb::global_control> thread_cap;
  if (options.max_threads > 0)
    thread_cap.emplace(tbb::global_control::max_allowed_parallelism, options.max_threads);
  SharedState own_shared;
  SharedState& state = shared ? *shared : own_shared;
  // spdlog creates its registry on first use, behind a guard inside libspdlog that ThreadSanitizer
  // cannot see: create it here, before any task logs, so the task spawns order it for every worker.
  spdlog::default_logger_raw();
  // A cache entry that vanished or was damaged after planning, under a node whose producers were
  // elided: plan again (the entry is gone now, so its producers run). Likewise after waiting for
  // another run's claims. Past one attempt per node the run goes on without the cache.
  const size_t last = graph.nodes.size() + 1;
  for (size_t attempt = 0;; ++attempt) {
    ExecutorOptions o = options;
    if (attempt == last) o.cache = nullptr;
    bool replan = false;
    RunResult result = execute_once(graph, profiler, o, state, replan);
    if (!replan || attempt == last) {
      progress::Hub& events = progress::hub();
      if (events.active()) {
        progress::Event e;
        e.kind = progress::EventKind::kRunFinished;
        e.run = options.run_id;
        e.stage = graph.name;
        e.status = result.interrupted ? "interrupted" : result.error ? "failed" : "ok";
        e.seconds = result.wall_ms / 1e3;
        events.emit(std::move(e));
      }
      return result;
    }
    spdlog::debug("stage cache: planning again (an entry went missing, or another run settled)");
  }
}

}  // namespace gen3d::pipeline
