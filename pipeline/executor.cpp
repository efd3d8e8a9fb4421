#include "pipeline/executor.h"

#include <mutex>

#include <spdlog/spdlog.h>
#include <tbb/flow_graph.h>
#include <tbb/global_control.h>

#include "pipeline/error.h"

namespace gen3d::pipeline {

namespace flow = tbb::flow;

RunResult execute(const Graph& graph, Profiler& profiler, const ExecutorOptions& options,
                  SharedState* shared) {
  std::optional<tbb::global_control> thread_cap;
  if (options.max_threads > 0)
    thread_cap.emplace(tbb::global_control::max_allowed_parallelism, options.max_threads);

  SharedState own_shared;
  SharedState& state = shared ? *shared : own_shared;
  const size_t n = graph.nodes.size();

  RunResult result;
  result.pipeline = graph.name;
  result.outputs.resize(n);
  result.nodes.resize(n);
  for (size_t i = 0; i < n; ++i) {
    result.nodes[i].id = graph.nodes[i].id;
    result.nodes[i].stage = graph.nodes[i].contract->name;
  }

  std::atomic<bool> cancel{false};
  std::mutex error_mutex;
  std::mutex progress_mutex;
  size_t finished = 0;
  const int64_t run_start = profiler.now_ns();

  // Runs node i on the calling thread; returns whether its consumers may fire.
  const auto run_node = [&](size_t i) -> bool {
    const GraphNode& node = graph.nodes[i];
    NodeRun& rec = result.nodes[i];
    if (options.interrupt && options.interrupt->load()) cancel = true;
    if (cancel.load()) {
      rec.status = NodeStatus::Skipped;
      return false;
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
    StageContext ctx(std::move(w));

    rec.thread = Profiler::thread_index();
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
    if (options.on_node_done) {
      std::lock_guard lock(progress_mutex);
      options.on_node_done(rec, ++finished, n);
    }
    if (options.interrupt && options.interrupt->load()) cancel = true;
    if (failure.empty()) {
      rec.status = NodeStatus::Done;
      spdlog::debug("node {} done in {:.1f} ms", node.id, rec.wall_ms);
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

  result.wall_ms = static_cast<double>(profiler.now_ns() - run_start) / 1e6;
  for (NodeRun& rec : result.nodes)
    if (rec.status == NodeStatus::Pending) rec.status = NodeStatus::Skipped;
  result.interrupted = options.interrupt && options.interrupt->load();
  return result;
}

}  // namespace gen3d::pipeline
