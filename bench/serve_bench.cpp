// `gen3d serve` measured from outside, over loopback HTTP: /health latency (p50, p99) and
// requests per second, idle and while two texture jobs run; then one texture job through the
// server (POST /generate, as a client waits for it) against the same job through `gen3d texture`
// (the same shipped config and variables), the baseline measured in the same run. Prints JSON.
//
// /health is measured in `--rounds` rounds, each starting a fresh server three times: idle (what
// the rest of the machine costs a request), with two jobs whose threads run at the server's own
// priority (`--job-nice 0`, the baseline), and with two jobs at the default (a lower priority than
// the threads that answer requests). The three take turns, so that all see the same load of a
// shared machine; each figure is the median over the rounds, with the range and every round's.
//
//   build/bench/gen3d_serve_bench [--runs 5] [--rounds 5] [--health 400] [--interval 5]
//                                 [--seconds 3] [--clients 4]
//
// --health probes, one every --interval ms, each on a new connection; then --clients clients on
// kept-alive connections for --seconds, as fast as they can.
//
// Run from the repository root (it reads assets/images/spider_front.png and the BoxTextured mesh).

#include <arpa/inet.h>
#include <netinet/in.h>
#include <signal.h>
#include <sys/socket.h>
#include <sys/wait.h>
#include <unistd.h>

#include <algorithm>
#include <atomic>
#include <chrono>
#include <cstdio>
#include <cstdlib>
#include <filesystem>
#include <fstream>
#include <iostream>
#include <iterator>
#include <map>
#include <sstream>
#include <stdexcept>
#include <string>
#include <thread>
#include <utility>
#include <vector>

#include <httplib.h>
#include <nlohmann/json.hpp>

#include "io/base64.h"

namespace {

namespace fs = std::filesystem;
using nlohmann::json;
using Clock = std::chrono::steady_clock;

const std::string kMesh = "tests/data/mesh/meshes-assimp/glTF2/BoxTextured.glb";
const std::string kImage = "assets/images/spider_front.png";

double ms_since(Clock::time_point t0) {
  return std::chrono::duration<double, std::milli>(Clock::now() - t0).count();
}

std::string read_bytes(const std::string& path) {
  std::ifstream in(path, std::ios::binary);
  if (!in) throw std::runtime_error("cannot read " + path + " (run from the repository root)");
  return std::string(std::istreambuf_iterator<char>(in), {});
}

// Median, minimum and maximum of `v`.
json summary(std::vector<double> v) {
  std::sort(v.begin(), v.end());
  const size_t n = v.size();
  const double median = n % 2 ? v[n / 2] : (v[n / 2 - 1] + v[n / 2]) / 2;
  return {{"median", median}, {"min", v.front()}, {"max", v.back()}, {"n", n}};
}

double percentile(std::vector<double> v, double p) {
  std::sort(v.begin(), v.end());
  return v[std::min(v.size() - 1, static_cast<size_t>(p * static_cast<double>(v.size())))];
}

// Runs `args` and waits for it; its exit status.
int run_process(const std::vector<std::string>& args) {
  const pid_t pid = ::fork();
  if (pid == 0) {
    std::vector<char*> argv;
    for (const std::string& a : args) argv.push_back(const_cast<char*>(a.c_str()));
    argv.push_back(nullptr);
    std::freopen("/dev/null", "w", stdout);
    std::freopen("/dev/null", "w", stderr);
    ::execv(argv[0], argv.data());
    ::_exit(127);
  }
  int status = 0;
  ::waitpid(pid, &status, 0);
  return WIFEXITED(status) ? WEXITSTATUS(status) : 128 + WTERMSIG(status);
}

class Server {
 public:
  // `gen3d serve --jobs 2` on `port`, with `extra` arguments.
  Server(const std::string& gen3d, int port, const std::string& data,
         const std::vector<std::string>& extra = {})
      : port_(port) {
    std::vector<std::string> args = {gen3d,     "serve", "--port", std::to_string(port),
                                     "--jobs",  "2",     "--data", data,
                                     "--grace", "0"};
    args.insert(args.end(), extra.begin(), extra.end());
    pid_ = ::fork();
    if (pid_ == 0) {
      std::freopen("/dev/null", "w", stdout);
      std::freopen("/dev/null", "w", stderr);
      std::vector<char*> argv;
      for (const std::string& a : args) argv.push_back(const_cast<char*>(a.c_str()));
      argv.push_back(nullptr);
      ::execv(argv[0], argv.data());
      ::_exit(127);
    }
    for (int i = 0; i < 400; ++i) {
      if (client().Get("/health")) return;
      std::this_thread::sleep_for(std::chrono::milliseconds(25));
    }
    throw std::runtime_error("gen3d serve did not start");
  }
  ~Server() {
    ::kill(pid_, SIGTERM);
    int status = 0;
    ::waitpid(pid_, &status, 0);
  }
  pid_t pid() const { return pid_; }
  httplib::Client client() const {
    httplib::Client c("127.0.0.1", port_);
    c.set_read_timeout(600, 0);
    return c;
  }

