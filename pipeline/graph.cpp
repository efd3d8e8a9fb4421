#include "pipeline/graph.h"

#include <algorithm>
#include <cmath>
#include <functional>
#include <map>
#include <optional>
#include <set>

#include <fmt/format.h>

#include "pipeline/error.h"

namespace gen3d::pipeline {

using nlohmann::json;

namespace {

template <class Specs>
std::vector<std::string> names_of(const Specs& specs) {
  std::vector<std::string> out;
  for (const auto& s : specs) out.push_back(s.name);
  return out;
}

// Replaces "$var" with the variable's value (keeping its JSON type) and "${var}" inside longer
// strings with its text. Recurses into arrays. Unknown variables are reported.
json resolve(const json& value, const json& vars, const std::string& path,
             std::vector<std::string>& unresolved) {
  if (value.is_array()) {
    json out = json::array();
    for (size_t i = 0; i < value.size(); ++i)
      out.push_back(resolve(value[i], vars, path + "/" + std::to_string(i), unresolved));
    return out;
  }
  if (!value.is_string()) return value;
  const std::string s = value.get<std::string>();
  if (s.size() > 1 && s[0] == '$' && s[1] != '{') {
    const std::string name = s.substr(1);
    if (vars.contains(name)) return vars[name];
    unresolved.push_back(name);
    return value;
  }
  std::string out;
  size_t pos = 0;
  while (true) {
    const auto open = s.find("${", pos);
    if (open == std::string::npos) break;
    const auto close = s.find('}', open);
    if (close == std::string::npos) break;
    out += s.substr(pos, open - pos);
    const std::string name = s.substr(open + 2, close - open - 2);
    if (!vars.contains(name)) {
      unresolved.push_back(name);
    } else {
      const json& v = vars[name];
      out += v.is_string() ? v.get<std::string>() : v.dump();
    }
    pos = close + 1;
  }
  out += s.substr(pos);
  return json(out);
}

bool is_integer(const json& v) {
  if (v.is_number_integer()) return true;
  return false;
}

}  // namespace

std::optional<std::string> convert_param(const ParamSpec& spec, const json& v, ParamValue& out) {
  const auto expected = [&] {
    return fmt::format("expected {}, got {}", spec.describe_type(), v.dump());
  };
  const auto in_range = [&](double x) {
    return !((spec.min && x < *spec.min) || (spec.max && x > *spec.max));
  };
  switch (spec.type) {
    case ParamType::Bool:
      if (!v.is_boolean()) return expected();
      out = v.get<bool>();
      return std::nullopt;
    case ParamType::Int:
      if (!is_integer(v) || !in_range(v.get<double>())) return expected();
      out = v.get<int64_t>();
      return std::nullopt;
    case ParamType::Float:
      if (!v.is_number() || !std::isfinite(v.get<double>()) || !in_range(v.get<double>()))
        return expected();
      out = v.get<double>();
      return std::nullopt;
    case ParamType::String:
      if (!v.is_string()) return expected();
      if (!spec.choices.empty() && std::find(spec.choices.begin(), spec.choices.end(),
                                             v.get<std::string>()) == spec.choices.end())
        return expected() + suggestion(v.get<std::string>(), spec.choices);
      out = v.get<std::string>();
      return std::nullopt;
    case ParamType::IntList: {
      if (!v.is_array()) return expected();
      std::vector<int64_t> items;
      for (const json& x : v) {
        if (!is_integer(x) || !in_range(x.get<double>())) return expected();
        items.push_back(x.get<int64_t>());
      }
      out = std::move(items);
      return std::nullopt;
    }
    case ParamType::FloatList: {
      if (!v.is_array()) return expected();
      std::vector<double> items;
      for (const json& x : v) {
        if (!x.is_number() || !in_range(x.get<double>())) return expected();
        items.push_back(x.get<double>());
      }
      out = std::move(items);
      return std::nullopt;
    }
    case ParamType::StringList: {
      if (!v.is_array()) return expected();
      std::vector<std::string> items;
      for (const json& x : v) {
        if (!x.is_string()) return expected();
        items.push_back(x.get<std::string>());
      }
      out = std::move(items);
      return std::nullopt;
    }
  }
  return expected();
}

namespace {

// Checks a config against the stage contracts in named steps. Every step records what is wrong and
// goes on, so one ConfigError lists every problem of the config at once.
class GraphBuilder {
 public:
  GraphBuilder(const PipelineConfig& cfg, const Registry& registry)
      : cfg_(cfg), registry_(registry) {
    graph_.name = cfg.name;
  }

