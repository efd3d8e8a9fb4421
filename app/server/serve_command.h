#pragma once
// `gen3d serve`: an HTTP server over the same pipelines the command line runs. Two APIs:
//   - the reference Hunyuan3D-2 api_server.py protocol (POST /generate, POST /send,
//     GET /status/{uid}), unchanged for its clients;
//   - gen3d's job API (/v1/jobs: submit, list, state with per-node progress, server-sent events,
//     result, cancel), plus /health and /metrics (Prometheus text).
// Jobs run on a bounded queue with a fixed number of workers (docs/serve.md). The parts live in
// app/server/: reference_api (the first), job_api (the second), job_queue (the queue and
// the jobs' state), job_runner (the texture and shape pipelines the jobs run), http (shared).

#include <chrono>
#include <cstddef>
#include <string>

#include "app/cli/cache_command.h"

namespace gen3d::app::server {

struct ServeOptions {
  std::string host = "127.0.0.1";  // loopback unless told otherwise
  int port = 8081;                 // the reference server's port
  std::string models_dir;          // --models: shape model, paint (and delight) models
  int jobs = 1;                    // jobs run at once
  size_t queue = 16;               // jobs that may wait; past that requests get 429
  std::string max_body = "128M";   // largest request body (K, M, G suffixes)
  std::string data_dir;            // job folders (inputs, outputs); default: a temp folder
  std::string token;               // when set, every request needs "Authorization: Bearer T"
  bool insecure = false;           // allow a non-loopback address without a token
  int texture_size = 0;            // texture jobs' texture size (0: the config's default)
  int render_size = 0;             // texture jobs' view render size (0: the config's default)
  std::string grace = "30s";       // on SIGTERM, how long running jobs may take to finish
  int job_nice = 10;               // jobs' threads' nice value (1 to 19), below requests'; 0: same
  // --cache DIR, --cache-budget, --no-cache, --cache-all: the one stage cache all jobs share
  // (default: the command line's, $GEN3D_CACHE_DIR, else $XDG_CACHE_HOME/gen3d or ~/.cache/gen3d).
  cli::CacheOptions cache;
};

// "30s", "2m", "500ms", "1h", or a bare number of seconds ("0", "2.5"). Throws ConfigError.
std::chrono::milliseconds parse_duration(const std::string& text);

// "512", "64K", "128M", "1G" (powers of 1024) in bytes. Throws ConfigError.
size_t parse_byte_size(const std::string& text);

// Whether `host` names a loopback address (127.0.0.0/8, ::1, localhost).
bool is_loopback_host(const std::string& host);

// Serves until SIGINT/SIGTERM, then stops gracefully: new jobs are refused (503), queued ones
// cancelled, running ones given `grace` to finish and cancelled past it; a second signal cancels at
// once. Returns the exit code (0 once stopped; 2 for a refused configuration).
int cmd_serve(const ServeOptions& options);

}  // namespace gen3d::app::server
