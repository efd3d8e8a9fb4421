// views_from_pbr_model run alone through StageRunner on a tiny Hunyuan3D-Paint-v2-1 folder and a
// tiny DINOv2 folder written at test time in the official layouts (tests/support/tiny_paint21.h).

#include <cctype>
#include <cmath>
#include <cstdio>
#include <filesystem>
#include <fstream>
#include <functional>

#include <gtest/gtest.h>

#include "models/core/safetensors.h"
#include "models/nn/model_cache.h"
#include "pipeline/error.h"
#include "stage_test_helpers.h"
#include "support/paths.h"
#include "support/tiny_models.h"
#include "support/tiny_paint21.h"
#include "support/torch_save.h"

namespace gen3d::test {
namespace {

namespace fs = std::filesystem;

// One folder per test: ctest runs each test in its own process, several at once, and a folder
// rewritten under a process that has its weights mapped would pull the pages from under it.
const TinyPaint21Folder& tiny_folder() {
  static const TinyPaint21Folder f = [] {
    const auto* test = ::testing::UnitTest::GetInstance()->current_test_info();
    std::string name =
        std::string("pbr_paint_tiny_") + test->test_suite_name() + "_" + test->name();
    for (char& c : name)
      if (!std::isalnum(static_cast<unsigned char>(c))) c = '_';
    return write_tiny_paint21_folder(temp_dir(name), 3);
  }();
  return f;
}

// Two views at 64-px network views (8 × 8 latents), two UniPC steps, 48-px outputs.
void small_job(pipeline::StageRunner& r, const TinyPaint21Folder& f,
               const std::string& precision = "fp32", int seed = 5) {
  two_view_paint_inputs(r);
  r.param("model", f.dir)
      .param("dino_model", f.dino_dir)
      .param("view_size", 64)
      .param("steps", 2)
      .param("resolution", 48)
      .param("seed", seed)
      .param("precision", precision);
}

struct PbrViews {
  std::shared_ptr<const stages::ImageList> albedo, mr;
};

PbrViews run_job(const TinyPaint21Folder& f, const std::string& precision, int seed,
                 int cfg_rows = 3) {
  pipeline::StageRunner r = runner("views_from_pbr_model");
  small_job(r, f, precision, seed);
  r.param("cfg_rows", cfg_rows);
  r.run();
  return {r.output<stages::ImageList>("albedo"), r.output<stages::ImageList>("mr")};
}

double max_diff(const stages::ImageList& a, const stages::ImageList& b) {
  double d = 0.0;
  for (std::size_t v = 0; v < a.size(); ++v)
    for (std::size_t k = 0; k < a[v].pixels.size(); ++k)
      d = std::max(d, static_cast<double>(std::fabs(a[v].pixels[k] - b[v].pixels[k])));
  return d;
}

void expect_views(const stages::ImageList& images) {
  ASSERT_EQ(images.size(), 2u);
  for (const auto& img : images) {
    EXPECT_EQ(img.width, 48);
    EXPECT_EQ(img.height, 48);
    EXPECT_EQ(img.channels, 3);
    for (float v : img.pixels) {
      ASSERT_TRUE(std::isfinite(v));
      ASSERT_GE(v, 0.0f);
      ASSERT_LE(v, 1.0f);
    }
  }
}

class ViewsFromPbrModel : public ::testing::TestWithParam<const char*> {};

TEST_P(ViewsFromPbrModel, PaintsAlbedoAndMrOfEveryViewDeterministically) {
  const TinyPaint21Folder& f = tiny_folder();
  pipeline::StageRunner r = runner("views_from_pbr_model");
  small_job(r, f, GetParam());
  r.run();
  const auto albedo = r.output<stages::ImageList>("albedo");
  const auto mr = r.output<stages::ImageList>("mr");
  ASSERT_TRUE(albedo && mr);
  expect_views(*albedo);
  expect_views(*mr);
  // Two materials from separate weights and prompts: the images differ.
  EXPECT_GT(max_diff(*albedo, *mr), 1e-3);
  // The seed decides everything: the same seed repeats bit for bit, another one differs.
  const PbrViews again = run_job(f, GetParam(), 5);
  EXPECT_EQ(max_diff(*albedo, *again.albedo), 0.0);
  EXPECT_EQ(max_diff(*mr, *again.mr), 0.0);
  const PbrViews other = run_job(f, GetParam(), 6);
  EXPECT_GT(max_diff(*albedo, *other.albedo), 1e-4);

  const auto counters = r.profiler().counter_totals();
  EXPECT_EQ(counters.at("multiview.model_steps"), 2.0);
  const std::string trace = r.profiler().chrome_trace_json();
  for (const char* span : {"load model", "encode + step 0", "step 1", "decode"})
    EXPECT_NE(trace.find(std::string("\"") + span + "\""), std::string::npos) << span;
}

// Two CFG rows give the three rows' images up to float rounding (through two UniPC steps and the
// decoder).
TEST(ViewsFromPbrModelCfg, TwoRowsMatchThreeUpToRounding) {
  const TinyPaint21Folder& f = tiny_folder();
  const PbrViews three = run_job(f, "fp32", 5, 3);
  const PbrViews two = run_job(f, "fp32", 5, 2);
  EXPECT_LE(max_diff(*three.albedo, *two.albedo), 1e-4);
  EXPECT_LE(max_diff(*three.mr, *two.mr), 1e-4);
  std::printf("[ info ] two vs three CFG rows: albedo %.2e, mr %.2e\n",
              max_diff(*three.albedo, *two.albedo), max_diff(*three.mr, *two.mr));
}

INSTANTIATE_TEST_SUITE_P(Precisions, ViewsFromPbrModel, ::testing::Values("fp32", "bf16"));

// The folder's unet state_dict rewritten through `edit` into a copy of the tiny folder.
TinyPaint21Folder edited_unet(const std::string& name,
                              const std::function<void(NamedTensors&)>& edit) {
  TinyPaint21Folder f = write_tiny_paint21_folder(temp_dir(name), 3);
  const std::string bin = f.dir + "/unet/diffusion_pytorch_model.bin";
  const auto file = models::SafetensorsFile::open(bin);
  NamedTensors tensors;
  for (const auto& info : file->tensors()) tensors.emplace_back(info.name, file->to_f32(info));
  edit(tensors);
  write_torch_save(bin, {{"", std::move(tensors)}}, models::DType::kF32);
  return f;
}

std::string run_error(const TinyPaint21Folder& f) {
  return error_of([&] { run_job(f, "fp32", 5); });
}

TEST(ViewsFromPbrModelFolder, MissingOrMisShapedTensorsAreNamed) {
  const std::string missing_name = "unet.learned_text_clip_mr";
  const TinyPaint21Folder missing = edited_unet("pbr_paint_missing", [&](NamedTensors& t) {
    std::erase_if(t, [&](const auto& p) { return p.first == missing_name; });
  });
  const std::string e1 = run_error(missing);
  EXPECT_NE(e1.find("missing " + missing_name), std::string::npos) << e1;

  const std::string bad_name = "unet_dual.conv_in.weight";
  const TinyPaint21Folder misshaped = edited_unet("pbr_paint_misshaped", [&](NamedTensors& t) {
    for (auto& [name, value] : t)
      if (name == bad_name) value = models::Tensor(models::Shape{32, 5, 3, 3});
  });
  const std::string e2 = run_error(misshaped);
  EXPECT_NE(e2.find("mis-shaped " + bad_name), std::string::npos) << e2;
}

TEST(ViewsFromPbrModelFolder, MissingFilesAreNamed) {
  TinyPaint21Folder no_sched = write_tiny_paint21_folder(temp_dir("pbr_paint_no_sched"), 3);
  fs::remove(no_sched.dir + "/scheduler/scheduler_config.json");
  EXPECT_NE(run_error(no_sched).find("scheduler_config.json"), std::string::npos)
      << run_error(no_sched);

  TinyPaint21Folder no_dino = write_tiny_paint21_folder(temp_dir("pbr_paint_no_dino"), 3);
  fs::remove(no_dino.dino_dir + "/model.safetensors");
  const std::string e = run_error(no_dino);
  EXPECT_NE(e.find("model.safetensors"), std::string::npos) << e;
  EXPECT_NE(e.find("pytorch_model.bin"), std::string::npos) << e;

  TinyPaint21Folder no_unet = write_tiny_paint21_folder(temp_dir("pbr_paint_no_unet"), 3);
  fs::remove(no_unet.dir + "/unet/diffusion_pytorch_model.bin");
  EXPECT_NE(run_error(no_unet).find("diffusion_pytorch_model"), std::string::npos)
      << run_error(no_unet);
}

// A DINOv2 folder whose width the UNet's DINO projection does not take is refused at load.
TEST(ViewsFromPbrModelFolder, DinoWidthMustChain) {
  TinyPaint21Folder f = write_tiny_paint21_folder(temp_dir("pbr_paint_dino_width"), 3);
  const TinyPaint21Folder wide = write_tiny_paint21_folder(temp_dir("pbr_paint_dino_wide"), 3);
  // The other folder's DINOv2 with a wider config and weights.
  {
    std::ofstream(wide.dino_dir + "/config.json") << tiny_dinov2_config_json(24, 2, 1, 28);
    const auto w = tiny_dinov2_weights(9, 24, 1, 28);
    std::vector<std::pair<std::string, const models::Tensor*>> refs;
    for (const auto& [name, t] : w) refs.emplace_back(name, &t);
    models::write_safetensors(wide.dino_dir + "/model.safetensors", refs);
  }
  f.dino_dir = wide.dino_dir;
  const std::string e = run_error(f);
  EXPECT_NE(e.find("has hidden_size 24, the UNet's image_proj_model_dino takes 16"),
            std::string::npos)
      << e;
}

TEST(ViewsFromPbrModelFolder, MapsMustMatchTheViews) {
  const TinyPaint21Folder& f = tiny_folder();
  pipeline::StageRunner fewer = runner("views_from_pbr_model");
  small_job(fewer, f);
  fewer.input<stages::ImageList>("normals", stages::ImageList(1, gradient(40, 3, 0.5f)));
  EXPECT_NE(error_of([&] { fewer.run(); }).find("2 views but 1 normal and 2 position maps"),
            std::string::npos);
}

TEST(ViewsFromPbrModelFolder, ParamsAreCheckedBeforeAnythingLoads) {
  const auto problem = [](const std::string& model, const std::string& dino, int view_size) {
    pipeline::StageRunner r = runner("views_from_pbr_model");
    small_job(r, tiny_folder());
    r.param("model", model).param("dino_model", dino).param("view_size", view_size);
    try {
      r.run();
    } catch (const pipeline::ConfigError& e) {
      return std::string(e.what());
    }
    return std::string();
  };
  const TinyPaint21Folder& f = tiny_folder();
  EXPECT_NE(problem("", f.dino_dir, 64).find("views_from_pbr_model needs \"model\""),
            std::string::npos);
  EXPECT_NE(problem(f.dir, "", 64).find("views_from_pbr_model needs \"dino_model\""),
            std::string::npos);
  EXPECT_NE(problem(f.dir, "no/such/folder", 64).find("DINOv2 folder not found"),
            std::string::npos);
  EXPECT_NE(problem(f.dir, f.dino_dir, 72).find("multiple of 64"), std::string::npos);
}

// The device is a checked choice: cuda with a bf16 precision passes validation (what happens next
// depends on the machine: without a CUDA backend or GPU the run names the device), cuda with fp32
// is a config error, and an unknown device name is refused when the parameter is set.
TEST(ViewsFromPbrModelFolder, DeviceIsCheckedBeforeAnythingLoads) {
  const TinyPaint21Folder& f = tiny_folder();
  {
    pipeline::StageRunner r = runner("views_from_pbr_model");
    small_job(r, f, "bf16");
    r.param("device", "cuda");
    try {
      r.run();
    } catch (const pipeline::ConfigError& e) {
      ADD_FAILURE() << "device cuda with bf16 failed validation: " << e.what();
    } catch (const std::exception& e) {
      EXPECT_NE(std::string(e.what()).find("device cuda"), std::string::npos) << e.what();
    }
  }
  {
    pipeline::StageRunner r = runner("views_from_pbr_model");
    small_job(r, f, "fp32");
    r.param("device", "cuda");
    try {
      r.run();
      ADD_FAILURE() << "device cuda with fp32 passed validation";
    } catch (const pipeline::ConfigError& e) {
      EXPECT_NE(std::string(e.what()).find("device cuda runs the network in bf16"),
                std::string::npos)
          << e.what();
    }
  }
  pipeline::StageRunner r = runner("views_from_pbr_model");
  try {
    r.param("device", "gpu");
    ADD_FAILURE() << "device gpu was accepted";
  } catch (const pipeline::ConfigError& e) {
    const std::string msg = e.what();
    EXPECT_NE(msg.find("/params/device"), std::string::npos) << msg;
    EXPECT_NE(msg.find("gpu"), std::string::npos) << msg;
  }
  // The default stays the CPU.
  const pipeline::StageContract c = stage_registry().find("views_from_pbr_model")->contract();
  const pipeline::ParamSpec* device = c.find_param("device");
  ASSERT_TRUE(device && device->default_value);
  EXPECT_EQ(std::get<std::string>(*device->default_value), "cpu");
}

}  // namespace
}  // namespace gen3d::test
