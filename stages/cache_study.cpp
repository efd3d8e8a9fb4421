// cache_study: NoCache and every step cache on the same DiT, condition and noise; the comparison
// table (full DiT evaluations, wall time, speed-up, error of the final latents) as text and JSON.

#include <filesystem>
#include <memory>

#include <fmt/format.h>
#include <spdlog/spdlog.h>

#include "io/atomic_file.h"
#include "models/shape/cache_study.h"
#include "models/shape/checkpoints.h"
#include "models/shape/dit.h"
#include "stages/register.h"
#include "stages/shared.h"
#include "stages/types.h"

namespace gen3d::stages {
namespace {

using pipeline::Range;
using pipeline::StageContext;
using pipeline::StageContract;

class CacheStudy final : public pipeline::Stage {
 public:
  StageContract contract() const override {
    return StageContract("cache_study",
                         "Run NoCache and each step cache (FBCache, TeaCache, TaylorSeer) on the "
                         "same DiT, condition and noise seed; report full DiT evaluations, wall "
                         "time, speed-up and the relative L2 error of the final latents.")
        .model_class()
        .cache_policy(pipeline::CachePolicy::Never)  // it measures time
        .output<TextReport>("table", "the comparison, one row per method (NoCache first)")
        .param<std::string>("model", "", "DiT weights: .safetensors file or model directory")
        .param<std::string>("config", "",
                            "model config, YAML or JSON (default: next to the weights)")
        .choice("random_config", "none", {"none", "mid", "small"},
                "a random DiT with a band-limited time embedding instead of weights")
        .param<std::string>("cond", "",
                            "condition tokens (.safetensors), [B, Lc, C] or [Lc, C] (default "
                            "with random_config: seeded random tokens)")
        .param<std::string>("cond_name", "",
                            "tensor name in cond (default: its only tensor, or in.cond_context)")
        .param<int>("steps", 50, Range{1, 1000}, "denoising steps")
        .param<double>("guidance", 5.0, Range{-1, 100}, "classifier-free guidance scale")
        .param<int64_t>("seed", 0, Range{0, 9007199254740992.0},
                        "noise seed (the random condition uses seed + 1)")
        .param<int>("latent_tokens", 0, Range{0, 1 << 20},
                    "latent tokens L (0: 3072, or the random preset's)")
        .param<int>("repeats", 1, Range{1, 100}, "timing rounds (the best is kept)")
        .param<std::vector<std::string>>("methods", std::vector<std::string>{},
                                         "fbcache, teacache, taylorseer or all (empty: all)")
        .param<std::string>("json", "", "also write the rows to this JSON file");
  }
  void check(const pipeline::ParamMap& p, std::vector<std::string>& problems) const override {
    const auto& model = std::get<std::string>(p.at("model"));
    const bool random = std::get<std::string>(p.at("random_config")) != "none";
    if (model.empty() == !random)
      problems.push_back("give exactly one of \"model\" and \"random_config\"");
    if (!model.empty() && std::get<std::string>(p.at("cond")).empty())
      problems.push_back("\"model\" needs \"cond\": the condition tokens of the study");
    const auto& cond = std::get<std::string>(p.at("cond"));
    if (!cond.empty() && !std::filesystem::is_regular_file(cond))
      problems.push_back("condition file not found: " + cond);
    for (const auto& name : std::get<std::vector<std::string>>(p.at("methods"))) {
      if (name == "all") continue;
      try {
        models::parse_cache_method(name);
      } catch (const std::exception& e) {
        problems.push_back(e.what());
      }
    }
    const auto& json = std::get<std::string>(p.at("json"));
    if (!json.empty()) check_output_path(json, problems);
  }
  void run(StageContext& ctx) const override {
    models::StudyOptions options;
    options.seed = static_cast<std::uint64_t>(ctx.param<int64_t>("seed"));
    options.repeats = ctx.param<int>("repeats");
    options.sampler.steps = ctx.param<int>("steps");
    options.sampler.guidance_scale = ctx.param<double>("guidance");
    const int latent_tokens = ctx.param<int>("latent_tokens");
    options.latent_tokens = latent_tokens > 0 ? latent_tokens : 3072;
    const std::string random = ctx.param<std::string>("random_config");
    const std::string cond_path = ctx.param<std::string>("cond");

    std::string header;
    std::shared_ptr<const models::Hunyuan3DDiT> model;
    models::Tensor cond;
    {
      auto span = ctx.span("load model");
      if (random != "none") {
        const auto setup = models::random_study_setup(random);
        model = models::study_random_dit(setup.config, 1234);
        if (latent_tokens <= 0) options.latent_tokens = setup.latent_tokens;
        cond =
            cond_path.empty()
                ? models::random_condition(setup.config, 1, setup.context_tokens, options.seed + 1)
                : models::read_condition(cond_path, ctx.param<std::string>("cond_name"));
        header = fmt::format(
            "random DiT \"{}\" with a band-limited time embedding (no trained weights)\n", random);
      } else {
        model = models::shared_dit(models::resolve_checkpoint(ctx.param<std::string>("model"),
                                                              ctx.param<std::string>("config")));
        cond = models::read_condition(cond_path, ctx.param<std::string>("cond_name"));
      }
    }
    const auto& c = model->config();
    header += fmt::format(
        "cache study: DiT H {} ({} + {} blocks, {} params), latents [{}, {}, {}], condition {}, "
        "{} steps, guidance {}, seed {}\n",
        c.hidden_size, c.depth, c.depth_single_blocks, model->num_parameters(), cond.dim(0),
        options.latent_tokens, c.in_channels, cond.shape().str(), options.sampler.steps,
        options.sampler.guidance_scale, options.seed);
    for (size_t start = 0, end; (end = header.find('\n', start)) != std::string::npos;
         start = end + 1)
      spdlog::info("{}: {}", ctx.node_id(), header.substr(start, end - start));

    const auto methods =
        models::select_study_methods(ctx.param<std::vector<std::string>>("methods"));
    const auto rows = models::run_cache_study(*model, cond, methods, options);
    const std::string json = ctx.param<std::string>("json");
    if (!json.empty()) {
      make_output_dir(json);
      io::write_file_atomically(json, models::study_json(rows));
    }
    ctx.out("table", std::make_shared<TextReport>(TextReport{header + models::study_table(rows)}));
  }
};

}  // namespace

void register_cache_study(pipeline::Registry& registry) {
  registry.add<CacheStudy>();
}

}  // namespace gen3d::stages
