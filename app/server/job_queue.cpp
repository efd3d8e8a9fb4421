#include "app/server/job_queue.h"

#include <pthread.h>

#include <algorithm>
#include <cmath>
#include <optional>
#include <random>

#include <fmt/format.h>
#include <spdlog/spdlog.h>
#include <nlohmann/json.hpp>

#include "app/server/thread_priority.h"
#include "pipeline/error.h"
#include "pipeline/progress_json.h"

namespace gen3d::app::server {

namespace fs = std::filesystem;

namespace {

// Events kept per job; past it further step and log events are dropped (node and run events
// are always kept, they make the job's state).
constexpr size_t kMaxEvents = 20000;

}  // namespace

const char* job_state_name(JobState state) {
  switch (state) {
    case JobState::kQueued:
      return "queued";
    case JobState::kRunning:
      return "running";
    case JobState::kDone:
      return "done";
    case JobState::kFailed:
      return "failed";
    case JobState::kCancelled:
      return "cancelled";
  }
  return "unknown";
}

std::string new_uuid() {
  static std::mutex mutex;
  static std::mt19937_64 rng{std::random_device{}()};
  std::lock_guard lock(mutex);
  const uint64_t a = rng(), b = rng();
  return fmt::format("{:08x}-{:04x}-4{:03x}-{:04x}-{:012x}", a >> 32, (a >> 16) & 0xFFFF, a & 0xFFF,
                     0x8000 | ((b >> 48) & 0x3FFF), b & 0xFFFFFFFFFFFFull);
}

Job::Snapshot Job::snapshot() const {
  std::lock_guard lock(mutex_);
  return Snapshot{state_,    phase_,         error_, output_, nodes_, created_, started_,
                  finished_, events_.size(), graph_, files_,  cache_, timing_};
}

std::vector<std::string> Job::events_from(size_t from, std::chrono::milliseconds wait,
                                          bool& finished) const {
  std::unique_lock lock(mutex_);
  changed_.wait_for(lock, wait, [&] { return events_.size() > from || job_finished(state_); });
  finished = job_finished(state_);
  if (from >= events_.size()) return {};
  return {events_.begin() + static_cast<std::ptrdiff_t>(from), events_.end()};
}

JobState Job::state() const {
  std::lock_guard lock(mutex_);
  return state_;
}

bool Job::wait_finished(std::chrono::milliseconds wait) const {
  std::unique_lock lock(mutex_);
  return changed_.wait_for(lock, wait, [&] { return job_finished(state_); });
}

void Job::set_phase(std::string phase) {
  std::lock_guard lock(mutex_);
  phase_ = std::move(phase);
  changed_.notify_all();
}

void Job::set_graph(std::string graph_json) {
  std::lock_guard lock(mutex_);
  graph_ = std::move(graph_json);
  changed_.notify_all();
}

void Job::set_timing(std::string timing_json) {
  std::lock_guard lock(mutex_);
  timing_ = std::move(timing_json);
}

void Job::add_file(const std::string& name, std::string path) {
  std::lock_guard lock(mutex_);
  files_[name] = std::move(path);
}

void Job::set_cache_summary(const JobCacheSummary& summary,
                            const std::vector<NodeProgress>& unneeded,
                            const std::vector<std::string>& cached_ids) {
  std::lock_guard lock(mutex_);
  cache_ = summary;
  for (const NodeProgress& n : unneeded)
    if (std::none_of(nodes_.begin(), nodes_.end(),
                     [&](const NodeProgress& m) { return m.id == n.id; }))
      nodes_.push_back(n);
  nlohmann::json e = {{"event", "cache"},
                      {"run", id},
                      {"enabled", summary.enabled},
                      {"hits", summary.hits},
                      {"unneeded", summary.unneeded},
                      {"misses", summary.misses},
                      {"stored", summary.stored},
                      {"saved_seconds", summary.saved_seconds},
                      {"nodes", cached_ids}};
  events_.push_back(e.dump());
  changed_.notify_all();
}

void Job::add_event(const progress::Event& e) {
  using progress::EventKind;
  std::lock_guard lock(mutex_);
  if (e.kind == EventKind::kNodeStarted) {
    nodes_.push_back({e.node, e.stage, "running", 0.0, ""});
  } else if (e.kind == EventKind::kNodeFinished) {
    auto it = std::find_if(nodes_.begin(), nodes_.end(),
                           [&](const NodeProgress& n) { return n.id == e.node; });
    if (it == nodes_.end()) it = nodes_.insert(nodes_.end(), {e.node, e.stage, "running", 0.0, ""});
    it->status = e.status;
    it->seconds = e.seconds;
    if (e.status == "cached") it->cache = "loaded";
  }
  const bool keeps_state = e.kind != EventKind::kStep && e.kind != EventKind::kLog;
  if (events_.size() >= kMaxEvents && !keeps_state) return;
  events_.push_back(pipeline::progress_event_json(e).dump());
  changed_.notify_all();
}

void Job::finish(JobState state, JobOutput output, JobError error) {
  std::lock_guard lock(mutex_);
  state_ = state;
  output_ = std::move(output);
  error_ = std::move(error);
  finished_ = Clock::now();
  work_ = nullptr;  // releases what the work held (decoded uploads)
  changed_.notify_all();
}

JobQueue::JobQueue(int workers, size_t capacity, fs::path root, int job_nice, size_t keep)
    : capacity_(capacity), root_(std::move(root)), keep_(keep), job_nice_(job_nice) {
  fs::create_directories(root_);
  // One subscription routes every job's events (they carry the job id as their run) to it.
  events_ = progress::hub().subscribe([this](const progress::Event& e) {
    if (e.run.empty()) return;
    std::shared_ptr<Job> job;
    {
      std::lock_guard lock(mutex_);
      const auto it = jobs_.find(e.run);
      if (it == jobs_.end()) return;
      job = it->second;
    }
    job->add_event(e);
  });
  for (int w = 0; w < std::max(1, workers); ++w) workers_.emplace_back([this] { worker_loop(); });
}

JobQueue::~JobQueue() {
  shutdown();
}

std::shared_ptr<Job> JobQueue::submit(const std::string& kind, JobWork work) {
  auto job = std::make_shared<Job>(new_uuid(), kind);
  job->work_ = std::move(work);
  {
    std::lock_guard lock(mutex_);
    // A free worker takes a job at once: it need not fit in the queue.
    const size_t idle = workers_.size() - running_;
    if (stopping_ || draining_ || pending_.size() >= capacity_ + idle) {
      ++rejected_;
      return nullptr;
    }
    ++submitted_;
    pending_.push_back(job);
    jobs_.emplace(job->id, job);
    order_.push_back(job->id);
  }
  wake_.notify_one();
  return job;
}

std::shared_ptr<Job> JobQueue::find(const std::string& id) const {
  std::lock_guard lock(mutex_);
  const auto it = jobs_.find(id);
  return it == jobs_.end() ? nullptr : it->second;
}

std::vector<std::shared_ptr<Job>> JobQueue::list() const {
  std::lock_guard lock(mutex_);
  std::vector<std::shared_ptr<Job>> out;
  for (const std::string& id : order_) out.push_back(jobs_.at(id));
  return out;
}

QueueCounts JobQueue::counts() const {
  QueueCounts c;
  for (const auto& job : list()) {
    switch (job->state()) {
      case JobState::kQueued:
        ++c.queued;
        break;
      case JobState::kRunning:
        ++c.running;
        break;
      case JobState::kDone:
        ++c.done;
        break;
      case JobState::kFailed:
        ++c.failed;
        break;
      case JobState::kCancelled:
        ++c.cancelled;
        break;
    }
  }
  std::lock_guard lock(mutex_);
  c.submitted = submitted_;
  c.rejected = rejected_;
  return c;
}

QueueCounts JobQueue::load() const {
  std::lock_guard lock(mutex_);
  QueueCounts c;
  c.queued = pending_.size();
  c.running = running_;
  return c;
}

int JobQueue::retry_after_seconds() const {
  std::lock_guard lock(mutex_);
  if (mean_run_seconds_ <= 0) return 10;
  // Every running and waiting job ends before a new one can start; they run `workers` at a time.
  const double ahead = static_cast<double>(pending_.size() + running_);
  const double seconds = mean_run_seconds_ * ahead / static_cast<double>(workers_.size());
  return static_cast<int>(std::clamp(std::ceil(seconds), 1.0, 300.0));
}

void JobQueue::drain() {
  std::deque<std::shared_ptr<Job>> queued;
  {
    std::lock_guard lock(mutex_);
    draining_ = true;
    queued.swap(pending_);
  }
  for (const auto& job : queued) {
    job->cancel();
    job->finish(JobState::kCancelled, {},
                {"cancelled before it started: the server is stopping", "cancelled", false});
  }
  idle_.notify_all();
}

bool JobQueue::draining() const {
  std::lock_guard lock(mutex_);
  return draining_;
}

bool JobQueue::wait_idle(std::chrono::steady_clock::time_point deadline) const {
  std::unique_lock lock(mutex_);
  return idle_.wait_until(lock, deadline, [&] { return pending_.empty() && running_ == 0; });
}

void JobQueue::shutdown() {
  {
    std::lock_guard lock(mutex_);
    if (stopping_) return;
    stopping_ = true;
    for (auto& [id, job] : jobs_) job->cancel();
  }
  wake_.notify_all();
  for (std::thread& t : workers_) t.join();
  events_.reset();
}

void JobQueue::worker_loop() {
  ::pthread_setname_np(::pthread_self(), "gen3d-job");  // as `top -H` and /proc show it
  std::optional<JobPriority> priority;
  if (job_nice_ > 0) {
    lower_thread_priority(job_nice_);
    priority.emplace(job_nice_);  // and TBB's workers when they join this thread's arena
  }
  for (;;) {
    std::shared_ptr<Job> job;
    {
      std::unique_lock lock(mutex_);
      wake_.wait(lock, [&] { return stopping_ || !pending_.empty(); });
      if (pending_.empty()) return;
      job = pending_.front();
      pending_.pop_front();
      ++running_;
    }
    const auto t0 = std::chrono::steady_clock::now();
    run(job);
    const double seconds =
        std::chrono::duration<double>(std::chrono::steady_clock::now() - t0).count();
    {
      std::lock_guard lock(mutex_);
      --running_;
      idle_.notify_all();
      mean_run_seconds_ =
          mean_run_seconds_ <= 0 ? seconds : 0.8 * mean_run_seconds_ + 0.2 * seconds;
    }
    forget_old_jobs();
  }
}

void JobQueue::run(const std::shared_ptr<Job>& job) {
  if (job->cancel_.load()) {
    job->finish(JobState::kCancelled, {}, {"cancelled before it started", "cancelled", false});
    return;
  }
  JobWork work;
  {
    std::lock_guard lock(job->mutex_);
    job->state_ = JobState::kRunning;
    job->started_ = Job::Clock::now();
    work = job->work_;
    job->changed_.notify_all();
  }
  const auto t0 = std::chrono::steady_clock::now();
  JobContext ctx{*job, root_ / job->id, job->cancel_};
  JobState state = JobState::kDone;
  JobOutput output;
  JobError error;
  try {
    fs::create_directories(ctx.dir);
    output = work(ctx);
  } catch (const JobFailure& e) {
    error = {e.what(), e.code, e.client_fault};
  } catch (const pipeline::ConfigError& e) {
    error = {e.what(), "bad_request", true};
  } catch (const std::exception& e) {
    error = {e.what(), "internal_error", false};
  }
  if (!error.code.empty()) state = job->cancel_.load() ? JobState::kCancelled : JobState::kFailed;
  if (state == JobState::kCancelled) error = {"cancelled", "cancelled", false};
  const double ms =
      std::chrono::duration<double, std::milli>(std::chrono::steady_clock::now() - t0).count();
  if (state == JobState::kFailed)
    spdlog::warn("job {} ({}) failed after {:.0f} ms: {}", job->id, job->kind, ms, error.message);
  else
    spdlog::info("job {} ({}) {} in {:.0f} ms", job->id, job->kind, job_state_name(state), ms);
  job->finish(state, std::move(output), std::move(error));
}

void JobQueue::forget_old_jobs() {
  std::vector<std::shared_ptr<Job>> old;
  {
    std::lock_guard lock(mutex_);
    size_t finished = 0;
    for (const std::string& id : order_) finished += job_finished(jobs_.at(id)->state());
    for (auto it = order_.begin(); it != order_.end() && finished > keep_;) {
      const auto job = jobs_.at(*it);
      if (!job_finished(job->state())) {
        ++it;
        continue;
      }
      old.push_back(job);
      jobs_.erase(*it);
      it = order_.erase(it);
      --finished;
    }
  }
  for (const auto& job : old) {
    std::error_code ec;
    fs::remove_all(root_ / job->id, ec);
  }
}

}  // namespace gen3d::app::server
