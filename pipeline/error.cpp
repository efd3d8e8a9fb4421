#include "pipeline/error.h"

namespace gen3d::pipeline {
namespace {

std::string join(const std::string& source, const std::vector<Problem>& problems) {
  std::string out =
      source.empty() ? std::string("invalid pipeline config") : "invalid pipeline config " + source;
  out += problems.size() == 1 ? " (1 problem):"
                              : " (" + std::to_string(problems.size()) + " problems):";
  for (const Problem& p : problems) out += "\n  " + p.to_string();
  return out;
}

}  // namespace

std::string Problem::to_string() const {
  std::string out = path.empty() ? std::string("/") : path;
  out += ": ";
  if (!node.empty()) out += "node \"" + node + "\": ";
  return out + message;
}

ConfigError::ConfigError(std::string source, std::vector<Problem> problems)
    : std::runtime_error(join(source, problems)), problems_(std::move(problems)) {}

ConfigError::ConfigError(const std::string& message)
    : std::runtime_error(message), problems_{Problem{"", "", message}} {}

StageError::StageError(std::string node, std::string stage, const std::string& cause)
    : std::runtime_error("node \"" + node + "\" (stage " + stage + ") failed: " + cause),
      node_(std::move(node)),
      stage_(std::move(stage)) {}

}  // namespace gen3d::pipeline
