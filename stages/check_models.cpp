// check_models: what a model folder holds, or every tensor of one weights file, without running
// any network.

#include <filesystem>
#include <memory>

#include <fmt/format.h>
#include <nlohmann/json.hpp>

#include "models/model_folder.h"
#include "stages/register.h"
#include "stages/types.h"

namespace gen3d::stages {
namespace {

using pipeline::StageContext;
using pipeline::StageContract;

class CheckModels final : public pipeline::Stage {
 public:
  StageContract contract() const override {
    return StageContract("check_models",
                         "What a model folder holds: the official networks, their files, dtypes, "
                         "parameters, memory at each precision, and missing or mis-shaped "
                         "tensors; for one weights file (.safetensors or .bin), every tensor with "
                         "the float64 sum and absolute sum of its stored values. Nothing is run.")
        .output<TextReport>("report", "the report (text, or JSON lines for a file with json)")
        .required<std::string>("path", "a model folder, or one weights file")
        .cache_policy(pipeline::CachePolicy::Never)
        .param<bool>("json", false, "a weights file: one JSON object per tensor");
  }
  void run(StageContext& ctx) const override {
    const std::string path = ctx.param<std::string>("path");
    std::string text;
    if (std::filesystem::is_directory(path)) {
      const auto checks = models::check_model_folder(path);
      double problems = 0;
      for (const auto& c : checks) problems += static_cast<double>(c.problems.size());
      ctx.count("check.problems", problems);
      text = models::format_model_check(checks);
    } else {
      const bool json = ctx.param<bool>("json");
      for (const auto& t : models::summarize_weights(path))
        text +=
            json ? nlohmann::json{{"name", t.name},
                                  {"dtype", t.dtype},
                                  {"shape", t.shape},
                                  {"sum", t.sum},
                                  {"abs_sum", t.abs_sum}}
                           .dump() +
                       "\n"
                 : fmt::format("{:<60} {:<5} {:<20} sum {:.9g} abs_sum {:.9g}\n", t.name, t.dtype,
                               fmt::format("{}", fmt::join(t.shape, "x")), t.sum, t.abs_sum);
      ctx.count("check.problems", 0);
    }
    ctx.out("report", std::make_shared<TextReport>(TextReport{text}));
  }
};

}  // namespace

void register_check_models(pipeline::Registry& registry) {
  registry.add<CheckModels>();
}

}  // namespace gen3d::stages
