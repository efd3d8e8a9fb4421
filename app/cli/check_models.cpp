#include "app/cli/check_models.h"

#include <fmt/format.h>
#include <nlohmann/json.hpp>

#include "app/cli/registry.h"
#include "app/cli/shipped_configs.h"
#include "pipeline/executor.h"
#include "pipeline/graph.h"
#include "stages/types.h"

namespace gen3d::app::cli {

int cmd_check_models(const CheckModelsOptions& o) {
  const nlohmann::json vars = {{"path", o.path}, {"json", o.json}};
  pipeline::PipelineConfig cfg = shipped_config("check_models", "gen3d models check", vars);
  pipeline::apply_overrides(cfg, o.run.sets);
  const pipeline::Graph graph = pipeline::build_graph(cfg, cli_registry());
  int problems = 0;
  // The report goes to stdout, the log and the run summary to stderr.
  const AfterRun print_report = [&](const pipeline::Graph& g, const pipeline::RunResult& run,
                                    const pipeline::Profiler& profiler) {
    for (const auto& node : g.nodes)
      if (auto report = run.output<stages::TextReport>(g, node.id, "report"))
        fmt::print("{}", report->text);
    const auto counters = profiler.counter_totals();
    if (const auto it = counters.find("check.problems"); it != counters.end())
      problems = static_cast<int>(it->second);
  };
  const int rc = run_graph(graph, o.run, print_report);
  return rc != 0 ? rc : (problems > 0 ? 1 : 0);
}

}  // namespace gen3d::app::cli
