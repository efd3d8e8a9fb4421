#pragma once
// The shipped pipeline configs (assets/pipelines/<name>.json) that commands run, compiled into the
// executable so it works from any directory. The list lives in app/cli/CMakeLists.txt.

#include <string>
#include <string_view>

#include <nlohmann/json.hpp>

#include "pipeline/config.h"

namespace gen3d::app::cli {

// The file's text as shipped. Throws ConfigError for a name that is not compiled in.
std::string_view shipped_config_text(std::string_view name);

// The parsed config with `vars` set; messages name it as "<command>
// (assets/pipelines/<name>.json)". Setting a variable the config does not have is a ConfigError
// (the command and the config disagree).
pipeline::PipelineConfig shipped_config(std::string_view name, const std::string& command,
                                        const nlohmann::json& vars = nlohmann::json::object());

}  // namespace gen3d::app::cli
