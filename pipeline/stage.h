#pragma once
// Stage: one unit of pipeline work with a contract (ports + parameters) declared before anything
// runs. Stages are thin adapters over the mesh/render/models libraries.

#include <atomic>
#include <cstdint>
#include <functional>
#include <map>
#include <memory>
#include <mutex>
#include <optional>
#include <string>
#include <string_view>
#include <typeindex>
#include <variant>
#include <vector>

#include "pipeline/profiler.h"
#include "pipeline/serial.h"

namespace gen3d::pipeline {

// ---- Port types --------------------------------------------------------------------------------

// Every type that travels between stages names itself once:
//   GEN3D_PORT_TYPE(gen3d::mesh::Mesh, "Mesh")
template <class T>
struct PortTypeName;  // specialize with `static constexpr const char* value`

#define GEN3D_PORT_TYPE(T, NAME)               \
  template <>                                  \
  struct gen3d::pipeline::PortTypeName<T> {    \
    static constexpr const char* value = NAME; \
  }

struct PortType {
  std::type_index id = typeid(void);
  std::string name;
  bool operator==(const PortType& o) const { return id == o.id; }
};

template <class T>
PortType port_type() {
  return PortType{typeid(T), PortTypeName<T>::value};
}

// An immutable value on the blackboard: readers share it and never copy or mutate.
struct Value {
  PortType type;
  std::shared_ptr<const void> data;
};

// ---- Parameters --------------------------------------------------------------------------------

enum class ParamType { Bool, Int, Float, String, IntList, FloatList, StringList };
using ParamValue = std::variant<bool, int64_t, double, std::string, std::vector<int64_t>,
                                std::vector<double>, std::vector<std::string>>;
using ParamMap = std::map<std::string, ParamValue, std::less<>>;

const char* to_string(ParamType t);

struct ParamSpec {
  std::string name;
  ParamType type = ParamType::String;
  std::optional<ParamValue> default_value;  // nullopt: the config must set it
  std::optional<double> min, max;           // inclusive range for Int/Float (and list items)
  std::vector<std::string> choices;         // allowed values for an enum-like String
  std::string doc;                          // one line

  bool required() const { return !default_value.has_value(); }
  std::string describe_type() const;  // "integer 64..16384", "one of files|reference"
};

template <class T>
constexpr ParamType param_type_of() {
  if constexpr (std::is_same_v<T, bool>)
    return ParamType::Bool;
  else if constexpr (std::is_integral_v<T>)
    return ParamType::Int;
  else if constexpr (std::is_floating_point_v<T>)
    return ParamType::Float;
  else if constexpr (std::is_same_v<T, std::vector<int64_t>> || std::is_same_v<T, std::vector<int>>)
    return ParamType::IntList;
  else if constexpr (std::is_same_v<T, std::vector<double>> ||
                     std::is_same_v<T, std::vector<float>>)
    return ParamType::FloatList;
  else if constexpr (std::is_same_v<T, std::vector<std::string>>)
    return ParamType::StringList;
  else
    return ParamType::String;
}

// ---- Contract ----------------------------------------------------------------------------------

struct PortSpec {
  std::string name;
  PortType type;
  std::string doc;
  bool optional = false;  // inputs only: the stage runs without it
};

// Which pool of capacity a stage draws on. Model stages (big networks) run a few at a time so they
// do not fight CPU stages for cores; the limit is an executor option.
enum class ResourceClass { Cpu, Model };

struct Range {
  double min, max;
};

// Whether the stage cache may keep a node's outputs on disk (pipeline/stage_cache.h).
//   Never:  side effects, timing-dependent or not worth it (savers, loaders, reports): runs when
//           needed, never stored. Its key still covers its inputs, parameters and files.
//   Auto:   stored when the run measured recomputing it (with what it needs upstream) to cost
//           clearly more than loading it back.
//   Always: stored whenever it runs (model stages: seconds to hours).
enum class CachePolicy { Never, Auto, Always };

// A parameter naming files the stage reads: their content goes into the node's cache key.
// A directory counts with every file under it; `siblings`: a file counts with every file under
// its directory (OBJ + MTL + textures, weights + config.json).
struct FileParam {
  std::string name;
  bool siblings = false;
};

// A parameter whose spelling does not pin its meaning (precision "auto" is bf16 on one CPU and fp32
// on another): the stage cache keys it by what `resolve` makes of it on this machine.
struct ResolvedParam {
  std::string name;
  std::function<std::string(const std::string&)> resolve;
};

struct StageContract {
  std::string name;
  std::string doc;
  ResourceClass resource = ResourceClass::Cpu;
  CachePolicy cache = CachePolicy::Auto;
  int version = 1;  // bumped when the stage's results change meaning: old cache entries go unused
  std::vector<FileParam> file_params;
  std::vector<ResolvedParam> resolved_params;
  std::vector<PortSpec> inputs;
  std::vector<PortSpec> outputs;
  std::vector<ParamSpec> params;

