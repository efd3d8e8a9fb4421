// The `encode_views` stage run alone through StageRunner on the Hunyuan3D-2mv golden set
// (tests/data/golden/multiview; skipped when absent): the view PNGs as load_image decodes them ->
// MVImageProcessorV2 per view -> DinoImageEncoderMV, against the official pipeline's condition.
// Also the errors: no view, and each conditioner stage given the other kind of model.

#include <algorithm>
#include <cmath>
#include <filesystem>
#include <stdexcept>

#include <gtest/gtest.h>
#include <nlohmann/json.hpp>

#include "image/image.h"
#include "image/io.h"
#include "models/core/error.h"
#include "models/core/safetensors.h"
#include "pipeline/stage_runner.h"
#include "stages/register.h"
#include "stages/types.h"
#include "support/paths.h"

namespace gen3d::test {
namespace {

namespace fs = std::filesystem;
using models::Tensor;

const pipeline::Registry& registry() {
  static const pipeline::Registry reg = [] {
    pipeline::Registry r;
    stages::register_conditioner_stages(r);
    return r;
  }();
  return reg;
}

fs::path multiview(const std::string& name) {
  return fs::path(source_dir()) / "tests/data/golden/multiview" / name;
}

TEST(EncodeViewsStage, ContractTakesFourOptionalViews) {
  const auto* c = registry().contract("encode_views");
  ASSERT_NE(c, nullptr);
  EXPECT_EQ(c->resource, pipeline::ResourceClass::Model);
  for (const char* view : {"front", "left", "back", "right"}) {
    const auto* in = c->find_input(view);
    ASSERT_NE(in, nullptr) << view;
    EXPECT_TRUE(in->optional) << view;
  }
  EXPECT_NE(c->find_output("cond"), nullptr);
  EXPECT_NE(c->find_output("uncond"), nullptr);
}

// Every variant of the set: its views (a subset, given in any order) -> the golden condition.
TEST(EncodeViewsStage, GoldenConditionFromTheViewImages) {
  std::error_code ec;
  int runs = 0;
  for (const auto& e : fs::directory_iterator(multiview(""), ec)) {
    if (!fs::is_regular_file(e.path() / "golden.safetensors")) continue;
    const auto golden = models::SafetensorsFile::open((e.path() / "golden.safetensors").string());
    const auto run = nlohmann::json::parse(golden->metadata().at("run"));
    SCOPED_TRACE(e.path().filename().string());
    pipeline::StageRunner stage(*registry().find("encode_views"));
    for (const auto& view : run["views_given"]) {
      const std::string name = view.get<std::string>();
      stage.input<image::Image>(
          name,
          image::load_image((e.path() / run["view_images"][name].get<std::string>()).string()));
    }
    stage.param("model", (e.path() / run["dit_folder"].get<std::string>()).string())
        .param("size", run["processor_size"].get<int>())
        .param("precision", "fp32");
    stage.run();
    const auto cond = stage.output<Tensor>("cond");
    const auto uncond = stage.output<Tensor>("uncond");
    const Tensor want = golden->to_f32("cond.main");
    ASSERT_EQ(cond->shape(), want.shape());
    ASSERT_EQ(uncond->shape(), want.shape());
    double worst = 0.0;
    for (std::int64_t i = 0; i < want.numel(); ++i)
      worst = std::max(worst, std::abs(double(cond->data()[i]) - want.data()[i]));
    EXPECT_LE(worst, 5e-5);  // the DINOv2 golden's tolerance
    for (const float v : uncond->span()) ASSERT_EQ(v, 0.0f);
    ++runs;
  }
  if (runs == 0) GTEST_SKIP() << "multiview golden set absent";
}

TEST(EncodeViewsStage, NoViewIsAnError) {
  const fs::path model = multiview("v2-mv-fast/hunyuan3d-dit-v2-mv-fast");
  if (!fs::exists(model)) GTEST_SKIP() << "multiview golden set absent";
  pipeline::StageRunner stage(*registry().find("encode_views"));
  stage.param("model", model.string());
  try {
    stage.run();
    FAIL() << "expected an error";
  } catch (const std::exception& e) {
    EXPECT_NE(std::string(e.what()).find("at least one view"), std::string::npos) << e.what();
  }
}

// A multiview model through encode_image, a single-image one through encode_views: clear errors.
TEST(EncodeViewsStage, EachStageRefusesTheOtherKindOfConditioner) {
  const fs::path mv = multiview("v2-mv-fast/hunyuan3d-dit-v2-mv-fast");
  const std::string single =
      source_dir() + "/tests/data/golden/dinov2/conditioner_a.fp16.safetensors";
  if (!fs::exists(mv) || !fs::exists(single)) GTEST_SKIP() << "golden sets absent";
  const image::Image img = image::load_image(multiview("views/front.png").string());

  pipeline::StageRunner by_image(*registry().find("encode_image"));
  by_image.input<image::Image>("image", img);
  by_image.param("model", mv.string()).param("size", 32);
  try {
    by_image.run();
    FAIL() << "expected an error";
  } catch (const std::exception& e) {
    EXPECT_NE(std::string(e.what()).find("multiview conditioner"), std::string::npos) << e.what();
  }

  pipeline::StageRunner by_views(*registry().find("encode_views"));
  by_views.input<image::Image>("front", img);
  by_views.param("model", single)
      .param("config", source_dir() + "/tests/data/golden/dinov2/config.json")
      .param("config_section", "models/a/conditioner_config")
      .param("size", 32);
  try {
    by_views.run();
    FAIL() << "expected an error";
  } catch (const std::exception& e) {
    EXPECT_NE(std::string(e.what()).find("need a multiview model"), std::string::npos) << e.what();
  }
}

}  // namespace
}  // namespace gen3d::test
