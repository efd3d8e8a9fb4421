// Golden tests of the plain UNet2DConditionModel (golden/texmodels/README.md §1): every
// unet_<x>.forward.safetensors listed in $GEN3D_GOLDEN_DIR/texmodels/config.json is run with the
// fp32 and the fp16 weight file; every stored inter.* tensor and out.sample must be within the
// per-tensor tolerance of config.json["tolerances_abs"]. Sizes come from the files.

#include <gtest/gtest.h>

#include <algorithm>
#include <cmath>
#include <cstdio>
#include <filesystem>
#include <fstream>
#include <map>
#include <nlohmann/json.hpp>
#include <sstream>
#include <string>
#include <vector>

#include "models/bf16_golden.h"
#include "models/core/safetensors.h"
#include "models/kernels/conv.h"
#include "models/paint/unet.h"
#include "support/paths.h"
#include "texmodels_golden.h"

namespace gen3d::models {
namespace {

using json = nlohmann::json;
using namespace texmodels_golden;

TEST(UNetGolden, PlainUNetsMatchEveryStoredTensor) {
  if (!std::filesystem::exists(golden_file("config.json")))
    GTEST_SKIP() << "golden data absent: " << golden_dir();
  const json cfg = load_config();
  int runs = 0;
  for (const auto& [part, entry] : cfg.items()) {
    if (part.rfind("unet_", 0) != 0) continue;
    const std::string fwd_path = golden_file(part + ".forward.safetensors");
    if (!std::filesystem::exists(fwd_path)) continue;
    const auto fwd = SafetensorsFile::open(fwd_path);
    const UNetConfig config = UNetConfig::parse(entry.at("cfg").dump(), part);
    const json& tol = cfg.at("tolerances_abs").at(part);

    const Tensor sample = to_nhwc(fwd->to_f32("in.sample"));
    const Tensor t = fwd->to_f32("in.timestep");
    const std::vector<float> timesteps(t.data(), t.data() + t.numel());
    const Tensor text = fwd->to_f32("in.encoder_hidden_states");

    for (const char* dtype : {"fp32", "fp16"}) {
      SCOPED_TRACE(part + " weights " + dtype);
      const std::string wpath = golden_file(part + ".weights." + dtype + ".safetensors");
      ASSERT_TRUE(std::filesystem::exists(wpath)) << wpath;
      const UNet2DCondition unet = UNet2DCondition::load(config, SafetensorsFile::open(wpath));
      if (entry.contains("params")) {
        EXPECT_EQ(unet.num_parameters(), entry.at("params").get<std::int64_t>());
      }

      std::map<std::string, Tensor> probes;
      const Tensor out =
          unet.forward(sample, timesteps, text, [&](const std::string& name, const Tensor& v) {
            probes[name] = v.rank() == 4 ? to_nchw(v) : v.clone();
          });
      int checked = 0;
      double worst_ratio = 0;
      for (const TensorInfo& info : fwd->tensors()) {
        if (info.name.rfind("inter.", 0) != 0) continue;
        const std::string name = info.name.substr(6);
        ASSERT_TRUE(probes.count(name)) << "no probe " << name;
        double err = 0;
        const double atol = tol.at(info.name).get<double>();
        EXPECT_TRUE(close(probes.at(name), fwd->to_f32(info.name), atol, &err)) << info.name;
        worst_ratio = std::max(worst_ratio, err / atol);
        std::printf("  %s %s %s: max |diff| %.3g (tol %.3g)\n", part.c_str(), dtype,
                    info.name.c_str(), err, atol);
        ++checked;
      }
      double err = 0;
      EXPECT_TRUE(
          close(to_nchw(out), fwd->to_f32("out.sample"), tol.at("out.sample").get<double>(), &err))
          << "out.sample";
      std::printf(
          "%s %s: %d intermediates (worst max|diff|/tol %.3f), out.sample max |diff| %.3g (tol "
          "%.3g)\n",
          part.c_str(), dtype, checked, worst_ratio, err, tol.at("out.sample").get<double>());
      EXPECT_GT(checked, 0);
      ++runs;
    }
  }
  EXPECT_GT(runs, 0) << "no unet_* forward files in " << golden_dir();
}

// bf16 mode: every stored intermediate and the output against the same golden float32 values
// (normalized MSE per tensor, tolerance in README "Precision").
TEST(UNetGolden, PlainUNets_bf16) {
  if (!std::filesystem::exists(golden_file("config.json")))
    GTEST_SKIP() << "golden data absent: " << golden_dir();
  const json cfg = load_config();
  int runs = 0;
  for (const auto& [part, entry] : cfg.items()) {
    if (part.rfind("unet_", 0) != 0) continue;
    const std::string fwd_path = golden_file(part + ".forward.safetensors");
    const std::string wpath = golden_file(part + ".weights.fp32.safetensors");
    if (!std::filesystem::exists(fwd_path) || !std::filesystem::exists(wpath)) continue;
    const auto fwd = SafetensorsFile::open(fwd_path);
    const UNetConfig config = UNetConfig::parse(entry.at("cfg").dump(), part);
    const Tensor sample = to_nhwc(fwd->to_f32("in.sample"));
    const Tensor t = fwd->to_f32("in.timestep");
    const std::vector<float> timesteps(t.data(), t.data() + t.numel());
    const Tensor text = fwd->to_f32("in.encoder_hidden_states");
    const UNet2DCondition unet =
        UNet2DCondition::load(config, SafetensorsFile::open(wpath), WeightStorage::kBF16);
    std::map<std::string, Tensor> probes;
    const Tensor out =
        unet.forward(sample, timesteps, text, [&](const std::string& name, const Tensor& v) {
          probes[name] = v.rank() == 4 ? to_nchw(v) : v.clone();
        });
    bf16test::NmseCheck check(part + " bf16", bf16test::kUNetNmse);
    for (const TensorInfo& info : fwd->tensors()) {
      if (info.name.rfind("inter.", 0) != 0) continue;
      const std::string name = info.name.substr(6);
      ASSERT_TRUE(probes.count(name)) << "no probe " << name;
      const Tensor g = fwd->to_f32(info.name);
      ASSERT_EQ(probes.at(name).numel(), g.numel()) << name;
      check.add(info.name, probes.at(name).data(), g.data(), g.numel());
    }
    const Tensor g = fwd->to_f32("out.sample"), o = to_nchw(out);
    ASSERT_EQ(o.numel(), g.numel());
    check.add("out.sample", o.data(), g.data(), g.numel());
    check.report();
    ++runs;
  }
  EXPECT_GT(runs, 0) << "no unet_* forward files in " << golden_dir();
}

}  // namespace
}  // namespace gen3d::models