  StageContract(std::string stage_name, std::string stage_doc)
      : name(std::move(stage_name)), doc(std::move(stage_doc)) {}

  template <class T>
  StageContract& input(std::string port, std::string port_doc = {}) {
    inputs.push_back(PortSpec{std::move(port), port_type<T>(), std::move(port_doc), false});
    return *this;
  }
  template <class T>
  StageContract& optional_input(std::string port, std::string port_doc = {}) {
    inputs.push_back(PortSpec{std::move(port), port_type<T>(), std::move(port_doc), true});
    return *this;
  }
  template <class T>
  StageContract& output(std::string port, std::string port_doc = {}) {
    outputs.push_back(PortSpec{std::move(port), port_type<T>(), std::move(port_doc), false});
    return *this;
  }
  template <class T>
  StageContract& param(std::string param_name, T default_value, std::string param_doc) {
    return add_param(std::move(param_name), param_type_of<T>(), to_param_value(default_value), {},
                     {}, std::move(param_doc));
  }
  template <class T>
  StageContract& param(std::string param_name, T default_value, Range range,
                       std::string param_doc) {
    return add_param(std::move(param_name), param_type_of<T>(), to_param_value(default_value),
                     range, {}, std::move(param_doc));
  }
  template <class T>
  StageContract& required(std::string param_name, std::string param_doc) {
    return add_param(std::move(param_name), param_type_of<T>(), std::nullopt, {}, {},
                     std::move(param_doc));
  }
  StageContract& choice(std::string param_name, std::string default_value,
                        std::vector<std::string> choices, std::string param_doc) {
    return add_param(std::move(param_name), ParamType::String, ParamValue(std::move(default_value)),
                     {}, std::move(choices), std::move(param_doc));
  }
  StageContract& model_class() {
    resource = ResourceClass::Model;
    cache = CachePolicy::Always;
    return *this;
  }
  StageContract& cache_policy(CachePolicy policy) {
    cache = policy;
    return *this;
  }
  StageContract& semantics_version(int v) {
    version = v;
    return *this;
  }
  // `param` (a string or list of strings) names files the stage reads.
  StageContract& reads_files(std::string param, bool siblings = false) {
    file_params.push_back(FileParam{std::move(param), siblings});
    return *this;
  }

  // The string parameter `param` is keyed by resolve(value) rather than its spelling.
  StageContract& keys_by(std::string param,
                         std::function<std::string(const std::string&)> resolve) {
    resolved_params.push_back(ResolvedParam{std::move(param), std::move(resolve)});
    return *this;
  }

  const PortSpec* find_input(std::string_view port) const;
  const PortSpec* find_output(std::string_view port) const;
  const ParamSpec* find_param(std::string_view param_name) const;

 private:
  StageContract& add_param(std::string param_name, ParamType type, std::optional<ParamValue> def,
                           std::optional<Range> range, std::vector<std::string> choices,
                           std::string param_doc);

