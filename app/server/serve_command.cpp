#include "app/server/serve_command.h"

#include <sys/socket.h>
#include <unistd.h>

#include <cerrno>
#include <chrono>
#include <csignal>
#include <cstring>
#include <filesystem>
#include <memory>
#include <thread>

#include <fmt/format.h>
#include <httplib.h>
#include <spdlog/spdlog.h>

#include "app/cli/commands.h"
#include "app/server/http.h"
#include "app/server/job_api.h"
#include "app/server/job_queue.h"
#include "app/server/job_runner.h"
#include "app/server/reference_api.h"
#include "app/server/studio.h"
#include "pipeline/error.h"
#include "pipeline/stage_cache.h"

namespace gen3d::app::server {

namespace fs = std::filesystem;
using pipeline::ConfigError;

size_t parse_byte_size(const std::string& text) {
  size_t used = 0;
  unsigned long long value = 0;
  try {
    value = std::stoull(text, &used);
  } catch (const std::exception&) {
    throw ConfigError("--max-body " + text + ": expected a size such as 64M");
  }
  const std::string suffix = text.substr(used);
  int shift = 0;
  if (suffix == "K" || suffix == "k")
    shift = 10;
  else if (suffix == "M" || suffix == "m")
    shift = 20;
  else if (suffix == "G" || suffix == "g")
    shift = 30;
  else if (!suffix.empty())
    throw ConfigError("--max-body " + text + ": expected a size such as 64M (K, M or G)");
  if (value == 0 || value > (1ull << (40 - shift)))
    throw ConfigError("--max-body " + text + ": expected a size from 1 byte to 1T");
  return static_cast<size_t>(value << shift);
}

std::chrono::milliseconds parse_duration(const std::string& text) {
  const auto bad = [&] {
    return ConfigError("--grace " + text + ": expected a duration such as 30s, 2m or 500ms");
  };
  size_t used = 0;
  double value = 0;
  try {
    value = std::stod(text, &used);
  } catch (const std::exception&) {
    throw bad();
  }
  const std::string unit = text.substr(used);
  double ms_per_unit = 0;
  if (unit.empty() || unit == "s")
    ms_per_unit = 1000;
  else if (unit == "ms")
    ms_per_unit = 1;
  else if (unit == "m" || unit == "min")
    ms_per_unit = 60 * 1000;
  else if (unit == "h")
    ms_per_unit = 3600 * 1000;
  else
    throw bad();
  const double ms = value * ms_per_unit;
  if (!(ms >= 0) || ms > 7 * 24 * 3600 * 1000.0) throw bad();  // NaN too
  return std::chrono::milliseconds(static_cast<long long>(ms));
}

bool is_loopback_host(const std::string& host) {
  return host == "localhost" || host == "::1" || host == "[::1]" || host.starts_with("127.");
}

namespace {

// The code of a status that a handler did not answer itself (routing, body limits).
const char* status_code_name(int status) {
  switch (status) {
    case 400:
      return "bad_request";
    case 401:
      return "unauthorized";
    case 404:
      return "not_found";
    case 405:
      return "method_not_allowed";
    case 413:
      return "body_too_large";
    case 414:
      return "uri_too_long";
    default:
      return status < 500 ? "client_error" : "internal_error";
  }
}

// The message of such a status.
std::string status_text(int status) {
  switch (status) {
    case 404:
      return "no such endpoint";
    case 405:
      return "method not allowed on this endpoint";
    case 413:
      return "the request body is larger than this server accepts (--max-body)";
    case 400:
      return "malformed request";
    default:
      return fmt::format("HTTP status {}", status);
  }
}

// SIGINT and SIGTERM received: the first stops the server gracefully, the second cuts the grace.
std::atomic<int>& stop_signals() {
  static std::atomic<int> count{0};
  return count;
}

class Server {
 public:
  explicit Server(const ServeOptions& o)
      : options_(o),
        data_dir_(o.data_dir.empty()
                      ? fs::temp_directory_path() / fmt::format("gen3d-serve-{}", ::getpid())
                      : fs::path(o.data_dir)),
        cache_(cli::open_stage_cache(o.cache)),
        runner_(find_serve_models(o.models_dir), o.texture_size, o.render_size, cache_.get()),
        jobs_(o.jobs, o.queue, data_dir_ / "jobs", o.job_nice) {
    routes();
  }

