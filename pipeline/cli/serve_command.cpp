#include "pipeline/cli/serve_command.h"

#include <unistd.h>

#include <algorithm>
#include <chrono>
#include <csignal>
#include <filesystem>
#include <fstream>
#include <optional>
#include <thread>

#include <fmt/format.h>
#include <httplib.h>
#include <spdlog/spdlog.h>
#include <nlohmann/json.hpp>

#include "io/base64.h"
#include "mesh/io.h"
#include "pipeline/cli/commands.h"
#include "pipeline/cli/serve_jobs.h"
#include "pipeline/error.h"
#include "pipeline/executor.h"
#include "pipeline/graph.h"
#include "pipeline/profiler.h"

namespace gen3d::cli {

namespace fs = std::filesystem;
using nlohmann::json;
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

bool is_loopback_host(const std::string& host) {
  return host == "localhost" || host == "::1" || host == "[::1]" || host.starts_with("127.");
}

namespace {

// An answer other than success: status, stable code and message, sent as a JSON body.
class HttpError : public std::runtime_error {
 public:
  HttpError(int status, std::string code, const std::string& message)
      : std::runtime_error(message), status(status), code(std::move(code)) {}
  int status;
  std::string code;
};

void send_json(httplib::Response& res, int status, const json& body) {
  res.status = status;
  res.set_content(body.dump(), "application/json");
}

void send_error(httplib::Response& res, int status, const std::string& code,
                const std::string& message) {
  send_json(res, status, {{"error", message}, {"error_code", code}});
}

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

json parse_body(const httplib::Request& req) {
  json body = json::parse(req.body, nullptr, false);
  if (body.is_discarded()) throw HttpError(400, "bad_json", "the request body is not valid JSON");
  if (!body.is_object()) throw HttpError(400, "bad_json", "the request body must be a JSON object");
  return body;
}

std::string decode_field(const json& body, const std::string& key) {
  if (!body[key].is_string())
    throw HttpError(400, "bad_field", "\"" + key + "\" must be a base64 string");
  try {
    return io::base64_decode(body[key].get_ref<const std::string&>());
  } catch (const std::invalid_argument& e) {
    throw HttpError(400, "bad_base64", "\"" + key + "\": " + e.what());
  }
}

// The file extension for image bytes, by their signature.
std::string image_extension(const std::string& bytes, const std::string& field) {
  if (bytes.starts_with("\x89PNG")) return ".png";
  if (bytes.starts_with("\xFF\xD8\xFF")) return ".jpg";
  if (bytes.size() >= 12 && bytes.starts_with("RIFF") && bytes.substr(8, 4) == "WEBP")
    return ".webp";
  throw HttpError(400, "bad_image", "\"" + field + "\" is not a PNG, JPEG or WebP image");
}

std::string content_type(const std::string& path) {
  const std::string ext = fs::path(path).extension().string();
  if (ext == ".glb") return "model/gltf-binary";
  if (ext == ".obj") return "text/plain";
  return "application/octet-stream";
}

void write_file(const fs::path& path, const std::string& bytes) {
  std::ofstream out(path, std::ios::binary);
  out.write(bytes.data(), static_cast<std::streamsize>(bytes.size()));
  if (!out) throw std::runtime_error("cannot write " + path.string());
}

std::string read_file(const std::string& path) {
  std::ifstream in(path, std::ios::binary);
  if (!in) throw std::runtime_error("cannot read " + path);
  return std::string(std::istreambuf_iterator<char>(in), {});
}

double unix_seconds(Job::Clock::time_point t) {
  if (t == Job::Clock::time_point{}) return 0;
  return std::chrono::duration<double>(t.time_since_epoch()).count();
}

// The status a failed job's error is answered with.
int error_status(const JobError& e) {
  if (e.code == "cancelled") return 503;
  return e.client_fault ? 400 : 500;
}

// An uploaded file: its name in the job's folder and its bytes.
struct Upload {
  std::string name;
  std::string bytes;
};

class Server {
 public:
  explicit Server(const ServeOptions& o)
      : options_(o),
        data_dir_(o.data_dir.empty()
                      ? fs::temp_directory_path() / fmt::format("gen3d-serve-{}", ::getpid())
                      : fs::path(o.data_dir)),
        jobs_(o.jobs, o.queue, data_dir_ / "jobs") {
    paint_models_ = has_paint_models(o.models_dir) ? o.models_dir : "";
    routes();
  }