  template <class T>
  static ParamValue to_param_value(const T& v) {
    if constexpr (std::is_same_v<T, bool>)
      return ParamValue(v);
    else if constexpr (std::is_integral_v<T>)
      return ParamValue(static_cast<int64_t>(v));
    else if constexpr (std::is_floating_point_v<T>)
      return ParamValue(static_cast<double>(v));
    else if constexpr (std::is_same_v<T, std::vector<int>>)
      return ParamValue(std::vector<int64_t>(v.begin(), v.end()));
    else if constexpr (std::is_same_v<T, std::vector<float>>)
      return ParamValue(std::vector<double>(v.begin(), v.end()));
    else if constexpr (std::is_convertible_v<T, std::string>)
      return ParamValue(std::string(v));
    else
      return ParamValue(v);
  }
};

// ---- Per-run shared state ----------------------------------------------------------------------

// Objects that several nodes of one run share (the raster cache; loaded networks live in the
// process-wide model cache, models/nn/model_cache.h). Created on first
// request; the object itself must be safe for concurrent use.
class SharedState {
 public:
  template <class T, class Make>
  std::shared_ptr<T> get_or_create(const std::string& key, Make&& make) {
    std::lock_guard lock(mutex_);
    auto& slot = objects_[key];
    if (!slot) slot = std::shared_ptr<T>(make());
    return std::static_pointer_cast<T>(slot);
  }

 private:
  std::mutex mutex_;
  std::map<std::string, std::shared_ptr<void>> objects_;
};

// ---- Context -----------------------------------------------------------------------------------

// What a node reported through count and gauge while it ran: kept with its cache entry and
// reported again when the node is loaded instead of run.
struct RecordedMetric {
  std::string name;
  double value = 0;  // a delta for counts, the level for gauges
  bool gauge = false;
};

class MetricLog {
 public:
  void add(std::string_view name, double value, bool gauge) {
    std::lock_guard lock(mutex_);
    items_.push_back({std::string(name), value, gauge});
  }
  std::vector<RecordedMetric> items() const {
    std::lock_guard lock(mutex_);
    return items_;
  }

 private:
  mutable std::mutex mutex_;
  std::vector<RecordedMetric> items_;
};

// What a running stage sees: its inputs, validated params, outputs, profiler and shared state.
class StageContext {
 public:
  struct Wiring {
    std::string node_id;
    const StageContract* contract = nullptr;
    std::map<std::string, Value, std::less<>> inputs;
    const ParamMap* params = nullptr;
    std::map<std::string, Value, std::less<>>* outputs = nullptr;
    Profiler* profiler = nullptr;
    SharedState* shared = nullptr;
    const std::atomic<bool>* cancel = nullptr;     // set when another node failed
    const std::atomic<bool>* interrupt = nullptr;  // set from outside (SIGINT)
    MetricLog* metrics = nullptr;                  // also records count and gauge calls
  };
  explicit StageContext(Wiring wiring) : w_(std::move(wiring)) {}

  template <class T>
  std::shared_ptr<const T> in(std::string_view port) const {
    const Value& v = input_value(port, port_type<T>());
    return std::static_pointer_cast<const T>(v.data);
  }
  bool has_input(std::string_view port) const { return w_.inputs.count(port) > 0; }

  template <class T>
  void out(std::string_view port, std::shared_ptr<const T> value) {
    set_output(port, Value{port_type<T>(), std::move(value)});
  }
  template <class T>
  void out(std::string_view port, std::shared_ptr<T> value) {
    out<T>(port, std::shared_ptr<const T>(std::move(value)));
  }

  template <class T>
  T param(std::string_view name) const {
    const ParamValue& v = param_value(name);
    if constexpr (std::is_same_v<T, bool>)
      return std::get<bool>(v);
    else if constexpr (std::is_integral_v<T>)
      return static_cast<T>(std::get<int64_t>(v));
    else if constexpr (std::is_floating_point_v<T>)
      return static_cast<T>(std::get<double>(v));
    else if constexpr (std::is_same_v<T, std::vector<int>>) {
      const auto& src = std::get<std::vector<int64_t>>(v);
      return T(src.begin(), src.end());
    } else if constexpr (std::is_same_v<T, std::vector<float>>) {
      const auto& src = std::get<std::vector<double>>(v);
      return T(src.begin(), src.end());
    } else
      return std::get<T>(v);
  }

