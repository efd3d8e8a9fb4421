#pragma once
// `gen3d texture --report`: one self-contained HTML page about a finished texgen run.

#include <string>

#include "pipeline/executor.h"
#include "pipeline/graph.h"
#include "pipeline/profiler.h"

namespace gen3d::app::cli {

// Thumbnails of the normal/position maps and view images, the texture with its coverage overlay,
// the bake report's counters and the stage timeline (from the profiler's spans). Images are
// embedded as PNG data URIs, so the page needs nothing else.
std::string texgen_report_html(const pipeline::Graph& graph, const pipeline::RunResult& run,
                               const pipeline::Profiler& profiler);

}  // namespace gen3d::app::cli
