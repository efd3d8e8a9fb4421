#pragma once
// Stages that exist only in the test binary: they exercise the runtime without real work.

#include <string>

#include "pipeline/config.h"
#include "pipeline/graph.h"
#include "pipeline/stage.h"

namespace gen3d::test {

struct Number {
  double value = 0;
};
struct Text {
  std::string value;
};

// test_const, test_add, test_sleep, test_model_sleep, test_fail, test_text, test_params,
// test_check, test_no_output, test_steps.
void register_test_stages(pipeline::Registry& registry);

// A registry holding only the test stages.
const pipeline::Registry& test_registry();

// Parses an inline JSON config (throws ConfigError like a file would).
pipeline::PipelineConfig config_from(const std::string& json_text);

// Builds and validates; returns the graph (throws ConfigError).
pipeline::Graph graph_from(const std::string& json_text, const std::vector<std::string>& sets = {});

}  // namespace gen3d::test

GEN3D_PORT_TYPE(gen3d::test::Number, "Number");
GEN3D_PORT_TYPE(gen3d::test::Text, "Text");
