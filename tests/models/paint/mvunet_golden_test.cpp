// Golden test of the Hunyuan3D-Paint UNet2.5D (golden/texmodels/README.md §3): the CFG call of
// mvunet.forward.safetensors with the fp32 and the fp16 weight file. Checks the reference
// features (ref_feat.*), every main-UNet intermediate (inter.*) and out.sample against the
// per-tensor tolerances of config.json["tolerances_abs"]["mvunet"]. Batch, view count, sizes and
// camera ids come from the stored shapes and config.json["mv"].

#include <gtest/gtest.h>

#include <algorithm>
#include <cmath>
#include <cstdio>
#include <cstring>
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
#include "models/paint/mvunet.h"
#include "support/paths.h"
#include "texmodels_golden.h"

namespace gen3d::models {
namespace {

using json = nlohmann::json;
using namespace texmodels_golden;

// A rank-5 (B, N, C, H, W) golden tensor as NHWC (B·N, H, W, C); also returns N.
Tensor views_nhwc(const SafetensorsFile& f, const std::string& name, std::int64_t* n = nullptr) {
  const TensorInfo* info = f.find(name);
  if (!info || info->shape.size() != 5) throw std::runtime_error(name + " is not (B, N, C, H, W)");
  const auto& s = info->shape;
  if (n) *n = s[1];
  return to_nhwc(f.to_f32_as(name, {s[0] * s[1], s[2], s[3], s[4]}));
}

std::vector<std::int64_t> i64_values(const SafetensorsFile& f, const std::string& name) {
  const TensorInfo* info = f.find(name);
  if (!info || info->dtype != DType::kI64) throw std::runtime_error(name + " is not I64");
  const auto bytes = f.bytes(*info);
  std::vector<std::int64_t> v(bytes.size() / 8);
  std::memcpy(v.data(), bytes.data(), bytes.size());
  return v;
}

// fp32 mode: both weight files within the absolute tolerances; bf16 mode: the fp32 file in the
// bf16 precision mode, every tensor within the bf16 normalized-MSE tolerance.
void check_mvunet(bool bf16) {
  const std::string fwd_path = golden_file("mvunet.forward.safetensors");
  if (!std::filesystem::exists(golden_file("config.json")) || !std::filesystem::exists(fwd_path))
    GTEST_SKIP() << "golden data absent: " << golden_dir();
  const json cfg = load_config();
  const json& mv = cfg.at("mv");
  const json& tol = cfg.at("tolerances_abs").at("mvunet");
  const UNetConfig base = UNetConfig::parse(mv.at("cfg").dump(), "mv");
  const auto fwd = SafetensorsFile::open(fwd_path);

  std::int64_t N = 0, n_ref = 0;
  const Tensor latents = views_nhwc(*fwd, "in.sample", &N);
  const Tensor normals = views_nhwc(*fwd, "in.normal_imgs");
  const Tensor positions = views_nhwc(*fwd, "in.position_imgs");
  const Tensor ref_latents = views_nhwc(*fwd, "in.ref_latents", &n_ref);
  ASSERT_EQ(N, mv.at("N").get<std::int64_t>());
  const std::int64_t B = latents.dim(0) / N;
  const Tensor text = fwd->to_f32("in.encoder_hidden_states");
  ASSERT_EQ(text.dim(0), B);
  const Tensor ts = fwd->to_f32("in.timestep");
  ASSERT_EQ(ts.numel(), 1);
  const Tensor rs = fwd->to_f32("in.ref_scale");
  const std::vector<float> ref_scale(rs.data(), rs.data() + rs.numel());
  std::vector<int> cams;
  for (std::int64_t id : i64_values(*fwd, "in.camera_info_gen")) cams.push_back(int(id));
  ASSERT_EQ(static_cast<std::int64_t>(cams.size()), B * N);

  // The stored ids are the official formula of the configured views.
  if (mv.contains("azims") && mv.contains("elevs")) {
    const std::int64_t n_listed = std::min<std::int64_t>(
        N, static_cast<std::int64_t>(std::min(mv.at("azims").size(), mv.at("elevs").size())));
    for (std::int64_t n = 0; n < n_listed; ++n)
      EXPECT_EQ(
          MultiviewUNet::camera_id(mv.at("azims")[n].get<int>(), mv.at("elevs")[n].get<int>()),
          cams[static_cast<std::size_t>(n)])
          << "view " << n;
  }

  const std::vector<const char*> dtypes =
      bf16 ? std::vector<const char*>{"bf16"} : std::vector<const char*>{"fp32", "fp16"};
  for (const char* dtype : dtypes) {
    SCOPED_TRACE(std::string("mvunet weights ") + dtype);
    const std::string wpath =
        golden_file(std::string("mvunet.weights.") + (bf16 ? "fp32" : dtype) + ".safetensors");
    ASSERT_TRUE(std::filesystem::exists(wpath)) << wpath;
    const auto net = MultiviewUNet::load(base, SafetensorsFile::open(wpath),
                                         bf16 ? WeightStorage::kBF16 : WeightStorage::kF32);
    bf16test::NmseCheck nmse("mvunet bf16", bf16test::kUNetNmse);
    const auto close_to = [&](const std::string& name, const Tensor& a, const Tensor& g,
                              double atol, double* err) -> ::testing::AssertionResult {
      if (!bf16) return close(a, g, atol, err);
      if (a.numel() != g.numel()) return ::testing::AssertionFailure() << "size differs";
      *err = 0;
      nmse.add(name, a.data(), g.data(), g.numel());
      return ::testing::AssertionSuccess();
    };
    if (mv.contains("params")) {
      EXPECT_EQ(net->num_parameters(), mv.at("params").get<std::int64_t>());
    }
    // The CFG text is [zeros, learned_text_clip_gen].
    {
      const Tensor& gen = net->learned_text_gen();
      ASSERT_EQ(gen.numel(), text.numel() / B);
      EXPECT_EQ(0, std::memcmp(gen.data(), text.data() + (B - 1) * gen.numel(),
                               sizeof(float) * gen.numel()));
    }

    double worst_ratio = 0;
    int checked = 0;
    const RefFeatures ref =
        net->reference_features(ref_latents, static_cast<int>(n_ref), net->learned_text_ref());
    int ref_stored = 0;
    for (const TensorInfo& info : fwd->tensors()) {
      if (info.name.rfind("ref_feat.", 0) != 0) continue;
      ++ref_stored;
      const std::string layer = info.name.substr(9);
      ASSERT_TRUE(ref.layers.count(layer)) << "no reference features for " << layer;
      double err = 0;
      const double atol = tol.at(info.name).get<double>();
      EXPECT_TRUE(close_to(info.name, ref.layers.at(layer), fwd->to_f32(info.name), atol, &err))
          << info.name;
      worst_ratio = std::max(worst_ratio, err / atol);
      std::printf("  mvunet %s %s: max |diff| %.3g (tol %.3g)\n", dtype, info.name.c_str(), err,
                  atol);
      ++checked;
    }
    EXPECT_EQ(static_cast<std::size_t>(ref_stored), ref.layers.size());

    std::map<std::string, Tensor> probes;
    const Tensor out =
        net->forward(latents, normals, positions, ts.data()[0], text, cams, ref, ref_scale,
                     static_cast<int>(N), [&](const std::string& name, const Tensor& v) {
                       probes[name] = v.rank() == 4 ? to_nchw(v) : v.clone();
                     });
    for (const TensorInfo& info : fwd->tensors()) {
      if (info.name.rfind("inter.", 0) != 0) continue;
      const std::string name = info.name.substr(6);
      ASSERT_TRUE(probes.count(name)) << "no probe " << name;
      double err = 0;
      const double atol = tol.at(info.name).get<double>();
      const Tensor want = fwd->to_f32(info.name);
      EXPECT_EQ(probes.at(name).shape(), want.shape()) << info.name;
      EXPECT_TRUE(close_to(info.name, probes.at(name), want, atol, &err)) << info.name;
      worst_ratio = std::max(worst_ratio, err / atol);
      std::printf("  mvunet %s %s: max |diff| %.3g (tol %.3g)\n", dtype, info.name.c_str(), err,
                  atol);
      ++checked;
    }
    double err = 0;
    const double atol = tol.at("out.sample").get<double>();
    const Tensor want = fwd->to_f32("out.sample");
    EXPECT_EQ(to_nchw(out).shape(), want.shape());
    EXPECT_TRUE(close_to("out.sample", to_nchw(out), want, atol, &err)) << "out.sample";
    if (bf16) nmse.report();
    std::printf(
        "mvunet %s: B=%lld N=%lld N_ref=%lld, %d tensors (worst max|diff|/tol %.3f), out.sample "
        "max |diff| %.3g (tol %.3g)\n",
        dtype, static_cast<long long>(B), static_cast<long long>(N), static_cast<long long>(n_ref),
        checked, worst_ratio, err, atol);
    EXPECT_GT(ref_stored, 0);
  }
}

TEST(MultiviewUNetGolden, CfgCallMatchesEveryStoredTensor) {
  check_mvunet(false);
}

TEST(MultiviewUNetGolden, CfgCall_bf16) {
  check_mvunet(true);
}

}  // namespace
}  // namespace gen3d::models