  int serve() {
    const auto max_body = parse_byte_size(options_.max_body);
    http_.set_payload_max_length(max_body);
    // Each waiting /generate and each event stream holds a thread while it lasts.
    const size_t threads = static_cast<size_t>(options_.jobs) + options_.queue + 8;
    http_.new_task_queue = [threads] { return new httplib::ThreadPool(threads); };
    int port = options_.port;
    if (port == 0) {
      port = http_.bind_to_any_port(options_.host);
      if (port < 0) throw std::runtime_error("cannot bind " + options_.host);
    } else if (!http_.bind_to_port(options_.host, port)) {
      throw std::runtime_error(
          fmt::format("cannot listen on {}:{} (in use, or not an address of this machine)",
                      options_.host, port));
    }
    spdlog::info(
        "gen3d serve: listening on http://{}:{} ({} worker{}, queue {}, jobs in {}{})",
        options_.host, port, options_.jobs, options_.jobs == 1 ? "" : "s", options_.queue,
        data_dir_.string(),
        paint_models_.empty() ? ", model-free texturing" : ", paint models " + paint_models_);
    std::atomic<bool> done{false};
    std::thread watcher([&] {
      while (!done.load()) {
        if (interrupt_flag().load()) {
          spdlog::info("gen3d serve: stopping");
          // Jobs first: a waiting /generate is answered and an event stream ends, so the
          // server's threads are free when it stops.
          jobs_.shutdown();
          http_.stop();
          return;
        }
        std::this_thread::sleep_for(std::chrono::milliseconds(100));
      }
    });
    const bool ok = http_.listen_after_bind();
    done.store(true);
    watcher.join();
    jobs_.shutdown();
    return ok || interrupt_flag().load() ? 0 : 1;
  }

 private:
  static bool has_paint_models(const std::string& dir) {
    if (dir.empty()) return false;
    const fs::path root(dir);
    return fs::is_directory(root / "hunyuan3d-paint-v2-0") ||
           fs::is_directory(root / "hunyuan3d-paintpbr-v2-1");
  }

  // Wraps a handler: HttpError, ConfigError and anything else become JSON errors.
  template <class F>
  httplib::Server::Handler guarded(F f) {
    return [f](const httplib::Request& req, httplib::Response& res) {
      try {
        f(req, res);
      } catch (const HttpError& e) {
        send_error(res, e.status, e.code, e.what());
      } catch (const ConfigError& e) {
        send_error(res, 400, "bad_request", e.what());
      } catch (const std::exception& e) {
        spdlog::error("{} {}: {}", req.method, req.path, e.what());
        send_error(res, 500, "internal_error", e.what());
      }
    };
  }

