// `gen3d shape` end to end on the tiny golden models (tests/data/golden): condition tokens ->
// sampled latents -> ShapeVAE -> volume decoding -> marching cubes -> mesh file; from an image
// (--image) on a tiny random model folder in the official combined layout, built here; the
// image -> textured mesh pipeline on that folder; and the bad-input paths.

#include <algorithm>
#include <filesystem>
#include <fstream>
#include <sstream>
#include <string>
#include <vector>

#include <gtest/gtest.h>
#include <nlohmann/json.hpp>

#include "mesh/io.h"
#include "support/paths.h"
#include "support/run_command.h"
#include "support/tiny_models.h"

namespace gen3d::test {
namespace {

namespace fs = std::filesystem;

bool golden_models_present() {
  const std::string g = source_dir() + "/tests/data/golden/";
  return fs::exists(g + "dit_weights.fp32.safetensors") &&
         fs::exists(g + "vae_weights.fp32.safetensors") && fs::exists(g + "sampler.safetensors") &&
         fs::exists(g + "config.json");
}

TEST(ShapeCommand, EveryVolumeMethodWritesAMesh) {
  if (!golden_models_present()) GTEST_SKIP() << "golden models absent";
  for (const char* method : {"dense", "hierarchical", "flashvdm"}) {
    const std::string dir = temp_dir(std::string("shape_") + method);
    const auto r =
        run_gen3d(std::string("shape --steps 4 --resolution 64 --min-resolution 16 ") +
                  "--method " + method + " -o " + dir + "/shape.obj --metrics " + dir + "/m.json");
    ASSERT_EQ(r.exit_code, 0) << method << "\n" << r.output;
    const mesh::Mesh m = mesh::load_mesh(dir + "/shape.obj");
    EXPECT_GT(m.face_count(), 100u) << method;
    std::ifstream in(dir + "/m.json");
    const auto metrics = nlohmann::json::parse(in);
    const double points = metrics["counters"]["volume_decode.points_queried"].get<double>();
    if (std::string(method) == "dense") {
      EXPECT_EQ(points, 65.0 * 65 * 65);
    } else {
      EXPECT_LT(points, 65.0 * 65 * 65) << method;
    }
  }
}

TEST(ShapeCommand, Bf16AndInt8PrecisionsWriteAMesh) {
  if (!golden_models_present()) GTEST_SKIP() << "golden models absent";
  for (const std::string precision : {"bf16", "int8"}) {
    const std::string dir = temp_dir("shape_" + precision);
    const auto r = run_gen3d("shape --steps 4 --resolution 64 --min-resolution 16 --precision " +
                             precision + " -o " + dir + "/shape.obj");
    ASSERT_EQ(r.exit_code, 0) << r.output;
    EXPECT_GT(mesh::load_mesh(dir + "/shape.obj").face_count(), 100u) << precision;
    const auto dump = run_gen3d("shape --precision " + precision + " --dump");
    EXPECT_NE(dump.output.find("\"precision\": \"" + precision + "\""), std::string::npos)
        << dump.output;
  }
  EXPECT_EQ(run_gen3d("shape --precision fp16 --dump").exit_code, 2);
}

TEST(ShapeCommand, DumpShowsTheAdaptedConfig) {
  const auto r = run_gen3d("shape --method flashvdm --resolution 380 --dump");
  ASSERT_EQ(r.exit_code, 0) << r.output;
  EXPECT_NE(r.output.find("flashvdm"), std::string::npos) << r.output;
  EXPECT_NE(r.output.find("380"), std::string::npos) << r.output;
}

TEST(ShapeCommand, BadInputsFailCleanly) {
  EXPECT_EQ(run_gen3d("shape --method octree --dump").exit_code, 2);
  const auto r = run_gen3d("shape --vae /nonexistent/vae.safetensors --steps 2 -o " +
                           temp_dir("shape_bad") + "/x.obj");
  EXPECT_NE(r.exit_code, 0);
  EXPECT_NE(r.output.find("/nonexistent/vae.safetensors"), std::string::npos) << r.output;
}

// --device cuda reaches every network node; fp32 on the GPU is refused at validation; a process
// without a GPU (or a build without the backend) fails with one message naming the node.
TEST(ShapeCommand, DeviceCudaIsPassedOnOrRefusedClearly) {
  const auto dump = run_gen3d("shape --device cuda --dump");
  ASSERT_EQ(dump.exit_code, 0) << dump.output;
  EXPECT_NE(dump.output.find("\"device\": \"cuda\""), std::string::npos) << dump.output;
  EXPECT_EQ(run_gen3d("shape --device tpu --dump").exit_code, 2);

  const std::string dir = temp_dir("shape_cuda");
  const auto fp32 =
      run_gen3d("shape --device cuda --precision fp32 --steps 2 -o " + dir + "/a.obj");
  EXPECT_NE(fp32.exit_code, 0);
  EXPECT_NE(fp32.output.find("device cuda runs the network in bf16"), std::string::npos)
      << fp32.output;
  EXPECT_FALSE(fs::exists(dir + "/a.obj"));

  if (!golden_models_present()) GTEST_SKIP() << "golden models absent";
  const auto r = run_gen3d("shape --device cuda --steps 2 --resolution 32 --min-resolution 16 -o " +
                           dir + "/b.obj");
  if (r.exit_code == 0) {  // a GPU and the backend: the mesh is there
    EXPECT_GT(mesh::load_mesh(dir + "/b.obj").face_count(), 0u);
  } else {
    EXPECT_NE(r.output.find("denoise: device cuda: "), std::string::npos) << r.output;
    EXPECT_FALSE(fs::exists(dir + "/b.obj"));
  }
}

// --- from an image -------------------------------------------------------------------------

const std::string kImage = "assets/images/spider_front.png";
// Few steps and a coarse grid: the models are random, only the wiring is under test.
const std::string kFast = " --steps 4 --resolution 64 --min-resolution 16 ";

// The "vars" of the config `--dump` printed (log lines on stderr may come before or after it).
nlohmann::json dumped_vars(const std::string& output) {
  const auto open = output.find('{'), close = output.rfind('}');
  if (open == std::string::npos || close == std::string::npos) return {};
  return nlohmann::json::parse(output.substr(open, close - open + 1))["vars"];
}

// A fresh tiny model folder per test (a few hundred KiB, written in milliseconds): tests run as
// separate processes, possibly at once, so none shares another's folder. Its config is the
// official config.yaml, as the published folders carry it.
TinyModelFolder tiny_folder() {
  const auto* test = ::testing::UnitTest::GetInstance()->current_test_info();
  return write_tiny_model_folder(temp_dir(std::string("tiny_models_") + test->name()), 7,
                                 TinyConfigFile::kYaml);
}

TEST(ShapeCommand, ImageToGlbWithAModelFolder) {
  const TinyModelFolder f = tiny_folder();
  const std::string dir = temp_dir("shape_image");
  const auto r = run_gen3d("shape --model " + f.dir + " --image " + kImage + kFast + "-o " + dir +
                           "/shape.glb --metrics " + dir + "/m.json");
  ASSERT_EQ(r.exit_code, 0) << r.output;
  const mesh::Mesh m = mesh::load_mesh(dir + "/shape.glb");
  EXPECT_GT(m.face_count(), 100u);
  // The condition came from the folder's own conditioner, through encode_image.
  std::ifstream in(dir + "/m.json");
  const auto metrics = nlohmann::json::parse(in);
  bool encoded = false;
  for (const auto& n : metrics["nodes"]) encoded = encoded || n["stage"] == "encode_image";
  EXPECT_TRUE(encoded) << metrics.dump();
}

// A Hunyuan3D-2.1 folder as published (config.yaml, model.fp16.ckpt: a torch.save dict of the
// model, vae and conditioner state dicts; HunYuanDiTPlain with a mixture-of-experts block): the
// same command, the DiT chosen by the folder's config, the latent count taken from its VAE, in
// each precision (int8: the attention and MLP products of the DiT, the VAE and the conditioner
// in int8).
TEST(ShapeCommand, Hunyuan21FolderToGlbInEachPrecision) {
  const auto* test = ::testing::UnitTest::GetInstance()->current_test_info();
  const TinyModelFolder f = write_tiny_model_folder(
      temp_dir(std::string("tiny_models_") + test->name()) + "/hunyuan3d-dit-v2-1", 7,
      TinyConfigFile::kYaml, TinyShapeVersion::k21);
  ASSERT_TRUE(f.weights.ends_with("model.fp16.ckpt"));
  const auto dump = run_gen3d("shape --model " + f.dir + " --image " + kImage + " --dump");
  ASSERT_EQ(dump.exit_code, 0) << dump.output;
  EXPECT_EQ(dumped_vars(dump.output)["latent_tokens"], f.latent_tokens) << dump.output;
  for (const std::string precision : {"fp32", "bf16", "int8"}) {
    const std::string dir = temp_dir("shape21_" + precision);
    const auto r = run_gen3d("shape --model " + f.dir + " --image " + kImage + kFast +
                             "--precision " + precision + " -o " + dir + "/shape.glb -v");
    ASSERT_EQ(r.exit_code, 0) << r.output;
    EXPECT_NE(r.output.find("HunyuanDiTPlain: loaded"), std::string::npos) << r.output;
    EXPECT_GT(mesh::load_mesh(dir + "/shape.glb").face_count(), 100u) << precision;
  }
  // A config.yaml key the 2.1 DiT does not know, or one of the wrong type, is named; nothing is
  // written.
  std::ifstream in(f.config);
  const std::string yaml((std::istreambuf_iterator<char>(in)), std::istreambuf_iterator<char>());
  const std::string line = "    moe_top_k: 2\n";
  ASSERT_NE(yaml.find(line), std::string::npos);
  const std::vector<std::pair<std::string, std::string>> bad = {
      {line + "    num_expertz: 4\n", "num_expertz"}, {"    moe_top_k: two\n", "moe_top_k"}};
  for (const auto& [replacement, named] : bad) {
    std::string edited = yaml;
    edited.replace(edited.find(line), line.size(), replacement);
    std::ofstream(f.config) << edited;
    const std::string dir = temp_dir("shape21_bad");
    const auto r = run_gen3d("shape --model " + f.dir + " --image " + kImage + kFast + "-o " + dir +
                             "/shape.glb");
    EXPECT_NE(r.exit_code, 0) << r.output;
    EXPECT_NE(r.output.find(named), std::string::npos) << r.output;
    EXPECT_FALSE(fs::exists(dir + "/shape.glb"));
  }
  std::ofstream(f.config) << yaml;
  // The folder's checker names the 2.1 DiT and finds every tensor where its loader expects it.
  const auto check = run_gen3d("models check " + f.dir);
  EXPECT_EQ(check.exit_code, 0) << check.output;
  EXPECT_NE(check.output.find("shape-2.1 (hunyuan3d-dit-v2-1): ok"), std::string::npos)
      << check.output;
}

TEST(ShapeCommand, ModelFolderSuppliesConditionerAndVae) {
  const TinyModelFolder f = tiny_folder();
  const auto r = run_gen3d("shape --model " + f.dir + " --image " + kImage + " --dump");
  ASSERT_EQ(r.exit_code, 0) << r.output;
  const auto vars = dumped_vars(r.output);
  EXPECT_EQ(vars["image"], kImage);
  EXPECT_EQ(vars["model"], f.dir);
  EXPECT_EQ(vars["vae"], f.dir);
  EXPECT_EQ(vars["conditioner"], f.dir);
  EXPECT_EQ(fs::path(vars["conditioner_config"].get<std::string>()), fs::path(f.config));
  EXPECT_EQ(vars["conditioner_section"], "conditioner");

  // --conditioner (a separate file) and its config override the folder's.
  const std::string golden = source_dir() + "/tests/data/golden/dinov2/";
  const auto o =
      run_gen3d("shape --model " + f.dir + " --image " + kImage + " --conditioner " + golden +
                "conditioner_a.fp16.safetensors --conditioner-config " + golden +
                "config.json --conditioner-section models/a/conditioner_config" + " --dump");
  ASSERT_EQ(o.exit_code, 0) << o.output;
  const auto vars2 = dumped_vars(o.output);
  EXPECT_EQ(vars2["conditioner"], golden + "conditioner_a.fp16.safetensors");
  EXPECT_EQ(vars2["conditioner_config"], golden + "config.json");
  EXPECT_EQ(vars2["conditioner_section"], "models/a/conditioner_config");
}

// Hunyuan3D-2's speed models from a models folder in the published layout (the tiny golden
// folders of tests/data/golden/fast_models): picked by short name, the turbo ones sampled with
// their consistency scheduler in 5 steps and decoded by the turbo VAE beside them with FlashVDM;
// `models check` names every folder.
TEST(ShapeCommand, SpeedModelsByNameFromAModelsFolder) {
  const std::string root = source_dir() + "/tests/data/golden/fast_models";
  if (!fs::is_directory(root + "/v2-0-turbo")) GTEST_SKIP() << "fast_models golden set absent";
  const auto check = run_gen3d("models check " + root + "/v2-0-turbo");
  EXPECT_EQ(check.exit_code, 0) << check.output;
  EXPECT_NE(check.output.find("shape-turbo (hunyuan3d-dit-v2-0-turbo): ok"), std::string::npos)
      << check.output;
  EXPECT_NE(check.output.find("shape-vae-turbo (hunyuan3d-vae-v2-0-turbo): ok"), std::string::npos)
      << check.output;

  for (const char* name : {"turbo", "fast", "mini-turbo"}) {
    const std::string variant =
        std::string(name) == "mini-turbo" ? "/v2-mini-turbo" : std::string("/v2-0-") + name;
    const std::string dir = temp_dir(std::string("shape_speed_") + name);
    const auto r = run_gen3d("shape --models " + root + variant + " --model " + name + " --image " +
                             kImage + " --resolution 32 --min-resolution 15 -o " + dir +
                             "/shape.glb --metrics " + dir + "/m.json");
    ASSERT_EQ(r.exit_code, 0) << name << "\n" << r.output;
    EXPECT_GT(mesh::load_mesh(dir + "/shape.glb").face_count(), 100u) << name;
    std::ifstream in(dir + "/m.json");
    const auto counters = nlohmann::json::parse(in)["counters"];
    const bool turbo = std::string(name).ends_with("turbo");
    // turbo: 5 consistency steps; fast: the flow pipeline's 50, the last (dt = 0) elided.
    EXPECT_EQ(counters["denoise.steps_full"].get<double>(), turbo ? 5 : 49) << name;
    const double points = counters["volume_decode.points_queried"].get<double>();
    if (turbo) {
      EXPECT_NE(r.output.find("turbo VAE"), std::string::npos) << r.output;
      EXPECT_NE(r.output.find("flashvdm"), std::string::npos) << r.output;
    } else {
      EXPECT_EQ(r.output.find("turbo VAE"), std::string::npos) << r.output;
    }
    EXPECT_GT(points, 0.0);
  }
  const auto unknown = run_gen3d("shape --models " + root + "/v2-0-fast --model turbo --image " +
                                 kImage + " --dump");
  EXPECT_EQ(unknown.exit_code, 2);
  EXPECT_NE(unknown.output.find("hunyuan3d-dit-v2-0-fast"), std::string::npos) << unknown.output;
}

// Hunyuan3D-2mv by name from its golden folders (a tiny random folder each, in the published
// layout): named views, any subset, through multiview_to_shape.json.
TEST(ShapeCommand, MultiviewModelsByNameWithNamedViews) {
  const std::string root = source_dir() + "/tests/data/golden/multiview";
  if (!fs::is_directory(root + "/v2-mv-turbo")) GTEST_SKIP() << "multiview golden set absent";
  const std::string views = root + "/views/";
  const auto check = run_gen3d("models check " + root + "/v2-mv-turbo");
  EXPECT_EQ(check.exit_code, 0) << check.output;
  EXPECT_NE(check.output.find("shape-mv-turbo (hunyuan3d-dit-v2-mv-turbo): ok"), std::string::npos)
      << check.output;

  struct Case {
    const char* name;
    std::vector<std::string> views;
  };
  for (const Case& c : {Case{"mv", {"front", "left", "back", "right"}},
                        Case{"mv-turbo", {"back", "front"}}, Case{"mv-fast", {"right"}}}) {
    const std::string dir = temp_dir(std::string("shape_mv_") + c.name);
    std::string images;
    for (const std::string& v : c.views) images += " --image " + v + "=" + views + v + ".png";
    const std::string args = "shape --models " + root + "/v2-" + c.name + " --model " + c.name +
                             images + " --steps 3 --resolution 32 --min-resolution 15";
    const auto r = run_gen3d(args + " -o " + dir + "/shape.glb --metrics " + dir + "/m.json");
    ASSERT_EQ(r.exit_code, 0) << c.name << "\n" << r.output;
    EXPECT_GT(mesh::load_mesh(dir + "/shape.glb").face_count(), 0u) << c.name;
    std::ifstream in(dir + "/m.json");
    const auto metrics = nlohmann::json::parse(in);
    EXPECT_EQ(metrics["counters"]["multiview.condition_views"].get<double>(),
              static_cast<double>(c.views.size()))
        << c.name;
    // The views not given have no load node; the others feed encode_views.
    const auto dump = run_gen3d(args + " --dump");
    ASSERT_EQ(dump.exit_code, 0) << dump.output;
    const auto open = dump.output.find('{');
    const auto config =
        nlohmann::json::parse(dump.output.substr(open, dump.output.rfind('}') - open + 1));
    std::vector<std::string> loads;
    for (const auto& n : config["nodes"])
      if (n["stage"] == "load_image") loads.push_back(n["id"]);
    std::vector<std::string> want = c.views;
    std::sort(want.begin(), want.end());
    std::sort(loads.begin(), loads.end());
    EXPECT_EQ(loads, want) << c.name;
  }
}

TEST(ShapeCommand, MultiviewUsageErrors) {
  const std::string root = source_dir() + "/tests/data/golden/multiview";
  const std::string front = root + "/views/front.png", left = root + "/views/left.png";
  const auto expect_error = [](const std::string& args, const std::string& message) {
    const auto r = run_gen3d(args + " --dump");
    EXPECT_EQ(r.exit_code, 2) << args << "\n" << r.output;
    EXPECT_NE(r.output.find(message), std::string::npos) << args << "\n" << r.output;
  };
  expect_error("shape --image top=" + front, "unknown view \"top\"");
  expect_error("shape --image front=" + front + " --image front=" + left, "given twice");
  expect_error("shape --image " + front + " --image left=" + left, "no view name");
  expect_error("shape --image front=" + front + " --cond tests/data/golden/sampler.safetensors",
               "--image and --cond");
  if (!fs::is_directory(root + "/v2-mv-fast")) GTEST_SKIP() << "multiview golden set absent";
  // A multiview model needs named views, a single-image one a single image.
  expect_error("shape --models " + root + "/v2-mv-fast --model mv-fast --image " + front,
               "is a multiview model");
  const TinyModelFolder f = tiny_folder();
  expect_error("shape --model " + f.dir + " --image front=" + front, "need a multiview model");
}

TEST(ShapeCommand, ImageUsageErrors) {
  const TinyModelFolder f = tiny_folder();
  const auto both =
      run_gen3d("shape --image " + kImage + " --cond tests/data/golden/sampler.safetensors --dump");
  EXPECT_EQ(both.exit_code, 2);
  EXPECT_NE(both.output.find("--image and --cond"), std::string::npos) << both.output;

  const auto no_image =
      run_gen3d("shape --model " + f.dir + " --conditioner " + f.weights + " --dump");
  EXPECT_EQ(no_image.exit_code, 2);
  EXPECT_NE(no_image.output.find("need --image"), std::string::npos) << no_image.output;

  // A DiT checkpoint without conditioner weights and no --conditioner: nothing to encode with.
  const auto no_conditioner = run_gen3d(
      "shape --model tests/data/golden/dit_weights.fp32.safetensors --image " + kImage + " --dump");
  EXPECT_EQ(no_conditioner.exit_code, 2);
  EXPECT_NE(no_conditioner.output.find("no conditioner"), std::string::npos)
      << no_conditioner.output;

  const auto missing = run_gen3d("shape --model " + f.dir + " --image /nonexistent/in.png" + kFast +
                                 "-o " + temp_dir("shape_image_bad") + "/x.glb");
  EXPECT_EQ(missing.exit_code, 2);
  EXPECT_NE(missing.output.find("/nonexistent/in.png"), std::string::npos) << missing.output;
}

// The shipped image -> textured mesh pipeline, pointed at the tiny folder: shape from the image,
// then texgen from the same image.
TEST(ImageToTexturedMesh, TinyModelFolderGivesATexturedGlb) {
  const TinyModelFolder f = tiny_folder();
  const std::string dir = temp_dir("image_textured");
  std::string sets;
  for (const std::string& s : {"conditioner=" + f.dir, "conditioner_config=" + f.config,
                               std::string("conditioner_section=conditioner"), "model=" + f.dir,
                               "vae=" + f.dir, std::string("steps=4"), std::string("resolution=64"),
                               std::string("min_resolution=16"), std::string("texture_size=256"),
                               std::string("render_size=256"), "out=" + dir + "/textured.glb"})
    sets += " --set " + s;
  const auto r = run_gen3d("run assets/pipelines/image_to_textured_mesh.json" + sets);
  ASSERT_EQ(r.exit_code, 0) << r.output;
  const mesh::Mesh m = mesh::load_mesh(dir + "/textured.glb");
  EXPECT_GT(m.face_count(), 100u);
  EXPECT_TRUE(m.has_uvs());
  ASSERT_TRUE(m.texture);
  EXPECT_EQ(m.texture->width, 256);
  EXPECT_EQ(m.texture->height, 256);
}

}  // namespace
}  // namespace gen3d::test

