// The README's Slurm array example, run for real (label `slow`): a single-node Slurm (munged,
// slurmctld and slurmd on localhost, with a generated slurm.conf, key and state in a temporary
// folder) runs `gen3d batch --resume --shard ${SLURM_ARRAY_TASK_ID}/4` as a 4-task array job over
// a small manifest, and every job must be done exactly once. Skips, saying why, without root or
// without Debian's slurmctld, slurmd, slurm-client and munge packages.

#include <signal.h>
#include <stdlib.h>
#include <unistd.h>

#include <algorithm>
#include <chrono>
#include <filesystem>
#include <fstream>
#include <map>
#include <random>
#include <set>
#include <string>
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

constexpr int kJobs = 12;
constexpr int kShards = 4;

std::string read_text(const std::string& path) {
  std::ifstream in(path);
  return std::string(std::istreambuf_iterator<char>(in), {});
}

// Stops what it started, whatever the test's outcome.
struct Cluster {
  std::string dir, env;
  ~Cluster() {
    if (dir.empty()) return;
    run_command(env + " scontrol shutdown >/dev/null 2>&1");
    for (const char* pidfile : {"slurmctld.pid", "slurmd.pid", "munged.pid"}) {
      const std::string text = read_text(dir + "/" + pidfile);
      const pid_t pid = text.empty() ? 0 : pid_t(std::stol(text));
      for (int i = 0; pid > 0 && i < 50 && ::kill(pid, 0) == 0; ++i) {
        if (i == 0 && std::string(pidfile) == "munged.pid") ::kill(pid, SIGTERM);
        std::this_thread::sleep_for(std::chrono::milliseconds(100));
      }
      if (pid > 0 && ::kill(pid, 0) == 0) ::kill(pid, SIGKILL);
    }
    std::error_code ec;
    fs::remove_all(dir, ec);
  }
};

std::string missing_tools() {
  std::string missing;
  for (const char* tool : {"munged", "slurmctld", "slurmd", "sbatch", "sinfo", "scontrol"})
    if (run_command(std::string("command -v ") + tool + " >/dev/null").exit_code != 0)
      missing += std::string(missing.empty() ? "" : ", ") + tool;
  return missing;
}

