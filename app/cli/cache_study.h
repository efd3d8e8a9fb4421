#pragma once
// `gen3d cache-study`: runs assets/pipelines/cache_study.json (the cache_study stage: NoCache and
// every step cache on the same model, condition and seed) with the command line's values as its
// variables, and prints the comparison table.

#include <cstdint>
#include <string>
#include <vector>

#include "app/cli/commands.h"

namespace gen3d::app::cli {

struct CacheStudyOptions {
  RunOptions run;             // -j, --set, --trace, --metrics (config is unused)
  std::string model;          // --model DIR|FILE (DiT weights; config.json next to them)
  std::string config;         // --config YAML or JSON (default: next to the weights)
  std::string random_config;  // --random-config mid|small: random DiT, no weights needed
  std::string cond;           // --cond F.safetensors (default with --random-config: random)
  std::string cond_name;      // --cond-name (default: the file's only tensor, or in.cond_context)
  int steps = 50;             // --steps
  double guidance = 5.0;      // --guidance
  std::uint64_t seed = 0;     // --seed (noise; the random condition uses seed + 1)
  int latent_tokens = 0;      // --latent-tokens (0: 3072, or the random preset's)
  int repeats = 1;            // --repeats (best wall time of)
  std::vector<std::string> methods;  // --method fbcache|teacache|taylorseer|all (default all)
  std::string json_path;             // --json F: rows as JSON
};

int cmd_cache_study(const CacheStudyOptions& options);

}  // namespace gen3d::app::cli
