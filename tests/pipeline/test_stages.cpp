#include "test_stages.h"

#include <chrono>
#include <stdexcept>
#include <thread>

#include <spdlog/spdlog.h>

#include "progress/progress.h"

namespace gen3d::test {

using pipeline::Range;
using pipeline::StageContext;
using pipeline::StageContract;

namespace {

void sleep_ms(int64_t ms) {
  std::this_thread::sleep_for(std::chrono::milliseconds(ms));
}

class Const final : public pipeline::Stage {
 public:
  StageContract contract() const override {
    return StageContract("test_const", "emit a number")
        .output<Number>("value")
        .param<double>("value", 1.0, "the number")
        .param<int>("sleep_ms", 0, Range{0, 10000}, "pause before emitting");
  }
  void run(StageContext& ctx) const override {
    sleep_ms(ctx.param<int64_t>("sleep_ms"));
    ctx.out("value", std::make_shared<Number>(Number{ctx.param<double>("value")}));
  }
};

class Add final : public pipeline::Stage {
 public:
  StageContract contract() const override {
    return StageContract("test_add", "add two numbers")
        .input<Number>("a")
        .input<Number>("b")
        .output<Number>("sum");
  }
  void run(StageContext& ctx) const override {
    ctx.out("sum", std::make_shared<Number>(
                       Number{ctx.in<Number>("a")->value + ctx.in<Number>("b")->value}));
  }
};

template <bool kModel>
class Sleep final : public pipeline::Stage {
 public:
  StageContract contract() const override {
    StageContract c(kModel ? "test_model_sleep" : "test_sleep", "sleep, then pass a number on");
    c.optional_input<Number>("in").output<Number>("out").param<int>("sleep_ms", 50, Range{0, 10000},
                                                                    "how long");
    if (kModel) c.model_class();
    return c;
  }
  void run(StageContext& ctx) const override {
    auto span = ctx.span("nap");
    sleep_ms(ctx.param<int64_t>("sleep_ms"));
    ctx.count("test.naps", 1);
    const double v = ctx.has_input("in") ? ctx.in<Number>("in")->value : 0.0;
    ctx.out("out", std::make_shared<Number>(Number{v + 1}));
  }
};

class Fail final : public pipeline::Stage {
 public:
  StageContract contract() const override {
    return StageContract("test_fail", "throw")
        .optional_input<Number>("in")
        .output<Number>("out")
        .param<std::string>("message", "boom", "the exception's message");
  }
  void run(StageContext& ctx) const override {
    throw std::runtime_error(ctx.param<std::string>("message"));
  }
};

class MakeText final : public pipeline::Stage {
 public:
  StageContract contract() const override {
    return StageContract("test_text", "emit a text").output<Text>("text");
  }
  void run(StageContext& ctx) const override {
    ctx.out("text", std::make_shared<Text>(Text{"hello"}));
  }
};

class Params final : public pipeline::Stage {
 public:
  StageContract contract() const override {
    return StageContract("test_params", "one parameter of each kind")
        .output<Number>("out")
        .param<int>("size", 512, Range{64, 16384}, "an integer with a range")
        .param<double>("scale", 1.0, Range{0.0, 10.0}, "a number with a range")
        .param<bool>("flag", false, "a boolean")
        .param<std::string>("label", "x", "a string")
        .choice("mode", "fast", {"fast", "exact"}, "an enum")
        .param<std::vector<double>>("weights", std::vector<double>{1.0}, "a list of numbers")
        .required<std::string>("path", "a required string");
  }
  void run(StageContext& ctx) const override {
    ctx.out("out", std::make_shared<Number>(Number{ctx.param<double>("scale") *
                                                   static_cast<double>(ctx.param<int>("size"))}));
  }
};

class Check final : public pipeline::Stage {
 public:
  StageContract contract() const override {
    return StageContract("test_check", "rejects mode \"bad\" at validation time")
        .output<Number>("out")
        .param<std::string>("mode", "good", "anything but bad");
  }
  void check(const pipeline::ParamMap& params, std::vector<std::string>& problems) const override {
    if (std::get<std::string>(params.at("mode")) == "bad")
      problems.push_back("mode \"bad\" is refused");
  }
  void run(StageContext& ctx) const override { ctx.out("out", std::make_shared<Number>()); }
};

// Counts `steps` progress steps and logs a warning from inside the node.
class Steps final : public pipeline::Stage {
 public:
  StageContract contract() const override {
    return StageContract("test_steps", "report progress steps and a warning")
        .optional_input<Number>("in")
        .output<Number>("out")
        .param<int>("steps", 3, Range{0, 1000}, "steps to count");
  }
  void run(StageContext& ctx) const override {
    const int n = ctx.param<int>("steps");
    progress::Steps steps("test step", n);
    for (int i = 0; i < n; ++i) steps.next();
    spdlog::warn("{}: counted {} steps", ctx.node_id(), n);
    ctx.out("out", std::make_shared<Number>(Number{static_cast<double>(n)}));
  }
};

class NoOutput final : public pipeline::Stage {
 public:
  StageContract contract() const override {
    return StageContract("test_no_output", "forgets its output").output<Number>("out");
  }
  void run(StageContext&) const override {}
};

}  // namespace

void register_test_stages(pipeline::Registry& r) {
  r.add<Const>();
  r.add<Add>();
  r.add<Sleep<false>>();
  r.add<Sleep<true>>();
  r.add<Fail>();
  r.add<MakeText>();
  r.add<Params>();
  r.add<Check>();
  r.add<NoOutput>();
  r.add<Steps>();
}

const pipeline::Registry& test_registry() {
  static const pipeline::Registry reg = [] {
    pipeline::Registry r;
    register_test_stages(r);
    r.retire("test_old", "it became test_const");
    return r;
  }();
  return reg;
}

pipeline::PipelineConfig config_from(const std::string& json_text) {
  return pipeline::parse_config(nlohmann::json::parse(json_text), "test.json");
}

pipeline::Graph graph_from(const std::string& json_text, const std::vector<std::string>& sets) {
  auto cfg = config_from(json_text);
  pipeline::apply_overrides(cfg, sets);
  return pipeline::build_graph(cfg, test_registry());
}

}  // namespace gen3d::test
