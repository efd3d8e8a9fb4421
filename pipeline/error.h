#pragma once
// The runtime's error types. The CLI maps them to exit codes: ConfigError -> 2, anything else -> 1.

#include <stdexcept>
#include <string>
#include <vector>

namespace gen3d::pipeline {

// One thing wrong with a pipeline config, located by JSON pointer and node id.
struct Problem {
  std::string path;     // JSON pointer into the config, e.g. "/nodes/4/params/resolution"
  std::string node;     // node id, empty when the problem is not about one node
  std::string message;  // what is wrong, in one sentence

  std::string to_string() const;
};

// A config that cannot run. Carries every problem found, not just the first.
class ConfigError : public std::runtime_error {
 public:
  ConfigError(std::string source, std::vector<Problem> problems);
  explicit ConfigError(const std::string& message);
  const std::vector<Problem>& problems() const { return problems_; }

 private:
  std::vector<Problem> problems_;
};

// A stage failed while running; names the node and stage, keeps the cause's message.
class StageError : public std::runtime_error {
 public:
  StageError(std::string node, std::string stage, const std::string& cause);
  const std::string& node() const { return node_; }
  const std::string& stage() const { return stage_; }

 private:
  std::string node_;
  std::string stage_;
};

// The run was cancelled from outside (SIGINT) before it finished.
class Cancelled : public std::runtime_error {
 public:
  using std::runtime_error::runtime_error;
};

}  // namespace gen3d::pipeline