  int serve() {
    const auto max_body = parse_byte_size(options_.max_body);
    http_.set_payload_max_length(max_body);
    // A response goes out in two writes (headers, then body): with Nagle's algorithm the second
    // waits for the client's delayed ACK, some 40 ms per request on a kept-alive connection.
    http_.set_tcp_nodelay(true);
    // Each waiting /generate and each event stream holds a thread while it lasts.
    const size_t threads = static_cast<size_t>(options_.jobs) + options_.queue + 8;
    http_.new_task_queue = [threads] { return new httplib::ThreadPool(threads); };
    // The library listens with a backlog of 5 (CPPHTTPLIB_LISTEN_BACKLOG, fixed when it was
    // built): a burst of clients overflows it, and the kernel drops their handshakes, some of them
    // after the client has sent its request. The socket is listened on again with the system's
    // maximum once bound.
    int listen_fd = -1;
    http_.set_socket_options([&listen_fd](socket_t sock) {
      httplib::default_socket_options(sock);
      listen_fd = sock;
    });
    int port = options_.port;
    if (port == 0) {
      port = http_.bind_to_any_port(options_.host);
      if (port < 0) throw std::runtime_error("cannot bind " + options_.host);
    } else if (!http_.bind_to_port(options_.host, port)) {
      throw std::runtime_error(
          fmt::format("cannot listen on {}:{} (in use, or not an address of this machine)",
                      options_.host, port));
    }
    if (listen_fd >= 0 && ::listen(listen_fd, SOMAXCONN) != 0)
      spdlog::warn("gen3d serve: cannot raise the listen backlog: {}", std::strerror(errno));
    const ServeModels& models = runner_.models();
    spdlog::info("gen3d serve: listening on http://{}:{} ({} worker{}, queue {}, jobs in {}{}{})",
                 options_.host, port, options_.jobs, options_.jobs == 1 ? "" : "s", options_.queue,
                 data_dir_.string(),
                 models.paint.empty() ? ", model-free texturing" : ", paint models " + models.paint,
                 models.shape.empty() ? ", no shape model" : ", shape model " + models.shape);
    spdlog::info("gen3d serve: stage cache {}",
                 cache_ ? cache_->options().dir : std::string("off (every node runs)"));
    std::atomic<bool> done{false};
    std::thread watcher([&] {
      while (!done.load()) {
        if (cli::interrupt_flag().load()) {
          stop_gracefully();
          return;
        }
        std::this_thread::sleep_for(std::chrono::milliseconds(50));
      }
    });
    const bool ok = http_.listen_after_bind();
    done.store(true);
    watcher.join();
    jobs_.shutdown();
    spdlog::info("gen3d serve: stopped");
    return ok || cli::interrupt_flag().load() ? 0 : 1;
  }

 private:
  // Refuses new jobs and cancels the queued ones, gives the running ones the grace period (cut
  // short by a second signal), cancels what still runs, then stops the HTTP server. Until then
  // it answers as before (a client polls its job's state and fetches its result; /health says
  // "stopping" with 503), and a waiting /generate gets its answer.
  void stop_gracefully() {
    const auto grace = parse_duration(options_.grace);
    const QueueCounts c = jobs_.counts();
    spdlog::info(
        "gen3d serve: stopping: no new jobs, {} queued cancelled, {} running given {:.1f} s to "
        "finish",
        c.queued, c.running, static_cast<double>(grace.count()) / 1000.0);
    jobs_.drain();
    const auto deadline = std::chrono::steady_clock::now() + grace;
    bool idle = false;
    while (!idle && std::chrono::steady_clock::now() < deadline && stop_signals() < 2)
      idle = jobs_.wait_idle(
          std::min(deadline, std::chrono::steady_clock::now() + std::chrono::milliseconds(50)));
    if (!idle) {
      const QueueCounts left = jobs_.counts();
      spdlog::warn("gen3d serve: {}: cancelling {} running job{}",
                   stop_signals() < 2 ? "grace period over" : "second signal", left.running,
                   left.running == 1 ? "" : "s");
    }
    // Jobs first: a waiting /generate is answered and an event stream ends, so the server's
    // threads are free when it stops.
    jobs_.shutdown();
    http_.stop();
  }

