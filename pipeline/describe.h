#pragma once
// Documents generated from the stage contracts, so they never drift from the code.

#include <string>

#include "pipeline/stage.h"

namespace gen3d::pipeline {

// Every stage with its ports and parameters, as JSON (`gen3d stages --json`).
std::string stages_json(const Registry& registry);

// The same as readable text (`gen3d stages`).
std::string stages_text(const Registry& registry);

// The same as one Markdown page (`gen3d stages --markdown`, committed as docs/stages.md): an index,
// the port types with the stages that make and take them, then one section per stage.
std::string stages_markdown(const Registry& registry);

// JSON Schema (draft 2020-12) for pipeline files: nodes are checked per stage, parameters per type
// and range, and "$var" strings are accepted wherever a parameter is.
std::string pipeline_schema(const Registry& registry);

}  // namespace gen3d::pipeline