namespace gen3d {
namespace {

// `gen3d bench dit` at a tiny size: one JSON line per precision with its timing, and with
// --alongside the forward beside a CPU-bound flow-graph node against the two alone.
TEST(BenchDit, PrintsOneJsonLinePerPrecisionWithTheAlongsideRun) {
  const auto r = test::run_gen3d(
      "bench dit --hidden 64 --heads 4 --depth 1 --single 1 --tokens 16 --context-tokens 8 "
      "--context-dim 32 --in-channels 8 --batch 1 --reps 2 --precision fp32,bf16 --alongside");
  ASSERT_EQ(r.exit_code, 0) << r.output;
  std::vector<nlohmann::json> lines;
  std::istringstream in(r.output);
  for (std::string text; std::getline(in, text);)
    if (!text.empty() && text[0] == '{') lines.push_back(nlohmann::json::parse(text));
  ASSERT_EQ(lines.size(), 2u) << r.output;
  EXPECT_EQ(lines[0]["precision"], "fp32");
  EXPECT_EQ(lines[1]["precision"], "bf16");
  for (const auto& line : lines) {
    EXPECT_EQ(line["bench"], "dit");
    EXPECT_GT(line["ms_per_forward"].get<double>(), 0.0);
    EXPECT_GT(line["gflop_per_forward"].get<double>(), 0.0);
    const auto& a = line["alongside"];
    ASSERT_TRUE(a.is_object()) << line.dump();
    for (const char* key : {"model_ms", "work_ms", "together_ms", "together_over_sum"})
      EXPECT_GT(a[key].get<double>(), 0.0) << key;
  }
  // The 2.1 architecture: the MoE blocks run top_k of the experts (plus the shared one).
  const auto moe = test::run_gen3d(
      "bench dit --arch 2.1 --hidden 64 --heads 4 --depth 3 --moe-layers 1 --experts 4 --top-k 2 "
      "--tokens 16 --context-tokens 8 --context-dim 32 --in-channels 8 --batch 1 --reps 1 "
      "--precision fp32 --roof");
  ASSERT_EQ(moe.exit_code, 0) << moe.output;
  const auto line = nlohmann::json::parse(moe.output.substr(moe.output.find('{')));
  EXPECT_EQ(line["arch"], "2.1");
  EXPECT_DOUBLE_EQ(line["moe_expert_rows_executed_over_dense"].get<double>(), 3.0 / 5.0);
  EXPECT_GT(line["roof_gflops"].get<double>(), 0.0);
  EXPECT_GT(line["fraction_of_roof"].get<double>(), 0.0);
  const auto bad = test::run_gen3d("bench dit --hidden 30 --heads 4");
  EXPECT_NE(bad.exit_code, 0);
  EXPECT_NE(bad.output.find("multiple of --heads"), std::string::npos) << bad.output;
}

}  // namespace
}  // namespace gen3d