  void routes() {
    http_.set_pre_routing_handler([this](const httplib::Request& req, httplib::Response& res) {
      request_start() = std::chrono::steady_clock::now();
      // The studio's page and scripts hold no data: a browser loads them without the token (the
      // page asks for it and sends it with its API calls).
      if (options_.token.empty() || authorized(req) ||
          (req.method == "GET" && is_studio_path(req.path)))
        return httplib::Server::HandlerResponse::Unhandled;
      res.set_header("WWW-Authenticate", "Bearer");
      send_error(res, 401, "unauthorized", "this server needs \"Authorization: Bearer <token>\"");
      return httplib::Server::HandlerResponse::Handled;
    });
    http_.set_error_handler(httplib::Server::HandlerWithResponse(
        [](const httplib::Request& req, httplib::Response& res) {
          if (!res.body.empty() || res.content_length_ > 0)
            return httplib::Server::HandlerResponse::Unhandled;
          // cpp-httplib parses form bodies itself and refuses those over 8 KiB (curl -d sends
          // one unless told otherwise).
          if (res.status == 413 &&
              req.get_header_value("Content-Type").starts_with("application/x-www-form-urlencoded"))
            send_error(res, 413, "body_too_large",
                       "a form-encoded body is limited to 8 KiB: send JSON with \"Content-Type: "
                       "application/json\"");
          else
            send_error(res, res.status, status_code_name(res.status), status_text(res.status));
          return httplib::Server::HandlerResponse::Handled;
        }));
    http_.set_exception_handler(
        [](const httplib::Request&, httplib::Response& res, std::exception_ptr) {
          send_error(res, 500, "internal_error", "the request failed inside the server");
        });
    http_.set_logger([](const httplib::Request& req, const httplib::Response& res) {
      const double ms = std::chrono::duration<double, std::milli>(std::chrono::steady_clock::now() -
                                                                  request_start())
                            .count();
      spdlog::info("http method={} path={} status={} bytes={} ms={:.1f}", req.method, req.path,
                   res.status, res.body.size() + res.content_length_, ms);
    });

    add_reference_routes(http_, jobs_, runner_);
    add_job_routes(http_, jobs_, runner_);
    add_studio_routes(http_);
  }

  static std::chrono::steady_clock::time_point& request_start() {
    thread_local std::chrono::steady_clock::time_point start;
    return start;
  }

  bool authorized(const httplib::Request& req) const {
    const std::string expected = "Bearer " + options_.token;
    const std::string given = req.get_header_value("Authorization");
    if (given.size() != expected.size()) return false;
    unsigned diff = 0;  // compared in constant time
    for (size_t i = 0; i < given.size(); ++i) diff |= static_cast<unsigned>(given[i] ^ expected[i]);
    return diff == 0;
  }

  const ServeOptions options_;
  const fs::path data_dir_;
  std::unique_ptr<pipeline::StageCache> cache_;  // null with --no-cache; shared by every job
  JobRunner runner_;  // outlives the queue: its workers run jobs through it
  httplib::Server http_;
  JobQueue jobs_;
};

extern "C" void on_stop_signal(int) {
  stop_signals().fetch_add(1);
  cli::interrupt_flag().store(true);
}

}  // namespace

int cmd_serve(const ServeOptions& o) {
  if (!is_loopback_host(o.host) && o.token.empty() && !o.insecure) {
    spdlog::error(
        "--host {} is not a loopback address: give --token T (clients then send "
        "\"Authorization: Bearer T\") or --insecure to serve anyone who can reach it",
        o.host);
    return 2;
  }
  if (o.jobs < 1) throw ConfigError("--jobs: at least 1");
  if (o.job_nice < 0 || o.job_nice > 19) throw ConfigError("--job-nice: from 0 to 19");
  parse_byte_size(o.max_body);  // refused before anything starts
  parse_duration(o.grace);
  std::signal(SIGTERM, on_stop_signal);
  std::signal(SIGINT, on_stop_signal);
  Server server(o);
  return server.serve();
}

}  // namespace gen3d::app::server
