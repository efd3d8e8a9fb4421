#include "app/server/job_runner.h"

#include <algorithm>
#include <filesystem>
#include <utility>
#include <vector>

#include <spdlog/spdlog.h>
#include <nlohmann/json.hpp>

#include "app/cli/texgen_report.h"
#include "app/server/http.h"
#include "io/atomic_file.h"
#include "models/shape/checkpoints.h"
#include "pipeline/executor.h"
#include "pipeline/graph.h"
#include "pipeline/profiler.h"
#include "pipeline/stage_cache.h"

namespace gen3d::app::server {

namespace fs = std::filesystem;

namespace {

// A folder `gen3d shape --model` takes without further options: DiT, VAE and conditioner.
bool is_shape_model(const fs::path& dir) {
  try {
    const auto c = models::inspect_checkpoint(dir.string());
    return c && c->has_vae && c->has_conditioner;
  } catch (const std::exception& e) {
    spdlog::debug("serve: {} is not a shape model: {}", dir.string(), e.what());
    return false;
  }
}

}  // namespace

ServeModels find_serve_models(const std::string& dir) {
  ServeModels m;
  if (dir.empty()) return m;
  const fs::path root(dir);
  if (fs::is_directory(root / "hunyuan3d-paint-v2-0") ||
      fs::is_directory(root / "hunyuan3d-paintpbr-v2-1"))
    m.paint = dir;
  if (is_shape_model(root)) {
    m.shape = dir;
    return m;
  }
  std::vector<std::string> names;
  std::error_code ec;
  for (const auto& e : fs::directory_iterator(root, ec))
    if (e.is_directory() && e.path().filename().string().starts_with("hunyuan3d-dit-v2"))
      names.push_back(e.path().filename().string());
  // The plain models first: -turbo and -fast are distilled for other step counts and guidance.
  const auto rank = [](const std::string& n) {
    return n == "hunyuan3d-dit-v2-1" ? 0 : n == "hunyuan3d-dit-v2-0" ? 1 : 2;
  };
  std::sort(names.begin(), names.end(), [&](const std::string& a, const std::string& b) {
    return std::pair(rank(a), a) < std::pair(rank(b), b);
  });
  for (const std::string& n : names)
    if (is_shape_model(root / n)) {
      m.shape = (root / n).string();
      break;
    }
  return m;
}

JobRunner::JobRunner(ServeModels models, int texture_size, int render_size,
                     pipeline::StageCache* cache)
    : models_(std::move(models)),
      texture_size_(texture_size),
      render_size_(render_size),
      cache_(cache) {}

CacheCounts JobRunner::cache_counts() const {
  return {cache_ != nullptr, hits_.load(), misses_.load(), stored_.load(), unneeded_.load()};
}

namespace {

// The graph as a client draws it: each node's id, stage and producers, in topological order.
std::string graph_json(const pipeline::Graph& graph) {
  nlohmann::json nodes = nlohmann::json::array();
  for (const size_t i : graph.order) {
    const pipeline::GraphNode& n = graph.nodes[i];
    nlohmann::json after = nlohmann::json::array();
    for (const size_t p : n.after) after.push_back(graph.nodes[p].id);
    nodes.push_back({{"id", n.id}, {"stage", n.contract->name}, {"after", std::move(after)}});
  }
  return nlohmann::json{{"name", graph.name}, {"nodes", std::move(nodes)}}.dump();
}

// What the run did with the stage cache: counts, and the nodes it did not need because the
// cache holds them (they sent no events).
JobCacheSummary cache_summary(const pipeline::Graph& graph, const pipeline::RunResult& run,
                              pipeline::StageCache* cache, std::vector<NodeProgress>& unneeded,
                              std::vector<std::string>& cached_ids) {
  JobCacheSummary s;
  s.enabled = run.cache_enabled;
  if (!cache || !run.cache_enabled) return s;
  for (size_t i = 0; i < run.nodes.size(); ++i) {
    const pipeline::NodeRun& n = run.nodes[i];
    if (n.status == pipeline::NodeStatus::Cached) {
      cached_ids.push_back(n.id);
      s.saved_seconds += n.saved_ms / 1e3;
      if (n.loaded) {
        ++s.hits;
      } else {
        ++s.unneeded;
        unneeded.push_back({n.id, n.stage, "cached", 0.0, "unneeded"});
      }
    } else if ((n.status == pipeline::NodeStatus::Done ||
                n.status == pipeline::NodeStatus::Failed) &&
               graph.nodes[i].contract->cache != pipeline::CachePolicy::Never &&
               cache->has_codecs(graph.nodes[i])) {
      ++s.misses;
    }
    s.stored += n.stored ? 1 : 0;
  }
  return s;
}

// How the run used its time, from its nodes' timings: the busy time of the nodes that ran or
// were loaded over the run's wall time (the concurrency achieved), and the critical path: the
// chain of producers and consumers whose times add up to the most, which bounds the run however
// many cores it gets.
std::string timing_json(const pipeline::Graph& graph, const pipeline::RunResult& run) {
  const size_t n = graph.nodes.size();
  std::vector<double> ms(n, 0.0), path(n, 0.0);
  std::vector<int> prev(n, -1);
  double busy = 0;
  for (size_t i = 0; i < n && i < run.nodes.size(); ++i) {
    const pipeline::NodeRun& r = run.nodes[i];
    const bool worked = r.status == pipeline::NodeStatus::Done ||
                        r.status == pipeline::NodeStatus::Failed || r.loaded;
    ms[i] = worked ? r.wall_ms : 0.0;
    busy += ms[i];
  }
  int last = -1;
  for (const size_t i : graph.order) {
    for (const size_t p : graph.nodes[i].after)
      if (path[p] > path[i]) {
        path[i] = path[p];
        prev[i] = static_cast<int>(p);
      }
    path[i] += ms[i];
    if (last < 0 || path[i] > path[static_cast<size_t>(last)]) last = static_cast<int>(i);
  }
  nlohmann::json chain = nlohmann::json::array();
  for (int i = last; i >= 0; i = prev[static_cast<size_t>(i)])
    if (ms[static_cast<size_t>(i)] > 0)
      chain.insert(chain.begin(), graph.nodes[static_cast<size_t>(i)].id);
  const double wall = run.wall_ms;
  return nlohmann::json{
      {"wall_seconds", wall / 1e3},
      {"busy_seconds", busy / 1e3},
      {"concurrency", wall > 0 ? busy / wall : 0.0},
      {"critical_path", std::move(chain)},
      {"critical_seconds", last < 0 ? 0.0 : path[static_cast<size_t>(last)] / 1e3}}
      .dump();
}

}  // namespace

void JobRunner::run(JobContext& ctx, const pipeline::Graph& graph, const std::string& report) {
  ctx.job.set_graph(graph_json(graph));
  pipeline::Profiler profiler;
  pipeline::ExecutorOptions exec;
  exec.interrupt = &ctx.cancel;
  exec.run_id = ctx.job.id;
  exec.elide_unused = report.empty();  // no report: what only a report shows is not run
  exec.cache = cache_;
  const pipeline::RunResult run = pipeline::execute(graph, profiler, exec, &shared_);
  {
    std::vector<NodeProgress> unneeded;
    std::vector<std::string> cached_ids;
    const JobCacheSummary s = cache_summary(graph, run, cache_, unneeded, cached_ids);
    hits_ += s.hits;
    misses_ += s.misses;
    stored_ += s.stored;
    unneeded_ += s.unneeded;
    ctx.job.set_timing(timing_json(graph, run));
    ctx.job.set_cache_summary(s, unneeded, cached_ids);
  }
  // The trace is kept for failed runs too: it shows where the run stopped.
  const std::string trace = (ctx.dir / "trace.json").string();
  io::write_file_atomically(trace, profiler.chrome_trace_json());
  ctx.job.add_file("trace", trace);
  if (run.interrupted) throw JobFailure("cancelled", "cancelled", false);
  if (run.error) {
    // A file the client sent that does not load is the client's fault.
    bool input = false;
    for (const pipeline::NodeRun& n : run.nodes)
      input = input || (n.status == pipeline::NodeStatus::Failed && n.stage.starts_with("load_"));
    throw JobFailure(input ? "bad_input" : "pipeline_failed", *run.error, input);
  }
  if (!report.empty()) {
    io::write_file_atomically(report, cli::texgen_report_html(graph, run, profiler));
    ctx.job.add_file("report", report);
  }
}

cli::TextureOptions JobRunner::texture_options(cli::TextureOptions t) const {
  t.models_dir = models_.paint;
  if (t.texture_size == 0) t.texture_size = texture_size_;
  if (t.render_size == 0) t.render_size = render_size_;
  return t;
}

JobOutput JobRunner::run_config(JobContext& ctx, const pipeline::Graph& graph,
                                const std::string& output, const std::string& report) {
  ctx.job.set_phase("texturing");
  run(ctx, graph, report);
  return {output, content_type(output)};
}

JobOutput JobRunner::texture(JobContext& ctx, cli::TextureOptions t) {
  ctx.job.set_phase("texturing");
  t = texture_options(std::move(t));
  const std::string report = std::exchange(t.report_path, "");
  run(ctx, cli::texture_graph(t), report);
  return {t.output, content_type(t.output)};
}

JobOutput JobRunner::shape(JobContext& ctx, cli::ShapeOptions s) {
  if (models_.shape.empty())
    throw JobFailure("no_shape_model", "this server has no shape model (--models)", false);
  ctx.job.set_phase("shape");
  s.model = models_.shape;
  if (const std::string problem = cli::resolve_shape_defaults(s); !problem.empty())
    throw JobFailure("no_shape_model", "the shape model cannot run: " + problem, false);
  run(ctx, cli::shape_graph(s), "");
  return {s.output, content_type(s.output)};
}

}  // namespace gen3d::app::server
