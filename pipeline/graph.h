#pragma once
// Graph: a pipeline config checked against the stage contracts and ordered as a DAG.

#include <optional>
#include <string>
#include <vector>

#include "pipeline/config.h"
#include "pipeline/stage.h"

namespace gen3d::pipeline {

struct Edge {
  std::string port;       // input port of the consuming node
  size_t from = 0;        // producing node index
  std::string from_port;  // output port of the producer
};

struct GraphNode {
  std::string id;
  const Stage* stage = nullptr;
  const StageContract* contract = nullptr;
  ParamMap params;             // every declared parameter, defaults filled in, $vars resolved
  std::vector<Edge> inputs;    // one per connected input port
  std::vector<size_t> after;   // distinct producer indices
  std::vector<size_t> before;  // distinct consumer indices
  size_t config_index = 0;     // position in the config's "nodes"
};

struct Graph {
  std::string name;
  std::vector<GraphNode> nodes;
  std::vector<size_t> order;  // a topological order

  // Graphviz dot: one box per node (id + stage), one labelled arrow per edge.
  std::string to_dot() const;
};

// Validates the whole config against the registry and returns the graph, or throws ConfigError
// with every problem found (unknown stage/port/param, type mismatch, range, duplicate id, cycle,
// unresolved $variable, stage-specific checks), each with its JSON pointer and node id.
Graph build_graph(const PipelineConfig& config, const Registry& registry);

// Converts one JSON value to a parameter's type, checking range and choices. Returns the error
// sentence ("expected integer 64..16384, got \"2k\"") or nothing on success.
std::optional<std::string> convert_param(const ParamSpec& spec, const nlohmann::json& value,
                                         ParamValue& out);

}  // namespace gen3d::pipeline
