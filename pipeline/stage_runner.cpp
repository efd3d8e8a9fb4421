#include "pipeline/stage_runner.h"

#include <fmt/format.h>

#include "pipeline/error.h"
#include "pipeline/graph.h"

namespace gen3d::pipeline {

StageRunner::StageRunner(const Stage& stage) : stage_(stage), contract_(stage.contract()) {
  for (const ParamSpec& spec : contract_.params)
    if (spec.default_value) params_[spec.name] = *spec.default_value;
}

StageRunner& StageRunner::param(const std::string& name, const nlohmann::json& value) {
  const ParamSpec* spec = contract_.find_param(name);
  const std::string path = fmt::format("/params/{}", name);
  if (!spec)
    throw ConfigError(
        contract_.name,
        {Problem{path, "", fmt::format("stage {} has no parameter \"{}\"", contract_.name, name)}});
  ParamValue converted;
  if (auto err = convert_param(*spec, value, converted))
    throw ConfigError(contract_.name, {Problem{path, "", *err}});
  params_[name] = std::move(converted);
  return *this;
}

void StageRunner::run() {
  std::vector<Problem> problems;
  for (const ParamSpec& spec : contract_.params)
    if (!params_.count(spec.name))
      problems.push_back(
          {"/params", "", fmt::format("missing required parameter \"{}\"", spec.name)});
  if (problems.empty()) {
    std::vector<std::string> found;
    stage_.check(params_, found);
    for (std::string& m : found) problems.push_back({"/params", "", std::move(m)});
  }
  if (!problems.empty()) throw ConfigError(contract_.name, std::move(problems));
  outputs_.clear();
  StageContext::Wiring w;
  w.node_id = contract_.name;
  w.contract = &contract_;
  w.inputs = inputs_;
  w.params = &params_;
  w.outputs = &outputs_;
  w.profiler = &profiler_;
  w.shared = &shared_;
  StageContext ctx(std::move(w));
  stage_.run(ctx);
}

}  // namespace gen3d::pipeline
