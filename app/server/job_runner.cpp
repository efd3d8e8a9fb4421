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

JobRunner::JobRunner(ServeModels models, int texture_size, int render_size)
    : models_(std::move(models)), texture_size_(texture_size), render_size_(render_size) {}

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

}  // namespace

void JobRunner::run(JobContext& ctx, const pipeline::Graph& graph, const std::string& report) {
  ctx.job.set_graph(graph_json(graph));
  pipeline::Profiler profiler;
  pipeline::ExecutorOptions exec;
  exec.interrupt = &ctx.cancel;
  exec.run_id = ctx.job.id;
  exec.elide_unused = report.empty();  // no report: what only a report shows is not run
  const pipeline::RunResult run = pipeline::execute(graph, profiler, exec, &shared_);
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

JobOutput JobRunner::texture(JobContext& ctx, cli::TextureOptions t) {
  ctx.job.set_phase("texturing");
  t.models_dir = models_.paint;
  if (t.texture_size == 0) t.texture_size = texture_size_;
  if (t.render_size == 0) t.render_size = render_size_;
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
