// The 2.1 PBR paint UNet2.5D (PbrUNet) on the GPU: the CFG call of paint21_unet.forward.safetensors
// with every stored tensor (reference features, the reference pass, the projected DINO tokens,
// every main-UNet intermediate, the traced block's branches, the output) against the official
// float32 values under the tolerance the CPU's bf16 golden test uses (bf16_golden.h kUNetNmse);
// the GPU's output against the CPU's bf16 output and against itself; and the keys / values
// projected once per generation (PbrUNet::project) against the plain call. Golden files from
// $GEN3D_GOLDEN_H21_DIR (default tests/data/golden/hunyuan3d-2.1), paint21/ inside; a test skips
// when they are absent.

#include <gtest/gtest.h>

#include <cstdio>
#include <cstring>
#include <filesystem>
#include <fstream>
#include <map>
#include <string>
#include <vector>

#include <nlohmann/json.hpp>

#include "cuda_fixture.h"
#include "models/bf16_golden.h"
#include "models/core/error.h"
#include "models/core/safetensors.h"
#include "models/kernels/conv.h"
#include "models/paint/paint21_golden.h"
#include "models/paint/pbr_unet.h"
#include "support/paths.h"

namespace gen3d::models {
namespace {

using json = nlohmann::json;
using i64 = std::int64_t;
using namespace paint21_golden;

// A host copy (probes and results are compared on the host).
Tensor host(const Tensor& t) {
  return t.device() == Device::kCpu ? t.clone() : t.to(Device::kCpu);
}

// The stored CFG call's inputs (paint21/README.md): the inputs repeated for the ref_scale rows,
// DINO zeros for every row but the last ("full").
struct Golden {
  json cfg;
  std::shared_ptr<const SafetensorsFile> fwd;
  UNetConfig base;
  std::string weights;
  PositionMaps positions_f16;  // in.position_maps, the bits the UNet's view reads
  std::vector<float> ref_scale;
  Tensor sample, normals, positions, ref_latents, prompt, dino;
  int num_ref = 1;
  i64 latent = 0;
  float timestep = 0.0f;

  static bool present() {
    return std::filesystem::exists(set_file("paint21_unet.forward.safetensors")) &&
           std::filesystem::exists(set_file("paint21_unet.weights.fp16.safetensors")) &&
           std::filesystem::exists(set_file("config.json"));
  }

  Golden() {
    std::ifstream in(set_file("config.json"));
    cfg = json::parse(in);
    fwd = SafetensorsFile::open(set_file("paint21_unet.forward.safetensors"));
    base = UNetConfig::parse(cfg.at("unet").dump(), "paint21 unet");
    weights = set_file("paint21_unet.weights.fp16.safetensors");
    const SafetensorsFile& f = *fwd;
    positions_f16 = position_maps(f);
    const Tensor rs = f.to_f32("in.ref_scale");
    ref_scale.assign(rs.data(), rs.data() + rs.numel());
    const i64 R = rs.numel();
    sample = rows_nhwc(f, "in.sample", R);  // (R·2·N, h, h, 4)
    normals = rows_nhwc(f, "in.embeds_normal", R);
    positions = rows_nhwc(f, "in.embeds_position", R);
    num_ref = static_cast<int>(f.find("in.ref_latents")->shape.at(1));
    ref_latents = rows_nhwc(f, "in.ref_latents");  // one item: all CFG rows equal
    prompt = f.to_f32("in.learned_prompt");        // (1, 2, T, D)
    const Tensor dino_in = f.to_f32("in.dino_hidden_states");
    dino = Tensor({R, dino_in.dim(1), dino_in.dim(2)});
    std::memcpy(dino.data() + (R - 1) * dino_in.numel(), dino_in.data(),
                sizeof(float) * dino_in.numel());
    latent = sample.dim(1);
    timestep = f.to_f32("in.timestep").data()[0];
  }

  std::unique_ptr<PbrUNet> load(Device device) const {
    return PbrUNet::load(base, weights, WeightStorage::kBF16, device);
  }

