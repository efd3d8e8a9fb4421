#include "pipeline/describe.h"

#include <cctype>
#include <map>
#include <set>

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

// ---- Markdown ----------------------------------------------------------------------------------

// A contract's prose as Markdown table-cell text. Its code spans are kept; outside them the
// characters Markdown would read as markup are escaped (`*`, `\`, `<`, and `_` where it does not
// join two word characters). `|` is escaped everywhere: it ends a table cell even in a code span.
std::string md_text(std::string_view s) {
  std::string out;
  bool code = false;
  const auto word = [&](size_t j) {
    return j < s.size() && std::isalnum(static_cast<unsigned char>(s[j]));
  };
  for (size_t i = 0; i < s.size(); ++i) {
    const char c = s[i];
    if (c == '`') {
      code = !code;
      out += c;
    } else if (c == '|') {
      out += "\\|";
    } else if (code) {
      out += c;
    } else if (c == '*' || c == '\\' || (c == '_' && !(i > 0 && word(i - 1) && word(i + 1)))) {
      out += '\\';
      out += c;
    } else if (c == '<') {
      out += "&lt;";
    } else {
      out += c;
    }
  }
  return out;
}

// `s` as a code span in a table cell.
std::string md_code(std::string_view s) {
  std::string body;
  for (const char c : s) body += c == '|' ? std::string("\\|") : std::string(1, c);
  return s.find('`') == std::string_view::npos ? "`" + body + "`" : "`` " + body + " ``";
}

std::string md_link(const std::string& stage) {
  return fmt::format("[{}](#{})", stage, stage);
}

// The first sentence of a stage's doc, for the index.
std::string first_sentence(const std::string& doc) {
  const auto end = doc.find(". ");
  return end == std::string::npos ? doc : doc.substr(0, end + 1);
}

std::string md_param_type(const ParamSpec& p) {
  if (p.choices.empty()) return p.describe_type();
  std::string out = "one of ";
  for (size_t i = 0; i < p.choices.size(); ++i) out += (i ? ", " : "") + md_code(p.choices[i]);
  return out;
}

std::string md_ports(const char* title, const std::vector<PortSpec>& ports) {
  if (ports.empty()) return {};
  std::string out = fmt::format("{}:\n\n| port | type | description |\n|---|---|---|\n", title);
  for (const PortSpec& p : ports)
    out +=
        fmt::format("| {} | {} | {}{} |\n", md_code(p.name), md_code(p.type.name), md_text(p.doc),
                    p.optional ? (p.doc.empty() ? "optional" : " (optional)") : "");
  return out + "\n";
}

std::string md_cache_line(const StageContract& c) {
  std::string line;
  if (c.resource == ResourceClass::Model)
    line +=
        "Model stage: runs in the model resource class (`--model-concurrency` of them at once, "
        "default 1). ";
  switch (c.cache) {
    case CachePolicy::Never:
      line += "Stage cache: never stored.";
      break;
    case CachePolicy::Auto:
      line += "Stage cache: stored when recomputing it costs clearly more than loading it.";
      break;
    case CachePolicy::Always:
      line += "Stage cache: always stored.";
      break;
  }
  if (!c.file_params.empty()) {
    line += " Files read (their content is part of the cache key): ";
    for (size_t i = 0; i < c.file_params.size(); ++i)
      line += fmt::format("{}{}{}", i ? ", " : "", md_code(c.file_params[i].name),
                          c.file_params[i].siblings ? " (with the files beside it)" : "");
    line += ".";
  }
  return line + "\n\n";
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

std::string stages_markdown(const Registry& registry) {
  std::string out =
      "# Stage reference\n\n"
      "<!-- Generated from the stage contracts by `gen3d stages --markdown`; do not edit. "
      "Regenerate: build/gen3d stages --markdown > docs/stages.md -->\n\n"
      "Every stage a pipeline config can name, with its ports and parameters exactly as the graph "
      "builder checks them before anything runs. A node wires each input port to another node's "
      "output as `\"node.port\"` and sets parameters under `params`; a parameter with a default "
      "may be left out. How configs are written: [pipelines.md](pipelines.md).\n\n"
      "## Index\n\n| stage | what it does |\n|---|---|\n";
  const std::vector<std::string> names = registry.names();
  std::map<std::string, std::pair<std::set<std::string>, std::set<std::string>>> types;
  for (const std::string& name : names) {
    const StageContract& c = *registry.contract(name);
    out += fmt::format("| {}{} | {} |\n", md_link(c.name),
                       c.resource == ResourceClass::Model ? " (model)" : "",
                       md_text(first_sentence(c.doc)));
    for (const PortSpec& p : c.outputs) types[p.type.name].first.insert(c.name);
    for (const PortSpec& p : c.inputs) types[p.type.name].second.insert(c.name);
  }

  out +=
      "\n## Port types\n\nAn edge joins an output to an input of the same type.\n\n"
      "| type | made by | taken by |\n|---|---|---|\n";
  const auto links = [](const std::set<std::string>& stages) {
    std::string s;
    for (const std::string& st : stages) s += (s.empty() ? "" : ", ") + md_link(st);
    return s.empty() ? std::string("-") : s;
  };
  for (const auto& [type, users] : types)
    out +=
        fmt::format("| {} | {} | {} |\n", md_code(type), links(users.first), links(users.second));
  out += "\n";

  for (const std::string& name : names) {
    const StageContract& c = *registry.contract(name);
    out += fmt::format("## {}\n\n{}\n\n", c.name, md_text(c.doc));
    out += md_cache_line(c);
    out += md_ports("Inputs", c.inputs);
    out += md_ports("Outputs", c.outputs);
    if (!c.params.empty()) {
      out += "Parameters:\n\n| name | type | default | description |\n|---|---|---|---|\n";
      for (const ParamSpec& p : c.params)
        out += fmt::format(
            "| {} | {} | {} | {} |\n", md_code(p.name), md_param_type(p),
            p.default_value ? md_code(to_json(*p.default_value).dump()) : std::string("required"),
            md_text(p.doc));
      out += "\n";
    }
  }
  while (out.ends_with("\n\n")) out.pop_back();
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
