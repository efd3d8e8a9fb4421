#include "models/shape/cache_study.h"

#include <chrono>

#include <fmt/format.h>
#include <cmath>
#include <limits>
#include <nlohmann/json.hpp>

#include "models/core/error.h"
#include "models/core/safetensors.h"
#include "models/nn/init.h"
#include "models/shape/dit.h"

namespace gen3d::models {

namespace {

double rel_l2(const Tensor& a, const Tensor& ref) {
  double num = 0.0, den = 0.0;
  for (std::int64_t i = 0; i < ref.numel(); ++i) {
    const double d = static_cast<double>(a.data()[i]) - ref.data()[i];
    num += d * d;
    den += static_cast<double>(ref.data()[i]) * ref.data()[i];
  }
  return std::sqrt(num / std::max(den, 1e-300));
}

// One timed run of `m`; keeps the best time in `row`.
void run_once(const Hunyuan3DDiT& model, const Tensor& cond, const StudyMethod& m,
              const StudyOptions& o, StudyRow& row, Tensor& final_latents) {
  const Shape shape{cond.dim(0), o.latent_tokens, model.config().in_channels};
  auto cache = make_step_cache(m.config);
  Tensor noise = nn::gaussian_noise(shape, o.seed);
  const auto t0 = std::chrono::steady_clock::now();
  final_latents = sample(model, o.sampler, cache.get(), std::move(noise), cond);
  const double s = std::chrono::duration<double>(std::chrono::steady_clock::now() - t0).count();
  row.seconds = std::min(row.seconds, s);
  row.report = cache->report();
  row.dit_evaluations = row.report.full;
}

}  // namespace

std::vector<StudyRow> run_cache_study(const Hunyuan3DDiT& model, const Tensor& cond,
                                      const std::vector<StudyMethod>& methods,
                                      const StudyOptions& options) {
  std::vector<StudyMethod> all{{"none", {}}};
  for (const StudyMethod& m : methods)
    if (m.config.method != CacheMethod::kNone) all.push_back(m);  // the baseline is row 0
  std::vector<StudyRow> rows(all.size());
  std::vector<Tensor> latents(all.size());
  for (std::size_t k = 0; k < all.size(); ++k) {
    rows[k].label = all[k].label;
    rows[k].seconds = std::numeric_limits<double>::infinity();
  }
  // Rounds over all methods (rather than repeats per method), so that load from other processes
  // on a shared machine hits every method alike; each keeps its best time.
  for (int r = 0; r < std::max(1, options.repeats); ++r)
    for (std::size_t k = 0; k < all.size(); ++k)
      run_once(model, cond, all[k], options, rows[k], latents[k]);
  const StudyRow& base = rows.front();
  for (std::size_t k = 0; k < rows.size(); ++k) {
    StudyRow& r = rows[k];
    r.rel_l2 = k == 0 ? 0.0 : rel_l2(latents[k], latents[0]);
    r.speedup = base.seconds / r.seconds;
    r.eval_ratio = base.dit_evaluations > 0
                       ? static_cast<double>(r.dit_evaluations) / base.dit_evaluations
                       : 1.0;
  }
  return rows;
}

std::vector<StudyMethod> default_study_methods() {
  std::vector<StudyMethod> m;
  StepCacheConfig c;
  c.method = CacheMethod::kFBCache;
  m.push_back({"fbcache 0.025 (default)", c});
  c.fbcache.rel_l1_thresh = 0.05;
  m.push_back({"fbcache 0.05", c});
  c = {};
  c.method = CacheMethod::kTeaCache;
  m.push_back({"teacache 0.1 (default)", c});
  c.teacache.rel_l1_thresh = 0.2;
  m.push_back({"teacache 0.2", c});
  c = {};
  c.method = CacheMethod::kTaylorSeer;
  m.push_back({"taylorseer n3 K4 (default)", c});
  c.taylorseer.n_derivatives = 1;
  c.taylorseer.warmup = 3;
  c.taylorseer.cutoff_steps = 0;
  m.push_back({"taylorseer n1 K4 W3 C0", c});
  c.taylorseer.image_rows_only = true;
  m.push_back({"taylorseer n1 K4 W3 C0 lean", c});
  return m;
}

RandomStudySetup random_study_setup(std::string_view preset) {
  RandomStudySetup s;
  DiTConfig& c = s.config;
  c.in_channels = 64;
  c.mlp_ratio = 4.0;
  if (preset == "mid") {
    c.context_in_dim = 256;
    c.hidden_size = 256;
    c.num_heads = 4;
    c.depth = 2;
    c.depth_single_blocks = 4;
    c.axes_dim = {64};
    s.latent_tokens = 384;
    s.context_tokens = 96;
  } else if (preset == "small") {
    c.context_in_dim = 64;
    c.hidden_size = 128;
    c.num_heads = 4;
    c.depth = 2;
    c.depth_single_blocks = 2;
    c.axes_dim = {32};
    s.latent_tokens = 128;
    s.context_tokens = 32;
  } else {
    throw ModelError("unknown random DiT preset \"" + std::string(preset) +
                     "\" (use mid or small)");
  }
  return s;
}

std::shared_ptr<const Hunyuan3DDiT> study_random_dit(const DiTConfig& config, std::uint64_t seed) {
  // Feature i of the 256-d embedding is cos / sin(1000 t f_i), f_i = 1000^(-i / 128); keep those
  // with 1000 f_i <= 10 (i >= 128 * ln(100) / ln(1000), about 86).
  const int half = 128;
  const int first_kept = static_cast<int>(
      std::ceil(half * std::log(config.time_factor / 10.0) / std::log(config.time_factor)));
  auto adjust = [&](const std::string& name, Tensor& w) {
    if (name != "time_in.in_layer.weight" && name != "guidance_in.in_layer.weight") return;
    for (std::int64_t r = 0; r < w.dim(0); ++r)
      for (int i = 0; i < first_kept; ++i) {
        w.at(r, i) = 0.0f;         // cos features
        w.at(r, half + i) = 0.0f;  // sin features
      }
  };
  return std::make_shared<const Hunyuan3DDiT>(
      Hunyuan3DDiT::random(config, seed, DiTOptions{}, adjust));
}

Tensor random_condition(const DiTConfig& config, int batch, int tokens, std::uint64_t seed) {
  return nn::gaussian_noise({batch, tokens, config.context_in_dim}, seed);
}

Tensor read_condition(const std::string& path, const std::string& name) {
  const auto file = SafetensorsFile::open(path);
  std::string tensor = name;
  if (tensor.empty()) {
    if (file->tensors().size() == 1)
      tensor = file->tensors().front().name;
    else if (file->find("in.cond_context"))
      tensor = "in.cond_context";
    else
      throw ModelError(path + " holds several tensors: name the condition tensor");
  }
  if (!file->find(tensor)) throw ModelError("no tensor \"" + tensor + "\" in " + path);
  Tensor t = file->to_f32(tensor);
  if (t.rank() == 2) t = t.reshaped({1, t.dim(0), t.dim(1)}).clone();
  return t;
}

std::vector<StudyMethod> select_study_methods(const std::vector<std::string>& names) {
  std::vector<StudyMethod> methods;
  for (auto& m : default_study_methods()) {
    bool wanted = names.empty();
    for (const auto& name : names)
      if (name == "all" || parse_cache_method(name) == m.config.method) wanted = true;
    if (wanted) methods.push_back(std::move(m));
  }
  return methods;
}

std::string study_table(const std::vector<StudyRow>& rows) {
  std::string out = fmt::format("{:<30} {:>6} {:>6} {:>6} {:>6} {:>10} {:>8} {:>8} {:>11} {:>9}\n",
                                "method", "full", "skip", "pred", "elided", "wall s", "speedup",
                                "evals", "rel L2", "cache MiB");
  for (const auto& r : rows)
    out += fmt::format(
        "{:<30} {:>6} {:>6} {:>6} {:>6} {:>10.3f} {:>7.2f}x {:>8.3f} {:>11.3e} {:>9.1f}\n", r.label,
        r.report.full, r.report.skipped, r.report.predicted, r.report.elided, r.seconds, r.speedup,
        r.eval_ratio, r.rel_l2, static_cast<double>(r.report.peak_bytes) / (1 << 20));
  return out;
}

std::string study_json(const std::vector<StudyRow>& rows) {
  nlohmann::json out = nlohmann::json::array();
  for (const auto& r : rows)
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
  return out.dump(2) + "\n";
}

}  // namespace gen3d::models
