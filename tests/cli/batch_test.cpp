// `gen3d batch`: failures are isolated, shards partition the jobs, --resume redoes only what did
// not finish — also after the process was killed.

#include <signal.h>
#include <sys/wait.h>
#include <unistd.h>

#include <chrono>
#include <filesystem>
#include <fstream>
#include <set>
#include <thread>

#include <gtest/gtest.h>
#include <nlohmann/json.hpp>

#include "mesh/io.h"
#include "support/paths.h"
#include "support/run_command.h"

namespace gen3d::test {
namespace {

namespace fs = std::filesystem;
using nlohmann::json;

// n jobs re-texturing the small box; every job whose index is in `poisoned` names a missing mesh.
std::string write_manifest(const std::string& dir, int n, std::set<int> poisoned = {},
                           int size = 64) {
  const std::string path = dir + "/manifest.jsonl";
  std::ofstream out(path);
  for (int i = 0; i < n; ++i) {
    const std::string mesh =
        poisoned.count(i) ? "no/such/mesh.obj" : "assets/meshes/BoxTextured.glb";
    out << json{{"id", "job" + std::to_string(i)},
                {"mesh", mesh},
                {"source_mesh", "assets/meshes/BoxTextured.glb"},
                {"reunwrap", true},
                {"set", {{"texture_size", size}, {"render_size", size}}}}
               .dump()
        << "\n";
  }
  return path;
}

json read_json(const std::string& path) {
  std::ifstream in(path);
  return json::parse(in);
}

std::set<std::string> ids_with_status(const json& metrics, const std::string& status) {
  std::set<std::string> out;
  for (const json& j : metrics["jobs"])
    if (j["status"] == status) out.insert(j["id"].get<std::string>());
  return out;
}

TEST(Batch, PoisonedJobsFailAloneAndTheRestComplete) {
  const std::string dir = temp_dir("batch_poison");
  const std::string manifest = write_manifest(dir, 100, {7, 23, 42, 61, 99});
  const auto r = run_gen3d("batch " + manifest + " --out " + dir + "/out --jobs 2 -q --metrics " +
                           dir + "/m.json");
  EXPECT_EQ(r.exit_code, 1) << r.output;
  const json m = read_json(dir + "/m.json");
  EXPECT_EQ(m["done"], 95);
  EXPECT_EQ(m["failed"], 5);
  EXPECT_EQ(ids_with_status(m, "failed"),
            (std::set<std::string>{"job7", "job23", "job42", "job61", "job99"}));
  for (const json& j : m["jobs"]) {
    if (j["status"] == "failed") {
      EXPECT_NE(j["error"].get<std::string>().find("no/such/mesh.obj"), std::string::npos);
    }
  }
  EXPECT_NE(r.output.find("job42"), std::string::npos) << "failures are reported";
  // A finished job has its output and marker; a failed one has neither.
  EXPECT_TRUE(fs::exists(dir + "/out/job0.glb") && fs::exists(dir + "/out/job0.done"));
  EXPECT_FALSE(fs::exists(dir + "/out/job7.glb") || fs::exists(dir + "/out/job7.done"));
  EXPECT_EQ(mesh::load_mesh(dir + "/out/job1.glb").face_count(), 12u);
}

TEST(Batch, ShardsPartitionTheJobsExactly) {
  const std::string dir = temp_dir("batch_shard");
  const std::string manifest = write_manifest(dir, 12);
  std::set<std::string> seen;
  size_t total = 0;
  for (int shard = 0; shard < 3; ++shard) {
    const std::string metrics = dir + "/m" + std::to_string(shard) + ".json";
    const auto r = run_gen3d("batch " + manifest + " --out " + dir + "/out -q --shard " +
                             std::to_string(shard) + "/3 --metrics " + metrics);
    ASSERT_EQ(r.exit_code, 0) << r.output;
    const auto done = ids_with_status(read_json(metrics), "done");
    total += done.size();
    seen.insert(done.begin(), done.end());
  }
  EXPECT_EQ(total, 12u) << "no job runs in two shards";
  EXPECT_EQ(seen.size(), 12u) << "every job runs in some shard";
  EXPECT_EQ(run_gen3d("batch " + manifest + " --shard 3/3").exit_code, 2);
}

TEST(Batch, ResumeAfterSigkillRedoesOnlyUnfinishedJobs) {
  const std::string dir = temp_dir("batch_resume");
  // Bigger jobs than elsewhere, so the batch is still running when it is killed.
  const std::string manifest = write_manifest(dir, 30, {}, 256);
  const std::string out = dir + "/out";
  // Start the batch, let it finish some jobs, then kill it without warning.
  const pid_t pid = fork();
  ASSERT_GE(pid, 0);
  if (pid == 0) {
    ::chdir(source_dir().c_str());
    execl(gen3d_executable().c_str(), "gen3d", "batch", manifest.c_str(), "--out", out.c_str(),
          "-q", "--no-cache", static_cast<char*>(nullptr));  // the user's cache is left alone
    _exit(127);
  }
  for (int waited = 0; waited < 3000; ++waited) {  // until a few markers exist (at most 60 s)
    std::this_thread::sleep_for(std::chrono::milliseconds(20));
    size_t markers = 0;
    if (fs::exists(out))
      for (const auto& e : fs::directory_iterator(out)) markers += e.path().extension() == ".done";
    if (markers >= 3) break;
  }
  kill(pid, SIGKILL);
  int status = 0;
  waitpid(pid, &status, 0);

  std::set<std::string> finished;
  for (const auto& e : fs::directory_iterator(out))
    if (e.path().extension() == ".done") finished.insert(e.path().stem().string());
  ASSERT_GE(finished.size(), 3u);
  ASSERT_LT(finished.size(), 30u) << "the batch finished before it could be killed";
  // Every output that has a marker is complete.
  for (const std::string& id : finished)
    EXPECT_EQ(mesh::load_mesh(out + "/" + id + ".glb").face_count(), 12u);

  const auto r = run_gen3d("batch " + manifest + " --out " + out + " --resume -q --metrics " + dir +
                           "/m.json");
  ASSERT_EQ(r.exit_code, 0) << r.output;
  const json m = read_json(dir + "/m.json");
  EXPECT_EQ(ids_with_status(m, "skipped"), finished);
  EXPECT_EQ(m["done"].get<size_t>() + finished.size(), 30u);
}

TEST(Batch, MalformedManifestIsRejectedBeforeWork) {
  const std::string dir = temp_dir("batch_bad");
  std::ofstream(dir + "/m.jsonl")
      << "{\"id\": \"a\", \"mesh\": \"x.obj\"}\nnot json\n{\"mesh\": \"y\"}\n"
         "{\"id\": \"a\", \"mesh\": \"z\"}\n";
  const auto r = run_gen3d("batch " + dir + "/m.jsonl --out " + dir + "/out");
  EXPECT_EQ(r.exit_code, 2) << r.output;
  EXPECT_NE(r.output.find("line 2: not a JSON object"), std::string::npos) << r.output;
  EXPECT_NE(r.output.find("line 3: every job needs a non-empty string \"id\""), std::string::npos);
  EXPECT_NE(r.output.find("duplicate id (first on line 1)"), std::string::npos) << r.output;
  EXPECT_FALSE(fs::exists(dir + "/out"));
}

}  // namespace
}  // namespace gen3d::test
