#pragma once
// `gen3d batch`: many pipeline runs from a JSON-lines manifest, failures recorded, resumable and
// shardable across machines by job id.

#include <string>
#include <vector>

#include "app/cli/cache_command.h"
#include "pipeline/manifest.h"

namespace gen3d::app::cli {

struct BatchOptions {
  std::string manifest;  // JSON lines: {"id", "mesh", "image", "views", "mr_views", "source_mesh",
                         // "set"}
  std::string pipeline;  // config file; empty: the built-in texgen pipeline
  std::string out_dir = "out/batch";
  int jobs = 1;         // jobs run at once
  int shard_index = 0;  // --shard I/N: this machine takes the jobs with hash(id) % N == I
  int shard_count = 1;
  bool resume = false;  // skip jobs whose completion marker exists
  std::string metrics_path;
  int threads = 0;  // -j: TBB worker cap for the whole process
  bool quiet = false;
  CacheOptions cache;  // one stage cache for every job: jobs sharing a mesh share its nodes
};

int cmd_batch(const BatchOptions& options);

}  // namespace gen3d::app::cli
