// Golden tests of the SD AutoencoderKL against diffusers v0.32.2 (golden/texmodels/README.md §2,
// vae.forward.safetensors with vae.weights.fp32 / .fp16). Data-driven: $GEN3D_GOLDEN_DIR
// (default tests/data/golden) + /texmodels; the config comes from config.json["vae"]["cfg"]
// (cross-checked with the weights' __metadata__), sizes from the tensors, per-tensor absolute
// tolerances from config.json["tolerances_abs"]["vae"]. Every out.* and inter.* tensor of the
// file must be produced and match.

#include <gtest/gtest.h>

#include <algorithm>
#include <cmath>
#include <cstdio>
#include <filesystem>
#include <fstream>
#include <map>
#include <nlohmann/json.hpp>
#include <string>

#include "models/bf16_golden.h"
#include "models/core/error.h"
#include "models/core/safetensors.h"
#include "models/kernels/conv.h"
#include "models/paint/sd_vae.h"
#include "support/paths.h"
#include "texmodels_golden.h"

namespace gen3d::models {
namespace {

using i64 = std::int64_t;
using json = nlohmann::json;
using namespace texmodels_golden;

struct Check {
  double max_err = 0.0, tol = 0.0;
};

class SdVaeGolden : public ::testing::TestWithParam<const char*> {
 protected:
  void SetUp() override {
    const std::string dir = golden_dir();
    data_path_ = dir + "/vae.forward.safetensors";
    // "bf16": the fp32 file in the bf16 precision mode, checked by normalized MSE per tensor.
    bf16_ = std::string(GetParam()) == "bf16";
    weights_path_ =
        dir + "/vae.weights." + std::string(bf16_ ? "fp32" : GetParam()) + ".safetensors";
    if (!std::filesystem::exists(data_path_) || !std::filesystem::exists(weights_path_) ||
        !std::filesystem::exists(dir + "/config.json"))
      GTEST_SKIP() << "golden files absent in " << dir;
    cfg_json_ = load_config();
    gold_ = SafetensorsFile::open(data_path_);
  }

  // Compares an NHWC result with the golden NCHW tensor `name`; records the outcome.
  void compare(const std::string& name, const Tensor& nhwc) {
    const TensorInfo* info = gold_->find(name);
    ASSERT_NE(info, nullptr) << "no golden tensor " << name;
    const Tensor g = to_nhwc(gold_->to_f32(*info));
    ASSERT_EQ(g.shape(), nhwc.shape())
        << name << ": golden (NHWC) " << g.shape().str() << " vs " << nhwc.shape().str();
    const auto& tols = cfg_json_["tolerances_abs"]["vae"];
    ASSERT_TRUE(tols.contains(name)) << "no tolerance for " << name;
    Check c;
    c.tol = tols[name].get<double>();
    if (bf16_) {
      nmse_.add(name, nhwc.data(), g.data(), g.numel());
      c.tol = 1.0;  // nmse_ holds the verdict
      checks_[name] = c;
      return;
    }
    for (i64 i = 0; i < g.numel(); ++i) {
      const double d = std::abs(static_cast<double>(nhwc.data()[i]) - g.data()[i]);
      c.max_err = std::max(c.max_err, std::isfinite(d) ? d : INFINITY);
    }
    checks_[name] = c;
    EXPECT_LE(c.max_err, c.tol) << name;
  }

