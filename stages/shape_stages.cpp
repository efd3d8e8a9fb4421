// Shape-generation stages: tensors in and out of safetensors files, and `denoise` (flow-matching
// sampling with CFG and a step cache on the Hunyuan3D DiT).

#include <filesystem>
#include <limits>

#include <fmt/format.h>
#include <spdlog/spdlog.h>

#include "models/core/error.h"
#include "models/core/precision.h"
#include "models/core/safetensors.h"
#include "models/nn/init.h"
#include "models/shape/checkpoints.h"
#include "models/shape/dit.h"
#include "models/shape/sampler.h"
#include "models/shape/step_cache.h"
#include "stages/register.h"
#include "stages/shared.h"
#include "stages/types.h"

namespace gen3d::stages {
namespace {

using models::Tensor;
using pipeline::ParamMap;
using pipeline::Range;
using pipeline::StageContext;
using pipeline::StageContract;

template <class T>
T get(const ParamMap& p, const char* name) {
  const auto& v = p.at(name);
  if constexpr (std::is_same_v<T, std::string> || std::is_same_v<T, bool> ||
                std::is_same_v<T, std::vector<double>>)
    return std::get<T>(v);
  else if constexpr (std::is_integral_v<T>)
    return static_cast<T>(std::get<int64_t>(v));
  else
    return static_cast<T>(std::get<double>(v));
}

class LoadTensor final : public pipeline::Stage {
 public:
  StageContract contract() const override {
    return StageContract("load_tensor",
                         "Read one tensor (widened to float32) from a .safetensors file.")
        .output<Tensor>("tensor")
        .required<std::string>("path", ".safetensors file")
        .required<std::string>("name", "tensor name inside the file")
        .cache_policy(pipeline::CachePolicy::Never)
        .reads_files("path");
  }
  void check(const ParamMap& params, std::vector<std::string>& problems) const override {
    const auto path = get<std::string>(params, "path");
    if (!std::filesystem::is_regular_file(path))
      problems.push_back("tensor file not found: " + path);
  }
  void run(StageContext& ctx) const override {
    const auto file = models::SafetensorsFile::open(ctx.param<std::string>("path"));
    const auto name = ctx.param<std::string>("name");
    if (!file->find(name))
      throw models::ModelError("no tensor \"" + name + "\" in " + file->path());
    auto t = std::make_shared<Tensor>(file->to_f32(name));
    spdlog::debug("{}: {} {}", ctx.node_id(), name, t->shape().str());
    ctx.out("tensor", std::move(t));
  }
};

class SaveTensor final : public pipeline::Stage {
 public:
  StageContract contract() const override {
    return StageContract("save_tensor", "Write a tensor to a .safetensors file (float32).")
        .input<Tensor>("tensor")
        .required<std::string>("path", "output file; missing directories are created")
        .param<std::string>("name", "latents", "tensor name inside the file");
  }
  void check(const ParamMap& params, std::vector<std::string>& problems) const override {
    check_output_path(get<std::string>(params, "path"), problems);
  }
  void run(StageContext& ctx) const override {
    auto t = ctx.in<Tensor>("tensor");
    const auto path = ctx.param<std::string>("path");
    make_output_dir(path);
    const std::string tmp = path + ".tmp";
    models::write_safetensors(tmp, {{ctx.param<std::string>("name"), t.get()}});
    std::filesystem::rename(tmp, path);  // never a half-written file
    spdlog::info("{}: wrote {} {}", ctx.node_id(), path, t->shape().str());
  }
};

// Parameter readers over a validated ParamMap (check) or the stage context (run).
struct FromMap {
  const ParamMap& p;
  template <class T>
  T get(const char* n) const {
    return stages::get<T>(p, n);
  }
};
struct FromCtx {
  const StageContext& c;
  template <class T>
  T get(const char* n) const {
    return c.param<T>(n);
  }
};

template <class P>
models::StepCacheConfig cache_config(const P& p) {
  models::StepCacheConfig c;
  c.method = models::parse_cache_method(p.template get<std::string>("cache"));
  c.fbcache.rel_l1_thresh = p.template get<double>("fbcache_rel_l1_thresh");
  c.fbcache.last_computed = p.template get<std::string>("fbcache_reference") == "last_computed";
  c.fbcache.compare_residual = p.template get<std::string>("fbcache_compare") == "residual";
  c.teacache.rel_l1_thresh = p.template get<double>("teacache_rel_l1_thresh");
  c.teacache.warmup = p.template get<int>("teacache_warmup");
  c.teacache.coefficients = p.template get<std::vector<double>>("teacache_coefficients");
  c.taylorseer.n_derivatives = p.template get<int>("taylorseer_n_derivatives");
  c.taylorseer.skip_interval_steps = p.template get<int>("taylorseer_skip_interval_steps");
  c.taylorseer.warmup = p.template get<int>("taylorseer_warmup");
  c.taylorseer.cutoff_steps = p.template get<int>("taylorseer_cutoff_steps");
  c.taylorseer.image_rows_only = p.template get<bool>("taylorseer_image_rows_only");
  return c;
}

class Denoise final : public pipeline::Stage {
 public:
  StageContract contract() const override {
    const models::TeaCacheOptions tea;
    const models::TaylorSeerOptions ts;
    StageContract c("denoise",
                    "Flow-matching sampling (Euler, CFG [cond; uncond]) of shape latents with "
                    "the Hunyuan3D DiT and an optional step cache (FBCache, TeaCache or "
                    "TaylorSeer).");
    c.model_class()
        .reads_files("model", true)
        .reads_files("config")
        .input<Tensor>("cond", "condition tokens [B, Lc, context_in_dim]")
        .optional_input<Tensor>("uncond", "unconditional tokens (default: zeros, as official)")
        .optional_input<Tensor>("noise", "initial latents [B, L, C] (default: seeded noise)")
        .output<Tensor>("latents", "final latents [B, L, in_channels]")
        .required<std::string>("model", "DiT weights: .safetensors file or model directory")
        .param<std::string>("config", "",
                            "config.yaml or JSON config (default: config.json, else config.yaml, "
                            "next to the weights)")
        .param<std::string>("config_section", "model", "section of the config with the DiT params")
        .choice("weights", "f32", {"f32", "f16"}, "in-memory dtype of Linear weights (fp32)")
        .choice("precision", "auto", {"auto", "fp32", "bf16", "int8"},
                "network precision: bf16 (bf16 weights and GEMM / convolution operands, float32 "
                "accumulation, norms and state) or fp32; int8: bf16 with the attention and MLP "
                "products in int8 (per-channel weight and per-token activation scales); auto: "
                "bf16 where the CPU has AVX512-BF16 or AMX")
        .keys_by("precision", resolved_precision)
        .param<int>("steps", 50, Range{1, 1000}, "denoising steps N")
        .param<double>("guidance_scale", 5.0, Range{-1, 100},
                       "CFG scale s (CFG iff s >= 0 and no guidance embedding)")
        .param<int>("seed", 0, Range{0, 2147483647}, "noise seed (when no noise input)")
        .param<int>("latent_tokens", 3072, Range{1, 1 << 20}, "L of the latents (VAE num_latents)")
        .choice("schedule", "auto", {"auto", "flow", "consistency"},
                "timestep table; auto: the config's scheduler section (consistency for the turbo "
                "models), flow without one")
        .param<int>("pcm_timesteps", 100, Range{1, 1000},
                    "consistency schedule grid (auto: the config's)")
        .param<bool>("elide_zero_dt_steps", true, "skip the DiT call of a dt = 0 step (exact)")
        .choice("cache", "none", {"none", "fbcache", "teacache", "taylorseer"}, "step cache")
        .param<double>("fbcache_rel_l1_thresh", 0.025, Range{0, 10}, "FBCache threshold tau")
        .choice("fbcache_reference", "previous_step", {"previous_step", "last_computed"},
                "FBCache reference (CANN / ParaAttention)")
        .choice("fbcache_compare", "output", {"output", "residual"},
                "FBCache compares block 0's output or residual")
        .param<double>("teacache_rel_l1_thresh", tea.rel_l1_thresh, Range{0, 10},
                       "TeaCache threshold on the accumulated rescaled change")
        .param<int>("teacache_warmup", tea.warmup, Range{0, 1000}, "forced FULL steps at both ends")
        .param<std::vector<double>>("teacache_coefficients", tea.coefficients,
                                    "rescale polynomial, highest degree first")
        .param<int>("taylorseer_n_derivatives", ts.n_derivatives, Range{0, 8}, "Taylor order n")
        .param<int>("taylorseer_skip_interval_steps", ts.skip_interval_steps, Range{1, 100},
                    "compute interval K")
        .param<int>("taylorseer_warmup", ts.warmup, Range{1, 1000}, "leading FULL steps W")
        .param<int>("taylorseer_cutoff_steps", ts.cutoff_steps, Range{0, 1000},
                    "trailing FULL steps C")
        .param<bool>("taylorseer_image_rows_only", false,
                     "keep no condition-stream factors (same result, ~30 % less memory)");
    add_device_param(c);
    return c;
  }