TEST(Slurm, ReadmeArrayExampleRunsEveryJobExactlyOnce) {
  if (::geteuid() != 0) GTEST_SKIP() << "needs root to start slurmctld and slurmd";
  if (const std::string m = missing_tools(); !m.empty())
    GTEST_SKIP() << "Slurm is not installed (missing " << m
                 << "); apt-get install slurmctld slurmd slurm-client munge";

  // Daemon state in a short /tmp path (the munge socket path must fit a sockaddr_un); the batch
  // itself in the test's folder.
  Cluster cluster;
  char tmpl[] = "/tmp/gen3d-slurm-XXXXXX";
  ASSERT_NE(::mkdtemp(tmpl), nullptr);
  const std::string d = tmpl;
  cluster.dir = d;
  const std::string conf = d + "/slurm.conf";
  cluster.env = "SLURM_CONF=" + conf;
  fs::create_directories(d + "/state");
  fs::create_directories(d + "/spool");

  std::random_device rd;
  {
    std::ofstream key(d + "/munge.key", std::ios::binary);
    for (int i = 0; i < 1024; ++i) key.put(char(rd() & 0xff));
  }
  fs::permissions(d + "/munge.key", fs::perms::owner_read);
  const std::string sock = d + "/munge.sock";
  const auto munged =
      run_command("munged --force -S " + sock + " --key-file=" + d + "/munge.key --pid-file=" + d +
                  "/munged.pid --log-file=" + d + "/munged.log --seed-file=" + d + "/munged.seed");
  ASSERT_EQ(munged.exit_code, 0) << munged.output;

  std::string host = run_command("hostname -s").output;
  host = host.substr(0, host.find_first_of("\r\n"));
  const int port = 20000 + int(rd() % 20000) / 2 * 2;  // two free-looking ports, per run
  const long cpus = std::max(1L, ::sysconf(_SC_NPROCESSORS_ONLN));
  std::ofstream(conf) << "ClusterName=gen3dtest\n"
                      << "SlurmctldHost=" << host << "(127.0.0.1)\n"
                      << "SlurmctldPort=" << port << "\nSlurmdPort=" << port + 1 << "\n"
                      << "SlurmUser=root\nSlurmdUser=root\n"
                      << "AuthType=auth/munge\nCredType=cred/munge\n"
                      << "AuthInfo=socket=" << sock << "\n"
                      << "StateSaveLocation=" << d << "/state\nSlurmdSpoolDir=" << d << "/spool\n"
                      << "SlurmctldPidFile=" << d << "/slurmctld.pid\n"
                      << "SlurmdPidFile=" << d << "/slurmd.pid\n"
                      << "SlurmctldLogFile=" << d << "/slurmctld.log\n"
                      << "SlurmdLogFile=" << d << "/slurmd.log\n"
                      << "ProctrackType=proctrack/linuxproc\nTaskPlugin=task/none\n"
                      << "JobAcctGatherType=jobacct_gather/none\n"
                      << "AccountingStorageType=accounting_storage/none\n"
                      << "JobCompType=jobcomp/none\nMpiDefault=none\n"
                      << "SelectType=select/cons_tres\nSelectTypeParameters=CR_Core\n"
                      << "ReturnToService=2\n"
                      << "NodeName=" << host << " NodeAddr=127.0.0.1 CPUs=" << cpus
                      << " State=UNKNOWN\n"
                      << "PartitionName=gen3d Nodes=" << host
                      << " Default=YES MaxTime=INFINITE State=UP\n";
  const auto ctld = run_command(cluster.env + " slurmctld -c -f " + conf);
  ASSERT_EQ(ctld.exit_code, 0) << ctld.output;
  const auto slurmd = run_command(cluster.env + " slurmd -f " + conf);
  ASSERT_EQ(slurmd.exit_code, 0) << slurmd.output;
  std::string state;
  for (int i = 0; i < 300 && state.rfind("idle", 0) != 0; ++i) {
    std::this_thread::sleep_for(std::chrono::milliseconds(200));
    state = run_command(cluster.env + " sinfo -h -o %t").output;
  }
  ASSERT_EQ(state.rfind("idle", 0), 0u)
      << "the node never became idle: " << state << read_text(d + "/slurmctld.log")
      << read_text(d + "/slurmd.log");

  // The manifest and the README's command, with 4 shards instead of 16 and a metrics file per
  // task. gen3d comes from PATH, as on a cluster; sbatch passes the environment on.
  const std::string work = temp_dir("slurm_array");
  const std::string mesh = source_dir() + "/assets/meshes/BoxTextured.glb";
  {
    std::ofstream out(work + "/jobs.jsonl");
    for (int i = 0; i < kJobs; ++i)
      out << json{{"id", "job" + std::to_string(i)},
                  {"mesh", mesh},
                  {"source_mesh", mesh},
                  {"reunwrap", true},
                  {"set", {{"texture_size", 64}, {"render_size", 64}}}}
                 .dump()
          << "\n";
  }
  const std::string bin_dir = fs::path(gen3d_executable()).parent_path().string();
  const std::string submit =
      "cd " + work + " && PATH=" + bin_dir + ":$PATH " + cluster.env +
      " timeout 600 sbatch --wait --array=0-" + std::to_string(kShards - 1) +
      " -o slurm-%A_%a.out --wrap 'gen3d batch jobs.jsonl --out out --resume --shard "
      "${SLURM_ARRAY_TASK_ID}/" +
      std::to_string(kShards) + " --metrics metrics-${SLURM_ARRAY_TASK_ID}.json -q'";
  const auto r = run_command(submit);
  std::string logs;
  for (const auto& e : fs::directory_iterator(work))
    if (e.path().extension() == ".out")
      logs += e.path().filename().string() + ":\n" + read_text(e.path().string());
  ASSERT_EQ(r.exit_code, 0) << r.output << logs << read_text(d + "/slurmctld.log");

  // Every job done exactly once: in one task's metrics, with its marker and a complete output.
  std::map<std::string, int> done_in;
  size_t done_total = 0;
  for (int t = 0; t < kShards; ++t) {
    const std::string path = work + "/metrics-" + std::to_string(t) + ".json";
    ASSERT_TRUE(fs::exists(path)) << "array task " << t << " wrote no metrics\n" << logs;
    const json m = json::parse(read_text(path));
    EXPECT_EQ(m["failed"], 0) << path;
    EXPECT_EQ(m["skipped"], 0) << path;
    for (const json& j : m["jobs"]) {
      if (j["status"] != "done") continue;
      ++done_total;
      const std::string id = j["id"].get<std::string>();
      EXPECT_FALSE(done_in.count(id)) << id << " done by tasks " << done_in[id] << " and " << t;
      done_in[id] = t;
    }
  }
  EXPECT_EQ(done_total, size_t(kJobs));
  EXPECT_EQ(done_in.size(), size_t(kJobs));
  for (int i = 0; i < kJobs; ++i) {
    const std::string id = "job" + std::to_string(i);
    EXPECT_TRUE(fs::exists(work + "/out/" + id + ".done")) << id;
    EXPECT_EQ(mesh::load_mesh(work + "/out/" + id + ".glb").face_count(), 12u) << id;
  }
  std::set<int> tasks_with_jobs;
  for (const auto& [id, t] : done_in) tasks_with_jobs.insert(t);
  std::printf("slurm: %d jobs over %d array tasks (%zu of them got jobs)\n", kJobs, kShards,
              tasks_with_jobs.size());
}

}  // namespace
}  // namespace gen3d::test
