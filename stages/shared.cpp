#include "stages/shared.h"

namespace gen3d::stages {

render::RasterCache& raster_cache(const pipeline::StageContext& ctx) {
  return *ctx.shared().get_or_create<render::RasterCache>("raster_cache",
                                                          [] { return new render::RasterCache(); });
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