  // The plain call's condition (reference features, DINO tokens, position encodings).
  PbrCondition condition(const PbrUNet& net) const {
    return net.condition(ref_latents, num_ref, dino, positions_f16.maps, latent);
  }

  Tensor forward(const PbrUNet& net, const PbrCondition& cond, const UNetProbe& probe = {}) const {
    return net.forward(sample, normals, positions, timestep, prompt, cond, ref_scale, 1.0f, probe);
  }
};

#define REQUIRE_PAINT21_GOLDEN()                                                    \
  do {                                                                              \
    if (!Golden::present()) GTEST_SKIP() << "golden data absent: " << set_file(""); \
  } while (0)

TEST(PbrUNetCudaGolden, EveryStoredTensorWithinTheBf16Tolerance) {
  GEN3D_REQUIRE_GPU();
  REQUIRE_PAINT21_GOLDEN();
  const Golden g;
  const auto net = g.load(Device::kCuda);
  ASSERT_EQ(net->device(), Device::kCuda);
  auto as_stored = [](const Tensor& t) { return t.rank() == 4 ? to_nchw(t) : t.clone(); };

  std::map<std::string, Tensor> dual_probes, probes;
  PbrCondition cond;
  cond.ref =
      net->reference_features(g.ref_latents, g.num_ref, [&](const std::string& n, const Tensor& v) {
        EXPECT_EQ(v.device(), Device::kCpu) << n;
        dual_probes[n] = as_stored(v);
      });
  cond.dino = net->project_dino(g.dino);
  net->prepare_positions(cond, g.positions_f16.maps, g.latent);
  // What the condition caches lives on the GPU.
  ASSERT_FALSE(cond.ref.layers.empty());
  for (const auto& [name, t] : cond.ref.layers) EXPECT_EQ(t.device(), Device::kCuda) << name;
  EXPECT_EQ(cond.dino.device(), Device::kCuda);
  for (const auto& [len, level] : cond.levels)
    for (const auto& [hd, t] : level.rope) {
      EXPECT_EQ(t.cos.device(), Device::kCuda) << len << " " << hd;
      EXPECT_EQ(t.sin.device(), Device::kCuda) << len << " " << hd;
    }

  const Tensor out = g.forward(*net, cond, [&](const std::string& n, const Tensor& v) {
    EXPECT_EQ(v.device(), Device::kCpu) << n;
    probes[n] = as_stored(v);
  });
  ASSERT_EQ(out.device(), Device::kCpu);
  probes["conv_out"] = to_nchw(out);
  probes["time_embedding"] = probes.at("time_emb");
  probes["image_proj_model_dino"] = host(cond.dino);

  bf16test::NmseCheck check("paint21 PBR UNet2.5D on the GPU", bf16test::kUNetNmse);
  // A golden tensor against the last numel values of `got` (the stored intermediates are the
  // last CFG row's, "full").
  auto compare = [&](const std::string& name, const Tensor& got_any) {
    const Tensor got = host(got_any);
    const Tensor want = flat(*g.fwd, name);
    ASSERT_GE(got.numel(), want.numel()) << name << ": got " << got.shape().str();
    ASSERT_EQ(got.numel() % want.numel(), 0) << name << ": got " << got.shape().str();
    check.add(name, got.data() + (got.numel() - want.numel()), want.data(), want.numel());
  };
  bool saw_out = false;
  for (const TensorInfo& info : g.fwd->tensors()) {
    const std::string& n = info.name;
    if (n.rfind("in.", 0) == 0 || n.rfind("voxel_indices.", 0) == 0 || n.rfind("rope.", 0) == 0)
      continue;
    if (n.rfind("ref.", 0) == 0) {
      ASSERT_TRUE(cond.ref.layers.count(n.substr(4))) << "no reference features for " << n;
      compare(n, cond.ref.layers.at(n.substr(4)));
    } else if (n.rfind("inter.unet_dual.", 0) == 0) {
      ASSERT_TRUE(dual_probes.count(n.substr(16))) << "no reference probe " << n;
      compare(n, dual_probes.at(n.substr(16)));
    } else if (n == "inter.dino_proj") {
      compare(n, cond.dino);
    } else if (n.rfind("inter.unet.", 0) == 0 || n.rfind("trace.unet.", 0) == 0) {
      ASSERT_TRUE(probes.count(n.substr(11))) << "no probe " << n;
      compare(n, probes.at(n.substr(11)));
    } else if (n == "out.sample") {
      compare(n, to_nchw(out));
      saw_out = true;
    } else {
      ADD_FAILURE() << "golden tensor not checked: " << n;
    }
  }
  EXPECT_TRUE(saw_out);
  EXPECT_GT(check.count(), 10);
  check.report();
}

TEST(PbrUNetCudaGolden, GpuAgreesWithTheCpuBf16PathAndWithItself) {
  GEN3D_REQUIRE_GPU();
  REQUIRE_PAINT21_GOLDEN();
  const Golden g;
  const auto gpu = g.load(Device::kCuda);
  const auto cpu = g.load(Device::kCpu);
  const PbrCondition gc = g.condition(*gpu), cc = g.condition(*cpu);
  // Untraced, twice (weights stay uploaded): the same output, and near the CPU's bf16 output.
  const Tensor a = g.forward(*gpu, gc), b = g.forward(*gpu, gc);
  const Tensor c = g.forward(*cpu, cc);
  ASSERT_EQ(a.device(), Device::kCpu);
  ASSERT_EQ(a.shape(), c.shape());
  for (i64 i = 0; i < a.numel(); ++i) ASSERT_EQ(a.data()[i], b.data()[i]) << i;
  const double e = bf16test::nmse(a.data(), c.data(), c.numel());
  std::printf("[ info ] paint21 PBR UNet2.5D GPU vs CPU bf16 output: nmse %.3g\n", e);
  EXPECT_LE(e, bf16test::kUNetNmse);
  // The projected DINO tokens too.
  const Tensor dg = host(gc.dino);
  ASSERT_EQ(dg.shape(), cc.dino.shape());
  EXPECT_LE(bf16test::nmse(dg.data(), cc.dino.data(), cc.dino.numel()), bf16test::kUNetNmse);
}

// The keys / values of the reference features, the prompt and the DINO tokens projected once on
// the GPU (with the features released afterwards, as the sampler does) against the plain call:
// the same GEMMs on the same rows.
TEST(PbrUNetCudaGolden, ProjectedConditionMatchesThePlainCall) {
  GEN3D_REQUIRE_GPU();
  REQUIRE_PAINT21_GOLDEN();
  const Golden g;
  const auto gpu = g.load(Device::kCuda);
  const PbrCondition plain = g.condition(*gpu);
  PbrCondition once = g.condition(*gpu);
  gpu->project(once, g.prompt, g.ref_scale);
  EXPECT_GT(once.projected.bytes(), 0);
  for (const Tensor& t : once.projected.text_kv) EXPECT_EQ(t.device(), Device::kCuda);
  for (const Tensor& t : once.projected.dino_kv) EXPECT_EQ(t.device(), Device::kCuda);
  for (const auto& items : once.projected.ref_kv)
    for (const Tensor& t : items) {
      if (!t.empty()) {
        EXPECT_EQ(t.device(), Device::kCuda);
      }
    }
  once.ref = RefFeatures();
  once.dino = Tensor();
  const Tensor a = g.forward(*gpu, plain);
  const Tensor c = g.forward(*gpu, once);
  ASSERT_EQ(a.shape(), c.shape());
  const double e = bf16test::nmse(c.data(), a.data(), a.numel());
  std::printf("[ info ] paint21 PBR UNet2.5D GPU with projected condition vs plain: nmse %.3g\n",
              e);
  EXPECT_LE(e, 1e-10);
  // A condition projected for another prompt is refused, on the GPU as on the CPU.
  Tensor other = g.prompt.clone();
  other.data()[0] += 1.0f;
  EXPECT_THROW(gpu->forward(g.sample, g.normals, g.positions, g.timestep, other, once, g.ref_scale),
               ModelError);
}

}  // namespace
}  // namespace gen3d::models
