// `gen3d serve`'s stage cache: one store shared by every job of the server. The same texture job
// twice loads the second's nodes from the cache and answers the same bytes; the job's state, its
// events and /metrics say so; --no-cache runs every node. The real binary on a loopback port,
// spoken to over real HTTP.

#include <unistd.h>

#include <algorithm>
#include <filesystem>
#include <fstream>
#include <iostream>
#include <iterator>
#include <map>
#include <regex>
#include <set>
#include <string>

#include <gtest/gtest.h>
#include <httplib.h>
#include <nlohmann/json.hpp>

#include "io/base64.h"
#include "support/paths.h"
#include "support/serve_process.h"

namespace gen3d::test {
namespace {

using nlohmann::json;

const std::string kMesh = "tests/data/mesh/meshes-assimp/glTF2/BoxTextured.glb";
const std::string kImage = "assets/images/spider_front.png";

json texture_job() {
  return {{"pipeline", "texture"},
          {"files",
           {{"box.glb", io::base64_encode(read_bytes(source_dir() + "/" + kMesh))},
            {"front.png", io::base64_encode(read_bytes(source_dir() + "/" + kImage))}}},
          {"vars", {{"mesh", "box.glb"}, {"image", "front.png"}}}};
}

// A finished job: its state, the text of its event stream and its result's bytes.
struct FinishedJob {
  json state;
  std::string events;
  std::string result;
};

FinishedJob run_job(const ServeProcess& server, const json& body) {
  auto c = server.client();
  c.set_read_timeout(300, 0);
  FinishedJob f;
  const auto r = c.Post("/v1/jobs", body.dump(), "application/json");
  EXPECT_TRUE(r && r->status == 202) << (r ? r->body : "no answer");
  if (!r || r->status != 202) return f;
  const std::string id = json::parse(r->body)["id"];
  // The stream ends with the job.
  c.Get(("/v1/jobs/" + id + "/events").c_str(), [&](const char* data, size_t n) {
    f.events.append(data, n);
    return true;
  });
  f.state = json::parse(c.Get(("/v1/jobs/" + id).c_str())->body);
  if (f.state["state"] == "done") f.result = c.Get(("/v1/jobs/" + id + "/result").c_str())->body;
  return f;
}

// The value of the Prometheus sample `name` (-1 when absent).
double metric(const ServeProcess& server, const std::string& name) {
  const auto r = server.client().Get("/metrics");
  if (!r) return -1;
  std::smatch m;
  if (!std::regex_search(r->body, m, std::regex("\n" + name + " ([0-9.e+]+)\n"))) return -1;
  return std::stod(m[1]);
}

size_t count_status(const json& state, const std::string& status) {
  size_t n = 0;
  for (const json& node : state["nodes"]) n += node["status"] == status ? 1 : 0;
  return n;
}

TEST(ServeCache, TheSameJobTwiceComesFromTheCacheWithTheSameBytes) {
  const std::string dir = temp_dir("serve_cache_" + std::to_string(::getpid()));
  // --cache-all: every node that may be stored is, however cheap at 256 px, so that the second
  // job needs to run none of them.
  const ServeProcess server({"--texture-size", "256", "--render-size", "256", "--data",
                             dir + "/data", "--cache", dir + "/cache", "--cache-all"});
  EXPECT_EQ(metric(server, "gen3d_stage_cache_enabled"), 1);
  EXPECT_EQ(metric(server, "gen3d_stage_cache_hits_total"), 0);

  const FinishedJob first = run_job(server, texture_job());
  ASSERT_EQ(first.state["state"], "done") << first.state.dump();
  const json& c1 = first.state["cache"];
  ASSERT_TRUE(c1.is_object()) << first.state.dump();
  EXPECT_TRUE(c1["enabled"].get<bool>());
  EXPECT_EQ(c1["hits"], 0) << c1.dump();
  EXPECT_GT(c1["misses"].get<int>(), 0) << c1.dump();
  EXPECT_GT(c1["stored"].get<int>(), 0) << c1.dump();
  EXPECT_EQ(count_status(first.state, "cached"), 0u) << first.state.dump();
  // The run's timing: its critical path is a chain of the graph's nodes, each a producer of the
  // next, and takes at most the run's time.
  const json& t = first.state["timing"];
  ASSERT_TRUE(t.is_object()) << first.state.dump();
  ASSERT_GT(t["critical_path"].size(), 2u) << t.dump();
  std::map<std::string, json> after;
  for (const json& n : first.state["graph"]["nodes"]) after[n["id"]] = n["after"];
  for (size_t i = 1; i < t["critical_path"].size(); ++i) {
    const json& producers = after[t["critical_path"][i].get<std::string>()];
    EXPECT_NE(std::find(producers.begin(), producers.end(), t["critical_path"][i - 1]),
              producers.end())
        << t.dump();
  }
  EXPECT_GT(t["critical_seconds"].get<double>(), 0) << t.dump();
  EXPECT_LE(t["critical_seconds"].get<double>(), t["wall_seconds"].get<double>() + 1e-3)
      << t.dump();
  EXPECT_GT(t["concurrency"].get<double>(), 0) << t.dump();

  const FinishedJob second = run_job(server, texture_job());
  ASSERT_EQ(second.state["state"], "done") << second.state.dump();
  const json& c2 = second.state["cache"];
  EXPECT_GT(c2["hits"].get<int>(), 0) << c2.dump();
  EXPECT_EQ(c2["misses"], 0) << "a node ran again: " << second.state.dump();
  EXPECT_EQ(c2["stored"], 0) << c2.dump();
  // Each node loaded or not needed shows "cached", and the list names them.
  const size_t cached = count_status(second.state, "cached");
  EXPECT_GT(cached, 0u);
  EXPECT_EQ(c2["nodes"].size(), cached) << c2.dump();
  EXPECT_EQ(c2["hits"].get<size_t>() + c2["unneeded"].get<size_t>(), cached) << c2.dump();
  size_t loaded = 0;
  for (const json& n : second.state["nodes"]) loaded += n.value("cache", "") == "loaded" ? 1 : 0;
  EXPECT_EQ(loaded, c2["hits"].get<size_t>()) << second.state.dump();
  // The events say so: nodes finished as "cached", then the run's cache summary.
  EXPECT_NE(second.events.find("\"status\":\"cached\""), std::string::npos) << second.events;
  EXPECT_NE(second.events.find("event: cache\n"), std::string::npos) << second.events;
  EXPECT_EQ(first.events.find("\"status\":\"cached\""), std::string::npos);

  // The same bytes, from the cache's copies of the node results.
  ASSERT_FALSE(first.result.empty());
  EXPECT_TRUE(first.result == second.result)
      << "the cached job's GLB differs (" << first.result.size() << " and " << second.result.size()
      << " bytes)";

  // /metrics counts over both jobs.
  EXPECT_EQ(metric(server, "gen3d_stage_cache_hits_total"), c2["hits"].get<double>());
  EXPECT_EQ(metric(server, "gen3d_stage_cache_misses_total"), c1["misses"].get<double>());
  EXPECT_EQ(metric(server, "gen3d_stage_cache_stored_total"), c1["stored"].get<double>());
  EXPECT_EQ(metric(server, "gen3d_stage_cache_unneeded_total"), c2["unneeded"].get<double>());
  std::cout << "serve cache: first job " << first.state["nodes"].size() << " nodes, "
            << c1["stored"] << " stored; second job " << c2["hits"] << " loaded, " << c2["unneeded"]
            << " not needed, " << c2["saved_seconds"] << " s saved\n";
}

TEST(ServeCache, NoCacheRunsEveryNode) {
  const std::string dir = temp_dir("serve_no_cache_" + std::to_string(::getpid()));
  const ServeProcess server({"--texture-size", "256", "--render-size", "256", "--data",
                             dir + "/data", "--cache", dir + "/cache", "--no-cache"});
  EXPECT_EQ(metric(server, "gen3d_stage_cache_enabled"), 0);
  for (int i = 0; i < 2; ++i) {
    const FinishedJob job = run_job(server, texture_job());
    ASSERT_EQ(job.state["state"], "done") << job.state.dump();
    EXPECT_FALSE(job.state["cache"]["enabled"].get<bool>()) << job.state.dump();
    EXPECT_EQ(job.state["cache"]["hits"], 0);
    EXPECT_EQ(count_status(job.state, "cached"), 0u) << job.state.dump();
    EXPECT_EQ(job.events.find("\"status\":\"cached\""), std::string::npos);
  }
  EXPECT_EQ(metric(server, "gen3d_stage_cache_hits_total"), 0);
  EXPECT_FALSE(std::filesystem::exists(dir + "/cache/entries"));  // nothing written
}

json post_json(const ServeProcess& server, const std::string& path, const json& body, int& status) {
  const auto r = server.client().Post(path.c_str(), body.dump(), "application/json");
  status = r ? r->status : -1;
  return r ? json::parse(r->body, nullptr, false) : json();
}

size_t node_index(const json& config, const std::string& id) {
  for (size_t i = 0; i < config["nodes"].size(); ++i)
    if (config["nodes"][i]["id"] == id) return i;
  ADD_FAILURE() << "no node " << id << " in " << config.dump();
  return 0;
}

// A texture job's own config: POST /v1/config gives the config its variables select, with its
// files named as in the job's folder; POST /v1/validate and POST /v1/jobs check an edited config
// in one way (the contracts, then what a job may read and write), every problem at its JSON path;
// the config runs as a job on the same files, its unchanged nodes from the cache.
TEST(ServeConfig, ValidatesAnEditedConfigAndRunsIt) {
  const std::string dir = temp_dir("serve_config_" + std::to_string(::getpid()));
  const ServeProcess server({"--texture-size", "256", "--render-size", "256", "--data",
                             dir + "/data", "--cache", dir + "/cache", "--cache-all"});
  const json job = texture_job();
  const json names = json::array({"box.glb", "front.png"});
  int status = 0;
  const json dumped =
      post_json(server, "/v1/config", {{"vars", job["vars"]}, {"files", names}}, status);
  ASSERT_EQ(status, 200) << dumped.dump();
  const json config = dumped["config"];
  EXPECT_EQ(config["name"], "texgen");
  EXPECT_EQ(config["vars"]["mesh"], "box.glb");
  EXPECT_EQ(config["vars"]["image"], "front.png");
  EXPECT_EQ(config["vars"]["out"], "output.glb");
  EXPECT_EQ(config["vars"]["texture_size"], 256);  // the server's size

  const auto check = [&](const json& c) {
    const json r = post_json(server, "/v1/validate",
                             {{"config", c}, {"vars", job["vars"]}, {"files", names}}, status);
    EXPECT_EQ(status, 200) << r.dump();
    return r;
  };
  json r = check(config);
  EXPECT_TRUE(r["valid"].get<bool>()) << r.dump();
  EXPECT_EQ(r["nodes"], config["nodes"].size());

  // Problems, all at once, each at its JSON path.
  json bad = config;
  const size_t normals = node_index(config, "normals"), image = node_index(config, "image"),
               save = node_index(config, "save");
  bad["nodes"][normals]["params"]["resolution"] = "2k";     // the contract's
  bad["nodes"][image]["params"]["path"] = "/etc/hostname";  // a path on the server
  bad["nodes"][save]["params"]["path"] = "../escaped.glb";  // outside the job's folder
  bad["nodes"].push_back({{"id", "dump"},
                          {"stage", "save_images"},  // a stage jobs do not run
                          {"inputs", {{"images", "multiview.images"}}},
                          {"params", {{"dir", "/tmp"}}}});
  r = check(bad);
  EXPECT_FALSE(r["valid"].get<bool>()) << r.dump();
  std::set<std::string> paths;
  for (const json& p : r["problems"]) paths.insert(p["path"].get<std::string>());
  const std::string n = "/nodes/";
  EXPECT_TRUE(paths.contains(n + std::to_string(normals) + "/params/resolution")) << r.dump();
  EXPECT_TRUE(paths.contains(n + std::to_string(image) + "/params/path")) << r.dump();
  EXPECT_TRUE(paths.contains(n + std::to_string(save) + "/params/path")) << r.dump();
  EXPECT_TRUE(paths.contains(n + std::to_string(config["nodes"].size()) + "/stage")) << r.dump();
  EXPECT_GE(r["problems"].size(), 4u) << r.dump();
  // Not JSON's shape, or no config at all: the request's fault.
  EXPECT_FALSE(check(json::array())["valid"].get<bool>());
  post_json(server, "/v1/validate", {{"vars", job["vars"]}}, status);
  EXPECT_EQ(status, 400);

  // A job with a bad config is refused with the same problems, and leaves nothing behind.
  json refused_job = job;
  refused_job["config"] = bad;
  r = post_json(server, "/v1/jobs", refused_job, status);
  EXPECT_EQ(status, 400) << r.dump();
  EXPECT_EQ(r["error_code"], "bad_config") << r.dump();
  EXPECT_GE(r["problems"].size(), 4u) << r.dump();
  EXPECT_FALSE(std::filesystem::exists(dir + "/data/jobs") &&
               !std::filesystem::is_empty(dir + "/data/jobs"));

  // The texture job, then its config as a job: the same result, from the cache.
  const FinishedJob first = run_job(server, job);
  ASSERT_EQ(first.state["state"], "done") << first.state.dump();
  json edited_job = job;
  edited_job["config"] = config;
  const FinishedJob second = run_job(server, edited_job);
  ASSERT_EQ(second.state["state"], "done") << second.state.dump();
  EXPECT_GT(second.state["cache"]["hits"].get<int>(), 0) << second.state.dump();
  EXPECT_EQ(second.state["cache"]["misses"], 0) << second.state.dump();
  EXPECT_TRUE(first.result == second.result);
  // An edit downstream re-runs what it changes.
  json changed = config;
  changed["nodes"][node_index(config, "fill")]["params"]["method"] = "propagate";
  edited_job["config"] = changed;
  const FinishedJob third = run_job(server, edited_job);
  ASSERT_EQ(third.state["state"], "done") << third.state.dump();
  EXPECT_GT(third.state["cache"]["hits"].get<int>(), 0) << third.state.dump();
  EXPECT_GT(third.state["cache"]["misses"].get<int>(), 0) << third.state.dump();
  const auto health = server.client().Get("/health");
  ASSERT_TRUE(health);
  EXPECT_EQ(health->status, 200);
}

}  // namespace
}  // namespace gen3d::test
