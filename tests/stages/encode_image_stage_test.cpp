// The `encode_image` stage run alone through StageRunner on the DINOv2 golden set
// (tests/data/golden/dinov2 or $GEN3D_GOLDEN_DIR/dinov2; skipped when absent): a decoded input
// image -> ImageProcessorV2 -> DinoImageEncoder, against the reference's conditioner output.
// Every size comes from the set's config.json.

#include <cmath>
#include <filesystem>
#include <fstream>

#include <gtest/gtest.h>
#include <nlohmann/json.hpp>

#include "image/image.h"
#include "models/core/safetensors.h"
#include "pipeline/error.h"
#include "pipeline/stage_runner.h"
#include "stages/register.h"
#include "stages/types.h"
#include "support/paths.h"

namespace gen3d::test {
namespace {

using models::Tensor;
using nlohmann::json;

const pipeline::Registry& registry() {
  static const pipeline::Registry reg = [] {
    pipeline::Registry r;
    stages::register_conditioner_stages(r);
    return r;
  }();
  return reg;
}

std::string golden(const std::string& name) {
  return env_or("GEN3D_GOLDEN_DIR", source_dir() + "/tests/data/golden") + "/dinov2/" + name;
}

#define REQUIRE_FILE(path)                                                         \
  do {                                                                             \
    if (!std::filesystem::exists(path)) GTEST_SKIP() << "file absent: " << (path); \
  } while (0)

json read_json(const std::string& path) {
  std::ifstream in(path);
  return json::parse(in);
}

// The decoded input image `input.X` (U8 [H, W, C]) as the unit-range image load_image gives.
image::Image input_image(const models::SafetensorsFile& pre, const std::string& image) {
  const models::TensorInfo* info = pre.find("input." + image);
  if (!info || info->dtype != models::DType::kU8 || info->shape.size() != 3)
    throw std::runtime_error("no U8 [H, W, C] tensor input." + image);
  image::Image img(static_cast<int>(info->shape[1]), static_cast<int>(info->shape[0]),
                   static_cast<int>(info->shape[2]));
  const auto bytes = pre.bytes(*info);
  for (std::size_t i = 0; i < bytes.size(); ++i) img.pixels[i] = bytes[i] / 255.0f;
  return img;
}

double max_abs_diff(const Tensor& a, const Tensor& b) {
  double worst = 0.0;
  for (std::int64_t i = 0; i < a.numel(); ++i)
    worst = std::max(worst, std::abs(double(a.data()[i]) - b.data()[i]));
  return worst;
}

TEST(EncodeImageStage, ContractIsAModelStage) {
  const auto* c = registry().contract("encode_image");
  ASSERT_NE(c, nullptr);
  EXPECT_EQ(c->resource, pipeline::ResourceClass::Model);
  EXPECT_NE(c->find_input("image"), nullptr);
  EXPECT_NE(c->find_output("cond"), nullptr);
  EXPECT_NE(c->find_output("uncond"), nullptr);
}

// Each single-image encoder run of the set, from the decoded RGBA image (the stage's whole path:
// unit-range image -> u8 -> recenter/resize -> transform -> DINOv2 -> CLS handling).
TEST(EncodeImageStage, GoldenRunsFromTheDecodedImage) {
  REQUIRE_FILE(golden("config.json"));
  REQUIRE_FILE(golden("preprocess.safetensors"));
  const json cfg = read_json(golden("config.json"));
  const auto pre = models::SafetensorsFile::open(golden("preprocess.safetensors"));
  const std::string dir = temp_dir("encode_image_stage");
  int ran = 0;
  for (const auto& [run, r] : cfg.at("runs").items()) {
    if (r.at("batch") != 1) continue;
    const std::string model = r.at("model");
    const std::string weights = golden("conditioner_" + model + ".fp16.safetensors");
    const std::string encoder_file = golden("encoder_" + run + ".safetensors");
    if (!std::filesystem::exists(weights) || !std::filesystem::exists(encoder_file)) continue;
    SCOPED_TRACE("run " + run);
    const std::string pre_run = r.at("inputs").at(0);
    const json& p = cfg.at("preprocess").at(pre_run);
    const image::Image image = input_image(*pre, p.at("image"));
    ASSERT_EQ(image.channels, 4) << "the golden inputs carry alpha";

    // The run's DinoImageEncoder kwargs, written as the official conditioner block.
    const std::string config = dir + "/" + run + ".json";
    std::ofstream(config) << json{{"conditioner",
                                   {{"target", "hy3dgen.shapegen.models.SingleImageEncoder"},
                                    {"params",
                                     {{"main_image_encoder",
                                       {{"type", "DinoImageEncoder"},
                                        {"kwargs",
                                         {{"config", r.at("model_config")},
                                          {"image_size", r.at("image_size")},
                                          {"use_cls_token", r.at("use_cls_token")}}}}}}}}}};

    pipeline::StageRunner stage(*registry().find("encode_image"));
    stage.input<image::Image>("image", image);
    stage.param("model", weights).param("config", config).param("config_section", "conditioner");
    stage.param("precision", "fp32");  // the float32 golden tolerance
    stage.param("size", p.at("size")).param("border_ratio", p.at("border_ratio"));
    stage.run();
    const auto cond = stage.output<Tensor>("cond");
    const auto uncond = stage.output<Tensor>("uncond");
    ASSERT_TRUE(cond && uncond);

    const auto enc = models::SafetensorsFile::open(encoder_file);
    const Tensor want = enc->to_f32("cond.main");
    ASSERT_EQ(cond->shape(), want.shape());
    EXPECT_EQ(cond->dim(1), r.at("tokens").get<std::int64_t>());
    // Exact preprocessing + float32 network: the encoder's golden tolerance.
    EXPECT_LE(max_abs_diff(*cond, want), 5e-5);
    ASSERT_EQ(uncond->shape(), want.shape());
    for (const float v : uncond->span()) ASSERT_EQ(v, 0.0f);
    ++ran;
  }
  if (ran == 0) GTEST_SKIP() << "no single-image encoder run with its files";
}

// An image without alpha gets one from the background removal first; the condition keeps the
// encoder's token count and width.
TEST(EncodeImageStage, RgbImageIsCutOutFirst) {
  const std::string weights = golden("conditioner_a.fp16.safetensors");
  REQUIRE_FILE(weights);
  REQUIRE_FILE(golden("config.json"));
  const json model = read_json(golden("config.json")).at("models").at("a");
  // A grey square on white.
  image::Image rgb(64, 48, 3, 1.0f);
  for (int y = 12; y < 36; ++y)
    for (int x = 20; x < 44; ++x)
      for (int c = 0; c < 3; ++c) rgb.at(x, y)[c] = 0.3f + 0.1f * c;

  pipeline::StageRunner stage(*registry().find("encode_image"));
  stage.input<image::Image>("image", rgb);
  stage.param("model", weights)
      .param("config", golden("config.json"))
      .param("config_section", "models/a/conditioner_config")
      .param("size", 64);
  stage.run();
  const auto cond = stage.output<Tensor>("cond");
  ASSERT_TRUE(cond);
  const int grid = model.at("config_image_size").get<int>() / 14;
  EXPECT_EQ(cond->dim(0), 1);
  EXPECT_EQ(cond->dim(1), grid * grid + 1);
  EXPECT_EQ(cond->dim(2), model.at("hidden").get<std::int64_t>());
  for (const float v : cond->span()) ASSERT_TRUE(std::isfinite(v));
}

TEST(EncodeImageStage, MissingWeightsAreAConfigError) {
  pipeline::StageRunner stage(*registry().find("encode_image"));
  stage.input<image::Image>("image", image::Image(16, 16, 4, 1.0f));
  stage.param("model", "/nonexistent/conditioner.safetensors");
  try {
    stage.run();
    FAIL() << "expected a ConfigError";
  } catch (const pipeline::ConfigError& e) {
    EXPECT_NE(std::string(e.what()).find("/nonexistent/conditioner.safetensors"), std::string::npos)
        << e.what();
  }
}

}  // namespace
}  // namespace gen3d::test