  Graph build() {
    add_nodes();
    for (size_t i = 0; i < cfg_.nodes.size(); ++i) {
      GraphNode& node = graph_.nodes[i];
      if (!node.contract) continue;  // its unknown stage is reported already
      resolve_params(cfg_.nodes[i], node);
      connect_inputs(cfg_.nodes[i], node);
      run_stage_checks(cfg_.nodes[i], node);
    }
    link_dependencies();
    order_topologically();
    if (!problems_.empty()) throw ConfigError(cfg_.source, std::move(problems_));
    return std::move(graph_);
  }

 private:
  // One node per config entry (ids first: edges refer to them); duplicate ids, unknown stages.
  void add_nodes() {
    for (const NodeConfig& n : cfg_.nodes) {
      const auto [it, fresh] = index_of_.emplace(n.id, graph_.nodes.size());
      if (!fresh)
        report(fmt::format("/nodes/{}/id", n.index), n.id,
               fmt::format("duplicate node id (first used at /nodes/{})",
                           cfg_.nodes[it->second].index));
      GraphNode node;
      node.id = n.id;
      node.config_index = n.index;
      node.stage = registry_.find(n.stage);
      node.contract = registry_.contract(n.stage);
      if (!node.stage) {
        const std::string replaced = registry_.replacement(n.stage);
        report(fmt::format("/nodes/{}/stage", n.index), n.id,
               replaced.empty()
                   ? fmt::format("unknown stage \"{}\"{}", n.stage,
                                 suggestion(n.stage, registry_.names()))
                   : fmt::format("stage \"{}\" no longer exists: {}", n.stage, replaced));
      }
      graph_.nodes.push_back(std::move(node));
    }
  }

  // Every declared parameter: the given ones ($vars resolved, type and range checked), then the
  // defaults; unknown names and missing required ones are problems.
  void resolve_params(const NodeConfig& n, GraphNode& node) {
    const StageContract& c = *node.contract;
    const std::string at = fmt::format("/nodes/{}", n.index);
    for (const auto& [name, raw] : n.params.items()) {
      const std::string path = at + "/params/" + pointer_token(name);
      const ParamSpec* spec = c.find_param(name);
      if (!spec) {
        report(path, n.id,
               with_origin(path, fmt::format("stage {} has no parameter \"{}\"{}", c.name, name,
                                             suggestion(name, names_of(c.params)))));
        continue;
      }
      if (auto value = param_value(n, *spec, raw, path)) node.params[name] = std::move(*value);
    }
    for (const ParamSpec& spec : c.params) {
      if (node.params.count(spec.name)) continue;
      if (spec.required() && !n.params.contains(spec.name))
        report(
            at + "/params", n.id,
            fmt::format("missing required parameter \"{}\" ({})", spec.name, spec.describe_type()));
      else if (spec.default_value)
        node.params[spec.name] = *spec.default_value;
    }
  }