  void routes() {
    http_.set_pre_routing_handler([this](const httplib::Request& req, httplib::Response& res) {
      request_start() = std::chrono::steady_clock::now();
      if (options_.token.empty() || authorized(req))
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

    // The reference api_server.py protocol.
    http_.Post("/generate", guarded([this](const auto& req, auto& res) { generate(req, res); }));
    http_.Post("/send", guarded([this](const auto& req, auto& res) { send(req, res); }));
    http_.Get(R"(/status/([^/]+))",
              guarded([this](const auto& req, auto& res) { status(req, res); }));

    // gen3d's own API.
    http_.Get("/health", guarded([this](const auto&, auto& res) { health(res); }));
    http_.Get("/metrics", guarded([this](const auto&, auto& res) { metrics(res); }));
    http_.Post("/v1/jobs", guarded([this](const auto& req, auto& res) { submit_job(req, res); }));
    http_.Get("/v1/jobs", guarded([this](const auto&, auto& res) { list_jobs(res); }));
    http_.Get(R"(/v1/jobs/([^/]+))", guarded([this](const auto& req, auto& res) {
                send_json(res, 200, job_json(*job(req)));
              }));
    http_.Get(R"(/v1/jobs/([^/]+)/events)",
              guarded([this](const auto& req, auto& res) { events(req, res); }));
    http_.Get(R"(/v1/jobs/([^/]+)/result)",
              guarded([this](const auto& req, auto& res) { result(req, res); }));
    http_.Delete(R"(/v1/jobs/([^/]+))", guarded([this](const auto& req, auto& res) {
                   const auto j = job(req);
                   j->cancel();
                   send_json(res, 202, job_json(*j));
                 }));
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

  std::shared_ptr<Job> job(const httplib::Request& req) const {
    auto j = jobs_.find(req.matches[1]);
    if (!j) throw HttpError(404, "unknown_job", "no job " + std::string(req.matches[1]));
    return j;
  }

  std::shared_ptr<Job> enqueue(const std::string& kind, JobWork work, httplib::Response& res) {
    auto j = jobs_.submit(kind, std::move(work));
    if (!j) {
      res.set_header("Retry-After", "10");
      throw HttpError(
          503, "queue_full",
          fmt::format("the job queue is full ({} waiting): retry later", jobs_.capacity()));
    }
    return j;
  }

  // ---- Texturing, shared by both APIs ----

  // Runs `gen3d texture`'s graph for `t` as this job; its output is `t.output`.
  JobOutput run_texture(JobContext& ctx, TextureOptions t) {
    ctx.job.set_phase("texturing");
    t.models_dir = paint_models_;
    if (t.texture_size == 0) t.texture_size = options_.texture_size;
    if (t.render_size == 0) t.render_size = options_.render_size;
    const pipeline::Graph graph = texture_graph(t);
    pipeline::Profiler profiler;
    pipeline::ExecutorOptions exec;
    exec.interrupt = &ctx.cancel;
    exec.run_id = ctx.job.id;
    exec.elide_unused = true;  // no report: what only a report shows is not run
    const pipeline::RunResult run = pipeline::execute(graph, profiler, exec, &shared_);
    if (run.interrupted) throw JobFailure("cancelled", "cancelled", false);
    if (run.error) {
      // A file the client sent that does not load is the client's fault.
      bool input = false;
      for (const pipeline::NodeRun& n : run.nodes)
        input = input || (n.status == pipeline::NodeStatus::Failed && n.stage.starts_with("load_"));
      throw JobFailure(input ? "bad_input" : "pipeline_failed", *run.error, input);
    }
    return {t.output, content_type(t.output)};
  }

  // ---- The reference protocol ----

  // The job a /generate or /send body asks for; throws HttpError for what cannot run.
  JobWork generate_work(const json& body) {
    // api_server.py ModelWorker.generate: "image" (else "text", through text-to-image).
    if (!body.contains("image")) {
      if (body.contains("text"))
        throw HttpError(400, "text_not_supported",
                        "text-to-image is not supported by gen3d: send \"image\" (base64)");
      throw HttpError(400, "missing_image", "No input image or text provided: send \"image\"");
    }
    Upload image{"image", decode_field(body, "image")};
    image.name += image_extension(image.bytes, "image");
    std::vector<std::pair<std::string, Upload>> views;  // view name, file
    for (const char* view : {"left", "back", "right"}) {
      const std::string key = std::string("image_") + view;
      if (!body.contains(key) || body[key].is_null()) continue;
      Upload u{key, decode_field(body, key)};
      u.name += image_extension(u.bytes, key);
      views.emplace_back(view, std::move(u));
    }
    const std::string type = body.value("type", std::string("glb"));
    if (type != "glb" && type != "obj" && type != "ply")
      throw HttpError(400, "unsupported_type",
                      "\"type\": \"" + type + "\" is not supported: glb, obj or ply");
    const bool texture = body.value("texture", false);
    const int face_count = body.value("face_count", 40000);
    // The shape parameters (seed, octree_resolution, num_inference_steps, guidance_scale) are
    // only read for shape generation, which this server does not run.
    if (!body.contains("mesh"))
      throw HttpError(501, "no_shape_model",
                      "this server has no shape model: /generate without \"mesh\" makes a shape "
                      "from the image, which gen3d serve does not do yet; send \"mesh\" (a "
                      "base64 GLB) with \"texture\": true to texture it");
    std::string mesh = decode_field(body, "mesh");
    if (!mesh.starts_with("glTF"))
      throw HttpError(400, "bad_mesh", "\"mesh\" is not a binary glTF (GLB) file");

    return [this, image = std::move(image), views = std::move(views), mesh = std::move(mesh), type,
            texture, face_count](JobContext& ctx) -> JobOutput {
      write_file(ctx.dir / "input.glb", mesh);
      write_file(ctx.dir / image.name, image.bytes);
      const std::string out = (ctx.dir / ("output." + type)).string();
      if (!texture) {  // the mesh as given, in the asked format
        mesh::save_mesh(mesh::load_mesh((ctx.dir / "input.glb").string()), out);
        return {out, content_type(out)};
      }
      TextureOptions t;
      t.mesh = (ctx.dir / "input.glb").string();
      t.images.push_back((ctx.dir / image.name).string());
      for (const auto& [view, u] : views) {
        write_file(ctx.dir / u.name, u.bytes);
        t.images.push_back(view + "=" + (ctx.dir / u.name).string());
      }
      t.faces = face_count;
      t.output = out;
      return run_texture(ctx, std::move(t));
    };
  }

  void generate(const httplib::Request& req, httplib::Response& res) {
    const auto j = enqueue("generate", generate_work(parse_body(req)), res);
    j->wait_finished(std::chrono::hours(24 * 365));
    const Job::Snapshot s = j->snapshot();
    if (s.state != JobState::kDone)
      return send_error(res, error_status(s.error), s.error.code, s.error.message);
    res.set_content(read_file(s.output.path), s.output.content_type);
  }

  void send(const httplib::Request& req, httplib::Response& res) {
    const auto j = enqueue("generate", generate_work(parse_body(req)), res);
    send_json(res, 200, {{"uid", j->id}});
  }

  void status(const httplib::Request& req, httplib::Response& res) {
    const auto j = jobs_.find(req.matches[1]);
    if (!j) throw HttpError(404, "unknown_uid", "no job " + std::string(req.matches[1]));
    const Job::Snapshot s = j->snapshot();
    switch (s.state) {
      case JobState::kQueued:
        return send_json(res, 200, {{"status", "processing"}});
      case JobState::kRunning:
        return send_json(res, 200,
                         {{"status", s.phase == "texturing" ? "texturing" : "processing"}});
      case JobState::kDone:
        return send_json(res, 200,
                         {{"status", "completed"},
                          {"model_base64", io::base64_encode(read_file(s.output.path))}});
      case JobState::kFailed:
      case JobState::kCancelled:
        return send_json(
            res, 200,
            {{"status", "failed"}, {"error", s.error.message}, {"error_code", s.error.code}});
    }
  }

  // ---- The job API ----

  void health(httplib::Response& res) const {
    const QueueCounts c = jobs_.counts();
    send_json(res, 200,
              {{"status", "ok"},
               {"version", GEN3D_VERSION},
               {"workers", jobs_.workers()},
               {"running", c.running},
               {"queue_length", c.queued},
               {"queue_capacity", jobs_.capacity()}});
  }

  void metrics(httplib::Response& res) const {
    const QueueCounts c = jobs_.counts();
    std::string text =
        "# HELP gen3d_jobs Jobs the server holds, by state.\n# TYPE gen3d_jobs gauge\n";
    const std::pair<const char*, size_t> states[] = {{"queued", c.queued},
                                                     {"running", c.running},
                                                     {"done", c.done},
                                                     {"failed", c.failed},
                                                     {"cancelled", c.cancelled}};
    for (const auto& [state, n] : states)
      text += fmt::format("gen3d_jobs{{state=\"{}\"}} {}\n", state, n);
    text += fmt::format(
        "# HELP gen3d_queue_length Jobs waiting for a worker.\n# TYPE gen3d_queue_length gauge\n"
        "gen3d_queue_length {}\n"
        "# HELP gen3d_queue_capacity Jobs that may wait.\n# TYPE gen3d_queue_capacity gauge\n"
        "gen3d_queue_capacity {}\n"
        "# HELP gen3d_workers Jobs run at once.\n# TYPE gen3d_workers gauge\ngen3d_workers {}\n"
        "# HELP gen3d_jobs_submitted_total Jobs accepted.\n"
        "# TYPE gen3d_jobs_submitted_total counter\ngen3d_jobs_submitted_total {}\n"
        "# HELP gen3d_jobs_rejected_total Jobs refused with a full queue.\n"
        "# TYPE gen3d_jobs_rejected_total counter\ngen3d_jobs_rejected_total {}\n",
        c.queued, jobs_.capacity(), jobs_.workers(), c.submitted, c.rejected);
    res.set_content(text, "text/plain; version=0.0.4");
  }

  static json job_json(const Job& j) {
    const Job::Snapshot s = j.snapshot();
    json nodes = json::array();
    for (const NodeProgress& n : s.nodes)
      nodes.push_back(
          {{"id", n.id}, {"stage", n.stage}, {"status", n.status}, {"seconds", n.seconds}});
    json out = {{"id", j.id},
                {"pipeline", j.kind},
                {"state", job_state_name(s.state)},
                {"created", unix_seconds(s.created)},
                {"nodes", std::move(nodes)},
                {"events", s.events}};
    if (!s.phase.empty()) out["phase"] = s.phase;
    if (s.started != Job::Clock::time_point{}) out["started"] = unix_seconds(s.started);
    if (s.finished != Job::Clock::time_point{}) out["finished"] = unix_seconds(s.finished);
    if (!s.error.code.empty())
      out["error"] = {{"error", s.error.message}, {"error_code", s.error.code}};
    return out;
  }

  // POST /v1/jobs {"pipeline": "texture", "files": {NAME: base64}, "vars": {...}}: the vars
  // name uploaded files, never paths on the server.
  void submit_job(const httplib::Request& req, httplib::Response& res) {
    const json body = parse_body(req);
    const std::string pipeline = body.value("pipeline", std::string());
    if (pipeline != "texture")
      throw HttpError(400, "unknown_pipeline",
                      "\"pipeline\": \"" + pipeline + "\" is not served (served: \"texture\")");
    std::vector<Upload> files;
    if (body.contains("files")) {
      if (!body["files"].is_object())
        throw HttpError(400, "bad_field", "\"files\" must be an object {name: base64}");
      for (const auto& [name, data] : body["files"].items()) {
        if (name.empty() || name.find_first_of("/\\") != std::string::npos || name[0] == '.')
          throw HttpError(400, "bad_file_name", "file name \"" + name + "\" is not a plain name");
        files.push_back({name, decode_field(body["files"], name)});
      }
    }
    const auto file = [&](const json& v, const std::string& var) {
      if (!v.is_string()) throw HttpError(400, "bad_var", "\"" + var + "\" must be a file name");
      std::string item = v.get<std::string>();
      const auto eq = item.find('=');  // VIEW=NAME for images on other views
      const std::string name = eq == std::string::npos ? item : item.substr(eq + 1);
      if (std::none_of(files.begin(), files.end(), [&](const Upload& u) { return u.name == name; }))
        throw HttpError(400, "missing_file",
                        "\"" + var + "\" names \"" + name + "\", which is not among \"files\"");
      return item;
    };
    const json vars = body.value("vars", json::object());
    if (!vars.is_object()) throw HttpError(400, "bad_field", "\"vars\" must be an object");
    TextureOptions t;
    std::vector<std::string> images;
    for (const auto& [key, v] : vars.items()) {
      if (key == "mesh") {
        t.mesh = file(v, key);
      } else if (key == "image") {
        for (const json& i : v.is_array() ? v : json::array({v})) images.push_back(file(i, key));
      } else if (key == "texture_size" || key == "render_size" || key == "faces") {
        if (!v.is_number_integer())
          throw HttpError(400, "bad_var", "\"" + key + "\" must be an integer");
        (key == "faces"          ? t.faces
         : key == "texture_size" ? t.texture_size
                                 : t.render_size) = v.get<int>();
      } else if (key == "reunwrap") {
        if (!v.is_boolean()) throw HttpError(400, "bad_var", "\"reunwrap\" must be true or false");
        t.reunwrap = v.get<bool>();
      } else {
        throw HttpError(400, "unknown_var",
                        "\"vars\": unknown variable \"" + key +
                            "\" (mesh, image, texture_size, render_size, faces, reunwrap)");
      }
    }
    if (t.mesh.empty()) throw HttpError(400, "missing_var", "\"vars\" needs \"mesh\"");
    if (images.empty()) throw HttpError(400, "missing_var", "\"vars\" needs \"image\"");
    const std::string format = body.value("format", std::string("glb"));
    if (format != "glb" && format != "obj" && format != "ply")
      throw HttpError(400, "unsupported_type", "\"format\": glb, obj or ply");

    const auto j = enqueue(
        pipeline,
        [this, files = std::move(files), images = std::move(images), t,
         format](JobContext& ctx) mutable -> JobOutput {
          for (const Upload& u : files) write_file(ctx.dir / u.name, u.bytes);
          const auto in_dir = [&](const std::string& item) {
            const auto eq = item.find('=');
            return eq == std::string::npos
                       ? (ctx.dir / item).string()
                       : item.substr(0, eq + 1) + (ctx.dir / item.substr(eq + 1)).string();
          };
          t.mesh = in_dir(t.mesh);
          for (const std::string& i : images) t.images.push_back(in_dir(i));
          t.output = (ctx.dir / ("output." + format)).string();
          return run_texture(ctx, std::move(t));
        },
        res);
    res.set_header("Location", "/v1/jobs/" + j->id);
    send_json(res, 202, job_json(*j));
  }

  void list_jobs(httplib::Response& res) const {
    json list = json::array();
    for (const auto& j : jobs_.list()) {
      const Job::Snapshot s = j->snapshot();
      list.push_back({{"id", j->id},
                      {"pipeline", j->kind},
                      {"state", job_state_name(s.state)},
                      {"created", unix_seconds(s.created)}});
    }
    send_json(res, 200, {{"jobs", std::move(list)}});
  }

  // Server-sent events: every event of the job from the first (or after Last-Event-ID), then an
  // "end" event with the job's state. Each stream reads the job's log at its own pace.
  void events(const httplib::Request& req, httplib::Response& res) {
    const auto j = job(req);
    size_t next = 0;
    if (req.has_header("Last-Event-ID")) {
      try {
        next = std::stoul(req.get_header_value("Last-Event-ID")) + 1;
      } catch (const std::exception&) {
        throw HttpError(400, "bad_header", "Last-Event-ID must be an event number");
      }
    }
    res.set_header("Cache-Control", "no-cache");
    res.set_chunked_content_provider(
        "text/event-stream", [j, next](size_t, httplib::DataSink& sink) mutable {
          bool finished = false;
          const auto events = j->events_from(next, std::chrono::seconds(1), finished);
          std::string text;
          for (const std::string& e : events) {
            const json parsed = json::parse(e, nullptr, false);
            const std::string name = parsed.is_object() ? parsed.value("event", "event") : "event";
            text += fmt::format("id: {}\nevent: {}\ndata: {}\n\n", next++, name, e);
          }
          if (finished) text += fmt::format("event: end\ndata: {}\n\n", job_json(*j).dump());
          if (text.empty()) text = ": waiting\n\n";  // finds a client that went away
          if (!sink.write(text.data(), text.size())) return false;
          if (finished) sink.done();
          return true;
        });
  }

  void result(const httplib::Request& req, httplib::Response& res) {
    const auto j = job(req);
    const Job::Snapshot s = j->snapshot();
    if (s.state == JobState::kDone)
      return res.set_content(read_file(s.output.path), s.output.content_type);
    if (job_finished(s.state))
      throw HttpError(409, s.error.code, "the job has no result: " + s.error.message);
    throw HttpError(409, "not_finished",
                    fmt::format("the job is {}: no result yet", job_state_name(s.state)));
  }

  const ServeOptions options_;
  const fs::path data_dir_;
  std::string paint_models_;      // --models when it holds a paint model
  pipeline::SharedState shared_;  // one raster cache and model registry for every job
  httplib::Server http_;
  JobQueue jobs_;
};

extern "C" void on_stop_signal(int) {
  interrupt_flag().store(true);
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
  parse_byte_size(o.max_body);  // refused before anything starts
  std::signal(SIGTERM, on_stop_signal);
  std::signal(SIGINT, on_stop_signal);
  Server server(o);
  return server.serve();
}

}  // namespace gen3d::cli