namespace gen3d {
namespace {

// `gen3d bench shape --tiny` for every published model: one JSON line each, with the model's
// steps, guidance mode, schedule and volume decoding (the turbos: 5 steps, consistency schedule,
// FlashVDM with the turbo VAE's narrower geometry decoder; the 2.0 fast and turbo embed the
// guidance: one forward per step, no CFG rows; the 2mini ones and 2.1 run CFG; 2mv-turbo takes
// four views).
TEST(BenchShape, EveryModelRunsInTinyForm) {
  struct Expect {
    const char* model;
    int steps;
    bool cfg;
    const char* schedule;
    const char* volume;
    int geo_width;  // tiny VAE width 64; the turbo VAEs halve it
    int views;
  };
  const Expect cases[] = {{"full", 50, true, "flow", "hierarchical", 64, 1},
                          {"fast", 50, false, "flow", "hierarchical", 64, 1},
                          {"turbo", 5, false, "consistency", "flashvdm", 32, 1},
                          {"mini", 50, true, "flow", "hierarchical", 64, 1},
                          {"mini-turbo", 5, true, "consistency", "flashvdm", 32, 1},
                          {"mv-turbo", 5, false, "consistency", "flashvdm", 32, 4},
                          {"2.1", 50, true, "flow", "hierarchical", 64, 1}};
  for (const Expect& e : cases) {
    const auto r = test::run_gen3d(std::string("bench shape --tiny --octree 32 --model ") +
                                   e.model + " --precision int8");
    ASSERT_EQ(r.exit_code, 0) << e.model << "\n" << r.output;
    const auto line = nlohmann::json::parse(r.output.substr(r.output.find("{\"bench\"")));
    EXPECT_EQ(line["model"], std::string(e.model) + " (tiny)");
    EXPECT_EQ(line["precision"], "int8") << e.model;
    EXPECT_EQ(line["steps"], e.steps) << e.model;
    EXPECT_EQ(line["cfg"], e.cfg) << e.model;
    EXPECT_EQ(line["schedule"], e.schedule) << e.model;
    EXPECT_EQ(line["volume"], e.volume) << e.model;
    EXPECT_EQ(line["geo_decoder_width"], e.geo_width) << e.model;
    EXPECT_EQ(line["views"], e.views) << e.model;
    EXPECT_GT(line["peak_rss_gib"].get<double>(), 0.0) << e.model;
    EXPECT_GE(line["dit_forwards"].get<int>(), e.steps - 1) << e.model;
    EXPECT_GT(line["faces"].get<int>(), 100) << e.model;
    // The decoder's own calls are part of the volume decode, the rest its bookkeeping.
    EXPECT_GT(line["volume_decoder_calls"].get<int>(), 0) << e.model;
    EXPECT_GT(line["volume_decoder_s"].get<double>(), 0.0) << e.model;
    EXPECT_LT(line["volume_decoder_s"].get<double>(), line["stages"]["volume_decode"].get<double>())
        << e.model;
    for (const char* stage : {"dinov2", "sampler", "vae_decode", "volume_decode"})
      EXPECT_GT(line["stages"][stage].get<double>(), 0.0) << e.model << " " << stage;
  }
  const auto bad = test::run_gen3d("bench shape --tiny --model huge");
  EXPECT_NE(bad.exit_code, 0);
  EXPECT_NE(bad.output.find("mini-turbo"), std::string::npos) << bad.output;

  // --image-size sets the conditioner's input, hence the context: (70 / 14)^2 + 1 tokens.
  const auto sized =
      test::run_gen3d("bench shape --tiny --octree 32 --model mini-turbo --image-size 70");
  ASSERT_EQ(sized.exit_code, 0) << sized.output;
  const auto line = nlohmann::json::parse(sized.output.substr(sized.output.find("{\"bench\"")));
  EXPECT_EQ(line["image_size"], 70);
  EXPECT_EQ(line["context_tokens"], 26);
  const auto odd = test::run_gen3d("bench shape --tiny --model mini-turbo --image-size 71");
  EXPECT_NE(odd.exit_code, 0);
  EXPECT_NE(odd.output.find("--image-size 71 is not a multiple"), std::string::npos) << odd.output;
}

}  // namespace
}  // namespace gen3d
