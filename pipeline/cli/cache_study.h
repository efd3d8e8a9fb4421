#pragma once
// `gen3d cache-study`: NoCache and every step cache on the same model, condition and seed; prints
// per method the full DiT evaluations, wall time, speed-up and relative L2 error of the final
// latents against NoCache.

#include <cstdint>
#include <string>
#include <vector>

namespace gen3d::cli {

struct CacheStudyOptions {
  std::string model;          // --model DIR|FILE (DiT weights; config.json next to them)
  std::string config;         // --config JSON (default: next to the weights)
  std::string random_config;  // --random-config mid|small: random DiT, no weights needed
  std::string cond;           // --cond F.safetensors (default with --random-config: random)
  std::string cond_name;      // --cond-name (default: the file's only tensor, or in.cond_context)
  int steps = 50;             // --steps
  double guidance = 5.0;      // --guidance
  std::uint64_t seed = 0;     // --seed (noise; the random condition uses seed + 1)
  int latent_tokens = 0;      // --latent-tokens (0: 3072, or the random preset's)
  int repeats = 1;            // --repeats (best wall time of)
  int threads = 0;            // -j (0: all cores)
  std::vector<std::string> methods;  // --method fbcache|teacache|taylorseer|all (default all)
  std::string json_path;             // --json F: rows as JSON
};

int cmd_cache_study(const CacheStudyOptions& options);

}  // namespace gen3d::cli
