// `gen3d serve` stopped by SIGTERM: it refuses new jobs and cancels the queued ones at once, lets
// the running job finish within --grace (its result stays fetchable meanwhile), cancels it past
// the grace or on a second signal, and exits 0 leaving only whole files under --data.

#include <sys/wait.h>

#include <chrono>
#include <csignal>
#include <filesystem>
#include <fstream>
#include <string>
#include <thread>
#include <vector>

#include <gtest/gtest.h>
#include <httplib.h>
#include <nlohmann/json.hpp>

#include "io/base64.h"
#include "mesh/io.h"
#include "support/paths.h"
#include "support/serve_process.h"

namespace gen3d::test {
namespace {

namespace fs = std::filesystem;
using nlohmann::json;
using namespace std::chrono_literals;

// A texture job of some seconds: the box at a 4096 px texture.
std::string job_body() {
  return json{{"image", io::base64_encode(read_bytes("assets/images/spider_front.png"))},
              {"mesh", io::base64_encode(
                           read_bytes("tests/data/mesh/meshes-assimp/glTF2/BoxTextured.glb"))},
              {"texture", true}}
      .dump();
}

std::string send(const ServeProcess& server) {
  const auto r = server.client().Post("/send", job_body(), "application/json");
  EXPECT_TRUE(r && r->status == 200) << (r ? r->body : "no answer");
  return r ? json::parse(r->body).value("uid", "") : "";
}

// Polls the job API until job `id` runs.
bool wait_running(const ServeProcess& server, const std::string& id) {
  for (const auto deadline = std::chrono::steady_clock::now() + 30s;
       std::chrono::steady_clock::now() < deadline; std::this_thread::sleep_for(10ms)) {
    const auto r = server.client().Get(("/v1/jobs/" + id).c_str());
    if (r && r->status == 200 && json::parse(r->body).value("state", "") == "running") return true;
  }
  return false;
}

// Files under `dir` whose name shows an unfinished write (io/atomic_file.h's temporaries).
std::vector<std::string> temporary_files(const std::string& dir) {
  std::vector<std::string> out;
  for (const auto& e : fs::recursive_directory_iterator(dir))
    if (e.is_regular_file() && e.path().filename().string().find(".tmp") != std::string::npos)
      out.push_back(e.path().string());
  return out;
}

bool exited_cleanly(int status) {
  return status != -1 && WIFEXITED(status) && WEXITSTATUS(status) == 0;
}

TEST(ServeShutdown, SigtermLetsTheRunningJobFinishAndRefusesNewOnes) {
  const std::string data = temp_dir("serve_sigterm");
  ServeProcess server({"--texture-size", "4096", "--grace", "120s", "--data", data});
  // The running job is a /generate whose client waits for the model.
  std::string model;
  int generate_status = 0;
  std::thread generate([&] {
    auto c = server.client();
    c.set_read_timeout(300, 0);
    const auto r = c.Post("/generate", job_body(), "application/json");
    if (!r) return;
    generate_status = r->status;
    model = r->body;
  });
  std::string running;
  for (int i = 0; i < 3000 && running.empty(); ++i, std::this_thread::sleep_for(10ms)) {
    const json list = json::parse(server.client().Get("/v1/jobs")->body);
    if (!list["jobs"].empty()) running = list["jobs"][0]["id"];
  }
  ASSERT_TRUE(wait_running(server, running));
  const std::string queued = send(server);
  server.send_signal(SIGTERM);

  // Still answering, but stopping: /health says so, new jobs are refused, the queued one is
  // cancelled.
  auto c = server.client();
  int health_status = 0;
  json health;
  for (int i = 0; i < 200 && health_status != 503; ++i, std::this_thread::sleep_for(10ms)) {
    const auto r = c.Get("/health");
    ASSERT_TRUE(r);
    health_status = r->status;
    health = json::parse(r->body);
  }
  EXPECT_EQ(health_status, 503);
  EXPECT_EQ(health["status"], "stopping");
  const auto refused = c.Post("/send", job_body(), "application/json");
  ASSERT_TRUE(refused);
  EXPECT_EQ(refused->status, 503);
  EXPECT_EQ(json::parse(refused->body)["error_code"], "shutting_down");
  const auto status = c.Get(("/status/" + queued).c_str());
  ASSERT_TRUE(status);
  EXPECT_EQ(json::parse(status->body)["status"], "failed");
  EXPECT_EQ(json::parse(status->body)["error_code"], "cancelled");

  // The running job finishes and its client gets the model; then the server exits.
  generate.join();
  EXPECT_EQ(generate_status, 200);
  ASSERT_TRUE(model.starts_with("glTF"));
  EXPECT_TRUE(exited_cleanly(server.wait(60s)));
  EXPECT_EQ(temporary_files(data), std::vector<std::string>{});
  const std::string output = data + "/jobs/" + running + "/output.glb";
  EXPECT_EQ(read_bytes(output), model);
  const mesh::Mesh m = mesh::load_mesh(output);
  ASSERT_TRUE(m.texture);
  EXPECT_EQ(m.texture->width, 4096);
  EXPECT_FALSE(fs::exists(data + "/jobs/" + queued));  // never started
}

// The running job is cancelled (its nodes not yet started are skipped): no output, only whole
// files.
void expect_cancelled_cleanly(ServeProcess& server, const std::string& data, const std::string& id,
                              std::chrono::milliseconds within) {
  const auto t0 = std::chrono::steady_clock::now();
  EXPECT_TRUE(exited_cleanly(server.wait(within + 30s)));
  EXPECT_LT(std::chrono::steady_clock::now() - t0, within + 30s);
  EXPECT_EQ(temporary_files(data), std::vector<std::string>{});
  const std::string dir = data + "/jobs/" + id;
  EXPECT_FALSE(fs::exists(dir + "/output.glb"));
  // The trace of the cancelled run is whole.
  ASSERT_TRUE(fs::exists(dir + "/trace.json"));
  EXPECT_FALSE(json::parse(read_bytes(dir + "/trace.json"), nullptr, false).is_discarded());
}

TEST(ServeShutdown, PastTheGraceTheRunningJobIsCancelled) {
  const std::string data = temp_dir("serve_sigterm_grace");
  ServeProcess server({"--texture-size", "4096", "--grace", "0", "--data", data});
  const std::string id = send(server);
  ASSERT_TRUE(wait_running(server, id));
  server.send_signal(SIGTERM);
  expect_cancelled_cleanly(server, data, id, 0ms);
}

TEST(ServeShutdown, ASecondSignalCutsTheGraceShort) {
  const std::string data = temp_dir("serve_sigterm_twice");
  ServeProcess server({"--texture-size", "4096", "--grace", "10m", "--data", data});
  const std::string id = send(server);
  ASSERT_TRUE(wait_running(server, id));
  server.send_signal(SIGTERM);
  std::this_thread::sleep_for(100ms);
  server.send_signal(SIGINT);
  expect_cancelled_cleanly(server, data, id, 0ms);
}

}  // namespace
}  // namespace gen3d::test
