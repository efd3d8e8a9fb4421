// Denoising-loop benchmark: a mid-size random DiT (models::random_study_setup("mid")), 50 and 100
// steps with CFG, NoCache baseline measured in the same run, then each step cache at the spec's
// defaults and at the CANN recipe's anchors (TeaCache 0.1: 1.86x, FBCache 0.05: 2.08x, TaylorSeer
// order 1 interval 4: 3.17x at 100 steps on an NPU with the real model). Prints one JSON document:
// per step count and method, wall time, speed-up, full-evaluation ratio, skip counts and the
// relative L2 error of the final latents against NoCache.
//
// Usage: gen3d_denoise_bench [preset=mid] [repeats=3] [steps...] (default steps: 50 100); each
// method keeps its best time over `repeats` rounds (rounds interleave the methods).

#include <tbb/info.h>

#include <algorithm>
#include <cstdio>
#include <cstdlib>
#include <string>
#include <vector>

#include <nlohmann/json.hpp>

#include "models/shape/cache_study.h"
#include "models/shape/dit.h"

int main(int argc, char** argv) {
  using namespace gen3d::models;
  const std::string preset = argc > 1 ? argv[1] : "mid";
  const int repeats = argc > 2 ? std::max(1, std::atoi(argv[2])) : 3;
  std::vector<int> step_counts;
  for (int i = 3; i < argc; ++i) step_counts.push_back(std::atoi(argv[i]));
  if (step_counts.empty()) step_counts = {50, 100};

  const RandomStudySetup setup = random_study_setup(preset);
  const auto model = study_random_dit(setup.config, 1234);
  const Tensor cond = random_condition(setup.config, 1, setup.context_tokens, 7);

  nlohmann::json doc;
  doc["model"] = {{"preset", preset},
                  {"hidden_size", setup.config.hidden_size},
                  {"double_blocks", setup.config.depth},
                  {"single_blocks", setup.config.depth_single_blocks},
                  {"parameters", model->num_parameters()},
                  {"latent_tokens", setup.latent_tokens},
                  {"context_tokens", setup.context_tokens},
                  {"cfg_batch", 2}};
  doc["threads"] = tbb::info::default_concurrency();
  doc["repeats"] = repeats;
  doc["runs"] = nlohmann::json::array();
  for (int steps : step_counts) {
    StudyOptions o;
    o.sampler.steps = steps;
    o.latent_tokens = setup.latent_tokens;
    o.seed = 12345;
    o.repeats = repeats;
    const auto rows = run_cache_study(*model, cond, default_study_methods(), o);
    nlohmann::json run{{"steps", steps}, {"methods", nlohmann::json::array()}};
    for (const auto& r : rows) {
      run["methods"].push_back({{"method", r.label},
                                {"baseline", r.label == "none"},
                                {"seconds", r.seconds},
                                {"speedup", r.speedup},
                                {"full_evaluations", r.dit_evaluations},
                                {"eval_ratio", r.eval_ratio},
                                {"skipped", r.report.skipped},
                                {"predicted", r.report.predicted},
                                {"elided", r.report.elided},
                                {"rel_l2_vs_nocache", r.rel_l2},
                                {"cache_peak_bytes", r.report.peak_bytes}});
      std::fprintf(stderr, "steps %3d  %-30s %8.3f s  %5.2fx  evals %5.3f  relL2 %.3e\n", steps,
                   r.label.c_str(), r.seconds, r.speedup, r.eval_ratio, r.rel_l2);
    }
    doc["runs"].push_back(std::move(run));
  }
  std::printf("%s\n", doc.dump(2).c_str());
  return 0;
}
