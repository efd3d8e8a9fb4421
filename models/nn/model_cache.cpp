#include "models/nn/model_cache.h"

#include <map>
#include <mutex>

#include <oneapi/tbb/collaborative_call_once.h>

namespace gen3d::models::nn {

namespace {

struct Entry {
  tbb::collaborative_once_flag once;
  std::shared_ptr<const void> model;
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
  // Threads waiting for a load help its parallel work instead of blocking TBB workers; a
  // throwing load leaves the flag unset, so the next caller retries.
  tbb::collaborative_call_once(e->once, [&] { e->model = load(); });
  return e->model;
}

std::size_t shared_model_count() {
  std::lock_guard lock(cache().mutex);
  std::size_t n = 0;
  for (const auto& [key, e] : cache().entries)
    if (e->model) ++n;
  return n;
}

void clear_shared_models() {
  std::lock_guard lock(cache().mutex);
  cache().entries.clear();
}

}  // namespace gen3d::models::nn
