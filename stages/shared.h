#pragma once
// Per-run objects shared by several stages, fetched through the stage context.

#include <memory>
#include <string>
#include <vector>

#include "models/core/device.h"
#include "pipeline/stage.h"
#include "render/raster_cache.h"
#include "stages/types.h"

namespace gen3d::stages {

// The run's raster cache: every stage asking for the same pose of the same mesh gets the same
// raster, computed once.
render::RasterCache& raster_cache(const pipeline::StageContext& ctx);

// Validation of an output file path: its directory must exist or be creatable (the nearest
// existing ancestor is a writable directory). Adds one sentence per problem.
void check_output_path(const std::string& path, std::vector<std::string>& problems);

// Creates the output file's directory (and parents) when missing; call right before writing.
void make_output_dir(const std::string& path);

// What a `precision` parameter means on this machine ("auto" resolved): the stage cache keys model
// stages by it, so a cache shared by CPUs with and without bf16 keeps their results apart.
std::string resolved_precision(const std::string& spelled);

// The `device` param of the shape networks' stages: cpu, or cuda (the network in bf16 on a GPU
// through the CUDA backend).
void add_device_param(pipeline::StageContract& c);
// A node's device against its precision: the CUDA backend runs bf16 only.
void check_device(const pipeline::ParamMap& params, std::vector<std::string>& problems);
// The node's device, its backend installed in this process; throws naming the node otherwise.
models::Device node_device(const pipeline::StageContext& ctx);

// Publishes the cache's counters (hits, misses, rasterizations, bytes, evictions) as gauges.
void report_cache(const pipeline::StageContext& ctx, const render::RasterCache& cache);

// How exactly view images land on the target's silhouettes, from each view's IoU: the lowest
// (0 for no views), with a gauge per view (`multiview.fit_view<v>.iou`) and one log line.
std::shared_ptr<ReferenceFit> view_fit(const pipeline::StageContext& ctx,
                                       const std::vector<double>& iou);

// Publishes how many views have an image (`multiview.views_with_images`), whichever stage made
// them.
void report_view_images(const pipeline::StageContext& ctx, const ImageList& images);

}  // namespace gen3d::stages
