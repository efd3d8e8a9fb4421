// `gen3d serve` end to end: the real binary on a free loopback port, spoken to over real HTTP
// (cpp-httplib's client). Texturing takes the model-free path at 256 px, so each job is quick;
// shape generation runs a tiny random model folder (tests/support/tiny_models.h) at a coarse grid.

#include <unistd.h>

#include <algorithm>
#include <chrono>
#include <fstream>
#include <memory>
#include <string>
#include <thread>
#include <vector>

#include <gtest/gtest.h>
#include <httplib.h>
#include <nlohmann/json.hpp>

#include "io/base64.h"
#include "mesh/io.h"
#include "support/paths.h"
#include "support/run_command.h"
#include "support/serve_process.h"
#include "support/tiny_models.h"

namespace gen3d::test {
namespace {

using nlohmann::json;

const std::string kMesh = "tests/data/mesh/meshes-assimp/glTF2/BoxTextured.glb";
const std::string kImage = "assets/images/spider_front.png";

json generate_body(bool texture) {
  return {{"image", io::base64_encode(read_bytes(kImage))},
          {"mesh", io::base64_encode(read_bytes(kMesh))},
          {"texture", texture}};
}

// The GLB in `bytes` parsed by the project's reader.
mesh::Mesh load_glb(const std::string& bytes, const std::string& name) {
  const std::string path = temp_dir("serve_" + name) + "/out.glb";
  std::ofstream(path, std::ios::binary) << bytes;
  return mesh::load_mesh(path);
}

// CTest runs each test in its own process, two at a time, and each process starts its own server:
// folders a suite's server writes are per process, so one never wipes another's.
std::string process_tag() {
  return std::to_string(::getpid());
}

class Serve : public ::testing::Test {
 protected:
  static void SetUpTestSuite() {
    server_ = new ServeProcess({"--texture-size", "256", "--render-size", "256", "--max-body", "1M",
                                "--data", temp_dir("serve_data_" + process_tag())});
  }
  static void TearDownTestSuite() {
    delete server_;
    server_ = nullptr;
  }
  static httplib::Client client() { return server_->client(); }

  static httplib::Result post(const std::string& path, const std::string& body) {
    return client().Post(path.c_str(), body, "application/json");
  }

  // The JSON error body of `r`, checked for its shape.
  static json error_of(const httplib::Result& r) {
    EXPECT_EQ(r->get_header_value("Content-Type"), "application/json");
    const json j = json::parse(r->body, nullptr, false);
    EXPECT_TRUE(j.is_object() && j.contains("error") && j.contains("error_code")) << r->body;
    return j;
  }

