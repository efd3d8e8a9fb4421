#include "pipeline/cli/cache_study.h"

#include <tbb/global_control.h>

#include <fstream>
#include <memory>
#include <optional>

#include <fmt/format.h>
#include <spdlog/spdlog.h>
#include <nlohmann/json.hpp>

#include "models/cache_study.h"
#include "models/dit.h"
#include "models/error.h"
#include "models/model_registry.h"
#include "models/safetensors.h"
#include "pipeline/atomic_file.h"
#include "pipeline/error.h"

namespace gen3d::cli {

namespace {

models::Tensor read_condition(const CacheStudyOptions& o) {
  const auto file = models::SafetensorsFile::open(o.cond);
  std::string name = o.cond_name;
  if (name.empty()) {
    if (file->tensors().size() == 1)
      name = file->tensors().front().name;
    else if (file->find("in.cond_context"))
      name = "in.cond_context";
    else
      throw pipeline::ConfigError(o.cond + " holds several tensors: name one with --cond-name");
  }
  if (!file->find(name)) throw pipeline::ConfigError("no tensor \"" + name + "\" in " + o.cond);
  models::Tensor t = file->to_f32(name);
  if (t.rank() == 2) t = t.reshaped({1, t.dim(0), t.dim(1)}).clone();  // one condition
  return t;
}

}  // namespace

int cmd_cache_study(const CacheStudyOptions& o) {
  if (o.model.empty() == o.random_config.empty())
    throw pipeline::ConfigError("cache-study: give exactly one of --model and --random-config");
  std::optional<tbb::global_control> threads;
  if (o.threads > 0)
    threads.emplace(tbb::global_control::max_allowed_parallelism,
                    static_cast<std::size_t>(o.threads));

  std::shared_ptr<const models::Hunyuan3DDiT> model;
  models::Tensor cond;
  models::StudyOptions so;
  so.seed = o.seed;
  so.repeats = o.repeats;
  so.sampler.steps = o.steps;
  so.sampler.guidance_scale = o.guidance;
  so.latent_tokens = o.latent_tokens > 0 ? o.latent_tokens : 3072;
  if (!o.random_config.empty()) {
    const auto setup = models::random_study_setup(o.random_config);
    model = models::study_random_dit(setup.config, 1234);
    if (o.latent_tokens <= 0) so.latent_tokens = setup.latent_tokens;
    cond = o.cond.empty()
               ? models::random_condition(setup.config, 1, setup.context_tokens, o.seed + 1)
               : read_condition(o);
  } else {
    if (o.cond.empty()) throw pipeline::ConfigError("cache-study: --cond is required with --model");
    model = models::shared_dit(models::resolve_dit_source(o.model, o.config));
    cond = read_condition(o);
  }

  std::vector<models::StudyMethod> methods;
  for (auto& m : models::default_study_methods()) {
    bool want = o.methods.empty();
    for (const auto& name : o.methods)
      if (name == "all" || models::parse_cache_method(name) == m.config.method) want = true;
    if (want) methods.push_back(std::move(m));
  }
  const auto& c = model->config();
  if (!o.random_config.empty())
    fmt::print("random DiT \"{}\" with a band-limited time embedding (no trained weights)\n",
               o.random_config);
  fmt::print(
      "cache study: DiT H {} ({} + {} blocks, {} params), latents [{}, {}, {}], condition {}, "
      "{} steps, guidance {}, seed {}\n",
      c.hidden_size, c.depth, c.depth_single_blocks, model->num_parameters(), cond.dim(0),
      so.latent_tokens, c.in_channels, cond.shape().str(), o.steps, o.guidance, o.seed);
  const auto rows = models::run_cache_study(*model, cond, methods, so);

  fmt::print("{:<30} {:>6} {:>6} {:>6} {:>6} {:>10} {:>8} {:>8} {:>11} {:>9}\n", "method", "full",
             "skip", "pred", "elided", "wall s", "speedup", "evals", "rel L2", "cache MiB");
  nlohmann::json out = nlohmann::json::array();
  for (const auto& r : rows) {
    fmt::print("{:<30} {:>6} {:>6} {:>6} {:>6} {:>10.3f} {:>7.2f}x {:>8.3f} {:>11.3e} {:>9.1f}\n",
               r.label, r.report.full, r.report.skipped, r.report.predicted, r.report.elided,
               r.seconds, r.speedup, r.eval_ratio, r.rel_l2,
               static_cast<double>(r.report.peak_bytes) / (1 << 20));
    out.push_back({{"method", r.label},
                   {"full", r.report.full},
                   {"skipped", r.report.skipped},
                   {"predicted", r.report.predicted},
                   {"elided", r.report.elided},
                   {"seconds", r.seconds},
                   {"speedup", r.speedup},
                   {"eval_ratio", r.eval_ratio},
                   {"rel_l2", r.rel_l2},
                   {"cache_peak_bytes", r.report.peak_bytes}});
  }
  if (!o.json_path.empty()) pipeline::write_file_atomic(o.json_path, out.dump(2) + "\n");
  return 0;
}

}  // namespace gen3d::cli
