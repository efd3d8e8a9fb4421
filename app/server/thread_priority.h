#pragma once
// Jobs run at a lower OS scheduling priority than the threads that answer HTTP requests. With
// every core busy with jobs, a request's thread that wakes up then takes a core from a job thread
// at once instead of waiting for the scheduler to share the cores out evenly, so /health and the
// job API answer in milliseconds however loaded the server is (docs/serve.md, Performance).
//
// Linux keeps a nice value per thread, and a thread starts with its creator's, so what a job
// thread starts (OpenCV's or OpenMP's pool threads) inherits the lower priority. TBB's worker
// threads are shared by the whole process and start wherever the scheduler decides: they are
// lowered when they join a job's task arena (JobPriority below).

#include <tbb/task_scheduler_observer.h>

namespace gen3d::app::server {

// Raises the calling thread's nice value to `nice` (1 to 19, higher is lower priority); a thread
// already at `nice` or above is left as it is. False when the system refuses (the reason is
// logged once).
bool lower_thread_priority(int nice);

// While it lives, every TBB worker thread that joins the task arena of the thread that made it
// (that thread's implicit arena, where its parallel work runs) is lowered to `nice`. Raising a
// priority again needs a privilege an ordinary process lacks, so a worker stays lowered after it
// leaves: in `gen3d serve`, TBB's workers work for jobs only (HTTP handlers run no parallel work).
class JobPriority final : public tbb::task_scheduler_observer {
 public:
  explicit JobPriority(int nice);
  ~JobPriority() override;
  JobPriority(const JobPriority&) = delete;
  JobPriority& operator=(const JobPriority&) = delete;

  void on_scheduler_entry(bool is_worker) override;

 private:
  const int nice_;
};

}  // namespace gen3d::app::server
