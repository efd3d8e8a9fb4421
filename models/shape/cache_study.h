#pragma once
// Cache study: runs NoCache and each step cache on the same model, condition and noise, and
// measures full DiT evaluations, wall time, speed-up and the error of the final latents.
// Shared by `gen3d cache-study` and bench/denoise_bench.cpp.

#include <cstdint>
#include <memory>
#include <string>
#include <string_view>
#include <vector>

#include "models/shape/dit_config.h"
#include "models/shape/sampler.h"
#include "models/shape/step_cache.h"

namespace gen3d::models {

class Hunyuan3DDiT;

struct StudyMethod {
  std::string label;  // "teacache 0.1"
  StepCacheConfig config;
};

struct StudyOptions {
  SamplerOptions sampler;    // steps, guidance, schedule
  int latent_tokens = 3072;  // L of the latents [B, L, in_channels]
  std::uint64_t seed = 0;    // noise seed (same for every method)
  int repeats = 1;           // timing: best of `repeats` runs
};

struct StudyRow {
  std::string label;
  CacheReport report;       // of the last repeat
  int dit_evaluations = 0;  // FULL steps (every block computed)
  double seconds = 0.0;     // best wall time of the sampling loop
  double speedup = 1.0;     // baseline seconds / seconds
  double eval_ratio = 1.0;  // dit_evaluations / baseline's
  double rel_l2 = 0.0;      // ||x - x_nocache|| / ||x_nocache|| of the final latents
};

// Row 0 is always the NoCache baseline (measured in the same call); then one row per method.
std::vector<StudyRow> run_cache_study(const Hunyuan3DDiT& model, const Tensor& cond,
                                      const std::vector<StudyMethod>& methods,
                                      const StudyOptions& options);

// The spec's default of each method plus the recipe's benchmark anchors (FBCache 0.05,
// TaylorSeer order 1 interval 4, ...).
std::vector<StudyMethod> default_study_methods();

// Random-weight DiT setups for studies without official weights (sizes chosen for a few-core CPU):
// "mid": H 256, 4 heads, 2 double + 4 single blocks, L 384 latent tokens, 96 context tokens;
// "small": H 128, 2 + 2 blocks, L 128, 32 context tokens. Throws on an unknown name.
struct RandomStudySetup {
  DiTConfig config;
  int latent_tokens = 0;
  int context_tokens = 0;
};
RandomStudySetup random_study_setup(std::string_view preset);
// The random DiT of a study: Hunyuan3DDiT::random with a band-limited time embedding (time_in only
// sees sinusoid features whose argument spans <= ~10 rad over t in [0, 1]), so that, like a trained
// model and unlike raw random weights, its output changes smoothly from step to step.
std::shared_ptr<const Hunyuan3DDiT> study_random_dit(const DiTConfig& config, std::uint64_t seed);
// Seeded N(0, 1) condition tokens [batch, tokens, context_in_dim].
Tensor random_condition(const DiTConfig& config, int batch, int tokens, std::uint64_t seed);

// The condition tokens stored in `path`: the tensor `name`, else the file's only tensor, else
// "in.cond_context"; [Lc, C] becomes one condition [1, Lc, C].
Tensor read_condition(const std::string& path, const std::string& name = {});

// The default methods whose method name is in `names` ("fbcache", "teacache", "taylorseer" or
// "all"; empty: all). Throws ModelError on an unknown name.
std::vector<StudyMethod> select_study_methods(const std::vector<std::string>& names);

// The comparison as an aligned text table (one row per method) and as a JSON array.
std::string study_table(const std::vector<StudyRow>& rows);
std::string study_json(const std::vector<StudyRow>& rows);

}  // namespace gen3d::models
