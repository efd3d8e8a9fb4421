#pragma once
// The jobs of `gen3d serve`: a bounded queue, a fixed number of workers, and per job its state,
// the state of each node and every progress event it emitted (so a client that subscribes late or
// reconnects catches up from the start). Events are appended by the progress hub's callback and
// read by each subscriber at its own pace: a slow client never slows a run.

#include <atomic>
#include <chrono>
#include <condition_variable>
#include <cstdint>
#include <deque>
#include <filesystem>
#include <functional>
#include <map>
#include <memory>
#include <mutex>
#include <optional>
#include <stdexcept>
#include <string>
#include <thread>
#include <vector>

#include "progress/progress.h"

namespace gen3d::app::server {

enum class JobState { kQueued, kRunning, kDone, kFailed, kCancelled };
const char* job_state_name(JobState state);
inline bool job_finished(JobState s) {
  return s == JobState::kDone || s == JobState::kFailed || s == JobState::kCancelled;
}

// A job's failure as the client sees it: a message and a stable code, and whether the client
// (4xx) or the server (5xx) is at fault.
struct JobError {
  std::string message;
  std::string code;
  bool client_fault = false;
};

// Thrown by a job's work to fail with a given code (any other exception fails it as
// "internal_error", a ConfigError as "bad_request").
class JobFailure : public std::runtime_error {
 public:
  JobFailure(std::string code, const std::string& message, bool client_fault)
      : std::runtime_error(message), code(std::move(code)), client_fault(client_fault) {}
  std::string code;
  bool client_fault;
};

// What a finished job produced: a file in its folder.
struct JobOutput {
  std::string path;
  std::string content_type = "application/octet-stream";
};

struct NodeProgress {
  std::string id;
  std::string stage;
  std::string status = "running";  // running, then the executor's done|failed|cached
  double seconds = 0;
  // For a cached node: "loaded" (its outputs came from the stage cache) or "unneeded" (the cache
  // holds them and nothing that ran needed them).
  std::string cache;
};

// What a job's run did with the stage cache, set when its run has ended.
struct JobCacheSummary {
  bool enabled = false;  // the server has a stage cache (not --no-cache)
  size_t hits = 0;       // nodes whose outputs were loaded from the cache
  size_t unneeded = 0;   // nodes the cache holds that this run did not need (not run, not loaded)
  size_t misses = 0;     // nodes that ran although the cache may hold them (not stored before)
  size_t stored = 0;     // nodes this run stored
  double saved_seconds = 0;  // the stored runs' time the loads saved
};

class Job;

// What a job's work sees: its folder (made before the work starts, removed with the job), its
// cancel flag (for ExecutorOptions::interrupt) and its phase ("texturing", ...).
struct JobContext {
  Job& job;
  std::filesystem::path dir;
  const std::atomic<bool>& cancel;
};
using JobWork = std::function<JobOutput(JobContext&)>;

class Job {
 public:
  using Clock = std::chrono::system_clock;
  Job(std::string id, std::string kind) : id(std::move(id)), kind(std::move(kind)) {}

  const std::string id;
  const std::string kind;  // "texture", "generate", ...

  // A copy of the mutable state, taken under the lock.
  struct Snapshot {
    JobState state = JobState::kQueued;
    std::string phase;
    JobError error;
    JobOutput output;
    std::vector<NodeProgress> nodes;
    Clock::time_point created, started, finished;
    size_t events = 0;
    std::string graph;                         // the graph as JSON text, once it is built ("")
    std::map<std::string, std::string> files;  // side files by name ("trace", "report"): paths
    std::optional<JobCacheSummary> cache;      // once the run has ended
    std::string timing;  // the run's critical path and concurrency as JSON text, once it ended
  };
  Snapshot snapshot() const;
  JobState state() const;  // without copying the rest

  // Events from `from` on (JSON text, in emission order); waits up to `wait` for one when there is
  // none yet and the job is not finished. `finished` tells whether the job had ended when read.
  std::vector<std::string> events_from(size_t from, std::chrono::milliseconds wait,
                                       bool& finished) const;
  // Waits until the job has finished (or `wait` passed); returns whether it has.
  bool wait_finished(std::chrono::milliseconds wait) const;