  static ServeProcess* server_;
};
ServeProcess* Serve::server_ = nullptr;

TEST_F(Serve, HealthAnswers) {
  const auto r = client().Get("/health");
  ASSERT_TRUE(r);
  EXPECT_EQ(r->status, 200);
  const json j = json::parse(r->body);
  EXPECT_EQ(j["status"], "ok");
  EXPECT_EQ(j["workers"], 1);
}

TEST_F(Serve, GenerateTexturesTheMeshIntoAGlb) {
  const auto r = post("/generate", generate_body(true).dump());
  ASSERT_TRUE(r);
  ASSERT_EQ(r->status, 200) << r->body;
  EXPECT_EQ(r->get_header_value("Content-Type"), "model/gltf-binary");
  const mesh::Mesh m = load_glb(r->body, "generate");
  EXPECT_GT(m.face_count(), 0u);
  ASSERT_TRUE(m.texture);
  EXPECT_EQ(m.texture->width, 256);
  EXPECT_TRUE(m.has_uvs());
}

TEST_F(Serve, GenerateWithoutTextureConvertsTheMesh) {
  json body = generate_body(false);
  body["type"] = "ply";
  const auto r = post("/generate", body.dump());
  ASSERT_TRUE(r);
  ASSERT_EQ(r->status, 200) << r->body;
  EXPECT_TRUE(r->body.starts_with("ply")) << r->body.substr(0, 16);
}

TEST_F(Serve, SendThenStatusUntilCompleted) {
  const auto sent = post("/send", generate_body(true).dump());
  ASSERT_TRUE(sent);
  ASSERT_EQ(sent->status, 200) << sent->body;
  const std::string uid = json::parse(sent->body)["uid"];
  json status;
  for (int i = 0; i < 600; ++i) {
    const auto r = client().Get(("/status/" + uid).c_str());
    ASSERT_TRUE(r);
    ASSERT_EQ(r->status, 200);
    status = json::parse(r->body);
    const std::string s = status["status"];
    ASSERT_TRUE(s == "processing" || s == "texturing" || s == "completed") << r->body;
    if (s == "completed") break;
    std::this_thread::sleep_for(std::chrono::milliseconds(100));
  }
  ASSERT_EQ(status["status"], "completed");
  const std::string glb = io::base64_decode(status["model_base64"].get<std::string>());
  ASSERT_TRUE(glb.starts_with("glTF"));
  const mesh::Mesh m = load_glb(glb, "status");
  ASSERT_TRUE(m.texture);
  EXPECT_EQ(m.texture->width, 256);  // baked at --texture-size (the box came with 211 px)
}

TEST_F(Serve, UnknownUidIs404) {
  const auto r = client().Get("/status/no-such-uid");
  ASSERT_TRUE(r);
  EXPECT_EQ(r->status, 404);
  EXPECT_EQ(error_of(r)["error_code"], "unknown_uid");
}

TEST_F(Serve, BadJsonIs400) {
  const auto r = post("/generate", "{\"image\": ");
  ASSERT_TRUE(r);
  EXPECT_EQ(r->status, 400);
  EXPECT_EQ(error_of(r)["error_code"], "bad_json");
}

TEST_F(Serve, MissingImageIs400) {
  json body = generate_body(true);
  body.erase("image");
  const auto r = post("/generate", body.dump());
  ASSERT_TRUE(r);
  EXPECT_EQ(r->status, 400);
  EXPECT_EQ(error_of(r)["error_code"], "missing_image");
}

TEST_F(Serve, TextIsRefusedClearly) {
  const auto r = post("/send", json{{"text", "a red chair"}}.dump());
  ASSERT_TRUE(r);
  EXPECT_EQ(r->status, 400);
  const json e = error_of(r);
  EXPECT_EQ(e["error_code"], "text_not_supported");
  EXPECT_NE(e["error"].get<std::string>().find("image"), std::string::npos);
}

TEST_F(Serve, ImageWithoutMeshSaysTheServerHasNoShapeModel) {
  json body = generate_body(true);
  body.erase("mesh");
  const auto r = post("/generate", body.dump());
  ASSERT_TRUE(r);
  EXPECT_EQ(r->status, 501);
  const json e = error_of(r);
  EXPECT_EQ(e["error_code"], "no_shape_model");
  EXPECT_NE(e["error"].get<std::string>().find("shape model"), std::string::npos);
}

TEST_F(Serve, BadBase64AndNonImageAre400) {
  json body = generate_body(true);
  body["image"] = "not base64!";
  auto r = post("/generate", body.dump());
  ASSERT_TRUE(r);
  EXPECT_EQ(r->status, 400);
  EXPECT_EQ(error_of(r)["error_code"], "bad_base64");
  body["image"] = io::base64_encode("just some text");
  r = post("/generate", body.dump());
  ASSERT_TRUE(r);
  EXPECT_EQ(r->status, 400);
  EXPECT_EQ(error_of(r)["error_code"], "bad_image");
}

TEST_F(Serve, BodyOverMaxBodyIs413) {
  const auto r = post("/generate", json{{"image", std::string(2 << 20, 'A')}}.dump());
  ASSERT_TRUE(r);
  EXPECT_EQ(r->status, 413);
  EXPECT_EQ(error_of(r)["error_code"], "body_too_large");
}

TEST_F(Serve, UnknownPathIsJson404) {
  const auto r = client().Get("/nowhere");
  ASSERT_TRUE(r);
  EXPECT_EQ(r->status, 404);
  EXPECT_EQ(error_of(r)["error_code"], "not_found");
}

// Reads a job's server-sent events to the end; returns (event name, data) pairs.
std::vector<std::pair<std::string, json>> read_events(httplib::Client& c, const std::string& id) {
  std::string text;
  const auto r = c.Get(("/v1/jobs/" + id + "/events").c_str(), [&](const char* data, size_t n) {
    text.append(data, n);
    return true;
  });
  EXPECT_TRUE(r);
  EXPECT_EQ(r->status, 200);
  EXPECT_EQ(r->get_header_value("Content-Type"), "text/event-stream");
  std::vector<std::pair<std::string, json>> events;
  size_t pos = 0;
  for (size_t end; (end = text.find("\n\n", pos)) != std::string::npos; pos = end + 2) {
    const std::string block = text.substr(pos, end - pos);
    std::string name, data;
    size_t line_start = 0;
    while (line_start < block.size()) {
      size_t line_end = block.find('\n', line_start);
      if (line_end == std::string::npos) line_end = block.size();
      const std::string line = block.substr(line_start, line_end - line_start);
      if (line.starts_with("event: ")) name = line.substr(7);
      if (line.starts_with("data: ")) data = line.substr(6);
      line_start = line_end + 1;
    }
    if (!name.empty()) events.emplace_back(name, json::parse(data));
  }
  return events;
}

TEST_F(Serve, JobApiStreamsNodeEventsAndServesTheResult) {
  const json body = {{"pipeline", "texture"},
                     {"files",
                      {{"box.glb", io::base64_encode(read_bytes(kMesh))},
                       {"front.png", io::base64_encode(read_bytes(kImage))}}},
                     {"vars", {{"mesh", "box.glb"}, {"image", "front.png"}}}};
  auto c = client();
  const auto r = c.Post("/v1/jobs", body.dump(), "application/json");
  ASSERT_TRUE(r);
  ASSERT_EQ(r->status, 202) << r->body;
  const std::string id = json::parse(r->body)["id"];
  EXPECT_EQ(r->get_header_value("Location"), "/v1/jobs/" + id);

  const auto events = read_events(c, id);
  ASSERT_FALSE(events.empty());
  size_t started = 0, finished = 0;
  for (const auto& [name, data] : events) {
    if (name == "node_started") ++started;
    if (name == "node_finished") {
      ++finished;
      EXPECT_EQ(data["run"], id);
    }
  }
  EXPECT_GT(started, 5u);
  EXPECT_EQ(started, finished);
  EXPECT_EQ(events.front().first, "run_started");
  EXPECT_EQ(events.back().first, "end");
  EXPECT_EQ(events.back().second["state"], "done");

  // A late subscriber catches up from the start (and the stream ends at once).
  EXPECT_EQ(read_events(c, id).size(), events.size());

  const auto state = c.Get(("/v1/jobs/" + id).c_str());
  ASSERT_TRUE(state);
  const json s = json::parse(state->body);
  EXPECT_EQ(s["state"], "done");
  ASSERT_FALSE(s["nodes"].empty());
  for (const json& n : s["nodes"]) EXPECT_NE(n["status"], "failed") << n.dump();

  const auto result = c.Get(("/v1/jobs/" + id + "/result").c_str());
  ASSERT_TRUE(result);
  ASSERT_EQ(result->status, 200);
  EXPECT_TRUE(load_glb(result->body, "job").texture);

  // The graph (every node, with its producers), drawn by the studio before the nodes run; nodes
  // only a report reads are in it but did not run.
  ASSERT_TRUE(s.contains("graph")) << s.dump();
  const json& graph = s["graph"]["nodes"];
  EXPECT_GT(graph.size(), s["nodes"].size());
  for (const json& n : s["nodes"])
    EXPECT_TRUE(std::any_of(graph.begin(), graph.end(), [&](const json& g) {
      return g["id"] == n["id"] && g["stage"] == n["stage"];
    })) << n.dump();
  // The files it serves: the result and the Chrome trace; no report unless asked.
  EXPECT_EQ(s["files"]["result"], "/v1/jobs/" + id + "/result");
  ASSERT_EQ(s["files"]["trace"], "/v1/jobs/" + id + "/trace");
  EXPECT_FALSE(s["files"].contains("report"));
  const auto trace = c.Get(("/v1/jobs/" + id + "/trace").c_str());
  ASSERT_TRUE(trace);
  ASSERT_EQ(trace->status, 200);
  EXPECT_FALSE(json::parse(trace->body)["traceEvents"].empty());
  const auto report = c.Get(("/v1/jobs/" + id + "/report").c_str());
  ASSERT_TRUE(report);
  EXPECT_EQ(report->status, 404);
  EXPECT_EQ(error_of(report)["error_code"], "no_report");

  const auto list = c.Get("/v1/jobs");
  ASSERT_TRUE(list);
  EXPECT_NE(list->body.find(id), std::string::npos);
  const auto metrics = c.Get("/metrics");
  ASSERT_TRUE(metrics);
  EXPECT_NE(metrics->body.find("gen3d_jobs{state=\"done\"}"), std::string::npos);
  EXPECT_NE(metrics->body.find("gen3d_queue_length 0"), std::string::npos);
}

// Runs a job to its end; returns its state.
json run_job(httplib::Client& c, const json& body) {
  const auto r = c.Post("/v1/jobs", body.dump(), "application/json");
  EXPECT_TRUE(r && r->status == 202) << (r ? r->body : "no answer");
  if (!r || r->status != 202) return json::object();
  const std::string id = json::parse(r->body)["id"];
  read_events(c, id);
  return json::parse(c.Get(("/v1/jobs/" + id).c_str())->body);
}

TEST_F(Serve, JobApiWritesTheReportWhenAsked) {
  auto c = client();
  const json s =
      run_job(c, {{"pipeline", "texture"},
                  {"files",
                   {{"box.glb", io::base64_encode(read_bytes(kMesh))},
                    {"front.png", io::base64_encode(read_bytes(kImage))}}},
                  {"vars", {{"mesh", "box.glb"}, {"image", "front.png"}, {"report", true}}}});
  ASSERT_EQ(s["state"], "done") << s.dump();
  // With a report every node runs.
  EXPECT_EQ(s["nodes"].size(), s["graph"]["nodes"].size());
  for (const json& n : s["nodes"]) EXPECT_EQ(n["status"], "done") << n.dump();
  ASSERT_TRUE(s["files"].contains("report")) << s.dump();
  const auto report = c.Get(s["files"]["report"].get<std::string>().c_str());
  ASSERT_TRUE(report);
  ASSERT_EQ(report->status, 200);
  EXPECT_EQ(report->get_header_value("Content-Type"), "text/html; charset=utf-8");
  EXPECT_TRUE(report->body.starts_with("<!doctype html>")) << report->body.substr(0, 40);
}

TEST_F(Serve, JobApiTexturesFromViewImagesOrAnotherMesh) {
  auto c = client();
  const std::string box = io::base64_encode(read_bytes(kMesh));
  const std::string image = io::base64_encode(read_bytes(kImage));
  // One image per view (the official six), in view order.
  json s = run_job(
      c, {{"pipeline", "texture"},
          {"files", {{"box.glb", box}, {"v.png", image}}},
          {"vars",
           {{"mesh", "box.glb"},
            {"views", json::array({"v.png", "v.png", "v.png", "v.png", "v.png", "v.png"})}}}});
  ASSERT_EQ(s["state"], "done") << s.dump();
  EXPECT_TRUE(std::any_of(s["nodes"].begin(), s["nodes"].end(), [](const json& n) {
    return n["stage"] == "views_from_files";
  })) << s.dump();
  // Texture transfer from another textured mesh.
  s = run_job(c, {{"pipeline", "texture"},
                  {"files", {{"box.glb", box}, {"source.glb", box}}},
                  {"vars", {{"mesh", "box.glb"}, {"source_mesh", "source.glb"}}}});
  ASSERT_EQ(s["state"], "done") << s.dump();
  EXPECT_TRUE(std::any_of(s["nodes"].begin(), s["nodes"].end(), [](const json& n) {
    return n["stage"] == "views_from_mesh";
  })) << s.dump();
  // One source, not two.
  const auto r =
      post("/v1/jobs",
           json{{"pipeline", "texture"},
                {"files", {{"box.glb", box}, {"front.png", image}}},
                {"vars", {{"mesh", "box.glb"}, {"image", "front.png"}, {"source_mesh", "box.glb"}}}}
               .dump());
  ASSERT_TRUE(r);
  EXPECT_EQ(r->status, 400);
  EXPECT_EQ(error_of(r)["error_code"], "conflicting_vars");
}

TEST_F(Serve, JobApiRefusesPathsAndUnknownVariables) {
  json body = {{"pipeline", "texture"},
               {"files", {{"box.glb", io::base64_encode(read_bytes(kMesh))}}},
               {"vars", {{"mesh", "box.glb"}, {"image", "/etc/passwd"}}}};
  auto r = post("/v1/jobs", body.dump());
  ASSERT_TRUE(r);
  EXPECT_EQ(r->status, 400);
  EXPECT_EQ(error_of(r)["error_code"], "missing_file");
  body["vars"] = {{"mesh", "box.glb"}, {"out", "/tmp/x.glb"}};
  r = post("/v1/jobs", body.dump());
  ASSERT_TRUE(r);
  EXPECT_EQ(r->status, 400);
  EXPECT_EQ(error_of(r)["error_code"], "unknown_var");
  body["pipeline"] = "studio";
  r = post("/v1/jobs", body.dump());
  ASSERT_TRUE(r);
  EXPECT_EQ(r->status, 400);
  EXPECT_EQ(error_of(r)["error_code"], "unknown_pipeline");
  // A shape job on a server without a shape model.
  body["pipeline"] = "shape";
  r = post("/v1/jobs", body.dump());
  ASSERT_TRUE(r);
  EXPECT_EQ(r->status, 501);
  EXPECT_EQ(error_of(r)["error_code"], "no_shape_model");
}

// A server whose --models folder holds a shape model (the tiny one, in the official layout:
// DIR/hunyuan3d-dit-v2-0) and no paint model.
class ServeShape : public Serve {
 protected:
  static void SetUpTestSuite() {
    const std::string models = temp_dir("serve_shape_models_" + process_tag());
    write_tiny_model_folder(models + "/hunyuan3d-dit-v2-0", 7, TinyConfigFile::kYaml);
    server_ = new ServeProcess({"--models", models, "--texture-size", "256", "--render-size", "256",
                                "--data", temp_dir("serve_shape_data_" + process_tag())});
  }

