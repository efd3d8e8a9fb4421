// views_from_model run alone through StageRunner on a paint model folder in the official layout,
// built from the golden tiny UNet2.5D and SD VAE (skipped when the golden weights are absent).

#include <cmath>
#include <filesystem>
#include <fstream>

#include <gtest/gtest.h>

#include "pipeline/error.h"
#include "stage_test_helpers.h"
#include "support/paths.h"

namespace gen3d::test {
namespace {

namespace fs = std::filesystem;
using nlohmann::json;

std::string golden_dir() {
  return env_or("GEN3D_GOLDEN_DIR", source_dir() + "/tests/data/golden") + "/texmodels";
}

bool have_golden() {
  return fs::exists(golden_dir() + "/mvunet.weights.fp16.safetensors");
}

void write_json(const fs::path& path, const json& value) {
  fs::create_directories(path.parent_path());
  std::ofstream(path) << value.dump(2);
}

// unet/ (the UNet2.5D), vae/ and scheduler/ of hunyuan3d-paint-v2-0.
std::string paint_folder(const std::string& name) {
  const fs::path dir = temp_dir(name);
  std::ifstream in(golden_dir() + "/config.json");
  const json cfg = json::parse(in);
  write_json(dir / "unet" / "config.json", cfg["mv"]["cfg"]);
  fs::copy_file(golden_dir() + "/mvunet.weights.fp16.safetensors",
                dir / "unet" / "diffusion_pytorch_model.safetensors",
                fs::copy_options::overwrite_existing);
  write_json(dir / "vae" / "config.json", cfg["vae"]["cfg"]);
  fs::copy_file(golden_dir() + "/vae.weights.fp16.safetensors",
                dir / "vae" / "diffusion_pytorch_model.fp16.safetensors",
                fs::copy_options::overwrite_existing);
  write_json(dir / "scheduler" / "scheduler_config.json", cfg["scheduler_config"]);
  return dir.string();
}

Image constant(int size, int channels, float value) {
  return Image(size, size, channels, value);
}

// Two views, a grey RGBA reference and flat maps; 32-px views (4 × 4 latents), two steps.
void small_job(pipeline::StageRunner& r, const std::string& model) {
  r.input<render::ViewSet>("views", level_views({0, 180}));
  r.input<Image>("image", constant(24, 4, 0.6f));
  r.input<stages::ImageList>("normals", stages::ImageList(2, constant(40, 3, 0.5f)));
  r.input<stages::ImageList>("positions", stages::ImageList(2, constant(40, 3, 0.5f)));
  r.param("model", model).param("view_size", 32).param("steps", 2).param("resolution", 48);
}

TEST(ViewsFromModel, PaintsEveryViewAtTheRenderSize) {
  if (!have_golden()) GTEST_SKIP() << "texmodels golden weights absent";
  pipeline::StageRunner r = runner("views_from_model");
  small_job(r, paint_folder("views_from_model"));
  r.run();
  const auto images = r.output<stages::ImageList>("images");
  ASSERT_TRUE(images);
  ASSERT_EQ(images->size(), 2u);
  for (const auto& img : *images) {
    EXPECT_EQ(img.width, 48);
    EXPECT_EQ(img.height, 48);
    EXPECT_EQ(img.channels, 3);
    for (float v : img.pixels) ASSERT_TRUE(std::isfinite(v));
  }
  const auto counters = r.profiler().counter_totals();
  EXPECT_EQ(counters.at("multiview.model_steps"), 2.0);
  EXPECT_EQ(counters.at("multiview.views_with_images"), 2.0);
  const std::string trace = r.profiler().chrome_trace_json();
  for (const char* span : {"load model", "encode + step 0", "step 1", "decode"})
    EXPECT_NE(trace.find(std::string("\"") + span + "\""), std::string::npos) << span;
}

TEST(ViewsFromModel, MapsMustMatchTheViews) {
  if (!have_golden()) GTEST_SKIP() << "texmodels golden weights absent";
  const std::string model = paint_folder("views_from_model_maps");
  pipeline::StageRunner fewer = runner("views_from_model");
  small_job(fewer, model);
  fewer.input<stages::ImageList>("normals", stages::ImageList(1, constant(40, 3, 0.5f)));
  EXPECT_NE(error_of([&] { fewer.run(); }).find("2 views but 1 normal and 2 position maps"),
            std::string::npos);

  pipeline::StageRunner hole = runner("views_from_model");
  small_job(hole, model);
  hole.input<stages::ImageList>("positions", stages::ImageList{constant(40, 3, 0.5f), Image{}});
  EXPECT_NE(error_of([&] { hole.run(); }).find("view 1 has no normal or position map"),
            std::string::npos);
}

TEST(ViewsFromModel, ParamsAreCheckedBeforeAnythingLoads) {
  const auto problem = [](const std::string& model, int view_size) {
    pipeline::StageRunner r = runner("views_from_model");
    small_job(r, model);
    r.param("view_size", view_size);
    try {
      r.run();
    } catch (const pipeline::ConfigError& e) {
      return std::string(e.what());
    }
    return std::string();
  };
  EXPECT_NE(problem("", 32).find("views_from_model needs \"model\""), std::string::npos);
  EXPECT_NE(problem("no/such/folder", 32).find("paint model folder not found"), std::string::npos);
  EXPECT_NE(problem(temp_dir("views_from_model_params"), 36).find("multiple of 8"),
            std::string::npos);
  // The feature cache is for the Euler steps; asked of turbo, it is refused.
  pipeline::StageRunner turbo = runner("views_from_model");
  small_job(turbo, temp_dir("views_from_model_params"));
  turbo.param("turbo", true).param("cache_interval", 2);
  EXPECT_NE(error_of([&] { turbo.run(); }).find("cache_interval applies to the Euler steps"),
            std::string::npos);
}

// device: cpu (the default) or cuda, which runs the networks in bf16 (precision auto or bf16).
// This test binary has no CUDA backend: a valid cuda node fails at its start, naming the node and
// the device, before anything loads.
TEST(ViewsFromModel, DeviceIsCheckedAgainstThePrecision) {
  const std::string model = temp_dir("views_from_model_device");
  const auto error = [&](const std::string& device, const std::string& precision) {
    pipeline::StageRunner r = runner("views_from_model");
    small_job(r, model);
    return error_of([&] {
      r.param("device", device).param("precision", precision);
      r.run();
    });
  };
  EXPECT_NE(error("gpu", "auto").find("/params/device"), std::string::npos);
  EXPECT_NE(error("cuda", "fp32").find("device cuda runs the network in bf16"), std::string::npos);
  for (const char* precision : {"auto", "bf16"}) {
    const std::string e = error("cuda", precision);
    EXPECT_NE(e.find("device cuda"), std::string::npos) << e;
    EXPECT_EQ(e.find("runs the network in bf16"), std::string::npos) << e;
  }
}

// cache_interval reaches the sampler: with 3 steps and interval 2, step 1 reuses the deep
// features of step 0, so the images differ from the plain run's; interval 1 is the plain run.
TEST(ViewsFromModel, CacheIntervalReachesTheSampler) {
  if (!have_golden()) GTEST_SKIP() << "texmodels golden weights absent";
  const std::string model = paint_folder("views_from_model_cache");
  const auto paint = [&](int interval) {
    pipeline::StageRunner r = runner("views_from_model");
    small_job(r, model);
    r.param("steps", 3).param("cache_interval", interval);
    r.run();
    return r.output<stages::ImageList>("images");
  };
  const auto plain = paint(1), again = paint(1), cached = paint(2);
  ASSERT_EQ(plain->size(), 2u);
  ASSERT_EQ(cached->size(), 2u);
  EXPECT_EQ((*plain)[0].pixels, (*again)[0].pixels);
  EXPECT_NE((*plain)[0].pixels, (*cached)[0].pixels);
}

}  // namespace
}  // namespace gen3d::test
