#pragma once
// The protocol of Hunyuan3D-2's api_server.py, unchanged for its clients: POST /generate (the
// model file in the answer), POST /send ({"uid"} at once) and GET /status/{uid} (processing,
// texturing, completed with the file in base64, or failed). docs/serve.md lists where gen3d
// answers differently on purpose.

#include <httplib.h>

#include "app/server/job_queue.h"
#include "app/server/job_runner.h"

namespace gen3d::app::server {

// Registers the three routes on `http`; their jobs go on `jobs` and run through `runner`.
void add_reference_routes(httplib::Server& http, JobQueue& jobs, JobRunner& runner);

}  // namespace gen3d::app::server
