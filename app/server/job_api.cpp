#include "app/server/job_api.h"

#include <algorithm>
#include <chrono>
#include <filesystem>
#include <optional>
#include <set>
#include <string>
#include <vector>

#include <fmt/format.h>
#include <nlohmann/json.hpp>

#include "app/server/http.h"
#include "app/server/job_config.h"
#include "pipeline/config.h"
#include "pipeline/error.h"

namespace gen3d::app::server {

namespace fs = std::filesystem;
using nlohmann::json;

namespace {

double unix_seconds(Job::Clock::time_point t) {
  if (t == Job::Clock::time_point{}) return 0;
  return std::chrono::duration<double>(t.time_since_epoch()).count();
}

json job_json(const Job& j) {
  const Job::Snapshot s = j.snapshot();
  json nodes = json::array();
  for (const NodeProgress& n : s.nodes) {
    json node = {{"id", n.id}, {"stage", n.stage}, {"status", n.status}, {"seconds", n.seconds}};
    if (!n.cache.empty()) node["cache"] = n.cache;
    nodes.push_back(std::move(node));
  }
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
  if (!s.graph.empty()) out["graph"] = json::parse(s.graph);
  if (!s.timing.empty()) out["timing"] = json::parse(s.timing);
  if (s.cache) {
    json cached = json::array();
    for (const NodeProgress& n : s.nodes)
      if (n.status == "cached") cached.push_back(n.id);
    out["cache"] = {{"enabled", s.cache->enabled},   {"hits", s.cache->hits},
                    {"unneeded", s.cache->unneeded}, {"misses", s.cache->misses},
                    {"stored", s.cache->stored},     {"saved_seconds", s.cache->saved_seconds},
                    {"nodes", std::move(cached)}};
  }
  // What the job serves besides its state: a URL per file.
  json files = json::object();
  if (s.state == JobState::kDone) files["result"] = "/v1/jobs/" + j.id + "/result";
  for (const auto& [name, path] : s.files) files[name] = "/v1/jobs/" + j.id + "/" + name;
  out["files"] = std::move(files);
  return out;
}

std::shared_ptr<Job> find_job(const JobQueue& jobs, const httplib::Request& req) {
  auto j = jobs.find(req.matches[1]);
  if (!j) throw HttpError(404, "unknown_job", "no job " + std::string(req.matches[1]));
  return j;
}

// A job's variables: what names uploaded files (never paths on the server), checked against
// "files", and plain values by type.
class Vars {
 public:
  // With `names_only`, "files" may also list the names alone (a config is built or checked for
  // files not sent yet).
  explicit Vars(const json& body, bool names_only = false) {
    if (body.contains("files")) {
      const json& files = body["files"];
      const bool names = names_only && files.is_array();
      if (!files.is_object() && !names)
        throw HttpError(400, "bad_field",
                        names_only ? "\"files\" must be an object {name: base64} or a list of names"
                                   : "\"files\" must be an object {name: base64}");
      for (const auto& [key, data] : files.items()) {
        if (names && !data.is_string())
          throw HttpError(400, "bad_field", "\"files\": a list of file names");
        const std::string name = names ? data.get<std::string>() : key;
        if (name.empty() || name.find_first_of("/\\") != std::string::npos || name[0] == '.')
          throw HttpError(400, "bad_file_name", "file name \"" + name + "\" is not a plain name");
        files_.push_back({name, names ? std::string() : decode_field(files, name)});
      }
    }
    vars_ = body.value("vars", json::object());
    if (!vars_.is_object()) throw HttpError(400, "bad_field", "\"vars\" must be an object");
  }

  const json& items() const { return vars_; }
  std::set<std::string> names() const {
    std::set<std::string> out;
    for (const Upload& u : files_) out.insert(u.name);
    return out;
  }
  // The uploads, moved out (once the variables are read).
  std::vector<Upload> take_files() { return std::move(files_); }

  // A file name (or VIEW=NAME for images on other views) among the uploads.
  std::string file(const json& v, const std::string& var) const {
    if (!v.is_string()) throw HttpError(400, "bad_var", "\"" + var + "\" must be a file name");
    std::string item = v.get<std::string>();
    const auto eq = item.find('=');
    const std::string name = eq == std::string::npos ? item : item.substr(eq + 1);
    if (std::none_of(files_.begin(), files_.end(), [&](const Upload& u) { return u.name == name; }))
      throw HttpError(400, "missing_file",
                      "\"" + var + "\" names \"" + name + "\", which is not among \"files\"");
    return item;
  }

