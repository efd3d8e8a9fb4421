#pragma once
// The one logger: spdlog's default logger, printing on stderr (or through a sink the front end
// gives), and forwarding every message to the progress hub as a log event.

#include <spdlog/common.h>

namespace gen3d::pipeline {

// The sink that prints log lines on stderr, in color where stderr is a terminal.
spdlog::sink_ptr stderr_log_sink();

// verbosity: 0 = info, 1 = debug (-v), 2+ = trace (-vv), -1 = warnings only (-q).
// GEN3D_LOG_LEVEL (trace|debug|info|warn|error|off) wins when set, so tests and services can pin
// it. `console` prints the log lines (null: nothing is printed, e.g. when stderr carries JSON
// events instead); whatever the level lets through also becomes a progress log event (with the
// node that logged it) while anyone listens to the hub.
void init_logging(int verbosity, spdlog::sink_ptr console);
inline void init_logging(int verbosity) {
  init_logging(verbosity, stderr_log_sink());
}

}  // namespace gen3d::pipeline
