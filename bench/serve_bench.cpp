// `gen3d serve` measured from outside, over loopback HTTP: /health latency (p50, p99) and
// requests per second, idle and while two texture jobs run; then one texture job through the
// server (POST /generate, as a client waits for it) against the same job through `gen3d texture`
// (the same shipped config and variables), the baseline measured in the same run. Prints JSON.
//
//   build/bench/gen3d_serve_bench [--runs 5] [--health 400] [--seconds 3] [--clients 4]
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
#include <stdexcept>
#include <string>
#include <thread>
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
  Server(const std::string& gen3d, int port, const std::string& data) : port_(port) {
    pid_ = ::fork();
    if (pid_ == 0) {
      std::freopen("/dev/null", "w", stdout);
      std::freopen("/dev/null", "w", stderr);
      const std::string p = std::to_string(port);
      ::execl(gen3d.c_str(), gen3d.c_str(), "serve", "--port", p.c_str(), "--jobs", "2", "--data",
              data.c_str(), "--grace", "0", static_cast<char*>(nullptr));
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

// /health `n` times in a row, each on a new connection (as a probe makes them): latencies in ms.
std::vector<double> health_latencies(const Server& server, int n) {
  std::vector<double> ms;
  for (int i = 0; i < n; ++i) {
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

json health_figures(const Server& server, int n, int clients, double seconds) {
  const std::vector<double> ms = health_latencies(server, n);
  return {{"health_ms_p50", percentile(ms, 0.5)},
          {"health_ms_p99", percentile(ms, 0.99)},
          {"health_ms_max", *std::max_element(ms.begin(), ms.end())},
          {"probes", n},
          {"health_rps", health_rps(server, clients, seconds)},
          {"rps_clients", clients}};
}

int running_jobs(const Server& server) {
  const auto r = server.client().Get("/health");
  return r ? json::parse(r->body).value("running", 0) : 0;
}

}  // namespace

int main(int argc, char** argv) {
  int runs = 5, probes = 400, clients = 4;
  double seconds = 3;
  std::string gen3d = GEN3D_EXECUTABLE;
  for (int i = 1; i + 1 < argc; i += 2) {
    const std::string a = argv[i];
    if (a == "--runs") runs = std::atoi(argv[i + 1]);
    if (a == "--health") probes = std::atoi(argv[i + 1]);
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
    {
      const Server server(gen3d, free_port(), (tmp / "data").string());
      out["idle"] = health_figures(server, probes, clients, seconds);

      // Two clients send one texture job after another, so both workers are busy while /health
      // is measured.
      std::vector<std::thread> jobs;
      std::atomic<bool> stop{false};
      for (int w = 0; w < 2; ++w)
        jobs.emplace_back([&] {
          auto c = server.client();
          while (!stop.load()) c.Post("/generate", body, "application/json");
        });
      while (running_jobs(server) < 2) std::this_thread::sleep_for(std::chrono::milliseconds(5));
      out["two_jobs_running"] = health_figures(server, probes, clients, seconds);
      stop.store(true);
      for (std::thread& t : jobs) t.join();

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
