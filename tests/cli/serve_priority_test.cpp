// Jobs run below the threads that answer requests (app/server/thread_priority.h): the server's
// threads as /proc shows them after a job, and TBB's workers lowered when they join a job's arena
// although a thread at the process's priority started them.

#include <sys/resource.h>
#include <sys/syscall.h>
#include <unistd.h>

#include <chrono>
#include <filesystem>
#include <fstream>
#include <map>
#include <mutex>
#include <sstream>
#include <string>
#include <thread>
#include <vector>

#include <gtest/gtest.h>
#include <httplib.h>
#include <tbb/parallel_for.h>
#include <tbb/task_arena.h>
#include <nlohmann/json.hpp>

#include "app/server/thread_priority.h"
#include "io/base64.h"
#include "support/paths.h"
#include "support/serve_process.h"

namespace gen3d::test {
namespace {

namespace fs = std::filesystem;
using nlohmann::json;

struct ThreadInfo {
  std::string name;
  int nice = 0;
};

// Every thread of process `pid`: its name and nice value, from /proc/PID/task/TID/stat.
std::map<int, ThreadInfo> threads_of(pid_t pid) {
  std::map<int, ThreadInfo> out;
  for (const auto& t : fs::directory_iterator("/proc/" + std::to_string(pid) + "/task")) {
    const std::string stat = read_bytes(t.path() / "stat");
    const size_t open = stat.find('('), close = stat.rfind(')');
    if (open == std::string::npos || close == std::string::npos) continue;
    // After the name: state (field 3) and on; the nice value is field 19.
    std::istringstream rest(stat.substr(close + 2));
    std::string field;
    for (int i = 3; i < 19; ++i) rest >> field;
    int nice = 0;
    rest >> nice;
    out[std::stoi(t.path().filename().string())] = {stat.substr(open + 1, close - open - 1), nice};
  }
  return out;
}

TEST(ServePriority, JobThreadsRunBelowTheRequestThreads) {
  ServeProcess server({"--jobs", "2", "--texture-size", "256", "--render-size", "256", "--data",
                       temp_dir("serve_priority_" + std::to_string(::getpid()))});
  const json body = {
      {"image", io::base64_encode(read_bytes("assets/images/spider_front.png"))},
      {"mesh",
       io::base64_encode(read_bytes("tests/data/mesh/meshes-assimp/glTF2/BoxTextured.glb"))},
      {"texture", true}};
  const auto r = server.client().Post("/generate", body.dump(), "application/json");
  ASSERT_TRUE(r);
  ASSERT_EQ(r->status, 200) << r->body;

  int job_threads = 0, lowered = 0, normal = 0;
  for (const auto& [tid, t] : threads_of(server.pid())) {
    if (t.name == "gen3d-job") ++job_threads;
    if (t.nice == 10) ++lowered;
    if (t.nice == 0) ++normal;
    EXPECT_TRUE(t.nice == 0 || t.nice == 10) << t.name << " " << tid << " at nice " << t.nice;
    if (tid == server.pid()) {
      EXPECT_EQ(t.nice, 0) << "the main thread";
    }
  }
  EXPECT_GE(job_threads, 2);  // the workers (TBB's workers that they start take their name)
  // The two job workers, and TBB's workers that ran the job's parallel loops.
  EXPECT_GE(lowered, std::thread::hardware_concurrency() > 1 ? 3 : 2);
  // The main thread and the request threads: --jobs + --queue (16) + 8.
  EXPECT_GE(normal, 1 + 2 + 16 + 8);
}

// The nice value of the calling thread.
int own_nice() {
  return ::getpriority(PRIO_PROCESS, static_cast<id_t>(::syscall(SYS_gettid)));
}

// Each thread that ran an iteration of a parallel loop, with its nice value then.
std::map<long, int> loop_threads() {
  std::mutex mutex;
  std::map<long, int> seen;
  tbb::parallel_for(0, 64, [&](int) {
    std::this_thread::sleep_for(std::chrono::milliseconds(2));  // long enough for a worker to join
    std::lock_guard lock(mutex);
    seen[::syscall(SYS_gettid)] = own_nice();
  });
  return seen;
}

TEST(ServePriority, TbbWorkersAreLoweredWhenTheyJoinAJobsArena) {
  if (tbb::this_task_arena::max_concurrency() < 2) GTEST_SKIP() << "TBB has no worker threads";
  // TBB's workers, started now by a thread at the process's priority: they do not inherit a
  // lowered one.
  const std::map<long, int> before = loop_threads();
  for (const auto& [tid, nice] : before) EXPECT_EQ(nice, 0) << tid;

  std::map<long, int> during;
  long job_tid = 0;
  std::thread job([&] {
    job_tid = ::syscall(SYS_gettid);
    ASSERT_TRUE(app::server::lower_thread_priority(10));
    const app::server::JobPriority priority(10);
    during = loop_threads();
  });
  job.join();
  int workers = 0;
  for (const auto& [tid, nice] : during) {
    EXPECT_EQ(nice, 10) << (tid == job_tid ? "the job's thread" : "a TBB worker");
    workers += tid != job_tid;
  }
  EXPECT_GE(workers, 1);  // a worker joined the job's loop
}

}  // namespace
}  // namespace gen3d::test