  void check(const ParamMap& params, std::vector<std::string>& problems) const override {
    check_device(params, problems);
    try {
      for (const auto& p : cache_config(FromMap{params}).problems()) problems.push_back(p);
    } catch (const std::exception& e) {
      problems.push_back(e.what());
    }
    const auto model = get<std::string>(params, "model");
    try {
      const auto src = models::resolve_checkpoint(model, get<std::string>(params, "config"));
      if (get<std::string>(params, "schedule") == "auto") models::scheduler_of(src.config);
    } catch (const std::exception& e) {
      problems.push_back(e.what());
    }
  }

  void run(StageContext& ctx) const override {
    models::CheckpointSource src = models::resolve_checkpoint(ctx.param<std::string>("model"),
                                                              ctx.param<std::string>("config"));
    src.section = ctx.param<std::string>("config_section");
    src.storage = models::storage_for(models::parse_precision(ctx.param<std::string>("precision")),
                                      ctx.param<std::string>("weights") == "f16"
                                          ? models::WeightStorage::kF16
                                          : models::WeightStorage::kF32);
    src.device = node_device(ctx);
    std::shared_ptr<const models::ShapeDenoiser> model;
    {
      auto span = ctx.span("load model");
      model = models::shared_denoiser(src);  // once per process; 2.0 or 2.1 by its config
    }
    auto cache = models::make_step_cache(cache_config(FromCtx{ctx}));

    models::SamplerOptions o;
    o.steps = ctx.param<int>("steps");
    o.guidance_scale = ctx.param<double>("guidance_scale");
    const auto schedule = ctx.param<std::string>("schedule");
    o.schedule = schedule == "consistency" ? models::ScheduleKind::kConsistency
                                           : models::ScheduleKind::kFlowMatch;
    o.pcm_timesteps = ctx.param<int>("pcm_timesteps");
    if (schedule == "auto")
      if (const auto s = models::scheduler_of(src.config)) {  // as the official pipeline loads it
        o.schedule = s->kind;
        o.pcm_timesteps = s->pcm_timesteps;
        o.num_train_timesteps = s->num_train_timesteps;
        o.shift = s->shift;
      }
    o.elide_zero_dt_steps = ctx.param<bool>("elide_zero_dt_steps");

    auto cond = ctx.in<Tensor>("cond");
    std::shared_ptr<const Tensor> uncond;
    if (ctx.has_input("uncond")) uncond = ctx.in<Tensor>("uncond");
    Tensor noise;
    if (ctx.has_input("noise")) {
      noise = ctx.in<Tensor>("noise")->clone();
    } else {
      if (cond->rank() != 3)
        throw models::ModelError("denoise: cond must be [B, Lc, C], got " + cond->shape().str());
      noise = models::nn::gaussian_noise(
          {cond->dim(0), ctx.param<int>("latent_tokens"), model->latent_channels()},
          static_cast<std::uint64_t>(ctx.param<int>("seed")));
    }

    const DeviceTrace device_trace(ctx, src.device);  // the GPU's work, in a trace
    models::FlowMatchSampler sampler(*model, o, cache.get());
    sampler.start(std::move(noise), *cond, uncond.get());
    while (!sampler.done()) {
      ctx.throw_if_cancelled();
      auto span = ctx.span(fmt::format("step {}", sampler.step_index()));
      const models::StepDecision d = sampler.step();
      if (d == models::StepDecision::kSkip) ctx.count("denoise.steps_skipped");
      if (d == models::StepDecision::kPredict) ctx.count("denoise.steps_predicted");
      if (d == models::StepDecision::kElided) ctx.count("denoise.steps_elided");
      if (d == models::StepDecision::kFull) ctx.count("denoise.steps_full");
    }
    const models::CacheReport& r = cache->report();
    ctx.gauge("denoise.cache_peak_bytes", static_cast<double>(r.peak_bytes));
    ctx.gauge("denoise.skip_rate", r.skip_rate());
    spdlog::info(
        "{}: {} {} steps{}, cache {}: {} full, {} skipped, {} predicted, {} elided, "
        "{:.1f} MiB",
        ctx.node_id(), r.steps,
        o.schedule == models::ScheduleKind::kConsistency ? "consistency" : "flow-matching",
        sampler.cfg() ? " with CFG" : "", r.method, r.full, r.skipped, r.predicted, r.elided,
        static_cast<double>(r.peak_bytes) / (1 << 20));
    ctx.out("latents", std::make_shared<Tensor>(sampler.latents().clone()));
  }
};

}  // namespace

void register_shape_stages(pipeline::Registry& registry) {
  registry.add<LoadTensor>();
  registry.add<SaveTensor>();
  registry.add<Denoise>();
}

}  // namespace gen3d::stages
