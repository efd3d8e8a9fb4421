#pragma once
// What a run leaves behind for people and programs: the summary table, the metrics JSON, the
// critical path.

#include <string>
#include <vector>

#include "pipeline/executor.h"
#include "pipeline/graph.h"
#include "pipeline/profiler.h"

namespace gen3d::pipeline {

// Node indices on the longest chain of dependent node wall times, producer first.
std::vector<size_t> critical_path(const Graph& graph, const RunResult& run);

// Table of node, stage, wall ms, share of the run, critical-path mark; then the run's wall time,
// the concurrency achieved (sum of node times / wall) and the counters.
std::string format_summary(const Graph& graph, const RunResult& run, const Profiler& profiler);

// {"pipeline","wall_ms","peak_rss_mb","ok","error","concurrency","critical_path",
//  "nodes":[{"id","stage","status","start_ms","wall_ms","thread"}], "counters":{...}}
std::string metrics_json(const Graph& graph, const RunResult& run, const Profiler& profiler);

// Peak resident set size of this process so far, in MiB.
double peak_rss_mb();

}  // namespace gen3d::pipeline
