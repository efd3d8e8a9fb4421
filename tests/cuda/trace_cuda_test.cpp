// The GPU's timeline for a trace (DeviceOps::start_timeline / take_timeline): the operations in
// issue order on the host clock, each kind merged across back-to-back launches, summing to what
// the profile (set_profiling / take_profile) measures for the same work.

#include <gtest/gtest.h>

#include <chrono>
#include <cmath>
#include <cstdio>
#include <random>
#include <string>
#include <vector>

#include "cuda_fixture.h"
#include "models/cuda/backend.h"
#include "models/nn/device_ops.h"
#include "models/nn/layers.h"
#include "models/nn/params.h"

namespace gen3d::models {
namespace {

using i64 = std::int64_t;
using clock = std::chrono::steady_clock;
using Spans = std::vector<nn::DeviceOps::TimelineSpan>;

Tensor random(const Shape& s, std::uint64_t seed, float stddev = 1.0f, float mean = 0.0f) {
  Tensor t(s);
  std::mt19937_64 rng(seed);
  std::normal_distribution<float> d(mean, stddev);
  for (float& v : t.span()) v = d(rng);
  return t;
}

double us(clock::duration d) {
  return std::chrono::duration<double, std::micro>(d).count();
}

std::vector<std::string> names(const Spans& spans) {
  std::vector<std::string> out;
  for (const auto& s : spans) out.push_back(s.name);
  return out;
}

// A linear layer, a LayerNorm and their activations on the GPU, the weights uploaded.
struct Work {
  static constexpr i64 kRows = 2048, kIn = 1024, kOut = 1024;
  nn::Linear layer;
  nn::LayerNorm norm;
  Tensor x, y;
  Work() {
    nn::RandomParams params([](const std::string&, Tensor&) {}, WeightStorage::kBF16);
    layer.set(params, random({kOut, kIn}, 1, 1.0f / 32.0f), random({kOut}, 2, 0.1f), kIn, kOut);
    norm.dim = kOut;
    norm.eps = 1e-6f;
    norm.weight = random({kOut}, 3, 0.2f, 1.0f);
    norm.bias = random({kOut}, 4, 0.1f);
    x = random({kRows, kIn}, 5).to(Device::kCuda);
    y = Tensor({kRows, kOut}, Device::kCuda);
    linear();
    layer_norm();  // uploads the parameters, outside any timeline
    ops().synchronize();
  }
  static const nn::DeviceOps& ops() { return nn::device_ops(Device::kCuda); }
  void linear() { ops().linear(layer, y.data(), kOut, x.data(), kIn, kRows); }
  void layer_norm() { ops().layer_norm(norm, y.data(), kOut, y.data(), kOut, kRows); }
  void silu() { ops().act_inplace(kernels::Act::kSilu, y.data(), kRows * kOut); }
  void add() { ops().add(y.data(), x.data(), kRows * kOut); }
};

TEST(CudaTimeline, OperationsInIssueOrderOnTheHostClockSummingToTheProfile) {
  GEN3D_REQUIRE_GPU();
  Work w;
  cuda::set_profiling(true);
  (void)cuda::take_profile();
  const clock::time_point before = clock::now();
  const std::uint64_t mark = Work::ops().start_timeline();
  for (int i = 0; i < 3; ++i) {
    w.linear();
    w.silu();
    w.layer_norm();
  }
  for (int i = 0; i < 5; ++i) w.add();  // back to back: merged where the gaps are small
  const Spans spans = Work::ops().take_timeline(mark);
  const clock::time_point after = clock::now();
  const auto profile = cuda::take_profile();
  cuda::set_profiling(false);

  ASSERT_GE(spans.size(), 10u) << ::testing::PrintToString(names(spans));
  ASSERT_LE(spans.size(), 14u) << ::testing::PrintToString(names(spans));
  for (std::size_t i = 0; i < spans.size(); ++i) {
    const char* want = i < 9 ? (i % 3 == 0   ? "linear"
                                : i % 3 == 1 ? "activation"
                                             : "layer_norm")
                             : "add";
    EXPECT_EQ(spans[i].name, want) << i;
    EXPECT_GE(us(spans[i].end - spans[i].start), 0.0) << i;
    // The reference event's host time is known to within its wait (tens of microseconds).
    EXPECT_GE(us(spans[i].start - before), -100.0) << i;
    EXPECT_LE(us(spans[i].end - after), 100.0) << i;
    if (i > 0) {
      EXPECT_GE(us(spans[i].start - spans[i - 1].end), -1.0) << "overlap at " << i;
    }
  }

  // The same work timed by the profile's own events: the sums agree but for the merged gaps.
  double profile_ms = 0;
  for (const auto& [name, ms] : profile) profile_ms += ms;
  double timeline_ms = 0;
  for (const auto& s : spans) timeline_ms += us(s.end - s.start) / 1e3;
  EXPECT_GT(profile_ms, 0.0);
  EXPECT_NEAR(timeline_ms, profile_ms, 0.1 * profile_ms + 0.05)
      << "timeline " << timeline_ms << " ms, profile " << profile_ms << " ms";
  std::printf("timeline: %zu spans, %.3f ms; profile %.3f ms\n", spans.size(), timeline_ms,
              profile_ms);
}

TEST(CudaTimeline, OverlappingCallersEachTakeTheWorkAfterTheirStart) {
  GEN3D_REQUIRE_GPU();
  Work w;
  const std::uint64_t first = Work::ops().start_timeline();
  w.linear();
  const std::uint64_t second = Work::ops().start_timeline();
  w.layer_norm();
  const Spans later = Work::ops().take_timeline(second);
  w.silu();
  const Spans earlier = Work::ops().take_timeline(first);
  EXPECT_EQ(names(later), std::vector<std::string>{"layer_norm"});
  EXPECT_EQ(names(earlier), (std::vector<std::string>{"linear", "activation"}));
  ASSERT_EQ(later.size(), 1u);
  ASSERT_EQ(earlier.size(), 2u);
  EXPECT_GE(us(later[0].start - earlier[0].end), -1.0);
  EXPECT_GE(us(earlier[1].start - later[0].end), -1.0);

  // Work with no one recording is on no timeline, and a new recording starts afresh.
  w.add();
  const std::uint64_t again = Work::ops().start_timeline();
  w.linear();
  EXPECT_EQ(names(Work::ops().take_timeline(again)), std::vector<std::string>{"linear"});
}

}  // namespace
}  // namespace gen3d::models
