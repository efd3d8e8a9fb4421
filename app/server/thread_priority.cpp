#include "app/server/thread_priority.h"

#include <sys/resource.h>
#include <sys/syscall.h>
#include <unistd.h>

#include <atomic>
#include <cerrno>
#include <cstring>

#include <spdlog/spdlog.h>

namespace gen3d::app::server {

namespace {

// The calling thread's id, which Linux's getpriority and setpriority take as a PRIO_PROCESS who
// to act on that thread alone.
id_t thread_id() {
  return static_cast<id_t>(::syscall(SYS_gettid));
}

}  // namespace

bool lower_thread_priority(int nice) {
  errno = 0;
  const int now = ::getpriority(PRIO_PROCESS, thread_id());
  if (errno == 0 && now >= nice) return true;
  if (::setpriority(PRIO_PROCESS, thread_id(), nice) == 0) return true;
  static std::atomic<bool> logged{false};
  if (!logged.exchange(true))
    spdlog::warn("gen3d serve: cannot lower the priority of job threads to nice {}: {}", nice,
                 std::strerror(errno));
  return false;
}

JobPriority::JobPriority(int nice) : nice_(nice) {
  observe(true);
}

JobPriority::~JobPriority() {
  observe(false);  // before the object goes: no notification reaches a half-destroyed observer
}

void JobPriority::on_scheduler_entry(bool is_worker) {
  if (!is_worker) return;  // the arena's own thread was lowered when it started
  // A worker joins and leaves arenas many times a second: one try per thread and value.
  thread_local int tried = 0;
  if (tried >= nice_) return;
  lower_thread_priority(nice_);
  tried = nice_;
}

}  // namespace gen3d::app::server
