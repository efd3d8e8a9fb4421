#include "stages/shared.h"

namespace gen3d::stages {

render::RasterCache& raster_cache(const pipeline::StageContext& ctx) {
  // Six views at 2048 plus the UV raster at 2048 (about 590 MiB) fit without eviction.
  constexpr size_t kBudget = size_t{1} << 30;
  return *ctx.shared().get_or_create<render::RasterCache>(
      "raster_cache", [] { return new render::RasterCache(kBudget); });
}

void report_cache(const pipeline::StageContext& ctx, const render::RasterCache& cache) {
  const render::RasterCacheStats s = cache.stats();
  ctx.gauge("raster_cache.hits", static_cast<double>(s.hits));
  ctx.gauge("raster_cache.misses", static_cast<double>(s.misses));
  ctx.gauge("raster_cache.rasterizations", static_cast<double>(s.rasterizations));
  ctx.gauge("raster_cache.evictions", static_cast<double>(s.evictions));
  ctx.gauge("raster_cache.bytes", static_cast<double>(s.bytes));
}

}  // namespace gen3d::stages