  void set_phase(std::string phase);
  // The graph the job runs, as JSON text (`{"name", "nodes": [{"id", "stage", "after"}]}`), set
  // before it starts: a client draws it and colours its nodes from the events.
  void set_graph(std::string graph_json);
  // The run's timing as JSON text (`{"wall_seconds", "busy_seconds", "concurrency",
  // "critical_path", "critical_seconds"}`), once it has ended.
  void set_timing(std::string timing_json);
  // A file the job wrote beside its output (a trace, a report), served by `name`.
  void add_file(const std::string& name, std::string path);
  // The run's use of the stage cache, once it has ended: the nodes it did not need because the
  // cache holds them are added to the job's nodes as "cached" (they sent no events), and a
  // "cache" event with the summary and the ids of the cached nodes goes to the event stream.
  void set_cache_summary(const JobCacheSummary& summary, const std::vector<NodeProgress>& unneeded,
                         const std::vector<std::string>& cached_ids);
  void cancel() { cancel_.store(true); }

 private:
  friend class JobQueue;
  void add_event(const progress::Event& e);
  void finish(JobState state, JobOutput output, JobError error);

  mutable std::mutex mutex_;
  mutable std::condition_variable changed_;
  JobState state_ = JobState::kQueued;
  std::string phase_;
  JobError error_;
  JobOutput output_;
  std::vector<NodeProgress> nodes_;
  std::vector<std::string> events_;
  std::string graph_;
  std::map<std::string, std::string> files_;
  std::optional<JobCacheSummary> cache_;
  std::string timing_;
  Clock::time_point created_ = Clock::now(), started_, finished_;
  std::atomic<bool> cancel_{false};
  JobWork work_;
};

struct QueueCounts {
  size_t queued = 0, running = 0, done = 0, failed = 0, cancelled = 0;
  size_t submitted = 0, rejected = 0;  // since the server started
};

class JobQueue {
 public:
  // `workers` jobs run at once; at most `capacity` wait for one. Each job gets a folder under
  // `root`; at most `keep` finished jobs are kept (the oldest are forgotten, folders and all).
  // With `job_nice` from 1 to 19 the jobs' threads run at that nice value, a lower priority than
  // the threads that answer requests (app/server/thread_priority.h); 0 leaves them as they are.
  JobQueue(int workers, size_t capacity, std::filesystem::path root, int job_nice = 0,
           size_t keep = 256);
  ~JobQueue();
  JobQueue(const JobQueue&) = delete;
  JobQueue& operator=(const JobQueue&) = delete;

  // The queued job, or null when the queue is full.
  std::shared_ptr<Job> submit(const std::string& kind, JobWork work);
  std::shared_ptr<Job> find(const std::string& id) const;
  std::vector<std::shared_ptr<Job>> list() const;  // oldest first
  QueueCounts counts() const;
  // Only `queued` and `running` of counts(), from the queue's own tallies: no job is looked at,
  // so it takes the same short time however many jobs the server keeps (for /health).
  QueueCounts load() const;
  size_t capacity() const { return capacity_; }
  int workers() const { return static_cast<int>(workers_.size()); }
  // Seconds a refused client should wait before it retries: the time the jobs ahead of it take,
  // from the mean run time of recent jobs (10 before any has run), from 1 to 300.
  int retry_after_seconds() const;

  // The first step of a graceful stop: new jobs are refused from now on and the queued ones end
  // cancelled without running; running jobs go on.
  void drain();
  bool draining() const;
  // Waits until no job runs or waits (true), or until `deadline` (false).
  bool wait_idle(std::chrono::steady_clock::time_point deadline) const;

  // Cancels every job and joins the workers (queued jobs end cancelled without running).
  void shutdown();

 private:
  void worker_loop();
  void run(const std::shared_ptr<Job>& job);
  void forget_old_jobs();

  const size_t capacity_;
  const std::filesystem::path root_;
  const size_t keep_;
  const int job_nice_;
  mutable std::mutex mutex_;
  std::condition_variable wake_;
  mutable std::condition_variable idle_;  // a worker finished a job
  std::deque<std::shared_ptr<Job>> pending_;
  std::map<std::string, std::shared_ptr<Job>> jobs_;
  std::vector<std::string> order_;  // ids, oldest first
  size_t running_ = 0;              // workers running a job
  size_t submitted_ = 0, rejected_ = 0;
  double mean_run_seconds_ = 0;  // an exponential moving average over finished runs (0: none yet)
  bool draining_ = false;        // new jobs are refused (drain)
  bool stopping_ = false;        // the workers stop (shutdown)
  std::vector<std::thread> workers_;
  progress::Hub::Subscription events_;
};

// A random version-4 UUID ("3f1c...-4...-..."), the form of the reference server's uids.
std::string new_uuid();

}  // namespace gen3d::app::server
