#pragma once
// gen3d's own job API: POST /v1/jobs (pipelines "texture" and "shape"), GET /v1/jobs,
// GET /v1/jobs/{id} (state with per-node progress), GET /v1/jobs/{id}/events (server-sent
// events), GET /v1/jobs/{id}/result, /trace and /report, DELETE /v1/jobs/{id}; and GET /health,
// GET /metrics (Prometheus text).

#include <httplib.h>

#include "app/server/job_queue.h"
#include "app/server/job_runner.h"

namespace gen3d::app::server {

// Registers the routes on `http`; their jobs go on `jobs` and run through `runner`.
void add_job_routes(httplib::Server& http, JobQueue& jobs, JobRunner& runner);

}  // namespace gen3d::app::server
