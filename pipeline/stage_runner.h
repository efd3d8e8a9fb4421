#pragma once
// StageRunner: runs one stage alone, outside any graph — typed inputs and params in, outputs out.
// Parameters go through the same checks as in a config (names, types, ranges, defaults).

#include <memory>
#include <string>

#include <nlohmann/json.hpp>

#include "pipeline/profiler.h"
#include "pipeline/stage.h"

namespace gen3d::pipeline {

class StageRunner {
 public:
  explicit StageRunner(const Stage& stage);

  template <class T>
  StageRunner& input(const std::string& port, std::shared_ptr<const T> value) {
    inputs_[port] = Value{port_type<T>(), std::move(value)};
    return *this;
  }
  template <class T>
  StageRunner& input(const std::string& port, T value) {
    return input<T>(port, std::make_shared<const T>(std::move(value)));
  }

  // Throws ConfigError for an unknown parameter or a value of the wrong type/range.
  StageRunner& param(const std::string& name, const nlohmann::json& value);

  // Runs the stage's semantic checks, then the stage; the stage's exceptions propagate.
  void run();

  template <class T>
  std::shared_ptr<const T> output(const std::string& port) const {
    const auto it = outputs_.find(port);
    if (it == outputs_.end() || !(it->second.type == port_type<T>())) return nullptr;
    return std::static_pointer_cast<const T>(it->second.data);
  }

  Profiler& profiler() { return profiler_; }
  SharedState& shared() { return shared_; }

 private:
  const Stage& stage_;
  StageContract contract_;
  ParamMap params_;
  std::map<std::string, Value, std::less<>> inputs_;
  std::map<std::string, Value, std::less<>> outputs_;
  Profiler profiler_;
  SharedState shared_;
};

}  // namespace gen3d::pipeline
