#include "app/cli/bench_single_image.h"

#include <cmath>

#include <fmt/format.h>
#include <nlohmann/json.hpp>

#include "app/cli/registry.h"
#include "app/cli/shipped_configs.h"
#include "pipeline/error.h"
#include "pipeline/executor.h"
#include "pipeline/graph.h"
#include "pipeline/profiler.h"
#include "render/camera.h"
#include "stages/types.h"

namespace gen3d::app::cli {

using nlohmann::json;

namespace {

// One textured result: PSNR per view, the seen view, the mean over the unseen level views (sides
// and back), the pooled PSNR over all views, and the seconds its own nodes took.
json branch(const std::string& metric, const std::map<std::string, double>& counters, size_t views,
            size_t seen, const std::vector<size_t>& unseen, double seconds) {
  json psnr = json::array();
  for (size_t v = 0; v < views; ++v) {
    const auto it = counters.find(fmt::format("{}.view{}", metric, v));
    psnr.push_back(it == counters.end() ? json(nullptr) : json(std::round(it->second * 100) / 100));
  }
  // Views that see nothing of the mesh (a flat object from the side) have no PSNR: left out.
  double sum = 0;
  size_t scored = 0;
  for (size_t v : unseen)
    if (psnr[v].is_number()) sum += psnr[v].get<double>(), ++scored;
  const auto all = counters.find(metric + ".mean_db");
  const auto r2 = [](double x) { return std::round(x * 100) / 100; };
  return {{"psnr", psnr},
          {"seen", psnr[seen]},
          {"unseen", scored == 0 ? json(nullptr) : json(r2(sum / scored))},
          {"all", all == counters.end() ? json(nullptr) : json(r2(all->second))},
          {"seconds", r2(seconds)}};
}

}  // namespace

void add_bench_single_image(CLI::App& bench, BenchSingleImageOptions& o) {
  auto* c = bench.add_subcommand(
      "single-image",
      "Texture a textured mesh's copy from one of its own albedo views (earlier and current "
      "single-image methods) and from all of them (the ceiling); one JSON line of per-view PSNR "
      "against the truth");
  c->add_option("--mesh", o.mesh, "a textured mesh (OBJ/MTL, glTF/GLB, FBX, ...)")->required();
  c->add_option("--view", o.view, "the view whose render is the reference image (0: front)")
      ->check(CLI::Range(0, 5))
      ->capture_default_str();
  c->add_option("--size", o.size, "render and texture size")
      ->check(CLI::Range(64, 8192))
      ->capture_default_str();
  c->add_option("--delight", o.delight,
                "delighting of the reference: none (it is an unlit render) or classical")
      ->check(CLI::IsMember({"none", "classical"}))
      ->capture_default_str();
  c->add_option("--set", o.run.sets, "override: var=value or node.param=value");
  c->add_option("--trace", o.run.trace_path, "write a Chrome trace");
  c->add_option("--metrics", o.run.metrics_path, "write run metrics as JSON");
  c->add_option("-j,--threads", o.run.threads, "worker threads (default: all cores)")
      ->check(CLI::Range(1, 1024));
  o.command = c;
}

int cmd_bench_single_image(const BenchSingleImageOptions& o) {
  const json vars = {
      {"mesh", o.mesh}, {"view", o.view}, {"size", o.size}, {"delight_method", o.delight}};
  if (o.delight != "none" && o.delight != "classical")
    throw pipeline::ConfigError("--delight " + o.delight + ": expected none or classical");
  pipeline::PipelineConfig cfg =
      shipped_config("bench_single_image", "gen3d bench single-image", vars);
  pipeline::apply_overrides(cfg, o.run.sets);
  const pipeline::Graph graph = pipeline::build_graph(cfg, cli_registry());
  RunOptions run = o.run;
  run.quiet = true;      // the JSON line is the output; the log still goes to stderr
  run.cache.off = true;  // every figure and timing comes from this run, never from a stored one
  const AfterRun print = [&](const pipeline::Graph& g, const pipeline::RunResult& result,
                             const pipeline::Profiler& profiler) {
    const auto views = result.output<render::ViewSet>(g, "views", "views");
    if (!views) throw std::runtime_error("the benchmark produced no views");
    const size_t seen = static_cast<size_t>(o.view);
    if (seen >= views->size())
      throw pipeline::ConfigError(
          fmt::format("--view {}: there are {} views", o.view, views->size()));
    // Unseen: the other views at the reference's elevation (sides and back).
    std::vector<size_t> unseen;
    for (size_t v = 0; v < views->size(); ++v)
      if (v != seen && (*views)[v].camera.elev == (*views)[seen].camera.elev) unseen.push_back(v);
    const auto seconds = [&](const std::string& prefix) {
      double ms = 0;
      for (const auto& node : result.nodes)
        if (node.id.rfind(prefix, 0) == 0) ms += node.wall_ms;
      return ms / 1000.0;
    };
    const auto counters = profiler.counter_totals();
    json line = {
        {"bench", "single-image"},
        {"mesh", o.mesh},
        {"view", o.view},
        {"size", o.size},
        {"delight", o.delight},
        {"unseen_views", unseen},
        {"before", branch("before", counters, views->size(), seen, unseen, seconds("before_"))},
        {"after", branch("after", counters, views->size(), seen, unseen, seconds("after_"))},
        {"views", branch("views", counters, views->size(), seen, unseen, seconds("all_"))}};
    for (const char* key : {"iou", "bbox_iou", "scale", "rotation_deg", "offset_x", "offset_y"})
      if (const auto it = counters.find(fmt::format("multiview.fit_view{}.{}", o.view, key));
          it != counters.end())
        line["after"]["fit"][key] = std::round(it->second * 10000) / 10000;
    for (const char* key : {"shared_texels", "mirrored_texels", "mirrored_vertices",
                            "symmetry_found", "symmetry_error"})
      if (const auto it = counters.find(std::string("inpaint.") + key); it != counters.end())
        line["after"]["fill"][key] = it->second;
    fmt::print("{}\n", line.dump());
  };
  return run_graph(graph, run, print);
}

}  // namespace gen3d::app::cli
