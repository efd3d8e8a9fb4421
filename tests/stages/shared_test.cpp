// The model stages' device timeline in the trace (stages/shared.h: DeviceTrace,
// record_device_timeline), with a made-up timeline: no GPU is needed.

#include <gtest/gtest.h>

#include <chrono>
#include <vector>

#include <nlohmann/json.hpp>

#include "models/nn/device_ops.h"
#include "pipeline/profiler.h"
#include "pipeline/stage.h"
#include "stages/shared.h"

namespace gen3d::test {
namespace {

using models::Device;
using std::chrono::microseconds;
using Spans = std::vector<models::nn::DeviceOps::TimelineSpan>;

pipeline::StageContext context(pipeline::Profiler* profiler) {
  pipeline::StageContext::Wiring w;
  w.node_id = "denoise";
  w.profiler = profiler;
  return pipeline::StageContext(std::move(w));
}

int gpu_spans(const pipeline::Profiler& p) {
  int n = 0;
  for (const auto& s : p.spans()) n += s.category == "gpu";
  return n;
}

TEST(DeviceTimeline, GoesOnTheDevicesTrackAsTheNodesSpans) {
  pipeline::Profiler p;
  const auto ctx = context(&p);
  const auto t0 = p.origin();
  const Spans spans = {{"linear", t0 + microseconds(100), t0 + microseconds(180)},
                       {"attention", t0 + microseconds(185), t0 + microseconds(400)}};
  stages::record_device_timeline(ctx, Device::kCuda, spans);
  { auto cpu = ctx.span("step 0"); }

  const int track = p.track("cuda:0");
  std::vector<pipeline::SpanRecord> on_track;
  for (const auto& s : p.spans())
    if (s.thread == track) on_track.push_back(s);
  ASSERT_EQ(on_track.size(), 2u);
  EXPECT_EQ(on_track[0].name, "linear");
  EXPECT_EQ(on_track[0].category, "gpu");
  EXPECT_EQ(on_track[0].node, "denoise");
  EXPECT_EQ(on_track[0].start_ns, 100'000);
  EXPECT_EQ(on_track[0].dur_ns, 80'000);
  EXPECT_EQ(on_track[1].name, "attention");
  EXPECT_EQ(on_track[1].start_ns, 185'000);
  EXPECT_EQ(on_track[1].dur_ns, 215'000);

  // In the Chrome trace: a thread named for the device, beside the stage's own thread.
  const auto trace = nlohmann::json::parse(p.chrome_trace_json());
  bool named = false;
  for (const auto& e : trace.at("traceEvents"))
    if (e.at("ph") == "M" && e.at("name") == "thread_name" && e.at("tid") == track)
      named = e.at("args").at("name") == "cuda:0";
  EXPECT_TRUE(named);
}

TEST(DeviceTimeline, NothingWithoutAProfilerOrSpans) {
  stages::record_device_timeline(
      context(nullptr), Device::kCuda,
      {{"linear", {}, std::chrono::steady_clock::time_point{} + microseconds(5)}});
  pipeline::Profiler p;
  stages::record_device_timeline(context(&p), Device::kCuda, {});
  EXPECT_EQ(gpu_spans(p), 0);
}

TEST(DeviceTrace, RecordsNothingOnTheCpu) {
  // The CPU has no timeline of its own.
  const auto& cpu = models::nn::device_ops(Device::kCpu);
  EXPECT_TRUE(cpu.take_timeline(cpu.start_timeline()).empty());
  pipeline::Profiler p;
  p.set_device_timelines(true);
  const auto ctx = context(&p);
  { const stages::DeviceTrace trace(ctx, Device::kCpu); }
  EXPECT_EQ(gpu_spans(p), 0);
}

TEST(DeviceTrace, AsksNoDeviceUnlessATraceIsWritten) {
  // This binary has no CUDA backend: asking for its ops would throw. With device timelines off
  // (a run without --trace), or with no profiler, the device is never asked.
  pipeline::Profiler p;
  const auto ctx = context(&p);
  { const stages::DeviceTrace trace(ctx, Device::kCuda); }
  { const stages::DeviceTrace trace(context(nullptr), Device::kCuda); }
  EXPECT_EQ(gpu_spans(p), 0);
}

TEST(DeviceTrace, ADeviceWithoutABackendFailsNothing) {
  // Tracing never fails a run: a device this process cannot time is logged and left out.
  pipeline::Profiler p;
  p.set_device_timelines(true);
  const auto ctx = context(&p);
  EXPECT_NO_THROW({ const stages::DeviceTrace trace(ctx, Device::kCuda); });
  EXPECT_EQ(gpu_spans(p), 0);
}

}  // namespace
}  // namespace gen3d::test
