// The plain UNet2DConditionModel on the GPU (golden/texmodels/README.md §1): every unet_* golden
// set's stored intermediates and output against the official float32 values under the UNets'
// bf16 tolerance (bf16_golden.h: kUNetNmse, the tolerance the CPU's bf16 path meets); the GPU's
// output against the CPU's bf16 output; two GPU runs against each other; the prompt's projected
// keys and values and a DeepCache pass on the GPU against the same calls on the CPU. Golden files
// from $GEN3D_GOLDEN_DIR (default tests/data/golden); a test skips when they are absent.

#include <gtest/gtest.h>

#include <cstdio>
#include <filesystem>
#include <map>
#include <string>
#include <vector>

#include <nlohmann/json.hpp>

#include "cuda_fixture.h"
#include "models/bf16_golden.h"
#include "models/core/error.h"
#include "models/core/safetensors.h"
#include "models/paint/texmodels_golden.h"
#include "models/paint/unet.h"

namespace gen3d::models {
namespace {

using json = nlohmann::json;
using namespace texmodels_golden;

struct GoldenSet {
  std::string part;
  UNetConfig config;
  std::string weights;  // fp32 weight file
  std::shared_ptr<const SafetensorsFile> fwd;
  Tensor sample, text;  // NHWC sample, (Bt, T, D) text
  std::vector<float> timesteps;
};

// Every unet_* set with its forward file and fp32 weights.
std::vector<GoldenSet> golden_sets() {
  std::vector<GoldenSet> sets;
  if (!std::filesystem::exists(golden_file("config.json"))) return sets;
  const json cfg = load_config();
  for (const auto& [part, entry] : cfg.items()) {
    if (part.rfind("unet_", 0) != 0) continue;
    GoldenSet s;
    s.part = part;
    s.weights = golden_file(part + ".weights.fp32.safetensors");
    const std::string fwd = golden_file(part + ".forward.safetensors");
    if (!std::filesystem::exists(fwd) || !std::filesystem::exists(s.weights)) continue;
    s.fwd = SafetensorsFile::open(fwd);
    s.config = UNetConfig::parse(entry.at("cfg").dump(), part);
    s.sample = to_nhwc(s.fwd->to_f32("in.sample"));
    const Tensor t = s.fwd->to_f32("in.timestep");
    s.timesteps.assign(t.data(), t.data() + t.numel());
    s.text = s.fwd->to_f32("in.encoder_hidden_states");
    sets.push_back(std::move(s));
  }
  return sets;
}

UNet2DCondition load(const GoldenSet& s, WeightStorage storage, Device device) {
  return UNet2DCondition::load(s.config, SafetensorsFile::open(s.weights), storage, device);
}

TEST(UNetCudaGolden, EveryStoredTensorWithinTheBf16Tolerance) {
  GEN3D_REQUIRE_GPU();
  const auto sets = golden_sets();
  if (sets.empty()) GTEST_SKIP() << "golden data absent: " << golden_dir();
  for (const GoldenSet& s : sets) {
    SCOPED_TRACE(s.part);
    const UNet2DCondition gpu = load(s, WeightStorage::kF32, Device::kCuda);
    ASSERT_EQ(gpu.device(), Device::kCuda);
    std::map<std::string, Tensor> probes;
    const Tensor out =
        gpu.forward(s.sample, s.timesteps, s.text, [&](const std::string& name, const Tensor& v) {
          EXPECT_EQ(v.device(), Device::kCpu) << name;
          probes[name] = v.rank() == 4 ? to_nchw(v) : v.clone();
        });
    ASSERT_EQ(out.device(), Device::kCpu);
    bf16test::NmseCheck check(s.part + " on the GPU", bf16test::kUNetNmse);
    for (const TensorInfo& info : s.fwd->tensors()) {
      if (info.name.rfind("inter.", 0) != 0) continue;
      const std::string name = info.name.substr(6);
      ASSERT_TRUE(probes.count(name)) << "no probe " << name;
      const Tensor g = s.fwd->to_f32(info.name);
      ASSERT_EQ(probes.at(name).numel(), g.numel()) << name;
      check.add(info.name, probes.at(name).data(), g.data(), g.numel());
    }
    const Tensor g = s.fwd->to_f32("out.sample"), o = to_nchw(out);
    ASSERT_EQ(o.numel(), g.numel());
    check.add("out.sample", o.data(), g.data(), g.numel());
    EXPECT_GT(check.count(), 1);
    check.report();
  }
}

TEST(UNetCudaGolden, GpuAgreesWithTheCpuBf16PathAndWithItself) {
  GEN3D_REQUIRE_GPU();
  const auto sets = golden_sets();
  if (sets.empty()) GTEST_SKIP() << "golden data absent: " << golden_dir();
  for (const GoldenSet& s : sets) {
    SCOPED_TRACE(s.part);
    const UNet2DCondition gpu = load(s, WeightStorage::kBF16, Device::kCuda);
    const UNet2DCondition cpu = load(s, WeightStorage::kBF16, Device::kCpu);
    // Untraced, twice (weights stay uploaded): the same output, and near the CPU's bf16 output.
    const Tensor a = gpu.forward(s.sample, s.timesteps, s.text);
    const Tensor b = gpu.forward(s.sample, s.timesteps, s.text);
    const Tensor c = cpu.forward(s.sample, s.timesteps, s.text);
    ASSERT_EQ(a.shape(), c.shape());
    for (std::int64_t i = 0; i < a.numel(); ++i) ASSERT_EQ(a.data()[i], b.data()[i]) << i;
    const double e = bf16test::nmse(a.data(), c.data(), c.numel());
    std::printf("[ info ] %s GPU vs CPU bf16 output: nmse %.3g\n", s.part.c_str(), e);
    EXPECT_LE(e, bf16test::kUNetNmse);

    // The time embedding runs on the GPU and comes back to the host.
    const Tensor ta = gpu.time_embedding(s.timesteps), tc = cpu.time_embedding(s.timesteps);
    ASSERT_EQ(ta.device(), Device::kCpu);
    ASSERT_EQ(ta.shape(), tc.shape());
    EXPECT_LE(bf16test::nmse(ta.data(), tc.data(), tc.numel()), bf16test::kUNetNmse);

    // The prompt's keys and values projected once (on the GPU, host copies accepted too): the
    // same GEMMs on the same rows as the plain pass.
    const std::vector<Tensor> kv = gpu.text_kv(s.text);
    ASSERT_EQ(kv.size(), gpu.transformer_sites().size());
    for (const Tensor& t : kv) EXPECT_EQ(t.device(), Device::kCuda);
    std::vector<Tensor> kv_host;
    for (const Tensor& t : kv) kv_host.push_back(t.to(Device::kCpu));
    const std::vector<Tensor>* both[] = {&kv, &kv_host};
    for (const std::vector<Tensor>* keys : both) {
      UNetCall call;
      call.text_kv = keys;
      const Tensor k = gpu.forward(s.sample, s.timesteps, s.text, call);
      const double ek = bf16test::nmse(k.data(), a.data(), a.numel());
      std::printf("[ info ] %s GPU with projected prompt vs plain: nmse %.3g\n", s.part.c_str(),
                  ek);
      EXPECT_LE(ek, 1e-10);
    }
  }
}

// DeepCache on the GPU: a full pass stores the deep features on the device, and a shallow pass
// on them matches the CPU's bf16 shallow pass.
TEST(UNetCudaGolden, DeepCacheOnTheGpu) {
  GEN3D_REQUIRE_GPU();
  const auto sets = golden_sets();
  if (sets.empty()) GTEST_SKIP() << "golden data absent: " << golden_dir();
  for (const GoldenSet& s : sets) {
    SCOPED_TRACE(s.part);
    if (s.config.levels() < 2) continue;
    const UNet2DCondition gpu = load(s, WeightStorage::kBF16, Device::kCuda);
    const UNet2DCondition cpu = load(s, WeightStorage::kBF16, Device::kCpu);
    UNetFeatureCache gc, cc;
    UNetCall gcall, ccall;
    gcall.cache = &gc;
    ccall.cache = &cc;
    const Tensor gfull = gpu.forward(s.sample, s.timesteps, s.text, gcall);
    const Tensor cfull = cpu.forward(s.sample, s.timesteps, s.text, ccall);
    ASSERT_EQ(gc.deep.device(), Device::kCuda);
    ASSERT_EQ(gc.deep.shape(), cc.deep.shape());
    EXPECT_LE(bf16test::nmse(gfull.data(), cfull.data(), cfull.numel()), bf16test::kUNetNmse);
    gcall.reuse_deep = ccall.reuse_deep = true;
    const Tensor g = gpu.forward(s.sample, s.timesteps, s.text, gcall);
    const Tensor c = cpu.forward(s.sample, s.timesteps, s.text, ccall);
    ASSERT_EQ(g.shape(), c.shape());
    const double e = bf16test::nmse(g.data(), c.data(), c.numel());
    std::printf("[ info ] %s GPU vs CPU bf16 DeepCache pass: nmse %.3g\n", s.part.c_str(), e);
    EXPECT_LE(e, bf16test::kUNetNmse);
  }
}

// A hook on a GPU UNet gets the block's tensors on the GPU, at every transformer site.
TEST(UNetCudaGolden, HooksSeeTheGpuTensors) {
  GEN3D_REQUIRE_GPU();
  const auto sets = golden_sets();
  if (sets.empty()) GTEST_SKIP() << "golden data absent: " << golden_dir();
  const GoldenSet& s = sets.front();
  const UNet2DCondition gpu = load(s, WeightStorage::kBF16, Device::kCuda);
  std::vector<int> seen;
  const TransformerHook hook = [&](int site, const Tensor& h, Tensor& x) {
    EXPECT_EQ(h.device(), Device::kCuda);
    EXPECT_EQ(x.device(), Device::kCuda);
    seen.push_back(site);
  };
  UNetCall call;
  call.hook = &hook;
  (void)gpu.forward(s.sample, s.timesteps, s.text, call);
  ASSERT_EQ(seen.size(), gpu.transformer_sites().size());
  for (std::size_t i = 0; i < seen.size(); ++i) EXPECT_EQ(seen[i], static_cast<int>(i));
}

}  // namespace
}  // namespace gen3d::models
