#pragma once
// Pipeline config: the JSON file users edit, plus --set overrides. Parsing checks structure only;
// pipeline/graph.h validates it against the stage contracts.

#include <map>
#include <string>
#include <utility>
#include <vector>

#include <nlohmann/json.hpp>

namespace gen3d::pipeline {

struct NodeConfig {
  std::string id;
  std::string stage;
  nlohmann::json params = nlohmann::json::object();
  std::vector<std::pair<std::string, std::string>> inputs;  // port -> "node.port", file order
  size_t index = 0;                                         // position in "nodes" (JSON pointers)
};

struct PipelineConfig {
  std::string source;  // file it came from, for messages ("" when built in memory)
  std::string name;
  nlohmann::json vars = nlohmann::json::object();
  std::vector<NodeConfig> nodes;
  // Values set by --set, keyed by JSON pointer: the override text, so messages can point at it.
  std::map<std::string, std::string> overridden;

  const NodeConfig* find_node(const std::string& id) const;
  nlohmann::json to_json() const;  // the effective config (after overrides), for --dump
};

// Structural parse of a config document. Throws ConfigError listing every structural problem.
// `config_dir` becomes the built-in variable `$config_dir`.
PipelineConfig parse_config(const nlohmann::json& doc, const std::string& source,
                            const std::string& config_dir = ".");

// Reads and parses a config file; a missing file or a JSON syntax error is a ConfigError.
PipelineConfig load_config(const std::string& path);

// Applies `--set key=value` overrides. `key` names a variable (`texture_size`) or a node parameter
// (`normals.resolution`). The value is JSON when it parses as JSON, else a plain string. Unknown
// variables or nodes, malformed items and type changes of variables are ConfigErrors (all at once).
void apply_overrides(PipelineConfig& config, const std::vector<std::string>& sets);

// JSON pointer escaping of one reference token ("a/b" -> "a~1b").
std::string pointer_token(const std::string& token);

}  // namespace gen3d::pipeline