  static int integer(const json& v, const std::string& var) {
    if (!v.is_number_integer())
      throw HttpError(400, "bad_var", "\"" + var + "\" must be an integer");
    return v.get<int>();
  }
  static double number(const json& v, const std::string& var) {
    if (!v.is_number()) throw HttpError(400, "bad_var", "\"" + var + "\" must be a number");
    return v.get<double>();
  }
  static bool boolean(const json& v, const std::string& var) {
    if (!v.is_boolean()) throw HttpError(400, "bad_var", "\"" + var + "\" must be true or false");
    return v.get<bool>();
  }
  static std::string string(const json& v, const std::string& var) {
    if (!v.is_string()) throw HttpError(400, "bad_var", "\"" + var + "\" must be a string");
    return v.get<std::string>();
  }

 private:
  std::vector<Upload> files_;
  json vars_;
};

// An uploaded file name (VIEW=NAME too) as a path in the job's folder.
std::string in_dir(const JobContext& ctx, const std::string& item) {
  const auto eq = item.find('=');
  return eq == std::string::npos
             ? (ctx.dir / item).string()
             : item.substr(0, eq + 1) + (ctx.dir / item.substr(eq + 1)).string();
}

// A texture job's variables: `gen3d texture`'s options with the files as names in the job's
// folder, its reference images (VIEW=NAME items), its view images in view order, and the report.
struct TexturePlan {
  cli::TextureOptions t;
  std::vector<std::string> images, views;
  bool report = false;
};

// "texture": `gen3d texture` on an uploaded mesh, with one source of view images: reference
// images (`image`), one image per view (`views`, in view order) or another textured mesh
// (`source_mesh`).
TexturePlan plan_texture(const Vars& vars) {
  TexturePlan p;
  cli::TextureOptions& t = p.t;
  for (const auto& [key, v] : vars.items().items()) {
    if (key == "mesh") {
      t.mesh = vars.file(v, key);
    } else if (key == "image") {
      for (const json& i : v.is_array() ? v : json::array({v}))
        p.images.push_back(vars.file(i, key));
    } else if (key == "views") {
      if (!v.is_array() || v.empty())
        throw HttpError(400, "bad_var", "\"views\" must be a list of file names, in view order");
      for (const json& i : v) {
        p.views.push_back(vars.file(i, key));
        if (p.views.back().find('=') != std::string::npos)
          throw HttpError(400, "bad_var", "\"views\": file names in view order (no VIEW=)");
      }
    } else if (key == "source_mesh") {
      t.source_mesh = vars.file(v, key);
    } else if (key == "faces") {
      t.faces = Vars::integer(v, key);
    } else if (key == "texture_size") {
      t.texture_size = Vars::integer(v, key);
    } else if (key == "render_size") {
      t.render_size = Vars::integer(v, key);
    } else if (key == "reunwrap") {
      t.reunwrap = Vars::boolean(v, key);
    } else if (key == "report") {
      p.report = Vars::boolean(v, key);
    } else {
      throw HttpError(400, "unknown_var",
                      "\"vars\": unknown variable \"" + key +
                          "\" (mesh, image, views, source_mesh, texture_size, render_size, faces, "
                          "reunwrap, report)");
    }
  }
  if (t.mesh.empty()) throw HttpError(400, "missing_var", "\"vars\" needs \"mesh\"");
  const int sources = !p.images.empty() + !p.views.empty() + !t.source_mesh.empty();
  if (sources != 1)
    throw HttpError(400, sources == 0 ? "missing_var" : "conflicting_vars",
                    "\"vars\" needs one source of view images: \"image\", \"views\" or "
                    "\"source_mesh\"");
  return p;
}

// The folder of a texture job with these variables: the uploads, and the view images' folder
// (views/: `--views DIR` reads a folder).
constexpr const char* kViewsFolder = "views";
JobFolder texture_folder(const Vars& vars, const JobRunner& runner) {
  JobFolder f;
  f.names = vars.names();
  if (const auto it = vars.items().find("views"); it != vars.items().end() && it->is_array())
    f.views = it->size();
  f.roots = {runner.models().paint, runner.models().shape};
  return f;
}

// A job's own config, checked as the job will run it: HttpError 400 bad_config listing the
// problems at their JSON paths.
void check_job_config(const json& config, const JobFolder& folder) {
  try {
    job_config_graph(config, folder);
  } catch (const pipeline::ConfigError& e) {
    throw HttpError(400, "bad_config", e.what(), {{"problems", problems_json(e)}});
  }
}

// The texture job for `vars`: `gen3d texture`'s config, or `config` (a client's edit of it, see
// job_config.h) when given, on the same files.
JobWork texture_work(Vars& vars, const std::string& format, JobRunner& runner, const json* config) {
  TexturePlan plan = plan_texture(vars);
  JobFolder folder = texture_folder(vars, runner);
  std::optional<json> own;
  if (config) {
    check_job_config(*config, folder);
    own = *config;
  }
  return [&runner, files = vars.take_files(), plan = std::move(plan), folder = std::move(folder),
          own = std::move(own), format](JobContext& ctx) mutable -> JobOutput {
    cli::TextureOptions& t = plan.t;
    for (const Upload& u : files) write_file(ctx.dir / u.name, u.bytes);
    t.mesh = in_dir(ctx, t.mesh);
    for (const std::string& i : plan.images) t.images.push_back(in_dir(ctx, i));
    if (!t.source_mesh.empty()) t.source_mesh = in_dir(ctx, t.source_mesh);
    if (!plan.views.empty()) {
      // `--views DIR` reads a folder's images sorted by name: numbered in the order given.
      t.views_dir = (ctx.dir / kViewsFolder).string();
      fs::create_directories(t.views_dir);
      for (size_t i = 0; i < plan.views.size(); ++i)
        fs::copy_file(ctx.dir / plan.views[i],
                      fs::path(t.views_dir) /
                          fmt::format("{:03}{}", i, fs::path(plan.views[i]).extension().string()));
    }
    const std::string report = plan.report ? (ctx.dir / "report.html").string() : "";
    if (own) {
      folder.dir = ctx.dir.string();
      std::string output;
      const pipeline::Graph graph = job_config_graph(*own, folder, &output);
      return runner.run_config(ctx, graph, output, report);
    }
    t.report_path = report;
    t.output = (ctx.dir / ("output." + format)).string();
    return runner.texture(ctx, std::move(t));
  };
}

// POST /v1/config {"pipeline": "texture", "vars", "files": {NAME: base64} or [NAME, ...],
// "format"}: the config the texture job would run (as `gen3d texture --dump` prints it), its files
// named relative to the job's folder, so that a client can edit it and send it back with the job.
void dump_texture_config(JobRunner& runner, const httplib::Request& req, httplib::Response& res) {
  const json body = parse_body(req);
  const std::string pipeline = body.value("pipeline", std::string("texture"));
  if (pipeline != "texture")
    throw HttpError(400, "unknown_pipeline",
                    "\"pipeline\": a config is built for \"texture\" jobs");
  const Vars vars(body, true);
  const std::string format = body.value("format", std::string("glb"));
  if (format != "glb" && format != "obj" && format != "ply")
    throw HttpError(400, "unsupported_type", "\"format\": glb, obj or ply");
  TexturePlan plan = plan_texture(vars);
  cli::TextureOptions t = plan.t;
  t.images = plan.images;
  if (!plan.views.empty()) t.views_dir = kViewsFolder;
  t.output = "output." + format;
  const pipeline::PipelineConfig cfg = cli::texture_config(runner.texture_options(t));
  json files = json::array();
  for (const std::string& n : texture_folder(vars, runner).names) files.push_back(n);
  send_json(res, 200, {{"config", cfg.to_json()}, {"files", std::move(files)}});
}

// POST /v1/validate {"config", "vars", "files"}: the problems a job with this config would be
// refused for, each at its JSON path; runs nothing and writes nothing.
void validate(JobRunner& runner, const httplib::Request& req, httplib::Response& res) {
  const json body = parse_body(req);
  if (!body.contains("config"))
    throw HttpError(400, "missing_field", "\"config\": the pipeline config to check");
  const Vars vars(body, true);
  try {
    const pipeline::Graph graph = job_config_graph(body["config"], texture_folder(vars, runner));
    send_json(res, 200,
              {{"valid", true}, {"problems", json::array()}, {"nodes", graph.nodes.size()}});
  } catch (const pipeline::ConfigError& e) {
    send_json(res, 200, {{"valid", false}, {"error", e.what()}, {"problems", problems_json(e)}});
  }
}

// "shape": `gen3d shape --image` with the server's shape model.
JobWork shape_work(Vars& vars, const std::string& format, JobRunner& runner) {
  if (runner.models().shape.empty())
    throw HttpError(501, "no_shape_model",
                    "this server has no shape model: start it with --models and a shape model "
                    "folder (hunyuan3d-dit-v2-*)");
  cli::ShapeOptions s;
  for (const auto& [key, v] : vars.items().items()) {
    if (key == "image") {
      s.image = vars.file(v, key);
      if (s.image.find('=') != std::string::npos)
        throw HttpError(400, "bad_var", "\"image\": one front image (no VIEW=)");
    } else if (key == "seed") {
      s.seed = Vars::integer(v, key);
    } else if (key == "steps") {
      s.steps = Vars::integer(v, key);
    } else if (key == "guidance") {
      s.guidance = Vars::number(v, key);
    } else if (key == "resolution") {
      s.resolution = Vars::integer(v, key);
    } else if (key == "min_resolution") {
      s.min_resolution = Vars::integer(v, key);
    } else if (key == "max_faces") {
      s.max_faces = Vars::integer(v, key);
    } else if (key == "method") {
      s.method = Vars::string(v, key);
    } else {
      throw HttpError(400, "unknown_var",
                      "\"vars\": unknown variable \"" + key +
                          "\" (image, seed, steps, guidance, resolution, min_resolution, "
                          "max_faces, method)");
    }
  }
  if (s.image.empty()) throw HttpError(400, "missing_var", "\"vars\" needs \"image\"");
  return [&runner, files = vars.take_files(), s, format](JobContext& ctx) mutable -> JobOutput {
    for (const Upload& u : files) write_file(ctx.dir / u.name, u.bytes);
    s.image = in_dir(ctx, s.image);
    s.output = (ctx.dir / ("output." + format)).string();
    return runner.shape(ctx, std::move(s));
  };
}

// POST /v1/jobs {"pipeline": "texture" | "shape", "files": {NAME: base64}, "vars": {...},
// "format": "glb"}.
void submit_job(JobQueue& jobs, JobRunner& runner, const httplib::Request& req,
                httplib::Response& res) {
  const json body = parse_body(req);
  const std::string pipeline = body.value("pipeline", std::string());
  if (pipeline != "texture" && pipeline != "shape")
    throw HttpError(
        400, "unknown_pipeline",
        "\"pipeline\": \"" + pipeline + "\" is not served (served: \"texture\", \"shape\")");
  Vars vars(body);
  const std::string format = body.value("format", std::string("glb"));
  if (format != "glb" && format != "obj" && format != "ply")
    throw HttpError(400, "unsupported_type", "\"format\": glb, obj or ply");
  const json* config = body.contains("config") ? &body["config"] : nullptr;
  if (config && pipeline != "texture")
    throw HttpError(400, "bad_field", "\"config\": a texture job's config (pipeline \"texture\")");
  JobWork work = pipeline == "texture" ? texture_work(vars, format, runner, config)
                                       : shape_work(vars, format, runner);
  const auto j = enqueue(jobs, pipeline, std::move(work), res);
  res.set_header("Location", "/v1/jobs/" + j->id);
  send_json(res, 202, job_json(*j));
}

void list_jobs(const JobQueue& jobs, httplib::Response& res) {
  json list = json::array();
  for (const auto& j : jobs.list()) {
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
void events(const JobQueue& jobs, const httplib::Request& req, httplib::Response& res) {
  const auto j = find_job(jobs, req);
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

void result(const JobQueue& jobs, const httplib::Request& req, httplib::Response& res) {
  const auto j = find_job(jobs, req);
  const Job::Snapshot s = j->snapshot();
  if (s.state == JobState::kDone)
    return res.set_content(read_file(s.output.path), s.output.content_type);
  if (job_finished(s.state))
    throw HttpError(409, s.error.code, "the job has no result: " + s.error.message);
  throw HttpError(409, "not_finished",
                  fmt::format("the job is {}: no result yet", job_state_name(s.state)));
}

// GET /v1/jobs/{id}/trace and /report: a file the job wrote beside its output.
void side_file(const JobQueue& jobs, const httplib::Request& req, httplib::Response& res,
               const std::string& name, const std::string& type) {
  const auto j = find_job(jobs, req);
  const Job::Snapshot s = j->snapshot();
  const auto it = s.files.find(name);
  if (it == s.files.end())
    throw HttpError(404, "no_" + name,
                    name == "report"
                        ? "the job has no report (a texture job with \"report\": true "
                          "has one once it is done)"
                        : "the job has no trace (yet): it is written when the run ends");
  res.set_content(read_file(it->second), type);
}

void health(const JobQueue& jobs, httplib::Response& res) {
  const QueueCounts c = jobs.load();
  // A stopping server says so with 503, so that a load balancer sends new work elsewhere.
  const bool stopping = jobs.draining();
  send_json(res, stopping ? 503 : 200,
            {{"status", stopping ? "stopping" : "ok"},
             {"version", GEN3D_VERSION},
             {"workers", jobs.workers()},
             {"running", c.running},
             {"queue_length", c.queued},
             {"queue_capacity", jobs.capacity()}});
}

void metrics(const JobQueue& jobs, const JobRunner& runner, httplib::Response& res) {
  const QueueCounts c = jobs.counts();
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
      c.queued, jobs.capacity(), jobs.workers(), c.submitted, c.rejected);
  const CacheCounts cache = runner.cache_counts();
  text += fmt::format(
      "# HELP gen3d_stage_cache_enabled Whether jobs use the stage cache (0: --no-cache).\n"
      "# TYPE gen3d_stage_cache_enabled gauge\ngen3d_stage_cache_enabled {}\n"
      "# HELP gen3d_stage_cache_hits_total Nodes loaded from the stage cache instead of run.\n"
      "# TYPE gen3d_stage_cache_hits_total counter\ngen3d_stage_cache_hits_total {}\n"
      "# HELP gen3d_stage_cache_misses_total Nodes run that the stage cache could have held.\n"
      "# TYPE gen3d_stage_cache_misses_total counter\ngen3d_stage_cache_misses_total {}\n"
      "# HELP gen3d_stage_cache_stored_total Nodes whose outputs jobs stored.\n"
      "# TYPE gen3d_stage_cache_stored_total counter\ngen3d_stage_cache_stored_total {}\n"
      "# HELP gen3d_stage_cache_unneeded_total Nodes neither run nor loaded: held by the cache, "
      "needed by nothing that ran.\n"
      "# TYPE gen3d_stage_cache_unneeded_total counter\ngen3d_stage_cache_unneeded_total {}\n",
      cache.enabled ? 1 : 0, cache.hits, cache.misses, cache.stored, cache.unneeded);
  res.set_content(text, "text/plain; version=0.0.4");
}

}  // namespace

void add_job_routes(httplib::Server& http, JobQueue& jobs, JobRunner& runner) {
  using Req = httplib::Request;
  using Res = httplib::Response;
  http.Get("/health", guarded([&](const Req&, Res& res) { health(jobs, res); }));
  http.Get("/metrics", guarded([&](const Req&, Res& res) { metrics(jobs, runner, res); }));
  http.Post("/v1/jobs",
            guarded([&](const Req& req, Res& res) { submit_job(jobs, runner, req, res); }));
  http.Post("/v1/config",
            guarded([&](const Req& req, Res& res) { dump_texture_config(runner, req, res); }));
  http.Post("/v1/validate", guarded([&](const Req& req, Res& res) { validate(runner, req, res); }));
  http.Get("/v1/jobs", guarded([&](const Req&, Res& res) { list_jobs(jobs, res); }));
  http.Get(R"(/v1/jobs/([^/]+))", guarded([&](const Req& req, Res& res) {
             send_json(res, 200, job_json(*find_job(jobs, req)));
           }));
  http.Get(R"(/v1/jobs/([^/]+)/events)",
           guarded([&](const Req& req, Res& res) { events(jobs, req, res); }));
  http.Get(R"(/v1/jobs/([^/]+)/result)",
           guarded([&](const Req& req, Res& res) { result(jobs, req, res); }));
  http.Get(R"(/v1/jobs/([^/]+)/trace)", guarded([&](const Req& req, Res& res) {
             side_file(jobs, req, res, "trace", "application/json");
           }));
  http.Get(R"(/v1/jobs/([^/]+)/report)", guarded([&](const Req& req, Res& res) {
             side_file(jobs, req, res, "report", "text/html; charset=utf-8");
           }));
  http.Delete(R"(/v1/jobs/([^/]+))", guarded([&](const Req& req, Res& res) {
                const auto j = find_job(jobs, req);
                j->cancel();
                send_json(res, 202, job_json(*j));
              }));
}

}  // namespace gen3d::app::server
