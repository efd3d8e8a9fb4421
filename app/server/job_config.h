#pragma once
// A pipeline config a client sends with a job (the studio's config editor): checked against the
// stage contracts as every config is (pipeline/graph.h), then against what a job may do on the
// server. Its stages are those of the texture pipelines the server runs; the files it reads are
// the job's own (uploads, named relative to the job's folder) or the server's model files; it
// writes one mesh, the job's result, under a plain file name in the job's folder. Both the job API
// and POST /v1/validate check a config with job_config_graph, so they never disagree.

#include <set>
#include <string>
#include <vector>

#include <nlohmann/json.hpp>

#include "pipeline/error.h"
#include "pipeline/graph.h"

namespace gen3d::app::server {

// What a job's config may name.
struct JobFolder {
  std::set<std::string> names;     // the uploads in the job's folder
  size_t views = 0;                // view images in its views/ folder (a "views" job), or 0
  std::vector<std::string> roots;  // server folders it may read from as they are (the models)
  std::string dir;                 // the folder; "" checks in a stand-in (empty files, removed)
};

// The graph of `config` for a job in `folder`. Throws ConfigError with every problem (the
// contracts' and the server's), each at its JSON path. A string in the config's variables or
// parameters that names one of the job's files (relative to its folder: "box.glb", "views")
// becomes its path in the folder; the result's file name becomes its path there too, given back
// in `output`.
pipeline::Graph job_config_graph(const nlohmann::json& config, const JobFolder& folder,
                                 std::string* output = nullptr);

// The stages a job's config may use: those of the texture configs the server runs.
const std::set<std::string>& job_config_stages();

// [{"path", "node", "message"}] of a ConfigError, for a client to show at each JSON path.
nlohmann::json problems_json(const pipeline::ConfigError& error);

}  // namespace gen3d::app::server