  // One given parameter's value with its variables resolved, or nothing after reporting why not.
  std::optional<ParamValue> param_value(const NodeConfig& n, const ParamSpec& spec, const json& raw,
                                        const std::string& path) {
    std::vector<std::string> unresolved;
    json value = resolve(raw, cfg_.vars, path, unresolved);
    for (const std::string& var : unresolved) {
      std::vector<std::string> vars;
      for (const auto& [k, v] : cfg_.vars.items()) vars.push_back(k);
      report(path, n.id, fmt::format("unresolved variable \"${}\"{}", var, suggestion(var, vars)));
    }
    if (!unresolved.empty()) return std::nullopt;
    // An override's text names a file or word when the parameter is a string.
    const auto origin = cfg_.overridden.find(path);
    if (spec.type == ParamType::String && !value.is_string() && origin != cfg_.overridden.end())
      value = origin->second.substr(origin->second.find('=') + 1);
    ParamValue converted;
    if (auto err = convert_param(spec, value, converted)) {
      report(path, n.id, with_origin(path, *err));
      return std::nullopt;
    }
    return converted;
  }

  // Each input: a declared port, a "node.port" reference to an existing output of the same type.
  // Required inputs left unconnected are problems.
  void connect_inputs(const NodeConfig& n, GraphNode& node) {
    const StageContract& c = *node.contract;
    const std::string at = fmt::format("/nodes/{}", n.index);
    std::set<std::string> connected;
    for (const auto& [port, from] : n.inputs) {
      const std::string path = at + "/inputs/" + pointer_token(port);
      const PortSpec* in = c.find_input(port);
      if (!in) {
        report(path, n.id,
               fmt::format("stage {} has no input \"{}\"{}", c.name, port,
                           suggestion(port, names_of(c.inputs))));
        continue;
      }
      connected.insert(port);
      if (auto edge = edge_to(n, *in, from, path)) node.inputs.push_back(std::move(*edge));
    }
    for (const PortSpec& in : c.inputs)
      if (!in.optional && !connected.count(in.name))
        report(at + "/inputs", n.id,
               fmt::format("required input \"{}\" ({}) is not connected", in.name, in.type.name));
  }

  // The edge feeding input `in` from "node.port", or nothing after reporting why not.
  std::optional<Edge> edge_to(const NodeConfig& n, const PortSpec& in, const std::string& from,
                              const std::string& path) {
    const auto dot = from.find('.');
    if (dot == std::string::npos) {
      report(path, n.id, fmt::format("expected \"node.port\", got \"{}\"", from));
      return std::nullopt;
    }
    const std::string from_id = from.substr(0, dot), from_port = from.substr(dot + 1);
    const auto producer = index_of_.find(from_id);
    if (producer == index_of_.end()) {
      std::vector<std::string> ids;
      for (const auto& [id, idx] : index_of_) ids.push_back(id);
      report(path, n.id,
             fmt::format("input \"{}\" refers to unknown node \"{}\"{}", in.name, from_id,
                         suggestion(from_id, ids)));
      return std::nullopt;
    }
    const GraphNode& p = graph_.nodes[producer->second];
    if (!p.contract) return std::nullopt;  // its unknown stage is reported already
    const PortSpec* out = p.contract->find_output(from_port);
    if (!out) {
      report(path, n.id,
             fmt::format("node \"{}\" (stage {}) has no output \"{}\"{}", from_id, p.contract->name,
                         from_port, suggestion(from_port, names_of(p.contract->outputs))));
      return std::nullopt;
    }
    if (!(out->type == in.type)) {
      report(path, n.id,
             fmt::format("type mismatch: input \"{}\" expects {} but {} is {}", in.name,
                         in.type.name, from, out->type.name));
      return std::nullopt;
    }
    return Edge{in.name, producer->second, from_port};
  }

  // The stage's own semantic checks (files exist, lists agree, ...), once its params are typed.
  void run_stage_checks(const NodeConfig& n, const GraphNode& node) {
    for (const ParamSpec& spec : node.contract->params)
      if (!node.params.count(spec.name)) return;
    std::vector<std::string> stage_problems;
    node.stage->check(node.params, stage_problems);
    for (std::string& m : stage_problems)
      report(fmt::format("/nodes/{}/params", n.index), n.id, std::move(m));
  }

