#include "stages/shared.h"

#include <unistd.h>

#include <algorithm>
#include <filesystem>

#include <spdlog/spdlog.h>

#include "models/core/error.h"
#include "models/core/precision.h"

namespace gen3d::stages {

render::RasterCache& raster_cache(const pipeline::StageContext& ctx) {
  // Six views at 2048 plus the UV raster at 2048 (about 590 MiB) fit without eviction.
  constexpr size_t kBudget = size_t{1} << 30;
  return *ctx.shared().get_or_create<render::RasterCache>(
      "raster_cache", [] { return new render::RasterCache(kBudget); });
}

void check_output_path(const std::string& path, std::vector<std::string>& problems) {
  namespace fs = std::filesystem;
  const fs::path dir =
      fs::path(path).parent_path().empty() ? fs::path(".") : fs::path(path).parent_path();
  fs::path existing = dir;
  while (!existing.empty() && !fs::exists(existing)) existing = existing.parent_path();
  if (existing.empty()) existing = ".";
  if (!fs::is_directory(existing))
    problems.push_back("cannot create the output directory " + dir.string() + ": " +
                       existing.string() + " is not a directory");
  else if (access(existing.c_str(), W_OK) != 0)
    problems.push_back("output directory " + existing.string() + " is not writable");
}

void make_output_dir(const std::string& path) {
  const std::filesystem::path dir = std::filesystem::path(path).parent_path();
  if (!dir.empty()) std::filesystem::create_directories(dir);
}

void report_cache(const pipeline::StageContext& ctx, const render::RasterCache& cache) {
  const render::RasterCacheStats s = cache.stats();
  ctx.gauge("raster_cache.hits", static_cast<double>(s.hits));
  ctx.gauge("raster_cache.misses", static_cast<double>(s.misses));
  ctx.gauge("raster_cache.rasterizations", static_cast<double>(s.rasterizations));
  ctx.gauge("raster_cache.evictions", static_cast<double>(s.evictions));
  ctx.gauge("raster_cache.bytes", static_cast<double>(s.bytes));
}

void report_view_images(const pipeline::StageContext& ctx, const ImageList& images) {
  size_t with_image = 0;
  for (const auto& image : images) with_image += !image.empty();
  ctx.gauge("multiview.views_with_images", static_cast<double>(with_image));
}

void add_device_param(pipeline::StageContract& c) {
  c.choice("device", "cpu", {"cpu", "cuda"},
           "where the network runs: cpu, or cuda (bf16 on a GPU through the CUDA backend; its "
           "weights are uploaded once per process)");
}

void check_device(const pipeline::ParamMap& params, std::vector<std::string>& problems) {
  const auto d = params.find("device");
  const auto p = params.find("precision");
  if (d == params.end() || p == params.end()) return;
  const std::string& precision = std::get<std::string>(p->second);
  if (std::get<std::string>(d->second) == "cuda" && precision != "auto" && precision != "bf16")
    problems.push_back("device cuda runs the network in bf16: set precision to auto or bf16 (" +
                       precision + " runs on the CPU)");
}

models::Device node_device(const pipeline::StageContext& ctx) {
  const models::Device d = models::parse_device(ctx.param<std::string>("device"));
  try {
    models::ensure_device(d);
  } catch (const std::exception& e) {
    throw models::ModelError(ctx.node_id() + ": device " + models::device_name(d) + ": " +
                             e.what());
  }
  return d;
}

DeviceTrace::DeviceTrace(const pipeline::StageContext& ctx, models::Device device)
    : device_(device) {
  const pipeline::Profiler* profiler = ctx.profiler();
  if (device == models::Device::kCpu || !profiler || !profiler->device_timelines()) return;
  try {
    mark_ = models::nn::device_ops(device).start_timeline();
    ctx_ = &ctx;
  } catch (const std::exception& e) {  // a trace never fails a run
    spdlog::warn("{}: no {} timeline in the trace: {}", ctx.node_id(), models::device_name(device),
                 e.what());
  }
}

DeviceTrace::~DeviceTrace() {
  if (!ctx_) return;
  try {
    record_device_timeline(*ctx_, device_, models::nn::device_ops(device_).take_timeline(mark_));
  } catch (const std::exception& e) {
    spdlog::warn("{}: no {} timeline in the trace: {}", ctx_->node_id(),
                 models::device_name(device_), e.what());
  }
}

void record_device_timeline(const pipeline::StageContext& ctx, models::Device device,
                            const std::vector<models::nn::DeviceOps::TimelineSpan>& spans) {
  pipeline::Profiler* profiler = ctx.profiler();
  if (!profiler || spans.empty()) return;
  // One device of each kind in this process: the backend runs on device 0.
  const int track = profiler->track(std::string(models::device_name(device)) + ":0");
  for (const auto& s : spans)
    profiler->add_span(track, s.name, "gpu", ctx.node_id(), s.start, s.end);
}

std::string resolved_precision(const std::string& spelled) {
  return std::string(
      models::precision_name(models::resolve_precision(models::parse_precision(spelled))));
}

std::shared_ptr<ReferenceFit> view_fit(const pipeline::StageContext& ctx,
                                       const std::vector<double>& iou) {
  auto fit = std::make_shared<ReferenceFit>();
  if (iou.empty()) return fit;
  fit->iou = *std::min_element(iou.begin(), iou.end());
  for (size_t v = 0; v < iou.size(); ++v)
    ctx.gauge("multiview.fit_view" + std::to_string(v) + ".iou", iou[v]);
  spdlog::info("{}: the view images cover the mesh's silhouettes at IoU {:.4f} or more",
               ctx.node_id(), fit->iou);
  return fit;
}

}  // namespace gen3d::stages
