#pragma once
// Progress events: one process-wide stream of what runs are doing (a run or node started or
// finished, step i of N inside a node, a log message). The executor reports nodes, library loops
// report their steps, and subscribers render the stream: the terminal status line, `--progress
// json`, a server's live view. Only the standard library: any module may report.
//
// Emitting is cheap when nobody listens (one relaxed atomic load). Subscribers are called one
// event at a time, in one order for all of them, which keeps each thread's events in the order
// that thread emitted them.

#include <atomic>
#include <cstdint>
#include <functional>
#include <mutex>
#include <string>
#include <string_view>
#include <utility>
#include <vector>

namespace gen3d::progress {

enum class EventKind {
  kRunStarted,    // stage: the pipeline's name; n: the nodes the run will run or load
  kRunFinished,   // stage: the pipeline's name; status: ok|failed|interrupted; seconds
  kNodeStarted,   // node, stage
  kNodeFinished,  // node, stage; status: done|failed|cached; seconds; i of n nodes finished;
                  // message: the failure
  kStep,          // node (when known), label, i of n done, eta_s
  kLog,           // level, message, node (when logged from inside a node)
};

enum class Level { kTrace, kDebug, kInfo, kWarning, kError };

struct Event {
  EventKind kind = EventKind::kStep;
  double t = 0.0;              // seconds since the process's progress clock began (set by emit)
  std::string run;             // the run's id (a batch or server job); empty for a lone run
  std::string node;            // the node's id; empty outside a node
  std::string stage;           // node events: the stage's name; run events: the pipeline's name
  std::string label;           // steps: what is counted ("denoise step", "loading weights")
  std::int64_t i = 0;          // steps: steps done; node_finished: nodes finished so far
  std::int64_t n = 0;          // steps: steps in all; node and run events: nodes in the run
  double seconds = 0;          // node_finished, run_finished: wall time
  double eta_s = -1.0;         // steps: estimated seconds left (negative: not known yet)
  std::string status;          // node_finished, run_finished
  Level level = Level::kInfo;  // log
  std::string message;         // log: the text; node_finished: the failure, if any
};

// Name of a kind as the JSON form spells it ("node_started", "step", ...).
std::string_view kind_name(EventKind kind);
std::string_view level_name(Level level);

// The event source. Subscribers must not subscribe or unsubscribe others from inside their
// callback; an event emitted from inside a callback (on that thread) is dropped, so a subscriber
// that logs cannot loop. A subscriber's exception is swallowed: a display never breaks a run.
class Hub {
 public:
  using Subscriber = std::function<void(const Event&)>;

  // Unsubscribes when destroyed; once that returns the callback is not running and never runs
  // again.
  class Subscription {
   public:
    Subscription() = default;
    Subscription(Subscription&& other) noexcept
        : hub_(std::exchange(other.hub_, nullptr)), id_(other.id_) {}
    Subscription& operator=(Subscription&& other) noexcept;
    Subscription(const Subscription&) = delete;
    Subscription& operator=(const Subscription&) = delete;
    ~Subscription() { reset(); }
    void reset();
    explicit operator bool() const { return hub_ != nullptr; }

   private:
    friend class Hub;
    Subscription(Hub* hub, std::uint64_t id) : hub_(hub), id_(id) {}
    Hub* hub_ = nullptr;
    std::uint64_t id_ = 0;
  };

  Hub();
  Hub(const Hub&) = delete;
  Hub& operator=(const Hub&) = delete;

  [[nodiscard]] Subscription subscribe(Subscriber fn);
  // Whether anyone listens: emitters skip building events when not.
  bool active() const noexcept { return listeners_.load(std::memory_order_relaxed) > 0; }
  // Stamps `e.t` and hands the event to every subscriber.
  void emit(Event e);
  // Seconds since this hub was made (the `t` of its events).
  double now() const;

 private:
  void unsubscribe(std::uint64_t id);

  const std::int64_t epoch_ns_;
  std::atomic<int> listeners_{0};
  std::mutex mutex_;  // the subscriber list, and delivery (one event at a time)
  std::vector<std::pair<std::uint64_t, Subscriber>> subscribers_;
  std::uint64_t next_id_ = 1;
  bool pruning_needed_ = false;
};

// The process-wide hub every module reports to.
Hub& hub();

// Names the run and node whose work this thread does, for the events emitted here (steps and log
// messages). Scopes nest: a thread waiting inside one node may run another node's task, and the
// outer scope is restored when the inner one ends. The strings must outlive the scope.
class NodeScope {
 public:
  NodeScope(const std::string& run, const std::string& node);
  ~NodeScope();
  NodeScope(const NodeScope&) = delete;
  NodeScope& operator=(const NodeScope&) = delete;

 private:
  const std::string* prev_run_;
  const std::string* prev_node_;
};

// The run and node of this thread's innermost NodeScope (empty strings outside any).
const std::string& current_run();
const std::string& current_node();

// Counts the steps of one loop: `Steps steps("denoise step", 50);` before it, `steps.done(i + 1)`
// after each step. Events carry the node that was current where the counter was made (so steps
// reported from helper threads still name it) and an ETA from the mean step time so far. With
// `min_interval_s` > 0, steps closer together than that are not reported (the first and the last
// always are): for per-tensor counts. Costs a relaxed atomic load per call when nobody listens.
class Steps {
 public:
  Steps() = default;
  Steps(std::string label, std::int64_t n, double min_interval_s = 0.0);

  void done(std::int64_t i);
  void next() { done(i_ + 1); }
  std::int64_t count() const { return i_; }
  std::int64_t total() const { return n_; }

 private:
  // Starts timing (and takes the node) at the first call made while someone listens.
  void start();

  std::string label_;
  std::int64_t n_ = 0;
  std::int64_t i_ = 0;
  double min_interval_s_ = 0.0;
  bool started_ = false;
  std::string run_, node_;
  std::int64_t i0_ = 0;       // steps done when timing began
  double t0_ = 0.0;           // hub time when timing began
  double last_emit_ = -1e30;  // hub time of the last reported step
};

}  // namespace gen3d::progress
