#include "app/cli/commands.h"

#include <functional>
#include <optional>

#include <fmt/format.h>
#include <spdlog/spdlog.h>

#include "app/cli/progress_display.h"
#include "app/cli/registry.h"
#include "app/cli/texgen_config.h"
#include "app/cli/texgen_report.h"
#include "io/atomic_file.h"
#include "pipeline/config.h"
#include "pipeline/describe.h"
#include "pipeline/error.h"
#include "pipeline/executor.h"
#include "pipeline/graph.h"
#include "pipeline/run_report.h"
#include "pipeline/stage_cache.h"
#include "stages/register.h"

namespace gen3d::app::cli {

using namespace gen3d::pipeline;

std::atomic<bool>& interrupt_flag() {
  static std::atomic<bool> flag{false};
  return flag;
}

const Registry& cli_registry() {
  static const Registry reg = [] {
    Registry r;
    stages::register_all_stages(r);
    return r;
  }();
  return reg;
}

namespace {

const Registry& registry() {
  return cli_registry();
}

Graph load_graph(const std::string& path, const std::vector<std::string>& sets) {
  PipelineConfig cfg = load_config(path);
  apply_overrides(cfg, sets);
  return build_graph(cfg, registry());
}

}  // namespace

int run_graph(const Graph& graph, const RunOptions& o, const AfterRun& after) {
  Profiler profiler;
  // A written trace shows each GPU node's own timeline too (timing every operation costs a
  // little, so only then).
  profiler.set_device_timelines(!o.trace_path.empty());
  ExecutorOptions exec;
  exec.max_threads = o.threads;
  exec.model_concurrency = o.model_concurrency;
  exec.interrupt = &interrupt_flag();
  // A graph with nothing the cache may hold (a model check, a timing study) opens no store.
  bool cacheable = false;
  for (const GraphNode& node : graph.nodes)
    cacheable = cacheable ||
                (node.contract->cache != CachePolicy::Never && !node.contract->outputs.empty());
  const auto cache = cacheable ? open_stage_cache(o.cache) : nullptr;
  exec.cache = cache.get();
  exec.elide_unused = o.elide_unused;
  spdlog::info("running {} ({} nodes)", graph.name, graph.nodes.size());
  std::optional<RunStatus> status;  // the status line, while the run goes on
  if (!o.quiet && status_line_enabled()) status.emplace(StatusLine::on_stderr());
  const RunResult run = execute(graph, profiler, exec);
  status.reset();

  if (!o.quiet) fmt::print(stderr, "\n{}", format_summary(graph, run, profiler));
  // Trace and metrics are written for failed runs too: they show where it stopped.
  if (!o.trace_path.empty()) {
    io::write_file_atomically(o.trace_path, profiler.chrome_trace_json());
    spdlog::info("trace written to {} (open in https://ui.perfetto.dev)", o.trace_path);
  }
  if (!o.metrics_path.empty())
    io::write_file_atomically(o.metrics_path, metrics_json(graph, run, profiler));
  if (run.ok() && after) after(graph, run, profiler);

  if (run.interrupted) {
    spdlog::error("interrupted: nodes not yet started were skipped");
    return 130;
  }
  if (run.error) {
    spdlog::error("{}", *run.error);
    return 1;
  }
  return 0;
}

int cmd_run(const RunOptions& o) {
  Graph graph = load_graph(o.config, o.sets);
  if (graph.name.empty()) graph.name = o.config;
  return run_graph(graph, o);
}

PipelineConfig texture_config(const TextureOptions& o) {
  PipelineConfig cfg = build_texgen_config(o);
  apply_overrides(cfg, o.run.sets);
  return cfg;
}

Graph texture_graph(const TextureOptions& o) {
  return build_graph(texture_config(o), registry());
}

int cmd_texture(const TextureOptions& o) {
  if (o.dump) {
    fmt::print("{}\n", texture_config(o).to_json().dump(2));
    return 0;
  }
  const Graph graph = texture_graph(o);
  AfterRun after;
  RunOptions run = o.run;
  // Without a report nothing reads the nodes only it shows (maps, previews): they are not run.
  run.elide_unused = o.report_path.empty();
  if (!o.report_path.empty()) {
    after = [&](const Graph& g, const RunResult& run, const Profiler& profiler) {
      io::write_file_atomically(o.report_path, texgen_report_html(g, run, profiler));
      spdlog::info("report written to {}", o.report_path);
    };
  }
  return run_graph(graph, run, after);
}

int cmd_validate(const std::string& config, const std::vector<std::string>& sets, bool dump) {
  PipelineConfig cfg = load_config(config);
  apply_overrides(cfg, sets);
  const Graph graph = build_graph(cfg, registry());
  if (dump) fmt::print("{}\n", cfg.to_json().dump(2));
  spdlog::info("{}: valid ({} nodes)", config, graph.nodes.size());
  return 0;
}

int cmd_stages(StagesFormat format) {
  switch (format) {
    case StagesFormat::kJson:
      fmt::print("{}\n", stages_json(registry()));
      break;
    case StagesFormat::kMarkdown:
      fmt::print("{}", stages_markdown(registry()));
      break;
    case StagesFormat::kText:
      fmt::print("{}", stages_text(registry()));
      break;
  }
  return 0;
}

int cmd_schema() {
  fmt::print("{}\n", pipeline_schema(registry()));
  return 0;
}

int cmd_graph(const std::string& config, const std::vector<std::string>& sets) {
  fmt::print("{}", load_graph(config, sets).to_dot());
  return 0;
}

}  // namespace gen3d::app::cli
