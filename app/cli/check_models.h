#pragma once
// `gen3d models check PATH [--json]`: runs assets/pipelines/check_models.json (the check_models
// stage) on a model folder or one weights file and prints its report; exits 1 when the folder
// has problems.

#include <string>

#include "app/cli/commands.h"

namespace gen3d::app::cli {

struct CheckModelsOptions {
  RunOptions run;     // -j, --set, --trace, --metrics
  std::string path;   // a model folder or a .safetensors / .bin file
  bool json = false;  // --json: a file's tensors as JSON lines
};

int cmd_check_models(const CheckModelsOptions& options);

}  // namespace gen3d::app::cli
