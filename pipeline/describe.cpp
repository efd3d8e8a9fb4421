#include "pipeline/describe.h"

#include <fmt/format.h>
#include <nlohmann/json.hpp>

namespace gen3d::pipeline {

using nlohmann::json;

namespace {

json to_json(const ParamValue& v) {
  return std::visit([](const auto& x) { return json(x); }, v);
}

json param_json(const ParamSpec& p) {
  json j = {
      {"name", p.name}, {"type", to_string(p.type)}, {"doc", p.doc}, {"required", p.required()}};
  if (p.default_value) j["default"] = to_json(*p.default_value);
  if (p.min) j["min"] = *p.min;
  if (p.max) j["max"] = *p.max;
  if (!p.choices.empty()) j["choices"] = p.choices;
  return j;
}

json ports_json(const std::vector<PortSpec>& ports) {
  json out = json::array();
  for (const PortSpec& p : ports) {
    json j = {{"name", p.name}, {"type", p.type.name}, {"doc", p.doc}};
    if (p.optional) j["optional"] = true;
    out.push_back(std::move(j));
  }
  return out;
}

// Schema of one parameter value, before $var substitution.
json param_schema(const ParamSpec& p) {
  json s;
  const auto bounded = [&](json t) {
    if (p.min) t["minimum"] = *p.min;
    if (p.max) t["maximum"] = *p.max;
    return t;
  };
  switch (p.type) {
    case ParamType::Bool:
      s = {{"type", "boolean"}};
      break;
    case ParamType::Int:
      s = bounded({{"type", "integer"}});
      break;
    case ParamType::Float:
      s = bounded({{"type", "number"}});
      break;
    case ParamType::String:
      s = {{"type", "string"}};
      if (!p.choices.empty()) s["enum"] = p.choices;
      break;
    case ParamType::IntList:
      s = {{"type", "array"}, {"items", bounded({{"type", "integer"}})}};
      break;
    case ParamType::FloatList:
      s = {{"type", "array"}, {"items", bounded({{"type", "number"}})}};
      break;
    case ParamType::StringList:
      s = {{"type", "array"}, {"items", {{"type", "string"}}}};
      break;
  }
  s["description"] = p.doc;
  if (p.default_value) s["default"] = to_json(*p.default_value);
  return {
      {"anyOf", json::array({s, {{"type", "string"}, {"pattern", "^\\$[A-Za-z_][A-Za-z0-9_]*$"}}})},
      {"description", p.doc}};
}

}  // namespace

std::string stages_json(const Registry& registry) {
  json stages = json::array();
  for (const std::string& name : registry.names()) {
    const StageContract& c = *registry.contract(name);
    json params = json::array();
    for (const ParamSpec& p : c.params) params.push_back(param_json(p));
    stages.push_back({{"name", c.name},
                      {"doc", c.doc},
                      {"resource", c.resource == ResourceClass::Model ? "model" : "cpu"},
                      {"inputs", ports_json(c.inputs)},
                      {"outputs", ports_json(c.outputs)},
                      {"params", std::move(params)}});
  }
  return json{{"stages", std::move(stages)}}.dump(2);
}

std::string stages_text(const Registry& registry) {
  std::string out;
  for (const std::string& name : registry.names()) {
    const StageContract& c = *registry.contract(name);
    out += fmt::format("{}{}\n  {}\n", c.name,
                       c.resource == ResourceClass::Model ? "  [model]" : "", c.doc);
    for (const PortSpec& p : c.inputs)
      out += fmt::format("  in   {:<14} {:<10} {}{}\n", p.name, p.type.name, p.doc,
                         p.optional ? " (optional)" : "");
    for (const PortSpec& p : c.outputs)
      out += fmt::format("  out  {:<14} {:<10} {}\n", p.name, p.type.name, p.doc);
    for (const ParamSpec& p : c.params) {
      const std::string def =
          p.default_value ? " = " + to_json(*p.default_value).dump() : std::string(" (required)");
      out += fmt::format("  param {:<13} {}{}: {}\n", p.name, p.describe_type(), def, p.doc);
    }
    out += "\n";
  }
  return out;
}

std::string pipeline_schema(const Registry& registry) {
  json node_variants = json::array();
  for (const std::string& name : registry.names()) {
    const StageContract& c = *registry.contract(name);
    json params = json::object();
    json required = json::array();
    for (const ParamSpec& p : c.params) {
      params[p.name] = param_schema(p);
      if (p.required()) required.push_back(p.name);
    }
    json inputs = json::object();
    json required_inputs = json::array();
    for (const PortSpec& p : c.inputs) {
      inputs[p.name] = {
          {"type", "string"},
          {"pattern", "^[^.]+\\..+$"},
          {"description", fmt::format("{} from \"node.port\"; {}", p.type.name, p.doc)}};
      if (!p.optional) required_inputs.push_back(p.name);
    }
    json params_schema = {
        {"type", "object"}, {"properties", params}, {"additionalProperties", false}};
    if (!required.empty()) params_schema["required"] = required;
    json inputs_schema = {
        {"type", "object"}, {"properties", inputs}, {"additionalProperties", false}};
    if (!required_inputs.empty()) inputs_schema["required"] = required_inputs;
    json variant = {{"type", "object"},
                    {"description", c.doc},
                    {"properties",
                     {{"id", {{"type", "string"}, {"pattern", "^[^.]+$"}}},
                      {"stage", {{"const", c.name}}},
                      {"doc", {{"type", "string"}}},
                      {"params", params_schema},
                      {"inputs", inputs_schema}}},
                    {"required", required_inputs.empty() ? json::array({"id", "stage"})
                                                         : json::array({"id", "stage", "inputs"})},
                    {"additionalProperties", false}};
    if (!required.empty()) variant["required"].push_back("params");
    node_variants.push_back(std::move(variant));
  }
  json schema = {
      {"$schema", "https://json-schema.org/draft/2020-12/schema"},
      {"title", "gen3d pipeline"},
      {"type", "object"},
      {"properties",
       {{"name", {{"type", "string"}}},
        {"description", {{"type", "string"}}},
        {"vars", {{"type", "object"}, {"description", "values substituted for \"$name\""}}},
        {"nodes", {{"type", "array"}, {"minItems", 1}, {"items", {{"oneOf", node_variants}}}}}}},
      {"required", json::array({"nodes"})},
      {"additionalProperties", false}};
  return schema.dump(2);
}

}  // namespace gen3d::pipeline
