#include "progress/progress.h"

#include <algorithm>
#include <chrono>

namespace gen3d::progress {

namespace {

std::int64_t steady_ns() {
  return std::chrono::duration_cast<std::chrono::nanoseconds>(
             std::chrono::steady_clock::now().time_since_epoch())
      .count();
}

const std::string kNone;

struct ThreadScope {
  const std::string* run = &kNone;
  const std::string* node = &kNone;
};
thread_local ThreadScope t_scope;
// The hub this thread is delivering an event of: what it emits there meanwhile is dropped.
thread_local const Hub* t_delivering = nullptr;

}  // namespace

std::string_view kind_name(EventKind kind) {
  switch (kind) {
    case EventKind::kRunStarted:
      return "run_started";
    case EventKind::kRunFinished:
      return "run_finished";
    case EventKind::kNodeStarted:
      return "node_started";
    case EventKind::kNodeFinished:
      return "node_finished";
    case EventKind::kStep:
      return "step";
    case EventKind::kLog:
      return "log";
  }
  return "?";
}

std::string_view level_name(Level level) {
  switch (level) {
    case Level::kTrace:
      return "trace";
    case Level::kDebug:
      return "debug";
    case Level::kInfo:
      return "info";
    case Level::kWarning:
      return "warning";
    case Level::kError:
      return "error";
  }
  return "?";
}

// ---- Hub ---------------------------------------------------------------------------------------

Hub::Hub() : epoch_ns_(steady_ns()) {}

double Hub::now() const {
  return static_cast<double>(steady_ns() - epoch_ns_) / 1e9;
}

Hub::Subscription Hub::subscribe(Subscriber fn) {
  std::lock_guard lock(mutex_);
  const std::uint64_t id = next_id_++;
  subscribers_.emplace_back(id, std::move(fn));
  listeners_.fetch_add(1, std::memory_order_relaxed);
  return Subscription(this, id);
}

void Hub::unsubscribe(std::uint64_t id) {
  // From inside a callback this thread already holds the mutex (delivery): the slot is emptied
  // and removed once the delivery is over.
  const bool inside = t_delivering == this;
  std::unique_lock lock(mutex_, std::defer_lock);
  if (!inside) lock.lock();
  for (auto& [sid, fn] : subscribers_)
    if (sid == id && fn) {
      fn = nullptr;
      listeners_.fetch_sub(1, std::memory_order_relaxed);
    }
  if (inside) {
    pruning_needed_ = true;
    return;
  }
  std::erase_if(subscribers_, [](const auto& s) { return !s.second; });
}

void Hub::emit(Event e) {
  if (!active() || t_delivering == this) return;
  std::lock_guard lock(mutex_);
  e.t = now();
  const Hub* outer = std::exchange(t_delivering, this);
  for (std::size_t k = 0; k < subscribers_.size(); ++k) {
    if (!subscribers_[k].second) continue;
    try {
      subscribers_[k].second(e);
    } catch (...) {
      // A display's failure must not stop the run it shows.
    }
  }
  t_delivering = outer;
  if (pruning_needed_) {
    std::erase_if(subscribers_, [](const auto& s) { return !s.second; });
    pruning_needed_ = false;
  }
}

Hub::Subscription& Hub::Subscription::operator=(Subscription&& other) noexcept {
  if (this != &other) {
    reset();
    hub_ = std::exchange(other.hub_, nullptr);
    id_ = other.id_;
  }
  return *this;
}

void Hub::Subscription::reset() {
  if (hub_) std::exchange(hub_, nullptr)->unsubscribe(id_);
}

Hub& hub() {
  static Hub h;
  return h;
}

// ---- Node scope --------------------------------------------------------------------------------

NodeScope::NodeScope(const std::string& run, const std::string& node)
    : prev_run_(t_scope.run), prev_node_(t_scope.node) {
  t_scope.run = &run;
  t_scope.node = &node;
}

NodeScope::~NodeScope() {
  t_scope.run = prev_run_;
  t_scope.node = prev_node_;
}

const std::string& current_run() {
  return *t_scope.run;
}

const std::string& current_node() {
  return *t_scope.node;
}

// ---- Steps -------------------------------------------------------------------------------------

Steps::Steps(std::string label, std::int64_t n, double min_interval_s)
    : label_(std::move(label)), n_(n), min_interval_s_(min_interval_s) {
  if (hub().active()) done(0);
}

void Steps::start() {
  started_ = true;
  run_ = current_run();
  node_ = current_node();
  i0_ = i_;
  t0_ = hub().now();
}

void Steps::done(std::int64_t i) {
  i_ = i;
  Hub& h = hub();
  if (!h.active()) return;
  const bool first = !started_;
  if (first) start();
  const double now = h.now();
  if (!first && i_ < n_ && now - last_emit_ < min_interval_s_) return;
  last_emit_ = now;
  Event e;
  e.kind = EventKind::kStep;
  e.run = run_;
  e.node = node_;
  e.label = label_;
  e.i = i_;
  e.n = n_;
  if (i_ > i0_)
    e.eta_s =
        std::max(0.0, (now - t0_) / static_cast<double>(i_ - i0_) * static_cast<double>(n_ - i_));
  h.emit(std::move(e));
}

}  // namespace gen3d::progress
