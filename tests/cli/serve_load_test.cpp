// `gen3d serve` under load: 50 clients send a small texture job (Hunyuan3D-2's /send) at the same
// moment to a server with two workers and eight places in its queue. Every request is either
// accepted and completes exactly once, or refused with 429 and Retry-After; the server's memory
// stays bounded and /health keeps answering while it works.

#include <algorithm>
#include <atomic>
#include <chrono>
#include <fstream>
#include <iostream>
#include <latch>
#include <map>
#include <mutex>
#include <set>
#include <string>
#include <thread>
#include <vector>

#include <gtest/gtest.h>
#include <httplib.h>
#include <nlohmann/json.hpp>

#include "io/base64.h"
#include "support/paths.h"
#include "support/serve_process.h"

namespace gen3d::test {
namespace {

using nlohmann::json;
using Clock = std::chrono::steady_clock;

// The peak resident set of process `pid` in KiB (VmHWM in /proc/<pid>/status), or -1.
long peak_rss_kib(pid_t pid) {
  std::ifstream in("/proc/" + std::to_string(pid) + "/status");
  std::string line;
  while (std::getline(in, line))
    if (line.starts_with("VmHWM:")) return std::stol(line.substr(6));
  return -1;
}

double percentile(std::vector<double> v, double p) {
  if (v.empty()) return 0;
  std::sort(v.begin(), v.end());
  const size_t i = std::min(v.size() - 1, static_cast<size_t>(p * static_cast<double>(v.size())));
  return v[i];
}

// What one client saw.
struct Outcome {
  int send_status = 0;  // 0: no answer at all
  std::string uid;      // accepted
  std::string retry_after;
  int completed = 0;  // times /status answered "completed" with a GLB
  std::string failure;
};

TEST(ServeLoad, FiftyConcurrentSendsCompleteOrAreRefusedWith429) {
  constexpr int kClients = 50;
  const std::string body = json{
      {"image", io::base64_encode(read_bytes("assets/images/spider_front.png"))},
      {"mesh",
       io::base64_encode(read_bytes("tests/data/mesh/meshes-assimp/glTF2/BoxTextured.glb"))},
      {"texture", true}}.dump();
  ServeProcess server({"--jobs", "2", "--queue", "8", "--texture-size", "256", "--render-size",
                       "256", "--data", temp_dir("serve_load")});
  const long idle_kib = peak_rss_kib(server.pid());

  // One job alone first: the peak of a single job, the scale of the memory bound below.
  {
    auto c = server.client();
    const auto r = c.Post("/generate", body, "application/json");
    ASSERT_TRUE(r);
    ASSERT_EQ(r->status, 200) << r->body;
  }
  const long one_job_kib = peak_rss_kib(server.pid());

  // /health from another thread all along, each on a fresh connection as a probe makes them.
  std::atomic<bool> stop_health{false};
  std::vector<double> health_ms;
  int health_failures = 0;
  std::thread health([&] {
    while (!stop_health.load()) {
      auto c = server.client();
      const auto t0 = Clock::now();
      const auto r = c.Get("/health");
      health_ms.push_back(std::chrono::duration<double, std::milli>(Clock::now() - t0).count());
      if (!r || r->status != 200) ++health_failures;
      std::this_thread::sleep_for(std::chrono::milliseconds(20));
    }
  });

  std::vector<Outcome> outcomes(kClients);
  std::latch start(kClients);
  std::vector<std::thread> clients;
  for (int i = 0; i < kClients; ++i)
    clients.emplace_back([&, i] {
      Outcome& o = outcomes[i];
      auto c = server.client();
      start.arrive_and_wait();  // all at once
      const auto sent = c.Post("/send", body, "application/json");
      if (!sent) {
        o.failure = "no answer to /send: " + httplib::to_string(sent.error());
        return;
      }
      o.send_status = sent->status;
      o.retry_after = sent->get_header_value("Retry-After");
      if (sent->status != 200) return;
      o.uid = json::parse(sent->body).value("uid", "");
      // Polls until the job has ended, then once more: "completed" must stay so, with the same
      // model.
      for (const auto deadline = Clock::now() + std::chrono::minutes(5);
           Clock::now() < deadline && o.completed < 2;) {
        const auto r = c.Get(("/status/" + o.uid).c_str());
        if (!r || r->status != 200) {
          o.failure = r ? r->body : "no answer to /status";
          return;
        }
        const json s = json::parse(r->body);
        const std::string state = s.value("status", "");
        if (state == "completed") {
          const std::string glb = io::base64_decode(s.value("model_base64", ""));
          if (!glb.starts_with("glTF")) o.failure = "completed without a GLB";
          ++o.completed;
        } else if (state != "processing" && state != "texturing") {
          o.failure = r->body;
          return;
        }
        std::this_thread::sleep_for(std::chrono::milliseconds(50));
      }
    });
  for (std::thread& t : clients) t.join();
  stop_health.store(true);
  health.join();

  std::set<std::string> uids;
  int accepted = 0, refused = 0;
  for (const Outcome& o : outcomes) {
    ASSERT_TRUE(o.send_status == 200 || o.send_status == 429)
        << "a /send answered " << o.send_status << " " << o.failure;
    if (o.send_status == 429) {
      ++refused;
      EXPECT_FALSE(o.retry_after.empty()) << "429 without Retry-After";
      EXPECT_GE(std::atoi(o.retry_after.c_str()), 1);
      continue;
    }
    ++accepted;
    EXPECT_FALSE(o.uid.empty());
    EXPECT_TRUE(uids.insert(o.uid).second) << "uid " << o.uid << " given twice";
    EXPECT_EQ(o.completed, 2) << o.uid << ": " << o.failure;
  }
  EXPECT_EQ(accepted + refused, kClients);
  // The queue was full at least once, and at least workers + queue jobs got in.
  EXPECT_GT(refused, 0);
  EXPECT_GE(accepted, 2 + 8);

  // The server's own account: every accepted job once, done; every refusal counted.
  auto c = server.client();
  const auto list = c.Get("/v1/jobs");
  ASSERT_TRUE(list);
  std::map<std::string, int> listed;
  const json jobs = json::parse(list->body);
  for (const json& j : jobs["jobs"]) {
    if (j["pipeline"] != "generate") continue;
    ++listed[j["id"].get<std::string>()];
    EXPECT_EQ(j["state"], "done") << j.dump();
  }
  EXPECT_EQ(listed.size(), static_cast<size_t>(accepted) + 1);  // and the warm-up job
  for (const std::string& uid : uids) EXPECT_EQ(listed[uid], 1) << uid;
  const auto metrics = c.Get("/metrics");
  ASSERT_TRUE(metrics);
  EXPECT_NE(metrics->body.find("gen3d_jobs_submitted_total " + std::to_string(accepted + 1)),
            std::string::npos)
      << metrics->body;
  EXPECT_NE(metrics->body.find("gen3d_jobs_rejected_total " + std::to_string(refused)),
            std::string::npos)
      << metrics->body;

  // Memory: two jobs run at once, each at most what the warm-up job added to the idle server; the
  // requests themselves are small (waiting jobs hold their ~60 KB of decoded uploads), so 64 MiB
  // covers them, the threads' stacks and the allocator's arenas.
  const long peak_kib = peak_rss_kib(server.pid());
  const long bound_kib = one_job_kib + (one_job_kib - idle_kib) + 64 * 1024;
  EXPECT_LE(peak_kib, bound_kib) << "idle " << idle_kib << " KiB, one job " << one_job_kib
                                 << " KiB";

  // /health: every probe answered; the time is reported, bounded only loosely (this is a test on
  // a shared machine: figures belong to the benchmark).
  EXPECT_EQ(health_failures, 0);
  ASSERT_FALSE(health_ms.empty());
  const double p50 = percentile(health_ms, 0.50), p99 = percentile(health_ms, 0.99);
  const double worst = *std::max_element(health_ms.begin(), health_ms.end());
  EXPECT_LT(p99, 2000.0);
  std::cout << "load: " << accepted << " accepted, " << refused << " refused (429); peak RSS "
            << peak_kib / 1024 << " MiB (idle " << idle_kib / 1024 << ", one job "
            << one_job_kib / 1024 << ", bound " << bound_kib / 1024 << "); /health p50 " << p50
            << " ms, p99 " << p99 << " ms, max " << worst << " ms over " << health_ms.size()
            << " probes\n";
  ::testing::Test::RecordProperty("health_p99_ms", std::to_string(p99));
  ::testing::Test::RecordProperty("peak_rss_kib", std::to_string(peak_kib));
}

}  // namespace
}  // namespace gen3d::test
