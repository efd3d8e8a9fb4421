#pragma once
// Per-run objects shared by several stages, fetched through the stage context.

#include <cstdint>
#include <memory>
#include <string>
#include <vector>

#include "models/core/device.h"
#include "models/nn/device_ops.h"
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

// A model stage's device work in the trace: while alive, when the node's network runs on a
// device (not the CPU) and the run writes a trace (Profiler::device_timelines), the device times
// its operations with its own events (nn::DeviceOps::start_timeline); when it goes, it waits for
// the device and records what ran as spans on a track named for the device ("cuda:0"), category
// "gpu", this node's. Nothing otherwise. Construct it right before the network's work.
class DeviceTrace {
 public:
  DeviceTrace(const pipeline::StageContext& ctx, models::Device device);
  // Neither throws: a timeline that cannot be had is logged and left out of the trace.
  ~DeviceTrace();
  DeviceTrace(const DeviceTrace&) = delete;
  DeviceTrace& operator=(const DeviceTrace&) = delete;

 private:
  const pipeline::StageContext* ctx_ = nullptr;  // null: not recording
  models::Device device_;
  std::uint64_t mark_ = 0;
};

// DeviceTrace's record: `spans` (a timeline of `device`) on the device's track of the context's
// profiler, as spans of the context's node. Nothing without a profiler.
void record_device_timeline(const pipeline::StageContext& ctx, models::Device device,
                            const std::vector<models::nn::DeviceOps::TimelineSpan>& spans);

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
