// Soak (label `slow`): `gen3d batch` over 200 jobs with --jobs 2 is killed with SIGKILL at random
// moments and restarted with --resume until it finishes. Every job must end done exactly once (a
// job whose completion marker exists is never run again, every job has a marker and a complete
// output), and the peak RSS of the last, uninterrupted run must not grow from its second quarter
// of jobs to its last.
//
// GEN3D_SOAK_SEED picks the kill schedule (the seed is printed; the default is fixed).

#include <signal.h>
#include <sys/stat.h>
#include <sys/wait.h>
#include <unistd.h>

#include <algorithm>
#include <chrono>
#include <cstdio>
#include <filesystem>
#include <fstream>
#include <map>
#include <random>
#include <set>
#include <string>
#include <thread>
#include <vector>

#include <gtest/gtest.h>
#include <nlohmann/json.hpp>

#include "mesh/io.h"
#include "support/paths.h"
#include "support/run_command.h"

namespace gen3d::test {
namespace {

namespace fs = std::filesystem;
using nlohmann::json;

constexpr int kJobs = 200;

std::string write_manifest(const std::string& dir) {
  const std::string mesh = source_dir() + "/assets/meshes/BoxTextured.glb";
  const std::string path = dir + "/manifest.jsonl";
  std::ofstream out(path);
  for (int i = 0; i < kJobs; ++i)
    out << json{{"id", "job" + std::to_string(i)},
                {"mesh", mesh},
                {"source_mesh", mesh},
                {"reunwrap", true},
                {"set", {{"texture_size", 256}, {"render_size", 256}}}}
               .dump()
        << "\n";
  return path;
}

// A completion marker's identity: written atomically (temporary file + rename), so running a job
// again gives its marker a new inode.
struct Marker {
  ino_t inode = 0;
  std::int64_t mtime_ns = 0;
  bool operator==(const Marker&) const = default;
};

std::map<std::string, Marker> markers(const std::string& out) {
  std::map<std::string, Marker> m;
  if (!fs::exists(out)) return m;
  for (const auto& e : fs::directory_iterator(out)) {
    if (e.path().extension() != ".done") continue;
    struct stat st {};
    if (::stat(e.path().c_str(), &st) != 0) continue;
    m[e.path().stem().string()] =
        Marker{st.st_ino, std::int64_t(st.st_mtim.tv_sec) * 1'000'000'000 + st.st_mtim.tv_nsec};
  }
  return m;
}

pid_t start_batch(const std::vector<std::string>& args) {
  std::vector<char*> argv;
  const std::string exe = gen3d_executable();
  argv.push_back(const_cast<char*>(exe.c_str()));
  for (const std::string& a : args) argv.push_back(const_cast<char*>(a.c_str()));
  argv.push_back(nullptr);
  const pid_t pid = fork();
  if (pid == 0) {
    execv(exe.c_str(), argv.data());
    _exit(127);
  }
  return pid;
}

// Resident set size of a running process in KiB (0 once it is gone).
long rss_kib(pid_t pid) {
  std::ifstream in("/proc/" + std::to_string(pid) + "/status");
  std::string line;
  while (std::getline(in, line))
    if (line.rfind("VmRSS:", 0) == 0) return std::stol(line.substr(6));
  return 0;
}

bool exited(pid_t pid, int& status) {
  return waitpid(pid, &status, WNOHANG) == pid;
}

TEST(Soak, BatchKilledAtRandomAndResumedDoesEveryJobExactlyOnceWithStableRss) {
  const std::string dir = temp_dir("soak_batch");
  const std::string manifest = write_manifest(dir);
  const std::string out = dir + "/out";
  const std::string seed_env = env_or("GEN3D_SOAK_SEED", "20261125");
  const unsigned seed = unsigned(std::stoul(seed_env));
  std::mt19937 rng(seed);
  std::printf("soak: seed %u\n", seed);
  // --no-cache: every job does its work (identical jobs would otherwise load each other's results).
  const std::vector<std::string> args = {"batch", manifest,   "--out", out,         "--jobs",
                                         "2",     "--resume", "-q",    "--no-cache"};

  // Phase 1: kill at random moments until about 80 jobs are done (the rest is left for the
  // measured run). Each round waits for a random number of new markers, then up to 40 ms more, so
  // most kills land in the middle of a job.
  std::map<std::string, Marker> seen;
  int kills = 0;
  while (seen.size() < 80 && kills < 12) {
    const size_t before = seen.size();
    const size_t target = before + std::uniform_int_distribution<size_t>(2, 25)(rng);
    const pid_t pid = start_batch(args);
    ASSERT_GT(pid, 0);
    int status = 0;
    bool gone = false, reached = false;
    const auto t0 = std::chrono::steady_clock::now();
    const auto elapsed_s = [&] {
      return std::chrono::duration<double>(std::chrono::steady_clock::now() - t0).count();
    };
    while (!gone && !reached && elapsed_s() < 300) {
      std::this_thread::sleep_for(std::chrono::milliseconds(2));
      gone = exited(pid, status);
      reached = markers(out).size() >= target;
    }
    if (!gone && !reached) {
      // Where it stands, when gdb is there to tell.
      const std::string stacks =
          run_command("gdb -p " + std::to_string(pid) +
                      " -batch -ex 'thread apply all bt' 2>/dev/null | grep -E '^(#|Thread)'")
              .output;
      kill(pid, SIGKILL);
      waitpid(pid, &status, 0);
      FAIL() << "no job finished for 300 s: the batch hangs (" << markers(out).size() - before
             << " of " << target - before << " new markers)\n"
             << stacks;
    }
    if (!gone) {
      std::this_thread::sleep_for(
          std::chrono::milliseconds(std::uniform_int_distribution<int>(0, 40)(rng)));
      kill(pid, SIGKILL);
      waitpid(pid, &status, 0);
      ++kills;
    }
    ASSERT_FALSE(gone && WIFEXITED(status) && WEXITSTATUS(status) != 0)
        << "batch exited with " << WEXITSTATUS(status);
    const auto now = markers(out);
    for (const auto& [id, m] : seen) {
      ASSERT_TRUE(now.count(id)) << id << ": its marker disappeared";
      EXPECT_EQ(now.at(id), m) << id << " was run again after it was done";
    }
    for (const auto& [id, m] : now) {
      if (!seen.count(id)) {
        EXPECT_EQ(mesh::load_mesh(out + "/" + id + ".glb").face_count(), 12u)
            << id << ": a marker without a complete output";
      }
    }
    seen = now;
    std::printf("soak: round %d: %zu jobs done (%.1f s)\n", kills, seen.size(), elapsed_s());
    if (gone) break;
  }
  ASSERT_GE(kills, 3) << "too few kills landed before the batch finished";
  ASSERT_LT(seen.size(), size_t(kJobs) - 80) << "too few jobs left for the RSS measurement";

  // Phase 2: an uninterrupted --resume run, its RSS sampled against the jobs it has finished.
  std::vector<std::string> final_args = args;
  final_args.push_back("--metrics");
  final_args.push_back(dir + "/metrics.json");
  const pid_t pid = start_batch(final_args);
  ASSERT_GT(pid, 0);
  std::vector<std::pair<size_t, long>> samples;  // (jobs finished in this run, RSS KiB)
  int status = 0;
  for (int waited = 0; !exited(pid, status); waited += 20) {
    ASSERT_LT(waited, 1'200'000) << "the final run did not end in 20 min";
    std::this_thread::sleep_for(std::chrono::milliseconds(20));
    const long rss = rss_kib(pid);
    if (rss > 0) samples.emplace_back(markers(out).size() - seen.size(), rss);
  }
  ASSERT_TRUE(WIFEXITED(status) && WEXITSTATUS(status) == 0) << "final run status " << status;

  std::ifstream in(dir + "/metrics.json");
  const json metrics = json::parse(in);
  EXPECT_EQ(metrics["failed"], 0);
  EXPECT_EQ(metrics["skipped"].get<size_t>(), seen.size()) << "every finished job is skipped";
  EXPECT_EQ(metrics["done"].get<size_t>() + seen.size(), size_t(kJobs));
  std::set<std::string> skipped;
  for (const json& j : metrics["jobs"])
    if (j["status"] == "skipped") skipped.insert(j["id"].get<std::string>());
  for (const auto& [id, m] : seen) EXPECT_TRUE(skipped.count(id)) << id << " was not skipped";

  const auto final_markers = markers(out);
  ASSERT_EQ(final_markers.size(), size_t(kJobs)) << "every job ends with its marker";
  for (const auto& [id, m] : seen)
    EXPECT_EQ(final_markers.at(id), m) << id << " was run again after it was done";
  for (int i = 0; i < kJobs; ++i) {
    const std::string id = "job" + std::to_string(i);
    EXPECT_EQ(mesh::load_mesh(out + "/" + id + ".glb").face_count(), 12u) << id;
  }

  // Peak RSS while the run did its second quarter of jobs, and while it did its last quarter
  // (the first quarter warms the caches up).
  const size_t n = size_t(kJobs) - seen.size();
  long peak_q2 = 0, peak_q4 = 0;
  for (const auto& [done, rss] : samples) {
    if (done >= n / 4 && done < n / 2) peak_q2 = std::max(peak_q2, rss);
    if (done >= 3 * n / 4) peak_q4 = std::max(peak_q4, rss);
  }
  std::printf(
      "soak: %d kills; final run %zu jobs, peak RSS %.1f MiB (2nd quarter) vs %.1f MiB "
      "(last quarter), process peak %.1f MiB\n",
      kills, n, peak_q2 / 1024.0, peak_q4 / 1024.0, metrics["peak_rss_mb"].get<double>());
  ASSERT_GT(peak_q2, 0);
  ASSERT_GT(peak_q4, 0);
  EXPECT_LE(peak_q4, peak_q2 + peak_q2 / 10 + 16 * 1024) << "RSS grows from job to job";
}

}  // namespace
}  // namespace gen3d::test
