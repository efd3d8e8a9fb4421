#include "app/server/http.h"

#include <fstream>
#include <iterator>

#include <fmt/format.h>
#include <spdlog/spdlog.h>

#include "io/atomic_file.h"
#include "io/base64.h"
#include "pipeline/error.h"

namespace gen3d::app::server {

namespace fs = std::filesystem;
using nlohmann::json;

void send_json(httplib::Response& res, int status, const json& body) {
  res.status = status;
  res.set_content(body.dump(), "application/json");
}

void send_error(httplib::Response& res, int status, const std::string& code,
                const std::string& message) {
  send_json(res, status, {{"error", message}, {"error_code", code}});
}

httplib::Server::Handler guarded(httplib::Server::Handler handler) {
  return [handler = std::move(handler)](const httplib::Request& req, httplib::Response& res) {
    try {
      handler(req, res);
    } catch (const HttpError& e) {
      json body = e.details;
      body["error"] = e.what();
      body["error_code"] = e.code;
      send_json(res, e.status, body);
    } catch (const pipeline::ConfigError& e) {
      send_error(res, 400, "bad_request", e.what());
    } catch (const std::exception& e) {
      spdlog::error("{} {}: {}", req.method, req.path, e.what());
      send_error(res, 500, "internal_error", e.what());
    }
  };
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
  io::write_file_atomically(path.string(), bytes);
}

std::string read_file(const std::string& path) {
  std::ifstream in(path, std::ios::binary);
  if (!in) throw std::runtime_error("cannot read " + path);
  return std::string(std::istreambuf_iterator<char>(in), {});
}

int error_status(const JobError& e) {
  if (e.code == "cancelled") return 503;
  return e.client_fault ? 400 : 500;
}

std::shared_ptr<Job> enqueue(JobQueue& jobs, const std::string& kind, JobWork work,
                             httplib::Response& res) {
  auto j = jobs.submit(kind, std::move(work));
  if (!j && jobs.draining())
    throw HttpError(503, "shutting_down",
                    "the server is shutting down: it finishes its running jobs and takes no new "
                    "ones");
  if (!j) {
    res.set_header("Retry-After", std::to_string(jobs.retry_after_seconds()));
    throw HttpError(
        429, "queue_full",
        fmt::format("the job queue is full ({} waiting): retry later", jobs.capacity()));
  }
  return j;
}

}  // namespace gen3d::app::server