 private:
  int port_;
  pid_t pid_ = -1;
};

// A port no one listens on now (the kernel's pick for a socket bound to port 0).
int free_port() {
  const int fd = ::socket(AF_INET, SOCK_STREAM, 0);
  sockaddr_in addr{};
  addr.sin_family = AF_INET;
  addr.sin_addr.s_addr = htonl(INADDR_LOOPBACK);
  socklen_t len = sizeof addr;
  const bool ok = ::bind(fd, reinterpret_cast<sockaddr*>(&addr), sizeof addr) == 0 &&
                  ::getsockname(fd, reinterpret_cast<sockaddr*>(&addr), &len) == 0;
  ::close(fd);
  if (!ok) throw std::runtime_error("no free port");
  return ntohs(addr.sin_port);
}

// /health `n` times, one probe every `interval_ms` (start to start, as a load balancer probes),
// each on a new connection: latencies in ms.
std::vector<double> health_latencies(const Server& server, int n, double interval_ms) {
  std::vector<double> ms;
  const auto start = Clock::now();
  for (int i = 0; i < n; ++i) {
    std::this_thread::sleep_until(start +
                                  std::chrono::duration_cast<Clock::duration>(
                                      std::chrono::duration<double, std::milli>(interval_ms * i)));
    auto c = server.client();
    const auto t0 = Clock::now();
    const auto r = c.Get("/health");
    if (!r || (r->status != 200)) throw std::runtime_error("/health failed");
    ms.push_back(ms_since(t0));
  }
  return ms;
}

// /health from `clients` threads, each with its own keep-alive connection, for `seconds`:
// requests per second.
double health_rps(const Server& server, int clients, double seconds) {
  std::atomic<long> done{0};
  std::atomic<bool> stop{false};
  std::vector<std::thread> threads;
  for (int i = 0; i < clients; ++i)
    threads.emplace_back([&] {
      auto c = server.client();
      c.set_keep_alive(true);
      while (!stop.load())
        if (const auto r = c.Get("/health"); r && r->status == 200) ++done;
    });
  const auto t0 = Clock::now();
  std::this_thread::sleep_for(std::chrono::duration<double>(seconds));
  stop.store(true);
  for (std::thread& t : threads) t.join();
  return static_cast<double>(done.load()) / (ms_since(t0) / 1000.0);
}

// CPU seconds process `pid` has used, all its threads together.
double cpu_seconds(pid_t pid) {
  std::istringstream stat(read_bytes("/proc/" + std::to_string(pid) + "/stat"));
  std::string field;
  std::vector<std::string> fields;
  while (stat >> field) fields.push_back(field);  // the name (2nd) has no space: "(gen3d)"
  const double ticks = std::stod(fields.at(13)) + std::stod(fields.at(14));  // utime, stime
  return ticks / static_cast<double>(::sysconf(_SC_CLK_TCK));
}

// Milliseconds the threads of `pid` that answer requests (all but the job threads, "gen3d-job",
// and the TBB workers they start, which take their name) have waited for a core: the sum of
// their run-queue delays (/proc/PID/task/TID/schedstat, in ns).
double request_threads_wait_ms(pid_t pid) {
  double ns = 0;
  for (const auto& t : fs::directory_iterator("/proc/" + std::to_string(pid) + "/task")) {
    const std::string stat = read_bytes((t.path() / "stat").string());
    if (stat.find("(gen3d-job)") != std::string::npos) continue;
    std::istringstream sched(read_bytes((t.path() / "schedstat").string()));
    double run = 0, wait = 0;
    sched >> run >> wait;
    ns += wait;
  }
  return ns / 1e6;
}

// The probes' latencies with what the server did meanwhile: the cores it used (its jobs, under
// load: whether they lose time to the requests) and how long its request threads waited for a
// core per probe; then the requests per second of `clients`.
json health_figures(const Server& server, int n, double interval_ms, int clients, double seconds) {
  const double cpu0 = cpu_seconds(server.pid()), wait0 = request_threads_wait_ms(server.pid());
  const auto t0 = Clock::now();
  const std::vector<double> ms = health_latencies(server, n, interval_ms);
  const double cores = (cpu_seconds(server.pid()) - cpu0) / (ms_since(t0) / 1000.0);
  const double wait = (request_threads_wait_ms(server.pid()) - wait0) / n;
  return {{"health_ms_p50", percentile(ms, 0.5)},
          {"health_ms_p99", percentile(ms, 0.99)},
          {"health_ms_max", *std::max_element(ms.begin(), ms.end())},
          {"request_threads_wait_ms_per_probe", wait},
          {"server_cores_while_probed", cores},
          {"health_rps", health_rps(server, clients, seconds)}};
}

int running_jobs(const Server& server) {
  const auto r = server.client().Get("/health");
  return r ? json::parse(r->body).value("running", 0) : 0;
}

// Two clients send one texture job after another, so both workers are busy while `measure` runs;
// what `measure` returns.
template <class F>
json with_two_jobs(const Server& server, const std::string& body, F measure) {
  std::vector<std::thread> jobs;
  std::atomic<bool> stop{false};
  for (int w = 0; w < 2; ++w)
    jobs.emplace_back([&] {
      auto c = server.client();
      while (!stop.load()) c.Post("/generate", body, "application/json");
    });
  while (running_jobs(server) < 2) std::this_thread::sleep_for(std::chrono::milliseconds(5));
  json figures = measure();
  stop.store(true);
  for (std::thread& t : jobs) t.join();
  return figures;
}

// Each figure of the rounds: its median over the rounds, with the range and every round's.
json over_rounds(const std::vector<json>& rounds) {
  json out;
  for (const auto& [key, value] : rounds.front().items()) {
    std::vector<double> v;
    for (const json& r : rounds) v.push_back(r[key].get<double>());
    out[key] = summary(v);
    out[key]["rounds"] = v;  // in round order: the variants of one round saw the same machine
  }
  return out;
}

}  // namespace

