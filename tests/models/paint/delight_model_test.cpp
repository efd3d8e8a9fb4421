// The InstructPix2Pix delighting loop on the tiny golden networks (the 8-channel unet_b and the
// SD VAE of golden/texmodels): output range and 8-bit quantization, seeding, and the guidance
// rule of the official settings (guidance 1.0 makes one conditional pass per step, so image
// guidance has no effect; guidance > 1 runs the three-branch batch).

#include <gtest/gtest.h>

#include <cmath>
#include <filesystem>

#include "models/core/safetensors.h"
#include "models/paint/delight_model.h"
#include "models/paint/sd_vae.h"
#include "models/paint/unet.h"
#include "texmodels_golden.h"

namespace gen3d::models {
namespace {

using namespace texmodels_golden;

class DelightLoop : public ::testing::Test {
 protected:
  void SetUp() override {
    if (!std::filesystem::exists(golden_file("unet_b.weights.fp32.safetensors")))
      GTEST_SKIP() << "golden weights absent in " << golden_dir();
    const auto cfg = load_config();
    auto m = std::make_shared<DelightModel>();
    m->unet = std::make_shared<const UNet2DCondition>(UNet2DCondition::load(
        UNetConfig::parse(cfg["unet_b"]["cfg"].dump(), "unet_b"),
        SafetensorsFile::open(golden_file("unet_b.weights.fp32.safetensors"))));
    WeightMap wm(SafetensorsFile::open(golden_file("vae.weights.fp32.safetensors")), "");
    m->vae = SdVae::load(SdVaeConfig::parse(cfg["vae"]["cfg"].dump(), "vae"), wm);
    wm.finish("SD VAE");
    m->scheduler = SchedulerConfig::parse(cfg["scheduler_config"].dump(), "scheduler");
    m->empty_prompt = Tensor(Shape{1, 7, m->unet->config().cross_attention_dim});
    for (std::int64_t i = 0; i < m->empty_prompt.numel(); ++i)
      m->empty_prompt.data()[i] = std::sin(0.37f * static_cast<float>(i));
    model_ = m;
    // A 32×32 gradient image (8×8 latents; unet_b needs sizes divisible by 2).
    image_ = Tensor(Shape{1, 32, 32, 3});
    for (std::int64_t i = 0; i < image_.numel(); ++i)
      image_.data()[i] = static_cast<float>((i * 37) % 256) / 255.0f;
  }

  Tensor run(float guidance, float image_guidance, std::uint64_t seed) {
    DelightModelOptions o;
    o.steps = 3;
    o.guidance = guidance;
    o.image_guidance = image_guidance;
    o.seed = seed;
    int calls = 0;
    Tensor out = delight_network(*model_, image_, o, [&](int i, int n) {
      EXPECT_EQ(i, calls++);
      EXPECT_EQ(n, 3);
    });
    EXPECT_EQ(calls, 3);
    return out;
  }

  std::shared_ptr<const DelightModel> model_;
  Tensor image_;
};

bool same(const Tensor& a, const Tensor& b) {
  return a.numel() == b.numel() && std::equal(a.data(), a.data() + a.numel(), b.data());
}

TEST_F(DelightLoop, OutputIsAnEightBitImage) {
  const Tensor out = run(1.0f, 1.5f, 42);
  ASSERT_EQ(out.shape(), (Shape{1, 32, 32, 3}));
  for (std::int64_t i = 0; i < out.numel(); ++i) {
    const float v = out.data()[i];
    ASSERT_GE(v, 0.0f);
    ASSERT_LE(v, 1.0f);
    ASSERT_NEAR(v * 255.0f, std::round(v * 255.0f), 1e-3) << i;
  }
}

TEST_F(DelightLoop, SeedDecidesTheNoise) {
  EXPECT_TRUE(same(run(1.0f, 1.5f, 42), run(1.0f, 1.5f, 42)));
  EXPECT_FALSE(same(run(1.0f, 1.5f, 42), run(1.0f, 1.5f, 43)));
}

TEST_F(DelightLoop, GuidanceOneIgnoresImageGuidance) {
  const Tensor official = run(1.0f, 1.5f, 42);
  EXPECT_TRUE(same(official, run(1.0f, 3.0f, 42)));
  EXPECT_FALSE(same(official, run(2.0f, 1.5f, 42)));  // guided: three-branch batch
}

TEST_F(DelightLoop, RejectsABatchOrWrongChannels) {
  DelightModelOptions o;
  o.steps = 1;
  EXPECT_THROW(delight_network(*model_, Tensor(Shape{2, 32, 32, 3}), o), ModelError);
  EXPECT_THROW(delight_network(*model_, Tensor(Shape{1, 32, 32, 4}), o), ModelError);
}

}  // namespace
}  // namespace gen3d::models
