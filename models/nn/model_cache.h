#pragma once
// The process-wide model cache: one load per key, shared read-only by every node, run and batch
// job. Concurrent requests for one key load it once (the others wait); requests for different
// keys load in parallel; a failed load is retried (and fails again) by the next request.

#include <cstddef>
#include <functional>
#include <memory>
#include <string>
#include <typeinfo>

namespace gen3d::models::nn {

std::shared_ptr<const void> cached_model(const std::string& key,
                                         const std::function<std::shared_ptr<const void>()>& load);

// The model of type T for `key` (e.g. a canonical folder path plus options), loaded by
// `load()` (returning a T) on first use.
template <class T, class Load>
std::shared_ptr<const T> shared_model(const std::string& key, Load&& load) {
  return std::static_pointer_cast<const T>(cached_model(
      std::string(typeid(T).name()) + "|" + key,
      [&]() -> std::shared_ptr<const void> { return std::make_shared<const T>(load()); }));
}

std::size_t shared_model_count();  // models currently held, of every type
void clear_shared_models();        // drops the cache's references (tests)

}  // namespace gen3d::models::nn