  // Producer and consumer lists from the edges, each neighbour once.
  void link_dependencies() {
    for (size_t i = 0; i < graph_.nodes.size(); ++i) {
      for (const Edge& e : graph_.nodes[i].inputs) {
        auto& after = graph_.nodes[i].after;
        if (std::find(after.begin(), after.end(), e.from) == after.end()) {
          after.push_back(e.from);
          graph_.nodes[e.from].before.push_back(i);
        }
      }
    }
  }

  // A topological order (Kahn); what is left over lies on or behind a cycle, which is reported.
  void order_topologically() {
    std::vector<size_t> pending(graph_.nodes.size());
    std::vector<size_t> ready;
    for (size_t i = 0; i < graph_.nodes.size(); ++i) {
      pending[i] = graph_.nodes[i].after.size();
      if (pending[i] == 0) ready.push_back(i);
    }
    while (!ready.empty()) {
      const size_t i = ready.front();
      ready.erase(ready.begin());
      graph_.order.push_back(i);
      for (size_t j : graph_.nodes[i].before)
        if (--pending[j] == 0) ready.push_back(j);
    }
    if (graph_.order.size() != graph_.nodes.size()) report_cycle(pending);
  }

  // Walks producer links from a stuck node until a node repeats: that loop is the cycle.
  void report_cycle(const std::vector<size_t>& pending) {
    size_t start = 0;
    while (pending[start] == 0) ++start;
    std::vector<size_t> walk;
    std::vector<int> seen_at(graph_.nodes.size(), -1);
    size_t cur = start;
    while (seen_at[cur] < 0) {
      seen_at[cur] = static_cast<int>(walk.size());
      walk.push_back(cur);
      for (size_t p : graph_.nodes[cur].after)
        if (pending[p] != 0) {
          cur = p;
          break;
        }
    }
    std::vector<size_t> cycle(walk.begin() + seen_at[cur], walk.end());
    std::reverse(cycle.begin(), cycle.end());  // producer -> consumer order
    std::string text;
    for (size_t k : cycle) text += graph_.nodes[k].id + " -> ";
    text += graph_.nodes[cycle.front()].id;
    report("/nodes", graph_.nodes[cycle.front()].id, "cycle: " + text);
  }

  // Names the --set that produced a value, when one did.
  std::string with_origin(const std::string& path, std::string message) const {
    const auto it = cfg_.overridden.find(path);
    if (it != cfg_.overridden.end()) message += " (set by --set " + it->second + ")";
    return message;
  }

  void report(std::string path, std::string node, std::string message) {
    problems_.push_back({std::move(path), std::move(node), std::move(message)});
  }

  const PipelineConfig& cfg_;
  const Registry& registry_;
  Graph graph_;
  std::map<std::string, size_t> index_of_;
  std::vector<Problem> problems_;
};

}  // namespace

Graph build_graph(const PipelineConfig& cfg, const Registry& registry) {
  return GraphBuilder(cfg, registry).build();
}

std::string Graph::to_dot() const {
  const auto quote = [](const std::string& s) {
    std::string out = "\"";
    for (char c : s) {
      if (c == '"' || c == '\\') out += '\\';
      out += c;
    }
    return out + "\"";
  };
  std::string out = "digraph " + quote(name.empty() ? "pipeline" : name) + " {\n";
  out += "  rankdir=LR;\n  node [shape=box, style=rounded, fontname=\"Helvetica\"];\n";
  for (const GraphNode& n : nodes) {
    const bool model = n.contract && n.contract->resource == ResourceClass::Model;
    out += "  " + quote(n.id) +
           " [label=" + quote(n.id + "\n" + (n.contract ? n.contract->name : "?")) +
           (model ? ", style=\"rounded,filled\", fillcolor=\"#f6d7a7\"" : "") + "];\n";
  }
  for (const GraphNode& n : nodes) {
    for (const Edge& e : n.inputs) {
      out += "  " + quote(nodes[e.from].id) + " -> " + quote(n.id) +
             " [label=" + quote(e.from_port + " → " + e.port) + "];\n";
    }
  }
  return out + "}\n";
}

}  // namespace gen3d::pipeline