  bool bf16_ = false;
  bf16test::NmseCheck nmse_{"SD VAE bf16", bf16test::kUNetNmse};
  std::string data_path_, weights_path_;
  json cfg_json_;
  std::shared_ptr<const SafetensorsFile> gold_;
  std::map<std::string, Check> checks_;
};

TEST_P(SdVaeGolden, EncodeDecodeMatchReference) {
  const SdVaeConfig cfg = SdVaeConfig::parse(cfg_json_["vae"]["cfg"].dump(), "config.json vae");
  const auto wfile = SafetensorsFile::open(weights_path_);
  // The weights' own metadata names the same config.
  if (auto it = wfile->metadata().find("config"); it != wfile->metadata().end()) {
    const SdVaeConfig meta = SdVaeConfig::parse(it->second, weights_path_ + " __metadata__");
    EXPECT_EQ(meta.block_out_channels, cfg.block_out_channels);
    EXPECT_EQ(meta.layers_per_block, cfg.layers_per_block);
    EXPECT_EQ(meta.norm_num_groups, cfg.norm_num_groups);
    EXPECT_EQ(meta.latent_channels, cfg.latent_channels);
  }
  WeightMap wm(wfile, "");
  const auto vae = SdVae::load(cfg, wm, bf16_ ? WeightStorage::kBF16 : WeightStorage::kF32);
  wm.finish("SD VAE");
  if (cfg_json_["vae"].contains("params")) {
    EXPECT_EQ(vae->num_parameters(), cfg_json_["vae"]["params"].get<i64>());
  }

  const Tensor image = to_nhwc(gold_->to_f32("in.image"));
  const Tensor eps = to_nhwc(gold_->to_f32("in.posterior_noise"));
  VaeProbe probe = [&](const std::string& name, const Tensor& t) { compare("inter." + name, t); };

  const SdVae::Posterior post = vae->encode(image, probe);
  compare("out.latent_mean", post.mean);
  compare("out.latent_std", post.std);
  const Tensor scaled = vae->encode_scaled(image, &eps);
  compare("out.latent_scaled", scaled);

  // The pipeline decodes latents / scaling_factor.
  Tensor z(scaled.shape());
  const float sf = static_cast<float>(cfg.scaling_factor);
  for (i64 i = 0; i < z.numel(); ++i) z.data()[i] = scaled.data()[i] / sf;
  compare("out.decoded", vae->decode(z, probe));
  compare("out.image", vae->decode_to_image(scaled));
  compare("out.decoded_from_mean", vae->decode(post.mean));

  // Every reference output and intermediate was produced and compared.
  int n = 0;
  std::string worst;
  double worst_usage = 0.0;
  for (const TensorInfo& t : gold_->tensors()) {
    if (t.name.rfind("in.", 0) == 0) continue;
    const auto it = checks_.find(t.name);
    EXPECT_TRUE(it != checks_.end()) << "not produced: " << t.name;
    if (it == checks_.end()) continue;
    ++n;
    const double u = it->second.max_err / it->second.tol;
    if (u >= worst_usage) {
      worst_usage = u;
      worst = t.name;
    }
  }
  if (bf16_) {
    nmse_.report();
    return;
  }
  std::printf(
      "[ info ] vae %s: %d golden tensors compared, worst max|err|/tol %.3f (%s: %.3g vs %.3g)\n",
      GetParam(), n, worst_usage, worst.c_str(), checks_[worst].max_err, checks_[worst].tol);
}

// The comparison can fail: one perturbed weight moves the decoded image past the tolerance (an
// fp32-mode check: its tolerances are absolute, so the bf16 mode has no instance of it).
class SdVaePerturbed : public SdVaeGolden {};

TEST_P(SdVaePerturbed, PerturbedWeightIsDetected) {
  const SdVaeConfig cfg = SdVaeConfig::parse(cfg_json_["vae"]["cfg"].dump(), "config.json vae");
  const auto wfile = SafetensorsFile::open(weights_path_);
  std::vector<std::pair<std::string, Tensor>> tensors;
  for (const TensorInfo& t : wfile->tensors()) tensors.emplace_back(t.name, wfile->to_f32(t));
  for (auto& [name, t] : tensors)
    if (name == "decoder.conv_out.bias") t.data()[0] += 1e-3f;
  std::vector<std::pair<std::string, const Tensor*>> refs;
  for (const auto& [name, t] : tensors) refs.emplace_back(name, &t);
  // One folder per weight set: CTest runs the parameterized tests in parallel processes.
  const std::string path =
      test::temp_dir("sd_vae_perturbed_" + std::string(GetParam())) + "/w.safetensors";
  write_safetensors(path, refs);
  WeightMap wm(SafetensorsFile::open(path), "");
  const auto vae = SdVae::load(cfg, wm);
  wm.finish("SD VAE");
  const Tensor post_mean = to_nhwc(gold_->to_f32("out.latent_mean"));
  const Tensor dec = vae->decode(post_mean);
  const Tensor g = to_nhwc(gold_->to_f32("out.decoded_from_mean"));
  double max_err = 0.0;
  for (i64 i = 0; i < g.numel(); ++i)
    max_err = std::max(max_err, std::abs(static_cast<double>(dec.data()[i]) - g.data()[i]));
  EXPECT_GT(max_err, cfg_json_["tolerances_abs"]["vae"]["out.decoded_from_mean"].get<double>());
}

INSTANTIATE_TEST_SUITE_P(Weights, SdVaeGolden, ::testing::Values("fp32", "fp16", "bf16"));
INSTANTIATE_TEST_SUITE_P(Weights, SdVaePerturbed, ::testing::Values("fp32", "fp16"));

}  // namespace
}  // namespace gen3d::models
