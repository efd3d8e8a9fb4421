#include "app/cli/cache_study.h"

#include <fmt/format.h>
#include <nlohmann/json.hpp>

#include "app/cli/registry.h"
#include "app/cli/shipped_configs.h"
#include "pipeline/error.h"
#include "pipeline/executor.h"
#include "pipeline/graph.h"
#include "stages/types.h"

namespace gen3d::app::cli {

int cmd_cache_study(const CacheStudyOptions& o) {
  if (o.model.empty() == o.random_config.empty())
    throw pipeline::ConfigError("cache-study: give exactly one of --model and --random-config");
  if (!o.model.empty() && o.cond.empty())
    throw pipeline::ConfigError("cache-study: --cond is required with --model");
  const nlohmann::json vars = {
      {"model", o.model},
      {"config", o.config},
      {"random_config", o.random_config.empty() ? "none" : o.random_config},
      {"cond", o.cond},
      {"cond_name", o.cond_name},
      {"steps", o.steps},
      {"guidance", o.guidance},
      {"seed", o.seed},
      {"latent_tokens", o.latent_tokens},
      {"repeats", o.repeats},
      {"methods", o.methods},
      {"json", o.json_path}};
  pipeline::PipelineConfig cfg = shipped_config("cache_study", "gen3d cache-study", vars);
  pipeline::apply_overrides(cfg, o.run.sets);
  const pipeline::Graph graph = pipeline::build_graph(cfg, cli_registry());
  // The table goes to stdout, the log and the run summary to stderr.
  const AfterRun print_table = [](const pipeline::Graph& g, const pipeline::RunResult& run,
                                  const pipeline::Profiler&) {
    for (const auto& node : g.nodes)
      if (auto table = run.output<stages::TextReport>(g, node.id, "table"))
        fmt::print("{}", table->text);
  };
  return run_graph(graph, o.run, print_table);
}

}  // namespace gen3d::app::cli
