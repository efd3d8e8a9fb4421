#include "models/nn/model_cache.h"

#include <condition_variable>
#include <map>
#include <mutex>

#include <oneapi/tbb/task_arena.h>

namespace gen3d::models::nn {

namespace {

struct Entry {
  std::mutex mutex;                   // guards model and busy
  std::condition_variable done;       // signalled when a load ends
  bool busy = false;                  // a thread is loading
  std::shared_ptr<const void> model;  // set once
};

struct Cache {
  std::mutex mutex;
  std::map<std::string, std::shared_ptr<Entry>> entries;
};

Cache& cache() {
  static Cache c;
  return c;
}

}  // namespace

std::shared_ptr<const void> cached_model(const std::string& key,
                                         const std::function<std::shared_ptr<const void>()>& load) {
  std::shared_ptr<Entry> e;
  {
    std::lock_guard lock(cache().mutex);
    auto& slot = cache().entries[key];
    if (!slot) slot = std::make_shared<Entry>();
    e = slot;
  }
  // The first caller loads while later ones wait; a throwing load leaves the entry empty, so the
  // next caller retries. The load runs isolated: the loading thread, waiting for its own parallel
  // work, never picks up an outer task that could ask for this same model. (oneTBB 2021.8's
  // collaborative_call_once, used before, can leave every waiter asleep after the run ended.)
  std::unique_lock lock(e->mutex);
  e->done.wait(lock, [&] { return !e->busy; });
  if (e->model) return e->model;
  e->busy = true;
  lock.unlock();
  std::shared_ptr<const void> model;
  try {
    model = tbb::this_task_arena::isolate([&] { return load(); });
  } catch (...) {
    lock.lock();
    e->busy = false;
    lock.unlock();
    e->done.notify_all();
    throw;
  }
  lock.lock();
  e->model = model;
  e->busy = false;
  lock.unlock();
  e->done.notify_all();
  return model;
}

std::size_t shared_model_count() {
  std::lock_guard lock(cache().mutex);
  std::size_t n = 0;
  for (const auto& [key, e] : cache().entries) {
    std::lock_guard entry_lock(e->mutex);
    if (e->model) ++n;
  }
  return n;
}

void clear_shared_models() {
  std::lock_guard lock(cache().mutex);
  cache().entries.clear();
}

}  // namespace gen3d::models::nn
