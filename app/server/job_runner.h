#pragma once
// The pipelines `gen3d serve` runs as jobs: `gen3d texture`'s and `gen3d shape`'s graphs, built
// by the same functions as on the command line, with the models found in --models. Every job
// shares one raster cache and stage state; the networks load once per process (the model cache)
// and stay for the next job.

#include <atomic>
#include <cstdint>
#include <string>

#include "app/cli/commands.h"
#include "app/cli/shape_command.h"
#include "app/server/job_queue.h"
#include "pipeline/stage.h"

namespace gen3d::pipeline {
struct Graph;
class StageCache;
}  // namespace gen3d::pipeline

namespace gen3d::app::server {

// What a Hunyuan3D-2 model folder offers the server.
struct ServeModels {
  std::string paint;  // the folder, when it holds a paint model ("" otherwise)
  std::string shape;  // the shape model (a folder `gen3d shape --model` takes), or ""
};

// The models in `dir` (none for ""): a paint model in hunyuan3d-paint-v2-0/ or
// hunyuan3d-paintpbr-v2-1/; a shape model in `dir` itself when it is a combined checkpoint folder
// with its VAE and conditioner, else in its first hunyuan3d-dit-v2-* folder that is one
// (hunyuan3d-dit-v2-1, then hunyuan3d-dit-v2-0, then the others by name).
ServeModels find_serve_models(const std::string& dir);

// The stage cache's counts over every job the server ran (for /metrics).
struct CacheCounts {
  bool enabled = false;
  uint64_t hits = 0, misses = 0, stored = 0, unneeded = 0;
};

class JobRunner {
 public:
  // Texture jobs get `texture_size` and `render_size` unless they set their own (0: the config's).
  // Every job shares `cache` (null: none); the executor's claims keep two jobs that need one
  // node's result from both computing it.
  JobRunner(ServeModels models, int texture_size, int render_size,
            pipeline::StageCache* cache = nullptr);
  JobRunner(const JobRunner&) = delete;
  JobRunner& operator=(const JobRunner&) = delete;

  const ServeModels& models() const { return models_; }
  CacheCounts cache_counts() const;

  // Runs `gen3d texture`'s graph for `t` (with the paint model when there is one, else
  // model-free); the output is `t.output`, with `t.report_path` (when set) the HTML report of
  // `gen3d texture --report`. The job's phase is "texturing".
  JobOutput texture(JobContext& ctx, cli::TextureOptions t);

  // Runs `gen3d shape`'s graph for `s` (an image; the model is the server's): the output is
  // `s.output`. The job's phase is "shape". JobFailure no_shape_model without a shape model.
  JobOutput shape(JobContext& ctx, cli::ShapeOptions s);

  // `t` as texture() runs it: the server's paint model and sizes where it sets none.
  cli::TextureOptions texture_options(cli::TextureOptions t) const;

  // Runs a job's own config (job_config.h), checked and with its files in the job's folder; the
  // output is `output`, with `report` (when set) as in texture(). The job's phase is "texturing".
  JobOutput run_config(JobContext& ctx, const pipeline::Graph& graph, const std::string& output,
                       const std::string& report);

 private:
  // Runs `graph` for the job: its graph and events go to the job, its Chrome trace to
  // `trace.json` in the job's folder (the file "trace"), and with a `report` path the texgen
  // report there once the run succeeded (the file "report"; the nodes only a report reads run).
  void run(JobContext& ctx, const pipeline::Graph& graph, const std::string& report);

  const ServeModels models_;
  const int texture_size_;
  const int render_size_;
  pipeline::SharedState shared_;
  pipeline::StageCache* const cache_;
  std::atomic<uint64_t> hits_{0}, misses_{0}, stored_{0}, unneeded_{0};
};

}  // namespace gen3d::app::server