  // An api_server.py request with an image and no mesh; few steps and a coarse grid (the model is
  // random: only the wiring is under test).
  static json image_only_body(bool texture) {
    return {{"image", io::base64_encode(read_bytes(kImage))},
            {"texture", texture},
            {"seed", 7},
            {"octree_resolution", 64},
            {"num_inference_steps", 4},
            {"guidance_scale", 5.0}};
  }
};

TEST_F(ServeShape, GenerateWithOnlyAnImageMakesAMesh) {
  const auto r = post("/generate", image_only_body(false).dump());
  ASSERT_TRUE(r);
  ASSERT_EQ(r->status, 200) << r->body.substr(0, 400);
  EXPECT_EQ(r->get_header_value("Content-Type"), "model/gltf-binary");
  ASSERT_TRUE(r->body.starts_with("glTF"));
  const mesh::Mesh m = load_glb(r->body, "shape_generate");
  EXPECT_GT(m.face_count(), 100u);
  EXPECT_FALSE(m.texture);
  // A grid too coarse to decode is the client's fault, said before anything runs.
  json coarse = image_only_body(false);
  coarse["octree_resolution"] = 4;
  const auto refused = post("/generate", coarse.dump());
  ASSERT_TRUE(refused);
  EXPECT_EQ(refused->status, 400);
  EXPECT_EQ(error_of(refused)["error_code"], "bad_field");
}

// /send answers at once; /status says "processing" while the job waits and makes the shape,
// "texturing" while it textures, then "completed" with the textured GLB. A first job holds the
// one worker, so the second is seen waiting.
TEST_F(ServeShape, SendThenStatusGoesFromProcessingToCompleted) {
  std::vector<std::string> uids;
  for (int i = 0; i < 2; ++i) {
    const auto sent = post("/send", image_only_body(true).dump());
    ASSERT_TRUE(sent);
    ASSERT_EQ(sent->status, 200) << sent->body;
    uids.push_back(json::parse(sent->body)["uid"]);
  }
  const std::vector<std::string> order = {"processing", "texturing", "completed"};
  std::vector<std::string> seen;  // each change of the second job's status
  json status;
  for (int i = 0; i < 3000; ++i) {
    const auto r = client().Get(("/status/" + uids[1]).c_str());
    ASSERT_TRUE(r);
    ASSERT_EQ(r->status, 200);
    status = json::parse(r->body);
    const std::string s = status["status"];
    ASSERT_NE(std::find(order.begin(), order.end(), s), order.end()) << r->body.substr(0, 400);
    if (seen.empty() || seen.back() != s) seen.push_back(s);
    if (s == "completed") break;
    std::this_thread::sleep_for(std::chrono::milliseconds(20));
  }
  ASSERT_EQ(status["status"], "completed");
  ASSERT_GE(seen.size(), 2u);
  EXPECT_EQ(seen.front(), "processing");
  const auto rank = [&](const std::string& s) {
    return std::find(order.begin(), order.end(), s) - order.begin();
  };
  for (size_t i = 1; i < seen.size(); ++i)  // never back
    EXPECT_LT(rank(seen[i - 1]), rank(seen[i])) << seen[i - 1] << " then " << seen[i];
  const std::string glb = io::base64_decode(status["model_base64"].get<std::string>());
  ASSERT_TRUE(glb.starts_with("glTF"));
  const mesh::Mesh m = load_glb(glb, "shape_status");
  EXPECT_GT(m.face_count(), 100u);
  ASSERT_TRUE(m.texture);  // textured model-free: the folder has no paint model
  EXPECT_EQ(m.texture->width, 256);
  EXPECT_TRUE(m.has_uvs());
}

TEST_F(ServeShape, JobApiShapePipelineStreamsSamplerSteps) {
  const json body = {{"pipeline", "shape"},
                     {"files", {{"front.png", io::base64_encode(read_bytes(kImage))}}},
                     {"vars",
                      {{"image", "front.png"},
                       {"steps", 4},
                       {"resolution", 64},
                       {"min_resolution", 16},
                       {"seed", 7}}}};
  auto c = client();
  const auto r = c.Post("/v1/jobs", body.dump(), "application/json");
  ASSERT_TRUE(r);
  ASSERT_EQ(r->status, 202) << r->body;
  const std::string id = json::parse(r->body)["id"];
  const auto events = read_events(c, id);
  ASSERT_FALSE(events.empty());
  EXPECT_EQ(events.back().first, "end");
  EXPECT_EQ(events.back().second["state"], "done") << events.back().second.dump();
  EXPECT_EQ(events.back().second["pipeline"], "shape");
  size_t steps = 0;
  bool denoised = false;
  for (const auto& [name, data] : events) {
    if (name == "step" && data.value("label", "") == "denoise step") ++steps;
    if (name == "node_finished" && data["stage"] == "denoise") denoised = true;
  }
  EXPECT_GE(steps, 4u);
  EXPECT_TRUE(denoised);
  const auto result = c.Get(("/v1/jobs/" + id + "/result").c_str());
  ASSERT_TRUE(result);
  ASSERT_EQ(result->status, 200);
  EXPECT_EQ(result->get_header_value("Content-Type"), "model/gltf-binary");
  EXPECT_GT(load_glb(result->body, "shape_job").face_count(), 100u);
  // Variables other than the shape command's are refused, and so is a file not uploaded.
  json bad = body;
  bad["vars"]["out"] = "/tmp/x.glb";
  auto refused = c.Post("/v1/jobs", bad.dump(), "application/json");
  ASSERT_TRUE(refused);
  EXPECT_EQ(refused->status, 400);
  EXPECT_EQ(error_of(refused)["error_code"], "unknown_var");
  bad = body;
  bad["vars"]["image"] = "/etc/passwd";
  refused = c.Post("/v1/jobs", bad.dump(), "application/json");
  ASSERT_TRUE(refused);
  EXPECT_EQ(error_of(refused)["error_code"], "missing_file");
}

TEST(ServeAccess, NonLoopbackAddressNeedsATokenOrInsecure) {
  const auto r = run_gen3d("serve --host 0.0.0.0 --port " + std::to_string(free_port()), 30);
  EXPECT_EQ(r.exit_code, 2) << r.output;
  EXPECT_NE(r.output.find("--token"), std::string::npos) << r.output;
}

TEST(ServeAccess, TokenIsRequiredOnEveryRequest) {
  const ServeProcess server({"--token", "s3cret", "--data", temp_dir("serve_token")});
  auto c = server.client();
  auto r = c.Get("/health");
  ASSERT_TRUE(r);
  EXPECT_EQ(r->status, 401);
  EXPECT_EQ(json::parse(r->body)["error_code"], "unauthorized");
  r = c.Post("/send", "{}", "application/json");
  ASSERT_TRUE(r);
  EXPECT_EQ(r->status, 401);
  c.set_bearer_token_auth("wrong");
  r = c.Get("/health");
  ASSERT_TRUE(r);
  EXPECT_EQ(r->status, 401);
  c.set_bearer_token_auth("s3cret");
  r = c.Get("/health");
  ASSERT_TRUE(r);
  EXPECT_EQ(r->status, 200);
  // The studio's page and scripts hold no data: a browser loads them without the token.
  auto browser = server.client();
  r = browser.Get("/");
  ASSERT_TRUE(r);
  EXPECT_EQ(r->status, 200);
  EXPECT_EQ(r->get_header_value("Content-Type"), "text/html; charset=utf-8");
  EXPECT_NE(r->body.find("gen3d studio"), std::string::npos);
  r = browser.Get("/studio/studio.js");
  ASSERT_TRUE(r);
  EXPECT_EQ(r->status, 200);
  r = browser.Get("/v1/jobs");
  ASSERT_TRUE(r);
  EXPECT_EQ(r->status, 401);
}

TEST(ServeAccess, FullQueueIs429WithRetryAfter) {
  // One worker, no waiting room: the first job (at the full default size, seconds long) takes the
  // worker, the second finds no room.
  const ServeProcess server({"--queue", "0", "--data", temp_dir("serve_queue")});
  auto c = server.client();
  const auto first = c.Post("/send", generate_body(true).dump(), "application/json");
  ASSERT_TRUE(first);
  EXPECT_EQ(first->status, 200) << first->body;
  const auto r = c.Post("/send", generate_body(true).dump(), "application/json");
  ASSERT_TRUE(r);
  EXPECT_EQ(r->status, 429);
  const std::string retry = r->get_header_value("Retry-After");
  ASSERT_FALSE(retry.empty());
  EXPECT_GE(std::stoi(retry), 1);
  EXPECT_EQ(json::parse(r->body)["error_code"], "queue_full");
}

}  // namespace
}  // namespace gen3d::test
