#include "pipeline/stage.h"

#include <algorithm>
#include <stdexcept>

#include <fmt/format.h>

#include "pipeline/error.h"

namespace gen3d::pipeline {

const char* to_string(ParamType t) {
  switch (t) {
    case ParamType::Bool:
      return "boolean";
    case ParamType::Int:
      return "integer";
    case ParamType::Float:
      return "number";
    case ParamType::String:
      return "string";
    case ParamType::IntList:
      return "list of integers";
    case ParamType::FloatList:
      return "list of numbers";
    case ParamType::StringList:
      return "list of strings";
  }
  return "?";
}

std::string ParamSpec::describe_type() const {
  if (!choices.empty()) {
    std::string out = "one of ";
    for (size_t i = 0; i < choices.size(); ++i)
      out += fmt::format("{}{}", i ? "|" : "", choices[i]);
    return out;
  }
  std::string out = to_string(type);
  if (min || max) {
    const auto num = [&](double v) {
      return type == ParamType::Int || type == ParamType::IntList ? fmt::format("{}", int64_t(v))
                                                                  : fmt::format("{}", v);
    };
    out += fmt::format(" {}..{}", min ? num(*min) : std::string(), max ? num(*max) : std::string());
  }
  return out;
}

StageContract& StageContract::add_param(std::string param_name, ParamType type,
                                        std::optional<ParamValue> def, std::optional<Range> range,
                                        std::vector<std::string> param_choices,
                                        std::string param_doc) {
  ParamSpec spec;
  spec.name = std::move(param_name);
  spec.type = type;
  spec.default_value = std::move(def);
  if (range) {
    spec.min = range->min;
    spec.max = range->max;
  }
  spec.choices = std::move(param_choices);
  spec.doc = std::move(param_doc);
  params.push_back(std::move(spec));
  return *this;
}

namespace {
template <class Spec>
const Spec* find_named(const std::vector<Spec>& specs, std::string_view name) {
  for (const Spec& s : specs)
    if (s.name == name) return &s;
  return nullptr;
}
}  // namespace

const PortSpec* StageContract::find_input(std::string_view port) const {
  return find_named(inputs, port);
}
const PortSpec* StageContract::find_output(std::string_view port) const {
  return find_named(outputs, port);
}
const ParamSpec* StageContract::find_param(std::string_view param_name) const {
  return find_named(params, param_name);
}

// ---- StageContext ------------------------------------------------------------------------------

const Value& StageContext::input_value(std::string_view port, const PortType& want) const {
  const auto it = w_.inputs.find(port);
  if (it == w_.inputs.end()) {
    const bool declared = w_.contract && w_.contract->find_input(port);
    throw std::logic_error(
        fmt::format("input \"{}\" {}", port, declared ? "is not connected" : "is not declared"));
  }
  if (!(it->second.type == want))
    throw std::logic_error(fmt::format("input \"{}\" holds {} but the stage reads {}", port,
                                       it->second.type.name, want.name));
  return it->second;
}

const ParamValue& StageContext::param_value(std::string_view name) const {
  if (w_.params) {
    const auto it = w_.params->find(name);
    if (it != w_.params->end()) return it->second;
  }
  throw std::logic_error(fmt::format("parameter \"{}\" is not declared", name));
}

void StageContext::set_output(std::string_view port, Value v) {
  const PortSpec* spec = w_.contract ? w_.contract->find_output(port) : nullptr;
  if (!spec) throw std::logic_error(fmt::format("output \"{}\" is not declared", port));
  if (!(spec->type == v.type))
    throw std::logic_error(fmt::format("output \"{}\" is declared {} but the stage wrote {}", port,
                                       spec->type.name, v.type.name));
  if (!v.data) throw std::logic_error(fmt::format("output \"{}\" was written empty", port));
  (*w_.outputs)[std::string(port)] = std::move(v);
}

Profiler::Span StageContext::span(std::string name) const {
  if (!w_.profiler) return {};
  return w_.profiler->span(std::move(name), "stage", w_.node_id);
}

void StageContext::count(std::string_view name, double delta) const {
  if (w_.profiler) w_.profiler->count(name, delta);
  if (w_.metrics) w_.metrics->add(name, delta, false);
}

void StageContext::gauge(std::string_view name, double value) const {
  if (w_.profiler) w_.profiler->gauge(name, value);
  if (w_.metrics) w_.metrics->add(name, value, true);
}

SharedState& StageContext::shared() const {
  if (!w_.shared) throw std::logic_error("no shared state in this context");
  return *w_.shared;
}

bool StageContext::cancelled() const {
  return (w_.cancel && w_.cancel->load(std::memory_order_relaxed)) ||
         (w_.interrupt && w_.interrupt->load(std::memory_order_relaxed));
}

void StageContext::throw_if_cancelled() const {
  if (cancelled()) throw Cancelled("cancelled");
}

// ---- Registry ----------------------------------------------------------------------------------

void Registry::add(Factory factory) {
  auto stage = factory();
  StageContract c = stage->contract();
  const std::string name = c.name;
  if (entries_.count(name)) throw std::logic_error("stage registered twice: " + name);
  entries_.emplace(name, Entry{std::move(stage), std::move(c)});
}

const Stage* Registry::find(std::string_view name) const {
  const auto it = entries_.find(name);
  return it == entries_.end() ? nullptr : it->second.stage.get();
}

const StageContract* Registry::contract(std::string_view name) const {
  const auto it = entries_.find(name);
  return it == entries_.end() ? nullptr : &it->second.contract;
}

const PortCodec* Registry::codec(const PortType& type) const {
  const auto it = codecs_.find(type.id);
  return it == codecs_.end() ? nullptr : &it->second;
}

void Registry::retire(std::string name, std::string replacement) {
  retired_[std::move(name)] = std::move(replacement);
}

std::string Registry::replacement(std::string_view name) const {
  const auto it = retired_.find(name);
  return it == retired_.end() ? std::string() : it->second;
}

std::vector<std::string> Registry::names() const {
  std::vector<std::string> out;
  for (const auto& [name, entry] : entries_) out.push_back(name);
  return out;
}

std::string did_you_mean(std::string_view word, const std::vector<std::string>& candidates) {
  // Levenshtein distance; suggest only when under a third of the word changed.
  const auto distance = [](std::string_view a, std::string_view b) {
    std::vector<size_t> row(b.size() + 1);
    for (size_t j = 0; j <= b.size(); ++j) row[j] = j;
    for (size_t i = 1; i <= a.size(); ++i) {
      size_t diag = row[0];
      row[0] = i;
      for (size_t j = 1; j <= b.size(); ++j) {
        const size_t up = row[j];
        row[j] = std::min({row[j] + 1, row[j - 1] + 1, diag + (a[i - 1] == b[j - 1] ? 0 : 1)});
        diag = up;
      }
    }
    return row[b.size()];
  };
  std::string best;
  size_t best_d = std::max<size_t>(2, word.size() / 3) + 1;
  for (const std::string& c : candidates) {
    const size_t d = distance(word, c);
    if (d < best_d) {
      best_d = d;
      best = c;
    }
  }
  return best;
}

std::string suggestion(std::string_view word, const std::vector<std::string>& candidates) {
  const std::string hint = did_you_mean(word, candidates);
  return hint.empty() ? std::string() : fmt::format(" (did you mean \"{}\"?)", hint);
}

}  // namespace gen3d::pipeline
