#pragma once
// Per-run objects shared by several stages, fetched through the stage context.

#include "pipeline/stage.h"
#include "render/raster_cache.h"

namespace gen3d::stages {

// The run's raster cache: every stage asking for the same pose of the same mesh gets the same
// raster, computed once.
render::RasterCache& raster_cache(const pipeline::StageContext& ctx);

// Publishes the cache's counters (hits, misses, rasterizations, bytes, evictions) as gauges.
void report_cache(const pipeline::StageContext& ctx, const render::RasterCache& cache);

}  // namespace gen3d::stages
