#pragma once
// Process-wide sharing of loaded models: one load per key (a canonical folder path), shared
// read-only by every node and batch job. Concurrent requests for one key load it once; a failed
// load is retried (and fails again) by the next request.

#include <filesystem>
#include <map>
#include <memory>
#include <mutex>
#include <string>

namespace gen3d::models {

template <class T, class Load>
std::shared_ptr<const T> shared_model(const std::string& path, Load load) {
  struct Entry {
    std::once_flag once;
    std::shared_ptr<const T> model;
  };
  static std::mutex mutex;
  static std::map<std::string, std::shared_ptr<Entry>> entries;
  std::error_code ec;
  const std::filesystem::path canonical = std::filesystem::weakly_canonical(path, ec);
  std::shared_ptr<Entry> e;
  {
    std::lock_guard lock(mutex);
    auto& slot = entries[ec ? path : canonical.string()];
    if (!slot) slot = std::make_shared<Entry>();
    e = slot;
  }
  std::call_once(e->once, [&] { e->model = load(path); });
  return e->model;
}

}  // namespace gen3d::models
