#include "app/cli/batch_command.h"

#include <atomic>
#include <chrono>
#include <filesystem>
#include <fstream>
#include <map>
#include <mutex>
#include <optional>
#include <thread>

#include <fmt/format.h>
#include <spdlog/spdlog.h>
#include <tbb/global_control.h>

#include "app/cli/commands.h"
#include "app/cli/progress_display.h"
#include "app/cli/registry.h"
#include "app/cli/texgen_config.h"
#include "io/atomic_file.h"
#include "pipeline/error.h"
#include "pipeline/executor.h"
#include "pipeline/graph.h"
#include "pipeline/run_report.h"
#include "pipeline/stage_cache.h"

namespace gen3d::app::cli {

using nlohmann::json;
using namespace gen3d::pipeline;
namespace fs = std::filesystem;

namespace {

std::string output_path(const BatchOptions& o, const BatchJob& job) {
  std::string ext = ".glb";
  if (job.spec.contains("format") && job.spec["format"].is_string())
    ext = "." + job.spec["format"].get<std::string>();
  return (fs::path(o.out_dir) / (job.id + ext)).string();
}

std::string marker_path(const BatchOptions& o, const BatchJob& job) {
  return (fs::path(o.out_dir) / (job.id + ".done")).string();
}

std::string text_field(const json& spec, const char* key) {
  return spec.contains(key) && spec[key].is_string() ? spec[key].get<std::string>() : std::string();
}

// The job's pipeline config: the built-in texgen job from its fields, or a config file whose
// variables the job's fields set; then the job's "set" overrides.
PipelineConfig job_config(const BatchOptions& o, const BatchJob& job) {
  PipelineConfig cfg;
  const std::string out = output_path(o, job);
  if (o.pipeline.empty()) {
    TextureOptions t;
    t.mesh = text_field(job.spec, "mesh");
    if (t.mesh.empty()) throw ConfigError("the job has no \"mesh\"");
    if (job.spec.contains("image")) {
      const json& img = job.spec["image"];
      if (img.is_string())
        t.images.push_back(img);
      else if (img.is_array())
        for (const json& i : img) t.images.push_back(i.get<std::string>());
    }
    t.views_dir = text_field(job.spec, "views");
    t.mr_views_dir = text_field(job.spec, "mr_views");
    t.source_mesh = text_field(job.spec, "source_mesh");
    t.reunwrap = job.spec.value("reunwrap", false);
    t.output = out;
    cfg = build_texgen_config(t);
  } else {
    cfg = load_config(o.pipeline);
    for (const auto& [key, value] : job.spec.items()) {
      if (key == "id" || key == "set" || key == "format") continue;
      if (!cfg.vars.contains(key))
        throw ConfigError(
            fmt::format("the pipeline has no variable \"{}\" for the job's field", key));
      cfg.vars[key] = value;
    }
    if (cfg.vars.contains("out")) cfg.vars["out"] = out;
  }
  std::vector<std::string> sets;
  if (job.spec.contains("set"))
    for (const auto& [key, value] : job.spec["set"].items())
      sets.push_back(key + "=" + (value.is_string() ? value.get<std::string>() : value.dump()));
  apply_overrides(cfg, sets);
  return cfg;
}

struct JobResult {
  std::string id;
  std::string status;  // done, failed, skipped
  std::string node;    // failing node, when known
  std::string error;
  double wall_ms = 0;
  std::vector<NodeRun> nodes;
};

}  // namespace

int cmd_batch(const BatchOptions& o) {
  if (o.shard_count < 1 || o.shard_index < 0 || o.shard_index >= o.shard_count)
    throw ConfigError(
        fmt::format("--shard {}/{}: expected I/N with 0 <= I < N", o.shard_index, o.shard_count));
  const std::vector<BatchJob> all = read_manifest(o.manifest);
  std::vector<BatchJob> jobs;
  for (const BatchJob& j : all)
    if (in_shard(j.id, o.shard_index, o.shard_count)) jobs.push_back(j);
  fs::create_directories(o.out_dir);
  spdlog::info("batch: {} jobs in {} ({} in shard {}/{}), {} at a time", all.size(), o.manifest,
               jobs.size(), o.shard_index, o.shard_count, o.jobs);

  std::optional<tbb::global_control> thread_cap;
  if (o.threads > 0) thread_cap.emplace(tbb::global_control::max_allowed_parallelism, o.threads);
  SharedState shared;  // one raster cache (byte-bounded) and one model registry for every job
  const auto cache = open_stage_cache(o.cache);
  std::vector<JobResult> results(jobs.size());
  std::atomic<size_t> next{0}, finished{0};
  std::mutex report_mutex;
  const auto start = std::chrono::steady_clock::now();
  const bool progress = !o.quiet && status_line_enabled();

  const auto run_job = [&](size_t k) {
    const BatchJob& job = jobs[k];
    JobResult& r = results[k];
    r.id = job.id;
    const auto t0 = std::chrono::steady_clock::now();
    if (o.resume && fs::exists(marker_path(o, job)) && fs::exists(output_path(o, job))) {
      r.status = "skipped";
    } else if (interrupt_flag().load()) {
      r.status = "failed";
      r.error = "interrupted before it started";
    } else {
      try {
        fs::remove(marker_path(o, job));
        const Graph graph = build_graph(job_config(o, job), cli_registry());
        Profiler profiler;
        ExecutorOptions exec;
        exec.interrupt = &interrupt_flag();
        exec.cache = cache.get();
        exec.run_id = job.id;
        // The built-in texgen job writes no report: what only a report shows is not run.
        exec.elide_unused = o.pipeline.empty();
        const RunResult run = execute(graph, profiler, exec, &shared);
        r.nodes = run.nodes;
        if (run.ok()) {
          r.status = "done";
          // The marker comes after the outputs' atomic renames: it exists only for complete jobs.
          io::write_file_atomically(
              marker_path(o, job),
              json{{"id", job.id}, {"output", output_path(o, job)}, {"wall_ms", run.wall_ms}}
                  .dump());
        } else {
          r.status = "failed";
          r.error = run.error ? *run.error : "interrupted";
          for (const NodeRun& n : run.nodes)
            if (n.status == NodeStatus::Failed) r.node = n.id;
        }
      } catch (const std::exception& e) {
        r.status = "failed";
        r.error = e.what();
      }
    }
    r.wall_ms =
        std::chrono::duration<double, std::milli>(std::chrono::steady_clock::now() - t0).count();
    std::lock_guard lock(report_mutex);
    const size_t done = ++finished;
    if (r.status == "failed")
      spdlog::error("job {} (manifest line {}) failed{}: {}", job.id, job.line,
                    r.node.empty() ? "" : " at node " + r.node, r.error);
    else if (!progress)
      spdlog::info("job {} {} ({:.0f} ms)", job.id, r.status, r.wall_ms);
    if (progress)
      StatusLine::on_stderr().show(
          fmt::format("[{}/{}] {} {}", done, jobs.size(), job.id, r.status));
  };

  std::vector<std::thread> workers;
  for (int w = 0; w < std::max(1, o.jobs); ++w)
    workers.emplace_back([&] {
      for (size_t k; (k = next.fetch_add(1)) < jobs.size();) run_job(k);
    });
  for (std::thread& t : workers) t.join();
  if (progress) StatusLine::on_stderr().clear();

  const double wall_s =
      std::chrono::duration<double>(std::chrono::steady_clock::now() - start).count();
  size_t done = 0, failed = 0, skipped = 0;
  std::map<std::string, double> stage_ms;
  json job_list = json::array();
  for (const JobResult& r : results) {
    done += r.status == "done";
    failed += r.status == "failed";
    skipped += r.status == "skipped";
    for (const NodeRun& n : r.nodes) stage_ms[n.stage] += n.wall_ms;
    json j = {{"id", r.id}, {"status", r.status}, {"wall_ms", r.wall_ms}};
    json cached = json::array();
    for (const NodeRun& n : r.nodes)
      if (n.cached) cached.push_back(n.id);
    if (cache) j["cached_nodes"] = std::move(cached);
    if (!r.error.empty()) j["error"] = r.error;
    if (!r.node.empty()) j["node"] = r.node;
    job_list.push_back(std::move(j));
  }
  const double per_min = wall_s > 0 ? 60.0 * static_cast<double>(done) / wall_s : 0.0;
  if (!o.quiet) {
    std::string table = fmt::format(
        "\nbatch: {} done, {} failed, {} skipped in {:.1f} s "
        "({:.1f} jobs/min), peak RSS {:.0f} MiB\n",
        done, failed, skipped, wall_s, per_min, peak_rss_mb());
    table += fmt::format("{:<20} {:>12}\n", "stage", "total ms");
    for (const auto& [stage, ms] : stage_ms) table += fmt::format("{:<20} {:>12.1f}\n", stage, ms);
    for (const JobResult& r : results)
      if (r.status == "failed") table += fmt::format("failed: {}: {}\n", r.id, r.error);
    fmt::print(stderr, "{}", table);
  }
  if (!o.metrics_path.empty()) {
    json stages = json::object();
    for (const auto& [stage, ms] : stage_ms) stages[stage] = ms;
    io::write_file_atomically(o.metrics_path,
                              json{{"manifest", o.manifest},
                                   {"shard", fmt::format("{}/{}", o.shard_index, o.shard_count)},
                                   {"done", done},
                                   {"failed", failed},
                                   {"skipped", skipped},
                                   {"wall_s", wall_s},
                                   {"jobs_per_min", per_min},
                                   {"peak_rss_mb", peak_rss_mb()},
                                   {"stage_ms", stages},
                                   {"jobs", job_list}}
                                  .dump(2));
  }
  if (interrupt_flag().load()) return 130;
  return failed > 0 ? 1 : 0;
}

}  // namespace gen3d::app::cli
