#pragma once
// The gen3d subcommands. Each returns the process exit code:
// 0 success, 1 run failure, 2 config/usage error, 130 interrupted.

#include <atomic>
#include <functional>
#include <string>
#include <vector>

#include "app/cli/cache_command.h"

namespace gen3d::pipeline {
struct Graph;
struct PipelineConfig;
struct RunResult;
class Profiler;
}  // namespace gen3d::pipeline

namespace gen3d::app::cli {

struct RunOptions {
  std::string config;
  std::vector<std::string> sets;
  std::string trace_path;
  std::string metrics_path;
  int threads = 0;
  int model_concurrency = 1;
  bool quiet = false;
  CacheOptions cache;         // --cache DIR, --no-cache, --cache-budget
  bool elide_unused = false;  // run only what a consumer, a side effect or the cache needs
};

struct TextureOptions {
  RunOptions run;                   // sets, trace, metrics, threads (config is unused)
  std::string mesh;                 // --mesh
  std::vector<std::string> images;  // --image PATH (front) or VIEW=PATH (VIEW: index or name)
  std::string views_dir;            // --views DIR
  std::string mr_views_dir;         // --mr-views DIR: metallic-roughness views beside --views
  std::string source_mesh;          // --source-mesh
  std::string output = "out/textured.glb";
  int texture_size = 0;  // 0: the config's default
  int render_size = 0;
  int faces = -1;             // -1: the config's default
  bool reunwrap = false;      // replace the mesh's own UVs with a fresh atlas
  std::string models_dir;     // --models: learned delight + multiview from this model folder
  bool turbo = false;         // --turbo: the turbo paint model
  std::string paint_version;  // --paint-version 2.0|2.1 (default: 2.1 when the folder has it)
  std::string precision;      // --precision auto|fp32|bf16: the learned networks' (with --models)
  std::string device;         // --device cpu|cuda: where the learned networks run (with --models)
  std::string report_path;    // --report R.html
  bool dump = false;          // print the built config instead of running
};

// Set by the SIGINT handler; the executor skips nodes not yet started and stages poll it.
std::atomic<bool>& interrupt_flag();

// What a command does with a successful run's outputs (a report file, a printed table).
using AfterRun = std::function<void(const pipeline::Graph&, const pipeline::RunResult&,
                                    const pipeline::Profiler&)>;

// Runs a validated graph: progress on a TTY, the summary, trace and metrics files, then `after`
// when the run succeeded. Returns the exit code.
int run_graph(const pipeline::Graph& graph, const RunOptions& options, const AfterRun& after = {});

// The config `gen3d texture` runs for these options: the shipped texgen config they select, its
// variables set, then the `--set` overrides. Throws ConfigError for options that make no job.
pipeline::PipelineConfig texture_config(const TextureOptions& options);
// That config as a validated graph (the command line and the server run the same one).
pipeline::Graph texture_graph(const TextureOptions& options);

int cmd_run(const RunOptions& options);
int cmd_texture(const TextureOptions& options);
int cmd_validate(const std::string& config, const std::vector<std::string>& sets, bool dump);
// How `gen3d stages` prints the contracts.
enum class StagesFormat { kText, kJson, kMarkdown };
int cmd_stages(StagesFormat format);
int cmd_schema();
int cmd_graph(const std::string& config, const std::vector<std::string>& sets);

}  // namespace gen3d::app::cli