  Profiler::Span span(std::string name) const;
  void count(std::string_view name, double delta = 1.0) const;
  void gauge(std::string_view name, double value) const;
  SharedState& shared() const;
  // The run's profiler, null when nothing is traced (for spans timed elsewhere: Profiler::track).
  Profiler* profiler() const { return w_.profiler; }
  const std::string& node_id() const { return w_.node_id; }
  bool cancelled() const;
  void throw_if_cancelled() const;  // for long loops: stop promptly when the run is cancelled

 private:
  const Value& input_value(std::string_view port, const PortType& want) const;
  const ParamValue& param_value(std::string_view name) const;
  void set_output(std::string_view port, Value v);
  Wiring w_;
};

// ---- Stage and registry ------------------------------------------------------------------------

// The versioned binary form of one port type, for the stage cache. `save` appends the value's
// bytes; `load` rebuilds an equal value from exactly those bytes (throwing CacheFormatError on
// anything else); `bytes` estimates the serialized size without serializing.
struct PortCodec {
  PortType type;
  uint32_t version = 1;
  std::function<void(const void*, ByteWriter&)> save;
  std::function<std::shared_ptr<const void>(ByteReader&)> load;
  std::function<uint64_t(const void*)> bytes;
};

class Stage {
 public:
  virtual ~Stage() = default;
  virtual StageContract contract() const = 0;
  // Semantic checks beyond types and ranges, run at validation time (before any work). Report each
  // problem as one sentence; the validator adds the node id and path.
  virtual void check(const ParamMap& /*params*/, std::vector<std::string>& /*problems*/) const {}
  virtual void run(StageContext& ctx) const = 0;
};

class Registry {
 public:
  using Factory = std::function<std::unique_ptr<Stage>()>;

  // Throws std::logic_error on a duplicate name (a programming error, not a user error).
  void add(Factory factory);
  template <class S>
  void add() {
    add([] { return std::make_unique<S>(); });
  }

  const Stage* find(std::string_view name) const;
  const StageContract* contract(std::string_view name) const;

  // Serialization of port type T for the stage cache (one codec per type).
  template <class T, class Save, class Load, class Bytes>
  void add_codec(uint32_t version, Save save, Load load, Bytes bytes) {
    PortCodec c;
    c.type = port_type<T>();
    c.version = version;
    c.save = [save](const void* v, ByteWriter& w) { save(*static_cast<const T*>(v), w); };
    c.load = [load](ByteReader& r) -> std::shared_ptr<const void> {
      return std::make_shared<const T>(load(r));
    };
    c.bytes = [bytes](const void* v) -> uint64_t { return bytes(*static_cast<const T*>(v)); };
    codecs_[c.type.id] = std::move(c);
  }
  const PortCodec* codec(const PortType& type) const;
  std::vector<std::string> names() const;  // sorted

  // A stage name that configs written for earlier versions may still use, and what replaced it:
  // a config naming it is told so instead of getting a bare "unknown stage".
  void retire(std::string name, std::string replacement);
  // The replacement of a retired name, or "".
  std::string replacement(std::string_view name) const;

 private:
  struct Entry {
    std::unique_ptr<Stage> stage;
    StageContract contract;
  };
  std::map<std::string, Entry, std::less<>> entries_;
  std::map<std::string, std::string, std::less<>> retired_;
  std::map<std::type_index, PortCodec> codecs_;
};

// Closest candidate by edit distance, or empty when none is close enough to suggest.
std::string did_you_mean(std::string_view word, const std::vector<std::string>& candidates);
// " (did you mean \"x\"?)" or "" — ready to append to a message.
std::string suggestion(std::string_view word, const std::vector<std::string>& candidates);

}  // namespace gen3d::pipeline
