#pragma once
// The one logger: spdlog's default logger writing to stderr.

#include <string>

namespace gen3d::pipeline {

// verbosity: 0 = info, 1 = debug (-v), 2+ = trace (-vv), -1 = warnings only (-q).
// GEN3D_LOG_LEVEL (trace|debug|info|warn|error|off) wins when set, so tests and services can pin
// it.
void init_logging(int verbosity);

}  // namespace gen3d::pipeline
