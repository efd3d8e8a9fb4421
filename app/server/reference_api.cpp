#include "app/server/reference_api.h"

#include <chrono>
#include <string>
#include <utility>
#include <vector>

#include <fmt/format.h>
#include <nlohmann/json.hpp>

#include "app/server/http.h"
#include "io/base64.h"
#include "mesh/io.h"

namespace gen3d::app::server {

using nlohmann::json;

namespace {

// The shape parameters' defaults when a request leaves them out, as api_server.py
// ModelWorker.generate sets them (seed 1234, octree_resolution 128, num_inference_steps 5,
// guidance_scale 5.0); its pipeline decodes the volume with FlashVDM (enable_flashvdm).
constexpr int kDefaultSeed = 1234;
constexpr int kDefaultOctreeResolution = 128;
constexpr int kDefaultSteps = 5;
constexpr double kDefaultGuidance = 5.0;
constexpr const char* kVolumeMethod = "flashvdm";
// Coarser grids have no level for the coarse-to-fine decoder to start from.
constexpr int kMinOctreeResolution = 8;

int int_field(const json& body, const std::string& key, int fallback) {
  if (!body.contains(key) || body[key].is_null()) return fallback;
  if (!body[key].is_number_integer())
    throw HttpError(400, "bad_field", "\"" + key + "\" must be an integer");
  return body[key].get<int>();
}

double number_field(const json& body, const std::string& key, double fallback) {
  if (!body.contains(key) || body[key].is_null()) return fallback;
  if (!body[key].is_number()) throw HttpError(400, "bad_field", "\"" + key + "\" must be a number");
  return body[key].get<double>();
}

// The job a /generate or /send body asks for; throws HttpError for what cannot run.
JobWork generate_work(const json& body, JobRunner& runner) {
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
  const int face_count = int_field(body, "face_count", 40000);

  // Without "mesh" the shape comes from the image.
  std::string mesh;
  cli::ShapeOptions shape;
  if (body.contains("mesh")) {
    mesh = decode_field(body, "mesh");
    if (!mesh.starts_with("glTF"))
      throw HttpError(400, "bad_mesh", "\"mesh\" is not a binary glTF (GLB) file");
  } else if (runner.models().shape.empty()) {
    throw HttpError(501, "no_shape_model",
                    "this server has no shape model: /generate without \"mesh\" makes a shape "
                    "from the image, which needs --models with a shape model folder "
                    "(hunyuan3d-dit-v2-*); or send \"mesh\" (a base64 GLB) with \"texture\": true "
                    "to texture it");
  } else {
    shape.seed = int_field(body, "seed", kDefaultSeed);
    shape.resolution = int_field(body, "octree_resolution", kDefaultOctreeResolution);
    if (shape.resolution < kMinOctreeResolution)
      throw HttpError(
          400, "bad_field",
          fmt::format("\"octree_resolution\" must be at least {}", kMinOctreeResolution));
    shape.steps = int_field(body, "num_inference_steps", kDefaultSteps);
    shape.guidance = number_field(body, "guidance_scale", kDefaultGuidance);
    shape.method = kVolumeMethod;
  }

  return [&runner, image = std::move(image), views = std::move(views), mesh = std::move(mesh),
          shape, type, texture, face_count](JobContext& ctx) mutable -> JobOutput {
    write_file(ctx.dir / image.name, image.bytes);
    const std::string out = (ctx.dir / ("output." + type)).string();
    const std::string input = (ctx.dir / "input.glb").string();
    if (!mesh.empty()) {
      write_file(input, mesh);
    } else {
      shape.image = (ctx.dir / image.name).string();
      shape.output = texture ? input : out;
      runner.shape(ctx, shape);
      if (!texture) return {out, content_type(out)};
    }
    if (!texture) {  // the mesh as given, in the asked format
      mesh::save_mesh(mesh::load_mesh(input), out);
      return {out, content_type(out)};
    }
    cli::TextureOptions t;
    t.mesh = input;
    t.images.push_back((ctx.dir / image.name).string());
    for (const auto& [view, u] : views) {
      write_file(ctx.dir / u.name, u.bytes);
      t.images.push_back(view + "=" + (ctx.dir / u.name).string());
    }
    t.faces = face_count;
    t.output = out;
    return runner.texture(ctx, std::move(t));
  };
}

}  // namespace

void add_reference_routes(httplib::Server& http, JobQueue& jobs, JobRunner& runner) {
  http.Post("/generate", guarded([&](const httplib::Request& req, httplib::Response& res) {
              const auto j = enqueue(jobs, "generate", generate_work(parse_body(req), runner), res);
              j->wait_finished(std::chrono::hours(24 * 365));
              const Job::Snapshot s = j->snapshot();
              if (s.state != JobState::kDone)
                return send_error(res, error_status(s.error), s.error.code, s.error.message);
              res.set_content(read_file(s.output.path), s.output.content_type);
            }));

  http.Post("/send", guarded([&](const httplib::Request& req, httplib::Response& res) {
              const auto j = enqueue(jobs, "generate", generate_work(parse_body(req), runner), res);
              send_json(res, 200, {{"uid", j->id}});
            }));

  // Queued and making the shape: "processing"; then "texturing"; then "completed" or "failed".
  http.Get(
      R"(/status/([^/]+))", guarded([&](const httplib::Request& req, httplib::Response& res) {
        const auto j = jobs.find(req.matches[1]);
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
      }));
}

}  // namespace gen3d::app::server
