#pragma once
// What both of `gen3d serve`'s APIs share: errors as JSON bodies, decoding of base64 fields,
// files in a job's folder, and putting a job on the queue.

#include <filesystem>
#include <memory>
#include <stdexcept>
#include <string>

#include <httplib.h>
#include <nlohmann/json.hpp>

#include "app/server/job_queue.h"

namespace gen3d::app::server {

// An answer other than success: status, stable code and message, sent as a JSON body.
class HttpError : public std::runtime_error {
 public:
  HttpError(int status, std::string code, const std::string& message,
            nlohmann::json details = nlohmann::json::object())
      : std::runtime_error(message),
        status(status),
        code(std::move(code)),
        details(std::move(details)) {}
  int status;
  std::string code;
  nlohmann::json details;  // more fields of the error body (e.g. "problems")
};

void send_json(httplib::Response& res, int status, const nlohmann::json& body);
// {"error": message, "error_code": code} with `status`.
void send_error(httplib::Response& res, int status, const std::string& code,
                const std::string& message);

// Wraps a handler: HttpError, ConfigError and anything else become JSON errors.
httplib::Server::Handler guarded(httplib::Server::Handler handler);

// The request body as a JSON object; HttpError 400 otherwise.
nlohmann::json parse_body(const httplib::Request& req);
// The bytes of the base64 string body[key]; HttpError 400 when it is not one.
std::string decode_field(const nlohmann::json& body, const std::string& key);
// The file extension (".png", ".jpg", ".webp") for image bytes, by their signature; HttpError 400
// naming `field` for anything else.
std::string image_extension(const std::string& bytes, const std::string& field);
// The Content-Type a result file is answered with, by its extension.
std::string content_type(const std::string& path);

// An uploaded file: its name in the job's folder and its bytes.
struct Upload {
  std::string name;
  std::string bytes;
};

// Written to a temporary sibling and renamed into place: a stopped server leaves no half file.
void write_file(const std::filesystem::path& path, const std::string& bytes);
std::string read_file(const std::string& path);

// The status a failed job's error is answered with.
int error_status(const JobError& error);

// Queues `work` as a job of `kind`; HttpError 429 (with Retry-After) when the queue is full, 503
// shutting_down once the server stops.
std::shared_ptr<Job> enqueue(JobQueue& jobs, const std::string& kind, JobWork work,
                             httplib::Response& res);

}  // namespace gen3d::app::server
