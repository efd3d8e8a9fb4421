// `gen3d texture --models` end to end on a tiny model folder built by the test in the official
// layout: hunyuan3d-paint-v2-0[-turbo]/ (the golden UNet2.5D + SD VAE weights with their configs)
// and hunyuan3d-delight-v2-0/ (the golden 8-channel UNet, the VAE, a small random CLIP text
// encoder and a tokenizer with the three special tokens).

#include <filesystem>
#include <fstream>
#include <random>
#include <set>
#include <sstream>

#include <gtest/gtest.h>
#include <nlohmann/json.hpp>

#include "mesh/io.h"
#include "models/core/safetensors.h"
#include "models/core/tensor.h"
#include "support/paths.h"
#include "support/run_command.h"
#include "support/tiny_models.h"

namespace gen3d::test {
namespace {

namespace fs = std::filesystem;
using nlohmann::json;

const std::string kBox = "assets/meshes/BoxTextured.glb";
const std::string kFront = "assets/images/spider_front.png";

std::string golden_dir() {
  return env_or("GEN3D_GOLDEN_DIR", source_dir() + "/tests/data/golden") + "/texmodels";
}

void write_text(const fs::path& path, const std::string& text) {
  fs::create_directories(path.parent_path());
  std::ofstream(path) << text;
}

json golden_config() {
  std::ifstream in(golden_dir() + "/config.json");
  return json::parse(in);
}

// unet/ vae/ scheduler/ of one diffusers pipeline folder.
void write_common(const fs::path& dir, const json& cfg, const json& unet_cfg,
                  const std::string& unet_weights) {
  write_text(dir / "unet" / "config.json", unet_cfg.dump(2));
  fs::copy_file(golden_dir() + "/" + unet_weights,
                dir / "unet" / "diffusion_pytorch_model.safetensors");
  write_text(dir / "vae" / "config.json", cfg["vae"]["cfg"].dump(2));
  fs::copy_file(golden_dir() + "/vae.weights.fp16.safetensors",
                dir / "vae" / "diffusion_pytorch_model.fp16.safetensors");
  write_text(dir / "scheduler" / "scheduler_config.json", cfg["scheduler_config"].dump(2));
}

// A small random CLIP text tower of width `dim` (the delight UNet's cross_attention_dim).
void write_text_encoder(const fs::path& dir, int dim) {
  const int vocab = 8, positions = 8, ffn = 2 * dim;
  write_text(dir / "config.json", json{{"vocab_size", vocab},
                                       {"hidden_size", dim},
                                       {"intermediate_size", ffn},
                                       {"num_hidden_layers", 1},
                                       {"num_attention_heads", 2},
                                       {"max_position_embeddings", positions},
                                       {"hidden_act", "quick_gelu"}}
                                      .dump(2));
  std::mt19937 rng(7);
  std::normal_distribution<float> normal(0.0f, 0.2f);
  std::vector<std::pair<std::string, models::Tensor>> t;
  const auto add = [&](const std::string& name, models::Shape shape, float fill = NAN) {
    models::Tensor x(shape);
    for (auto& v : x.span()) v = std::isnan(fill) ? normal(rng) : fill;
    t.emplace_back(name, std::move(x));
  };
  add("text_model.embeddings.token_embedding.weight", {vocab, dim});
  add("text_model.embeddings.position_embedding.weight", {positions, dim});
  const std::string l = "text_model.encoder.layers.0.";
  for (const char* n : {"layer_norm1", "layer_norm2"}) {
    add(l + n + ".weight", {dim}, 1.0f);
    add(l + n + ".bias", {dim}, 0.0f);
  }
  for (const char* p : {"q_proj", "k_proj", "v_proj", "out_proj"}) {
    add(l + "self_attn." + p + ".weight", {dim, dim});
    add(l + "self_attn." + p + ".bias", {dim});
  }
  add(l + "mlp.fc1.weight", {ffn, dim});
  add(l + "mlp.fc1.bias", {ffn});
  add(l + "mlp.fc2.weight", {dim, ffn});
  add(l + "mlp.fc2.bias", {dim});
  add("text_model.final_layer_norm.weight", {dim}, 1.0f);
  add("text_model.final_layer_norm.bias", {dim}, 0.0f);
  std::vector<std::pair<std::string, const models::Tensor*>> refs;
  for (const auto& [name, x] : t) refs.emplace_back(name, &x);
  models::write_safetensors((dir / "model.safetensors").string(), refs);
}

// The official folder layout with the golden tiny networks.
std::string build_model_folder(const std::string& name) {
  const fs::path root = temp_dir(name);
  const json cfg = golden_config();
  json mv = cfg["mv"]["cfg"];
  for (const char* paint : {"hunyuan3d-paint-v2-0", "hunyuan3d-paint-v2-0-turbo"})
    write_common(root / paint, cfg, mv, "mvunet.weights.fp16.safetensors");
  const fs::path delight = root / "hunyuan3d-delight-v2-0";
  write_common(delight, cfg, cfg["unet_b"]["cfg"], "unet_b.weights.fp32.safetensors");
  write_text_encoder(delight / "text_encoder", cfg["unet_b"]["cfg"]["cross_attention_dim"]);
  write_text(delight / "tokenizer" / "vocab.json",
             json{{"<|startoftext|>", 5}, {"<|endoftext|>", 6}, {"!", 0}, {"a", 1}}.dump());
  write_text(delight / "tokenizer" / "special_tokens_map.json",
             json{{"bos_token", {{"content", "<|startoftext|>"}}},
                  {"eos_token", "<|endoftext|>"},
                  {"pad_token", "!"}}
                 .dump());
  return root.string();
}

// Small sizes: 32-px views (8×8 latents), 64-px delighting, 2 steps each.
const std::string kTiny =
    " --texture-size 128 --render-size 128 --set multiview.view_size=32 --set "
    "multiview.steps=2 --set delight.size=64 --set delight.steps=2 ";

TEST(TextureModels, LearnedDelightAndMultiviewProduceATexturedGlb) {
  if (!fs::exists(golden_dir() + "/mvunet.weights.fp16.safetensors"))
    GTEST_SKIP() << "texmodels golden weights absent";
  const std::string models = build_model_folder("texture_models");
  const std::string out = temp_dir("texture_models_out");
  const auto r =
      run_gen3d("texture --mesh " + kBox + " --image " + kFront + " --models " + models + kTiny +
                "-o " + out + "/box.glb --metrics " + out + "/m.json --trace " + out + "/t.json");
  ASSERT_EQ(r.exit_code, 0) << r.output;
  const mesh::Mesh m = mesh::load_mesh(out + "/box.glb");
  ASSERT_TRUE(m.texture);
  EXPECT_EQ(m.texture->width, 128);
  EXPECT_NE(r.output.find("learned delighting"), std::string::npos) << r.output;

  // The model stages ran: per-step spans of both networks are in the trace.
  std::ifstream trace_in(out + "/t.json");
  const std::string trace((std::istreambuf_iterator<char>(trace_in)), {});
  EXPECT_NE(trace.find("\"step 1\""), std::string::npos);
  EXPECT_NE(trace.find("\"decode\""), std::string::npos);
  std::ifstream metrics_in(out + "/m.json");
  const json metrics = json::parse(metrics_in);
  EXPECT_EQ(metrics["counters"]["multiview.model_steps"], 2.0);
}

TEST(TextureModels, TurboRunsTheLcmPath) {
  if (!fs::exists(golden_dir() + "/mvunet.weights.fp16.safetensors"))
    GTEST_SKIP() << "texmodels golden weights absent";
  const std::string models = build_model_folder("texture_models_turbo");
  const std::string out = temp_dir("texture_models_turbo_out");
  const auto r =
      run_gen3d("texture --mesh " + kBox + " --image " + kFront + " --models " + models +
                " --turbo" + kTiny + "-o " + out + "/box.glb --metrics " + out + "/m.json");
  ASSERT_EQ(r.exit_code, 0) << r.output;
  std::ifstream metrics_in(out + "/m.json");
  const json metrics = json::parse(metrics_in);
  EXPECT_EQ(metrics["counters"]["multiview.model_steps"], 10.0);
  EXPECT_TRUE(fs::exists(out + "/box.glb"));
}

// --precision bf16: the same turbo run with the networks in bf16 (the golden bf16 tests check
// their values; here the flags reach both model stages and the texture is written).
TEST(TextureModels, TurboInBf16) {
  if (!fs::exists(golden_dir() + "/mvunet.weights.fp16.safetensors"))
    GTEST_SKIP() << "texmodels golden weights absent";
  const std::string models = build_model_folder("texture_models_bf16");
  const std::string out = temp_dir("texture_models_bf16_out");
  const auto r = run_gen3d("texture --mesh " + kBox + " --image " + kFront + " --models " + models +
                           " --turbo --precision bf16" + kTiny + "-o " + out + "/box.glb");
  ASSERT_EQ(r.exit_code, 0) << r.output;
  EXPECT_NE(r.output.find("paint model"), std::string::npos) << r.output;
  EXPECT_NE(r.output.find("networks in bf16"), std::string::npos) << r.output;
  const mesh::Mesh m = mesh::load_mesh(out + "/box.glb");
  ASSERT_TRUE(m.texture);
  const auto bad = run_gen3d("texture --mesh " + kBox + " --image " + kFront +
                             " --precision bf16 -o " + out + "/x.glb");
  EXPECT_EQ(bad.exit_code, 2) << bad.output;  // --precision without --models
  EXPECT_NE(bad.output.find("--precision"), std::string::npos) << bad.output;
}

// A changed bake or inpaint parameter after a turbo run: the paint and delight networks do not
// run again; their nodes show as cached in the metrics and the trace.
TEST(TextureModels, ChangedBakeParametersReuseThePaintAndDelightResults) {
  if (!fs::exists(golden_dir() + "/mvunet.weights.fp16.safetensors"))
    GTEST_SKIP() << "texmodels golden weights absent";
  const std::string models = build_model_folder("texture_models_cache");
  const std::string out = temp_dir("texture_models_cache_out");
  const std::string common = "texture --mesh " + kBox + " --image " + kFront + " --models " +
                             models + " --turbo" + kTiny + "--cache " + out + "/cache ";
  const auto first = run_gen3d(common + "-o " + out + "/a.glb --metrics " + out + "/m1.json");
  ASSERT_EQ(first.exit_code, 0) << first.output;
  std::ifstream m1_in(out + "/m1.json");
  const json m1 = json::parse(m1_in);
  EXPECT_EQ(m1["counters"]["multiview.model_steps"], 10.0);

  for (const std::string change : {"merge.bake_exp=2", "inpaint.algorithm=telea"}) {
    const auto again = run_gen3d(common + "--set " + change + " -o " + out + "/b.glb --metrics " +
                                 out + "/m2.json --trace " + out + "/t2.json");
    ASSERT_EQ(again.exit_code, 0) << again.output;
    std::ifstream m2_in(out + "/m2.json");
    const json m2 = json::parse(m2_in);
    // A loaded node reports its figures again; one not needed at all (what it feeds was loaded
    // instead: that depends on what the first run found worth storing) reports none. That the
    // network did not run shows in the trace below (no step spans).
    std::set<std::string> cached;
    for (const json& n : m2["nodes"]) {
      if (n["id"] == "multiview") {
        if (n["loaded"].get<bool>())
          EXPECT_EQ(m2["counters"]["multiview.model_steps"], 10.0) << change;
        else
          EXPECT_FALSE(m2["counters"].contains("multiview.model_steps")) << change;
      }
      if (n["cached"].get<bool>()) cached.insert(n["id"].get<std::string>());
      if (n["stage"] == "views_from_model" || n["stage"] == "delight") {
        EXPECT_EQ(n["status"], "cached") << change << " " << n.dump();
      }
    }
    EXPECT_TRUE(cached.count("multiview") && cached.count("delight")) << change;
    std::ifstream trace_in(out + "/t2.json");
    const json trace = json::parse(trace_in);
    std::set<std::string> cached_spans;
    for (const json& e : trace["traceEvents"])
      if (e.value("cat", "") == "cached") cached_spans.insert(e["name"].get<std::string>());
    EXPECT_TRUE(cached_spans.count("multiview") && cached_spans.count("delight")) << change;
    EXPECT_EQ(trace.dump().find("\"step 1\""), std::string::npos) << change;
  }
}

TEST(TextureModels, BrokenWeightsAreNamedAndNothingIsWritten) {
  if (!fs::exists(golden_dir() + "/mvunet.weights.fp16.safetensors"))
    GTEST_SKIP() << "texmodels golden weights absent";
  const std::string models = build_model_folder("texture_models_bad");
  // The paint UNet gets the VAE's weights: every tensor is missing or unexpected.
  const fs::path unet = fs::path(models) / "hunyuan3d-paint-v2-0" / "unet";
  fs::remove(unet / "diffusion_pytorch_model.safetensors");
  fs::copy_file(golden_dir() + "/vae.weights.fp32.safetensors",
                unet / "diffusion_pytorch_model.safetensors");
  const std::string out = temp_dir("texture_models_bad_out");
  const auto r = run_gen3d("texture --mesh " + kBox + " --image " + kFront + " --models " + models +
                           kTiny + "-o " + out + "/box.glb");
  EXPECT_EQ(r.exit_code, 1) << r.output;
  EXPECT_NE(r.output.find("missing unet.conv_in.weight"), std::string::npos) << r.output;
  EXPECT_FALSE(fs::exists(out + "/box.glb"));
}

TEST(TextureModels, UsageErrors) {
  const auto r = run_gen3d("texture --mesh " + kBox + " --models " + source_dir() + " -o " +
                           temp_dir("texture_models_noimg") + "/x.glb");
  EXPECT_EQ(r.exit_code, 2) << r.output;
  EXPECT_NE(r.output.find("--models needs --image"), std::string::npos) << r.output;

  const auto t = run_gen3d("texture --mesh " + kBox + " --image " + kFront + " --turbo -o " +
                           temp_dir("texture_models_turbo_alone") + "/x.glb");
  EXPECT_EQ(t.exit_code, 2) << t.output;
  EXPECT_NE(t.output.find("--turbo"), std::string::npos) << t.output;
}

// `gen3d models check` on the tests' model folder: every network found, its tensors compared with
// what the loaders claim; a missing file or a mis-shaped tensor is named and the exit code is 1.
TEST(ModelsCheck, FolderNetworksAreListedAndProblemsNamed) {
  const std::string dir = build_model_folder("models_check");
  write_tiny_model_folder(dir + "/hunyuan3d-dit-v2-0");
  const auto ok = run_gen3d("models check " + dir + " -q");
  ASSERT_EQ(ok.exit_code, 0) << ok.output;
  for (const char* line :
       {"paint (hunyuan3d-paint-v2-0): ok", "paint-turbo (hunyuan3d-paint-v2-0-turbo): ok",
        "delight (hunyuan3d-delight-v2-0): ok", "shape (hunyuan3d-dit-v2-0): ok",
        "checked against the loader", "bf16"})
    EXPECT_NE(ok.output.find(line), std::string::npos) << line << "\n" << ok.output;

  fs::remove(fs::path(dir) / "hunyuan3d-delight-v2-0" / "tokenizer" / "vocab.json");
  {  // one more single-stream block than the checkpoint holds
    const fs::path cfg_path = fs::path(dir) / "hunyuan3d-dit-v2-0" / "config.json";
    std::ifstream in(cfg_path);
    json shape_cfg = json::parse(in);
    json& dit =
        shape_cfg["model"].contains("params") ? shape_cfg["model"]["params"] : shape_cfg["model"];
    dit["depth_single_blocks"] = dit["depth_single_blocks"].get<int>() + 1;
    write_text(cfg_path, shape_cfg.dump());
  }
  const json mv = golden_config()["mv"]["cfg"];
  json wrong = mv;  // one channel count off: every tensor of the first level mis-shaped
  wrong["block_out_channels"][0] = wrong["block_out_channels"][0].get<int>() * 2;
  write_text(fs::path(dir) / "hunyuan3d-paint-v2-0" / "unet" / "config.json", wrong.dump());
  const auto bad = run_gen3d("models check " + dir + " -q");
  EXPECT_EQ(bad.exit_code, 1) << bad.output;
  EXPECT_NE(bad.output.find("paint (hunyuan3d-paint-v2-0): PROBLEMS"), std::string::npos)
      << bad.output;
  EXPECT_NE(bad.output.find("mis-shaped unet.conv_in.weight"), std::string::npos) << bad.output;
  EXPECT_NE(bad.output.find("missing " + dir + "/hunyuan3d-delight-v2-0/tokenizer/vocab.json"),
            std::string::npos)
      << bad.output;
  EXPECT_NE(bad.output.find("paint-turbo (hunyuan3d-paint-v2-0-turbo): ok"), std::string::npos);
  EXPECT_NE(bad.output.find("shape (hunyuan3d-dit-v2-0): PROBLEMS"), std::string::npos);
  EXPECT_NE(bad.output.find("missing model.single_blocks."), std::string::npos) << bad.output;
}

// One weights file as JSON lines: the sums are those of the values PyTorch wrote.
TEST(ModelsCheck, WeightsFileTensorsWithTheirSums) {
  const std::string torchbin = data_dir() + "/golden/torchbin";
  const auto r = run_gen3d("models check " + torchbin + "/state_dict.bin --json -q");
  ASSERT_EQ(r.exit_code, 0) << r.output;
  std::ifstream in(torchbin + "/expected.json");
  const json expected = json::parse(in);
  std::istringstream lines(r.output);
  std::string line;
  std::size_t seen = 0;
  while (std::getline(lines, line)) {
    if (line.empty() || line[0] != '{') continue;
    const json t = json::parse(line);
    const json& want = expected.at(t["name"].get<std::string>());
    double sum = 0;
    for (const auto& v : want["values"]) sum += v.get<double>();
    EXPECT_NEAR(t["sum"].get<double>(), sum, 1e-9 * (1 + std::abs(sum))) << line;
    EXPECT_EQ(t["shape"], want["shape"]) << line;
    ++seen;
  }
  EXPECT_EQ(seen, expected.size()) << r.output;
  const auto refused = run_gen3d("models check " + torchbin + "/malicious.bin -q");
  EXPECT_EQ(refused.exit_code, 1);
  EXPECT_NE(refused.output.find("refuses to import"), std::string::npos) << refused.output;
}

// `gen3d bench paint --tiny`: the delight and paint networks through the texture stages' entry
// points, one JSON line per run with each part's seconds; turbo paints in 10 steps, normal in
// 30; bad sizes and precisions are refused by name.
TEST(BenchPaint, TinyTurboAndNormalRuns) {
  for (const std::string mode : {"--turbo", "--normal"}) {
    const std::size_t reps = mode == "--turbo" ? 2 : 1;
    const auto r = run_gen3d("bench paint --tiny --size 64 --views 3 --delight-steps 2 --reps " +
                             std::to_string(reps) + " " + mode);
    ASSERT_EQ(r.exit_code, 0) << r.output;
    std::vector<json> lines;
    std::istringstream in(r.output);
    for (std::string line; std::getline(in, line);)
      if (line.starts_with("{\"bench\"")) lines.push_back(json::parse(line));
    ASSERT_EQ(lines.size(), reps) << r.output;
    for (const json& j : lines) {
      EXPECT_EQ(j["paint_steps"], mode == "--turbo" ? 10 : 30) << j.dump();
      EXPECT_EQ(j["delight_steps"], 2);
      EXPECT_EQ(j["output_shape"], "[3, 64, 64, 3]");
      EXPECT_GT(j["stages"]["delight"].get<double>(), 0.0);
      EXPECT_GT(j["stages"]["paint"].get<double>(), 0.0);
      EXPECT_GT(j["parameters"]["paint_unet"].get<double>(), j["parameters"]["delight_unet"]);
    }
  }
  const auto odd = run_gen3d("bench paint --tiny --size 100");
  EXPECT_NE(odd.exit_code, 0);
  EXPECT_NE(odd.output.find("--size 100 is not a multiple of 64"), std::string::npos) << odd.output;
  const auto int8 = run_gen3d("bench paint --tiny --precision int8");
  EXPECT_NE(int8.exit_code, 0);
  EXPECT_NE(int8.output.find("bench paint"), std::string::npos) << int8.output;
}

// `gen3d bench paint --write-models`: the random networks as model folders in the official
// layout, which `gen3d texture --models` loads and runs end to end (turbo: 10 paint steps).
TEST(BenchPaint, WrittenModelFoldersTextureAMesh) {
  const std::string models = temp_dir("bench_paint_models");
  const auto w = run_gen3d("bench paint --tiny --write-models " + models);
  ASSERT_EQ(w.exit_code, 0) << w.output;
  EXPECT_TRUE(fs::exists(models + "/hunyuan3d-delight-v2-0/text_encoder/model.safetensors"));
  EXPECT_EQ(w.output.find("{\"bench\""), std::string::npos) << w.output;  // nothing timed
  // Never over a model folder: a second write is refused and leaves the first one as it was.
  const std::string unet =
      models + "/hunyuan3d-paint-v2-0-turbo/unet/diffusion_pytorch_model.safetensors";
  const auto written = fs::last_write_time(unet);
  const auto again = run_gen3d("bench paint --tiny --write-models " + models);
  EXPECT_EQ(again.exit_code, 2) << again.output;
  EXPECT_NE(again.output.find("already has hunyuan3d-paint-v2-0-turbo/"), std::string::npos)
      << again.output;
  EXPECT_EQ(fs::last_write_time(unet), written);
  EXPECT_FALSE(fs::exists(models + "/hunyuan3d-delight-v2-0.partial"));
  const std::string out = temp_dir("bench_paint_models_out");
  const auto r = run_gen3d("texture --mesh " + kBox + " --image " + kFront + " --models " + models +
                           " --turbo --no-cache --texture-size 128 --render-size 128 " +
                           "--set multiview.view_size=64 --set delight.size=64 --set "
                           "delight.steps=2 -o " +
                           out + "/box.glb --metrics " + out + "/m.json");
  ASSERT_EQ(r.exit_code, 0) << r.output;
  EXPECT_NE(r.output.find("learned delighting"), std::string::npos) << r.output;
  std::ifstream metrics_in(out + "/m.json");
  const json metrics = json::parse(metrics_in);
  EXPECT_EQ(metrics["counters"]["multiview.model_steps"], 10.0);
  EXPECT_TRUE(mesh::load_mesh(out + "/box.glb").texture);
}

}  // namespace
}  // namespace gen3d::test
