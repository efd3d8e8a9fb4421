// The 2.0 DiT on the GPU against the golden float32 outputs of the official code, with the bf16
// tolerance of the CPU's bf16 path (bf16_golden.h): every act.* tensor and the output; and the
// GPU's output against the CPU's bf16 output. Golden files from $GEN3D_GOLDEN_DIR (default
// tests/data/golden); a test skips when they are absent.

#include <gtest/gtest.h>

#include <filesystem>

#include "cuda_fixture.h"
#include "models/bf16_golden.h"
#include "models/core/safetensors.h"
#include "models/shape/dit.h"
#include "support/paths.h"

namespace gen3d::models {
namespace {

std::string golden_file(const std::string& name) {
  return test::env_or("GEN3D_GOLDEN_DIR", test::source_dir() + "/tests/data/golden") + "/" + name;
}

TEST(DiTCudaGolden, ForwardOnTheGpuWithinTheBf16Tolerance) {
  GEN3D_REQUIRE_GPU();
  const auto w = golden_file("dit_weights.fp32.safetensors");
  const auto fwd = golden_file("dit_forward.safetensors");
  const auto cfg_file = golden_file("config.json");
  for (const auto& f : {w, fwd, cfg_file})
    if (!std::filesystem::exists(f)) GTEST_SKIP() << "golden file absent: " << f;
  const DiTConfig cfg = DiTConfig::from_file(cfg_file, "model");
  const auto gpu = Hunyuan3DDiT::load(cfg, w, {WeightStorage::kF32, Device::kCuda});
  const auto cpu = Hunyuan3DDiT::load(cfg, w, {WeightStorage::kBF16, Device::kCpu});
  auto file = SafetensorsFile::open(fwd);
  const Tensor x = file->to_f32("in.x"), t = file->to_f32("in.t"), ctx = file->to_f32("in.context");

  bf16test::NmseCheck check("DiT on the GPU", bf16test::kNetworkNmse);
  Hunyuan3DDiT::TraceFn fn = [&](const std::string& name, const Tensor& v) {
    EXPECT_EQ(v.device(), Device::kCpu) << name;
    if (name.rfind("act.", 0) != 0) return;
    const TensorInfo* info = file->find(name);
    if (!info) return;
    const Tensor ref = file->to_f32(*info);
    ASSERT_EQ(ref.numel(), v.numel()) << name;
    check.add(name, v.data(), ref.data(), ref.numel());
  };
  const Tensor out = gpu.forward(x, t, ctx, nullptr, &fn);
  ASSERT_EQ(out.device(), Device::kCpu);
  const Tensor ref_out = file->to_f32("out");
  ASSERT_EQ(out.shape(), ref_out.shape());
  check.add("out", out.data(), ref_out.data(), ref_out.numel());
  EXPECT_GT(check.count(), 1);
  check.report();

  // Untraced, twice (weights stay uploaded): the same output, and near the CPU's bf16 output.
  const Tensor a = gpu.forward(x, t, ctx), b = gpu.forward(x, t, ctx);
  const Tensor c = cpu.forward(x, t, ctx);
  for (std::int64_t i = 0; i < a.numel(); ++i) ASSERT_EQ(a.data()[i], b.data()[i]) << i;
  const double e = bf16test::nmse(a.data(), c.data(), c.numel());
  std::printf("[ info ] DiT GPU vs CPU bf16 output: nmse %.3g\n", e);
  EXPECT_LE(e, bf16test::kNetworkNmse);
}

}  // namespace
}  // namespace gen3d::models
