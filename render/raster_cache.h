#pragma once
// RasterCache: one rasterization per (mesh, pose, projection, resolution), shared immutably by
// every consumer (normal map, position map, back-projection of the same pose: 6 rasterizations
// instead of the reference's 18). Thread-safe; concurrent requests for one key compute it once
// while the others wait.
// Bounded by bytes with least-recently-used eviction; evicted rasters stay valid for holders.

#include <cstddef>
#include <cstdint>
#include <list>
#include <memory>
#include <mutex>
#include <unordered_map>

#include "mesh/mesh.h"
#include "render/camera.h"
#include "render/rasterizer.h"

namespace gen3d::render {

struct RasterCacheStats {
  uint64_t hits = 0;            // requests answered by an existing (or in-flight) entry
  uint64_t misses = 0;          // requests that created an entry
  uint64_t rasterizations = 0;  // rasterizations actually run (== misses unless one threw)
  uint64_t evictions = 0;       // entries dropped to stay within the byte budget
  size_t bytes = 0;             // bytes of the rasters currently held
  size_t entries = 0;           // entries currently held
};

class RasterCache {
 public:
  // Six views at 2048 x 2048 (20 bytes per pixel) plus a little room.
  static constexpr size_t kDefaultByteBudget = size_t{512} << 20;

  explicit RasterCache(size_t byte_budget = kDefaultByteBudget, const RasterOptions& options = {});
  ~RasterCache();
  RasterCache(const RasterCache&) = delete;
  RasterCache& operator=(const RasterCache&) = delete;

  // The raster of `mesh` seen by `camera` at width x height (rasterize(mesh, camera, ...)).
  std::shared_ptr<const Raster> get(const mesh::Mesh& mesh, const Camera& camera, int width,
                                    int height);
  // Same, with the mesh fingerprint computed once by the caller (mesh.fingerprint()).
  std::shared_ptr<const Raster> get(uint64_t fingerprint, const mesh::Mesh& mesh,
                                    const Camera& camera, int width, int height);
  // The texel-space raster of the mesh's UVs (rasterize_uv).
  std::shared_ptr<const Raster> get_uv(const mesh::Mesh& mesh, int width, int height);

  RasterCacheStats stats() const;
  size_t byte_budget() const { return budget_; }
  void clear();  // drops every entry (held rasters stay valid); counters are kept

 private:
  struct Key {
    uint64_t mesh = 0;
    bool uv_space = false;
    double elev = 0, azim = 0, distance = 0, ortho_scale = 0, near_plane = 0, far_plane = 0;
    int width = 0, height = 0;
    bool operator==(const Key&) const = default;
  };
  struct KeyHash {
    size_t operator()(const Key& k) const;
  };
  struct Entry;

  template <class Compute>
  std::shared_ptr<const Raster> lookup(const Key& key, Compute&& compute);
  void account(const Key& key, const std::shared_ptr<Entry>& entry);

  size_t budget_;
  RasterOptions options_;
  mutable std::mutex mutex_;
  std::list<Key> lru_;  // front = most recently used
  std::unordered_map<Key, std::shared_ptr<Entry>, KeyHash> map_;
  RasterCacheStats stats_;
};

}  // namespace gen3d::render
