#pragma once
// `gen3d serve` in a child process on a free loopback port, for tests that speak HTTP to the real
// binary (header-only: its users link cpp-httplib themselves).

#include <arpa/inet.h>
#include <netinet/in.h>
#include <signal.h>
#include <sys/socket.h>
#include <sys/wait.h>
#include <unistd.h>

#include <chrono>
#include <cstdlib>
#include <string>
#include <thread>
#include <vector>

#include <gtest/gtest.h>
#include <httplib.h>

#include "support/paths.h"

namespace gen3d::test {

// A port no one listens on now (the kernel's pick for a socket bound to port 0).
inline int free_port() {
  const int fd = ::socket(AF_INET, SOCK_STREAM, 0);
  sockaddr_in addr{};
  addr.sin_family = AF_INET;
  addr.sin_addr.s_addr = htonl(INADDR_LOOPBACK);
  addr.sin_port = 0;
  socklen_t len = sizeof addr;
  if (::bind(fd, reinterpret_cast<sockaddr*>(&addr), sizeof addr) != 0 ||
      ::getsockname(fd, reinterpret_cast<sockaddr*>(&addr), &len) != 0) {
    ::close(fd);
    return -1;
  }
  ::close(fd);
  return ntohs(addr.sin_port);
}

// `gen3d serve ARGS --port P` in a child process, stopped with SIGTERM when destroyed; without a
// stage cache unless ARGS name one.
class ServeProcess {
 public:
  explicit ServeProcess(std::vector<std::string> args) : port_(free_port()) {
    args.insert(args.begin(), {gen3d_executable(), "serve", "--port", std::to_string(port_)});
    pid_ = ::fork();
    if (pid_ == 0) {
      // No stage cache unless a test names one (--cache DIR): jobs must not depend on what
      // earlier runs left in a user cache directory.
      ::setenv("GEN3D_CACHE_DIR", "off", 1);
      std::vector<char*> argv;
      for (std::string& a : args) argv.push_back(a.data());
      argv.push_back(nullptr);
      ::execv(argv[0], argv.data());
      ::_exit(127);
    }
    // Up when it answers anything (a server with a token answers 401).
    for (int i = 0; i < 200; ++i) {
      if (client().Get("/health")) return;
      std::this_thread::sleep_for(std::chrono::milliseconds(50));
    }
    ADD_FAILURE() << "gen3d serve did not start on port " << port_;
  }
  ~ServeProcess() {
    if (pid_ <= 0) return;
    ::kill(pid_, SIGTERM);
    int status = 0;
    ::waitpid(pid_, &status, 0);
  }

  // Sends signal `sig` to the server.
  void send_signal(int sig) const {
    if (pid_ > 0) ::kill(pid_, sig);
  }
  // Waits up to `timeout` for the server to exit: its wait status, or -1 when it is still running
  // then (it is killed).
  int wait(std::chrono::milliseconds timeout) {
    if (pid_ <= 0) return -1;
    const auto deadline = std::chrono::steady_clock::now() + timeout;
    int status = 0;
    while (::waitpid(pid_, &status, WNOHANG) == 0) {
      if (std::chrono::steady_clock::now() > deadline) {
        ::kill(pid_, SIGKILL);
        ::waitpid(pid_, &status, 0);
        pid_ = -1;
        return -1;
      }
      std::this_thread::sleep_for(std::chrono::milliseconds(20));
    }
    pid_ = -1;
    return status;
  }

  int port() const { return port_; }
  pid_t pid() const { return pid_; }
  std::string url() const { return "http://127.0.0.1:" + std::to_string(port_); }

  httplib::Client client() const {
    httplib::Client c("127.0.0.1", port_);
    c.set_read_timeout(60, 0);
    return c;
  }

 private:
  int port_;
  pid_t pid_ = -1;
};

}  // namespace gen3d::test
