#include "render/raster_cache.h"

#include <oneapi/tbb/task_arena.h>
#include <spdlog/spdlog.h>

#include <condition_variable>
#include <cstring>

namespace gen3d::render {

struct RasterCache::Entry {
  std::mutex mutex;                      // guards raster and busy
  std::condition_variable done;          // signalled when a computation ends
  bool busy = false;                     // a thread is computing the raster
  std::shared_ptr<const Raster> raster;  // set once
  std::list<Key>::iterator lru_pos;      // valid while in map_ (guarded by RasterCache::mutex_)
  size_t bytes = 0;                      // accounted bytes (guarded by RasterCache::mutex_)
};

namespace {

// The entry's raster, computed by the first caller while later ones wait; a computation that
// throws leaves the entry empty for the next waiter to retry. The computation runs isolated: the
// computing thread, waiting for its own parallel work, never picks up an outer task that could
// ask for this same entry. (oneTBB 2021.8's collaborative_call_once was used here and hung
// `gen3d batch --jobs 2`: every waiter asleep after the computation had finished.)
template <class Entry, class Compute>
std::shared_ptr<const Raster> compute_once(Entry& e, Compute&& compute, bool& computed) {
  std::unique_lock lock(e.mutex);
  e.done.wait(lock, [&] { return !e.busy; });
  if (e.raster) return e.raster;
  e.busy = true;
  lock.unlock();
  std::shared_ptr<const Raster> raster;
  try {
    raster =
        tbb::this_task_arena::isolate([&] { return std::make_shared<const Raster>(compute()); });
  } catch (...) {
    lock.lock();
    e.busy = false;
    lock.unlock();
    e.done.notify_all();
    throw;
  }
  lock.lock();
  e.raster = raster;
  e.busy = false;
  lock.unlock();
  e.done.notify_all();
  computed = true;
  return raster;
}

}  // namespace

size_t RasterCache::KeyHash::operator()(const Key& k) const {
  uint64_t h = k.mesh ^ (k.uv_space ? 0x9e3779b97f4a7c15ull : 0);
  const auto mix = [&h](uint64_t v) { h ^= v + 0x9e3779b97f4a7c15ull + (h << 6) + (h >> 2); };
  for (double d : {k.elev, k.azim, k.distance, k.ortho_scale, k.near_plane, k.far_plane}) {
    const double canonical = d + 0.0;  // -0.0 == 0.0 must hash alike
    uint64_t bits;
    std::memcpy(&bits, &canonical, sizeof bits);
    mix(bits);
  }
  mix(static_cast<uint64_t>(k.width) << 32 | static_cast<uint32_t>(k.height));
  return static_cast<size_t>(h);
}

RasterCache::RasterCache(size_t byte_budget, const RasterOptions& options)
    : budget_(byte_budget), options_(options) {}

RasterCache::~RasterCache() = default;

template <class Compute>
std::shared_ptr<const Raster> RasterCache::lookup(const Key& key, Compute&& compute) {
  std::shared_ptr<Entry> entry;
  {
    std::lock_guard lock(mutex_);
    auto it = map_.find(key);
    if (it != map_.end()) {
      ++stats_.hits;
      entry = it->second;
      lru_.splice(lru_.begin(), lru_, entry->lru_pos);
    } else {
      ++stats_.misses;
      entry = std::make_shared<Entry>();
      lru_.push_front(key);
      entry->lru_pos = lru_.begin();
      map_.emplace(key, entry);
    }
  }
  bool computed = false;
  std::shared_ptr<const Raster> raster = compute_once(*entry, compute, computed);
  if (computed) account(key, entry);
  return raster;
}

void RasterCache::account(const Key& key, const std::shared_ptr<Entry>& entry) {
  std::lock_guard lock(mutex_);
  ++stats_.rasterizations;
  auto it = map_.find(key);
  if (it == map_.end() || it->second != entry) return;  // cleared meanwhile: not held
  {
    std::lock_guard entry_lock(entry->mutex);
    entry->bytes = entry->raster->bytes();
  }
  stats_.bytes += entry->bytes;
  // Evict least recently used entries (never the one just computed) until within budget.
  while (stats_.bytes > budget_ && lru_.size() > 1) {
    const Key victim_key = lru_.back();
    if (victim_key == key) break;
    auto victim = map_.find(victim_key);
    stats_.bytes -= victim->second->bytes;
    spdlog::debug("raster cache: evicting {}x{} raster ({} bytes) to stay within {} bytes",
                  victim_key.width, victim_key.height, victim->second->bytes, budget_);
    lru_.pop_back();
    map_.erase(victim);
    ++stats_.evictions;
  }
}

std::shared_ptr<const Raster> RasterCache::get(const mesh::Mesh& mesh, const Camera& camera,
                                               int width, int height) {
  return get(mesh.fingerprint(), mesh, camera, width, height);
}

std::shared_ptr<const Raster> RasterCache::get(uint64_t fingerprint, const mesh::Mesh& mesh,
                                               const Camera& camera, int width, int height) {
  Key key;
  key.mesh = fingerprint;
  key.elev = camera.elev;
  key.azim = camera.azim;
  key.distance = camera.distance;
  key.ortho_scale = camera.ortho_scale;
  key.near_plane = camera.near_plane;
  key.far_plane = camera.far_plane;
  key.width = width;
  key.height = height;
  return lookup(key, [&] { return rasterize(mesh, camera, width, height, options_); });
}

std::shared_ptr<const Raster> RasterCache::get_uv(const mesh::Mesh& mesh, int width, int height) {
  Key key;
  key.mesh = mesh.uv_fingerprint();
  key.uv_space = true;
  key.width = width;
  key.height = height;
  return lookup(key, [&] { return rasterize_uv(mesh, width, height, options_); });
}

RasterCacheStats RasterCache::stats() const {
  std::lock_guard lock(mutex_);
  RasterCacheStats s = stats_;
  s.entries = map_.size();
  return s;
}

void RasterCache::clear() {
  std::lock_guard lock(mutex_);
  map_.clear();
  lru_.clear();
  stats_.bytes = 0;
}

}  // namespace gen3d::render
