#include "pipeline/config.h"

#include <algorithm>
#include <filesystem>
#include <fstream>
#include <sstream>

#include <fmt/format.h>

#include "pipeline/error.h"
#include "pipeline/stage.h"

namespace gen3d::pipeline {

using nlohmann::json;

std::string pointer_token(const std::string& token) {
  std::string out;
  for (char c : token) {
    if (c == '~')
      out += "~0";
    else if (c == '/')
      out += "~1";
    else
      out += c;
  }
  return out;
}

const NodeConfig* PipelineConfig::find_node(const std::string& id) const {
  for (const NodeConfig& n : nodes)
    if (n.id == id) return &n;
  return nullptr;
}

json PipelineConfig::to_json() const {
  json nodes_json = json::array();
  for (const NodeConfig& n : nodes) {
    json node = {{"id", n.id}, {"stage", n.stage}};
    if (!n.params.empty()) node["params"] = n.params;
    if (!n.inputs.empty()) {
      json inputs = json::object();
      for (const auto& [port, from] : n.inputs) inputs[port] = from;
      node["inputs"] = std::move(inputs);
    }
    nodes_json.push_back(std::move(node));
  }
  json vars_json = vars;
  vars_json.erase("config_dir");
  return json{{"name", name}, {"vars", vars_json}, {"nodes", std::move(nodes_json)}};
}

PipelineConfig parse_config(const json& doc, const std::string& source,
                            const std::string& config_dir) {
  std::vector<Problem> problems;
  PipelineConfig cfg;
  cfg.source = source;
  if (!doc.is_object())
    throw ConfigError(source, {Problem{"", "", "the config must be a JSON object"}});

  static const std::vector<std::string> kTopKeys = {"name", "description", "vars", "nodes"};
  for (const auto& [key, value] : doc.items()) {
    if (std::find(kTopKeys.begin(), kTopKeys.end(), key) == kTopKeys.end()) {
      problems.push_back({fmt::format("/{}", pointer_token(key)), "",
                          fmt::format("unknown key \"{}\"{}", key, suggestion(key, kTopKeys))});
    }
  }
  if (doc.contains("name")) {
    if (doc["name"].is_string())
      cfg.name = doc["name"].get<std::string>();
    else
      problems.push_back({"/name", "", "expected a string"});
  }
  if (doc.contains("vars")) {
    if (doc["vars"].is_object())
      cfg.vars = doc["vars"];
    else
      problems.push_back({"/vars", "", "expected an object of variables"});
  }
  cfg.vars["config_dir"] = config_dir;

  if (!doc.contains("nodes") || !doc["nodes"].is_array() || doc["nodes"].empty()) {
    problems.push_back({"/nodes", "", "expected a non-empty array of nodes"});
    throw ConfigError(source, std::move(problems));
  }
  const json& nodes = doc["nodes"];
  static const std::vector<std::string> kNodeKeys = {"id", "stage", "params", "inputs", "doc"};
  for (size_t i = 0; i < nodes.size(); ++i) {
    const std::string at = fmt::format("/nodes/{}", i);
    const json& n = nodes[i];
    if (!n.is_object()) {
      problems.push_back({at, "", "expected a node object"});
      continue;
    }
    NodeConfig node;
    node.index = i;
    if (n.contains("id") && n["id"].is_string() && !n["id"].get<std::string>().empty())
      node.id = n["id"].get<std::string>();
    else
      problems.push_back({at + "/id", "", "every node needs a non-empty string \"id\""});
    if (node.id.find('.') != std::string::npos)
      problems.push_back({at + "/id", node.id, "a node id may not contain '.'"});
    for (const auto& [key, value] : n.items()) {
      if (std::find(kNodeKeys.begin(), kNodeKeys.end(), key) == kNodeKeys.end()) {
        problems.push_back({fmt::format("{}/{}", at, pointer_token(key)), node.id,
                            fmt::format("unknown key \"{}\"{}", key, suggestion(key, kNodeKeys))});
      }
    }
    if (n.contains("stage") && n["stage"].is_string())
      node.stage = n["stage"].get<std::string>();
    else
      problems.push_back({at + "/stage", node.id, "every node needs a string \"stage\""});
    if (n.contains("params")) {
      if (n["params"].is_object())
        node.params = n["params"];
      else
        problems.push_back({at + "/params", node.id, "expected an object of parameters"});
    }
    if (n.contains("inputs")) {
      if (!n["inputs"].is_object()) {
        problems.push_back(
            {at + "/inputs", node.id, "expected an object of \"port\": \"node.port\""});
      } else {
        for (const auto& [port, from] : n["inputs"].items()) {
          if (from.is_string())
            node.inputs.emplace_back(port, from.get<std::string>());
          else
            problems.push_back({fmt::format("{}/inputs/{}", at, pointer_token(port)), node.id,
                                "expected a string \"node.port\""});
        }
      }
    }
    cfg.nodes.push_back(std::move(node));
  }
  if (!problems.empty()) throw ConfigError(source, std::move(problems));
  return cfg;
}

PipelineConfig load_config(const std::string& path) {
  std::ifstream in(path);
  if (!in) throw ConfigError(fmt::format("cannot open pipeline config {}", path));
  std::stringstream buffer;
  buffer << in.rdbuf();
  json doc;
  try {
    doc = json::parse(buffer.str());
  } catch (const json::parse_error& e) {
    // nlohmann's message carries the line and column.
    std::string what = e.what();
    const auto colon = what.find("] ");
    throw ConfigError(fmt::format("{}: not valid JSON: {}", path,
                                  colon == std::string::npos ? what : what.substr(colon + 2)));
  }
  std::string dir = std::filesystem::path(path).parent_path().string();
  return parse_config(doc, path, dir.empty() ? "." : dir);
}

namespace {

// JSON when it parses as JSON (numbers, booleans, arrays, quoted strings), else the raw text.
json parse_override_value(const std::string& text) {
  json v = json::parse(text, nullptr, /*allow_exceptions=*/false);
  return v.is_discarded() ? json(text) : v;
}

const char* json_kind(const json& v) {
  if (v.is_boolean()) return "boolean";
  if (v.is_number()) return "number";
  if (v.is_string()) return "string";
  if (v.is_array()) return "list";
  if (v.is_object()) return "object";
  return "null";
}

}  // namespace

void apply_overrides(PipelineConfig& cfg, const std::vector<std::string>& sets) {
  std::vector<Problem> problems;
  for (const std::string& item : sets) {
    const auto eq = item.find('=');
    if (eq == std::string::npos || eq == 0) {
      problems.push_back({"", "", fmt::format("--set {}: expected key=value", item)});
      continue;
    }
    const std::string key = item.substr(0, eq);
    const std::string text = item.substr(eq + 1);
    json value = parse_override_value(text);
    const auto dot = key.find('.');
    if (dot == std::string::npos) {
      const std::string var_path = fmt::format("/vars/{}", pointer_token(key));
      // A variable: it must exist, and keep its kind (a number stays a number).
      if (!cfg.vars.contains(key) || key == "config_dir") {
        std::vector<std::string> names;
        for (const auto& [name, v] : cfg.vars.items())
          if (name != "config_dir") names.push_back(name);
        problems.push_back({var_path, "",
                            fmt::format("--set {}: unknown variable \"{}\"{}", item, key,
                                        suggestion(key, names))});
        continue;
      }
      const json& old = cfg.vars[key];
      if (old.is_string() && !value.is_string()) value = text;  // `--set mesh=123` names a file
      const bool same_kind = old.is_null() || std::string(json_kind(old)) == json_kind(value);
      if (!same_kind) {
        problems.push_back({var_path, "",
                            fmt::format("--set {}: variable \"{}\" is a {}, got {} {}", item, key,
                                        json_kind(old), json_kind(value), value.dump())});
        continue;
      }
      cfg.vars[key] = value;
      cfg.overridden[var_path] = item;
      continue;
    }
    // A node parameter: the node must exist; the parameter is checked against the contract later.
    const std::string node_id = key.substr(0, dot);
    const std::string param = key.substr(dot + 1);
    NodeConfig* node = nullptr;
    for (NodeConfig& n : cfg.nodes)
      if (n.id == node_id) node = &n;
    if (!node || param.empty()) {
      std::vector<std::string> ids;
      for (const NodeConfig& n : cfg.nodes) ids.push_back(n.id);
      problems.push_back(
          {"/nodes", "",
           node ? fmt::format("--set {}: missing parameter name after the node id", item)
                : fmt::format("--set {}: no node with id \"{}\"{}", item, node_id,
                              suggestion(node_id, ids))});
      continue;
    }
    node->params[param] = value;
    cfg.overridden[fmt::format("/nodes/{}/params/{}", node->index, pointer_token(param))] = item;
  }
  if (!problems.empty()) throw ConfigError(cfg.source, std::move(problems));
}

}  // namespace gen3d::pipeline