int main(int argc, char** argv) {
  int runs = 5, rounds = 5, probes = 400, clients = 4;
  double seconds = 3, interval_ms = 5;
  std::string gen3d = GEN3D_EXECUTABLE;
  for (int i = 1; i + 1 < argc; i += 2) {
    const std::string a = argv[i];
    if (a == "--runs") runs = std::atoi(argv[i + 1]);
    if (a == "--rounds") rounds = std::atoi(argv[i + 1]);
    if (a == "--health") probes = std::atoi(argv[i + 1]);
    if (a == "--interval") interval_ms = std::atof(argv[i + 1]);
    if (a == "--seconds") seconds = std::atof(argv[i + 1]);
    if (a == "--clients") clients = std::atoi(argv[i + 1]);
    if (a == "--gen3d") gen3d = argv[i + 1];
  }
  try {
    const fs::path tmp =
        fs::temp_directory_path() / ("gen3d_serve_bench_" + std::to_string(getpid()));
    fs::create_directories(tmp);
    const std::string body = json{
        {"image", gen3d::io::base64_encode(read_bytes(kImage))},
        {"mesh", gen3d::io::base64_encode(read_bytes(kMesh))},
        {"texture", true}}.dump();
    json out{{"bench", "serve"},
             {"cores", std::thread::hardware_concurrency()},
             {"loadavg_before", read_bytes("/proc/loadavg").substr(0, 14)}};
    // /health on an idle server (what the rest of the machine costs it), then with two jobs
    // running, their threads at the server's priority (the baseline) and lowered (the default);
    // a fresh server each time, the three in turn in every round.
    struct Variant {
      std::string name;
      std::vector<std::string> args;
      bool jobs;
    };
    const std::vector<Variant> variants = {{"idle", {}, false},
                                           {"two_jobs_job_nice_0", {"--job-nice", "0"}, true},
                                           {"two_jobs_job_nice_default", {}, true}};
    std::map<std::string, std::vector<json>> figures;
    for (int r = 0; r < rounds; ++r)
      for (const Variant& v : variants) {
        const Server server(gen3d, free_port(), (tmp / ("data_" + v.name)).string(), v.args);
        const auto measure = [&] {
          return health_figures(server, probes, interval_ms, clients, seconds);
        };
        figures[v.name].push_back(v.jobs ? with_two_jobs(server, body, measure) : measure());
      }
    for (const Variant& v : variants) out["health"][v.name] = over_rounds(figures[v.name]);
    out["health"]["rounds"] = rounds;
    out["health"]["probes"] = probes;
    out["health"]["probe_interval_ms"] = interval_ms;
    out["health"]["rps_clients"] = clients;
    {
      const Server server(gen3d, free_port(), (tmp / "data").string());

      // One job through the server, as its client sees it, and the same job through the command
      // line, start to exit, without the stage cache (the server has none). The two alternate, so
      // that both see the same load of a shared machine; a first run of each is not counted.
      std::vector<double> served, cli;
      auto c = server.client();
      for (int i = 0; i <= runs; ++i) {
        auto t0 = Clock::now();
        const auto r = c.Post("/generate", body, "application/json");
        if (!r || r->status != 200) throw std::runtime_error("/generate failed");
        if (i > 0) served.push_back(ms_since(t0));
        t0 = Clock::now();
        const int rc = run_process({gen3d, "texture", "--no-cache", "--mesh", kMesh, "--image",
                                    kImage, "--faces", "40000", "-o", (tmp / "cli.glb").string()});
        if (rc != 0) throw std::runtime_error("gen3d texture failed");
        if (i > 0) cli.push_back(ms_since(t0));
      }
      out["texture_job_ms"]["serve_generate"] = summary(served);
      out["texture_job_ms"]["gen3d_texture"] = summary(cli);
    }
    out["texture_job_ms"]["serve_overhead_median_ms"] =
        out["texture_job_ms"]["serve_generate"]["median"].get<double>() -
        out["texture_job_ms"]["gen3d_texture"]["median"].get<double>();
    out["loadavg_after"] = read_bytes("/proc/loadavg").substr(0, 14);
    fs::remove_all(tmp);
    std::cout << out.dump(2) << "\n";
  } catch (const std::exception& e) {
    std::cerr << "gen3d_serve_bench: " << e.what() << "\n";
    return 1;
  }
  return 0;
}
