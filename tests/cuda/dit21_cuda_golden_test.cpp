// The 2.1 DiT (HunyuanDiTPlain, with its mixture of experts) on the GPU: the golden set's forward
// pass under the bf16 check the CPU's bf16 mode meets (dit21_golden.h: every act.* tensor, the
// output, and the routing wherever the reference's gate decides by a clear margin); the GPU
// against the CPU's bf16 output; and the step caches' paths (branches reported to the host,
// image rows set, branches predicted) through the sampler.

#include <gtest/gtest.h>

#include <cmath>
#include <cstdio>

#include "cuda_fixture.h"
#include "models/bf16_golden.h"
#include "models/shape/dit21.h"
#include "models/shape/dit21_golden.h"
#include "models/shape/sampler.h"
#include "models/shape/step_cache.h"

namespace gen3d::models {
namespace {

using namespace dit21test;

#define REQUIRE_DIT21_GOLDEN()                                  \
  do {                                                          \
    REQUIRE_GOLDEN(set_file("dit21_forward.safetensors"));      \
    REQUIRE_GOLDEN(set_file("dit21_weights.fp16.safetensors")); \
    REQUIRE_GOLDEN(set_file("sampler21.safetensors"));          \
  } while (0)

TEST(DiT21CudaGolden, ForwardOnTheGpuWithinTheBf16Tolerance) {
  GEN3D_REQUIRE_GPU();
  REQUIRE_DIT21_GOLDEN();
  reduced_forward(WeightStorage::kBF16, "DiT21 on the GPU", bf16test::kNetworkNmse, "bf16",
                  Device::kCuda);
}

TEST(DiT21CudaGolden, GpuAgainstCpuBf16AndItself) {
  GEN3D_REQUIRE_GPU();
  REQUIRE_DIT21_GOLDEN();
  const auto gpu = golden_model(WeightStorage::kBF16, Device::kCuda);
  const auto cpu = golden_model(WeightStorage::kBF16, Device::kCpu);
  GoldenForward g;
  const Tensor a = gpu.forward(g.x, g.t, g.ctx), b = gpu.forward(g.x, g.t, g.ctx);
  const Tensor c = cpu.forward(g.x, g.t, g.ctx);
  ASSERT_EQ(a.device(), Device::kCpu);
  ASSERT_EQ(a.shape(), c.shape());
  for (std::int64_t i = 0; i < a.numel(); ++i) ASSERT_EQ(a.data()[i], b.data()[i]) << i;
  const double e = bf16test::nmse(a.data(), c.data(), c.numel());
  std::printf("[ info ] DiT21 GPU vs CPU bf16 output: nmse %.3g\n", e);
  EXPECT_LE(e, bf16test::kNetworkNmse);
  // Only the routed rows ran through experts, as on the CPU.
  const MoEUsage u = gpu.moe_usage();
  EXPECT_GT(u.tokens, 0);
  EXPECT_EQ(u.routed_rows, u.tokens * gpu.config().moe_top_k);
}

Tensor sample(const HunyuanDiTPlain& m, StepCache* cache) {
  const auto file = SafetensorsFile::open(set_file("sampler21.safetensors"));
  SamplerOptions opt;
  opt.steps = 10;
  opt.guidance_scale = golden_json()["golden"]["sampler21"]["guidance_scale"].get<double>();
  FlowMatchSampler s(m, opt, cache);
  s.start(file->to_f32("in.initial_latents"), file->to_f32("in.cond_context"));
  while (!s.done()) s.step();
  return s.latents().clone();
}

TEST(DiT21CudaGolden, StepCachesOnTheGpu) {
  GEN3D_REQUIRE_GPU();
  REQUIRE_DIT21_GOLDEN();
  const auto gpu = golden_model(WeightStorage::kBF16, Device::kCuda);
  const auto cpu = golden_model(WeightStorage::kBF16, Device::kCpu);
  const Tensor base = sample(gpu, nullptr);
  // A threshold of zero computes every branch and reports each to the host: the same latents.
  StepCacheConfig fb;
  fb.method = CacheMethod::kFBCache;
  fb.fbcache.rel_l1_thresh = 0.0;
  auto fb0 = make_step_cache(fb);
  const Tensor reported = sample(gpu, fb0.get());
  for (std::int64_t i = 0; i < base.numel(); ++i)
    ASSERT_EQ(reported.data()[i], base.data()[i]) << i;
  // Skipping (image rows set from the host) and predicting (branches added from the host): the
  // GPU follows the CPU's bf16 run of the same cache.
  fb.fbcache.rel_l1_thresh = 1e9;
  StepCacheConfig ts;
  ts.method = CacheMethod::kTaylorSeer;
  for (const StepCacheConfig& c : {fb, ts}) {
    auto on_gpu = make_step_cache(c), on_cpu = make_step_cache(c);
    const Tensor a = sample(gpu, on_gpu.get()), b = sample(cpu, on_cpu.get());
    EXPECT_EQ(on_gpu->report().full, on_cpu->report().full);
    EXPECT_GT(on_gpu->report().skipped + on_gpu->report().predicted, 0);
    const double e = bf16test::nmse(a.data(), b.data(), b.numel());
    std::printf("[ info ] DiT21 %s on the GPU vs the CPU's bf16: latents nmse %.3g\n",
                on_gpu->report().method.c_str(), e);
    EXPECT_LE(e, bf16test::kNetworkNmse);
  }
}

}  // namespace
}  // namespace gen3d::models
