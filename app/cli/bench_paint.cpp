#include "app/cli/bench_paint.h"

#include <sys/resource.h>
#include <unistd.h>

#include <spdlog/spdlog.h>
#include <chrono>
#include <cstdio>
#include <filesystem>
#include <fstream>
#include <memory>
#include <nlohmann/json.hpp>
#include <random>
#include <stdexcept>
#include <utility>
#include <vector>

#include "app/cli/device_option.h"
#include "models/core/precision.h"
#include "models/core/safetensors.h"
#include "models/core/tensor.h"
#include "models/nn/init.h"
#include "models/nn/params.h"
#include "models/paint/clip_text.h"
#include "models/paint/delight_model.h"
#include "models/paint/multiview_diffusion.h"
#include "models/paint/mvunet.h"
#include "models/paint/sd_vae.h"
#include "models/paint/unet.h"
#include "pipeline/error.h"

namespace gen3d::app::cli {
namespace {

using Clock = std::chrono::steady_clock;
namespace fs = std::filesystem;

double seconds_since(Clock::time_point t0) {
  return std::chrono::duration<double>(Clock::now() - t0).count();
}

models::Tensor uniform(const models::Shape& s, std::uint64_t seed) {
  models::Tensor t(s);
  std::mt19937_64 rng(seed);
  std::uniform_real_distribution<float> u(0.0f, 1.0f);
  for (float& v : t.span()) v = u(rng);
  return t;
}

// The official networks' configs (hunyuan3d-paint-v2-0[-turbo]/ and hunyuan3d-delight-v2-0/:
// SD2's UNet, the delight one with 8 input channels; SD's VAE), or tiny ones.
struct Configs {
  models::UNetConfig paint, delight;
  models::SdVaeConfig vae;
};

Configs configs(bool tiny) {
  Configs c;
  if (tiny) {
    c.paint.block_out_channels = {32, 64};
    c.paint.down_block_types = {"CrossAttnDownBlock2D", "DownBlock2D"};
    c.paint.up_block_types = {"UpBlock2D", "CrossAttnUpBlock2D"};
    c.paint.attention_head_dim = {2, 4};
    c.paint.transformer_layers_per_block = {1, 1};
    c.paint.layers_per_block = 1;
    c.paint.cross_attention_dim = 32;
    c.paint.norm_num_groups = 8;
    c.vae.block_out_channels = {32, 64};
    c.vae.down_block_types = {"DownEncoderBlock2D", "DownEncoderBlock2D"};
    c.vae.up_block_types = {"UpDecoderBlock2D", "UpDecoderBlock2D"};
    c.vae.layers_per_block = 1;
    c.vae.norm_num_groups = 8;
  }
  c.delight = c.paint;
  c.delight.in_channels = 8;  // [noisy latent | image latent]
  return c;
}

// Seeded random values for `expected` (nn::uniform_init's recipe: ±0.02, norm scales 1, biases
// 0), written as one fp16 safetensors file as the official folders ship them.
void write_random_weights(const fs::path& path,
                          const std::vector<std::pair<std::string, models::Shape>>& expected,
                          std::uint64_t seed) {
  fs::create_directories(path.parent_path());
  models::nn::RandomParams rnd(models::nn::uniform_init(seed));
  std::vector<models::Tensor> owned;
  owned.reserve(expected.size());
  std::vector<std::pair<std::string, const models::Tensor*>> list;
  for (const auto& [name, shape] : expected) {
    owned.push_back(rnd.take(name, shape));
    list.emplace_back(name, &owned.back());
  }
  models::write_safetensors(path.string(), list, models::DType::kF16);
}

// An SD VAE with random weights: through a temporary safetensors file, as a folder would load.
std::shared_ptr<const models::SdVae> random_vae(const models::SdVaeConfig& cfg,
                                                models::WeightStorage storage,
                                                models::Device device) {
  const fs::path path = fs::temp_directory_path() /
                        ("gen3d_bench_paint_vae_" + std::to_string(::getpid()) + ".safetensors");
  write_random_weights(path, models::SdVae::expected_tensors(cfg), 7);
  std::unique_ptr<models::SdVae> vae;
  try {
    models::WeightMap wm(models::SafetensorsFile::open(path.string()), "");
    vae = models::SdVae::load(cfg, wm, storage);
    wm.finish("SD VAE");
  } catch (...) {
    fs::remove(path);
    throw;
  }
  fs::remove(path);
  vae->set_device(device);
  return vae;
}

// diffusers config.json texts of the configs above, as the loaders read them.
nlohmann::json unet_json(const models::UNetConfig& c) {
  return {{"_class_name", "UNet2DConditionModel"},
          {"in_channels", c.in_channels},
          {"out_channels", c.out_channels},
          {"block_out_channels", c.block_out_channels},
          {"down_block_types", c.down_block_types},
          {"up_block_types", c.up_block_types},
          {"layers_per_block", c.layers_per_block},
          {"attention_head_dim", c.attention_head_dim},
          {"transformer_layers_per_block", c.transformer_layers_per_block},
          {"cross_attention_dim", c.cross_attention_dim},
          {"norm_num_groups", c.norm_num_groups},
          {"norm_eps", c.norm_eps},
          {"use_linear_projection", c.use_linear_projection},
          {"flip_sin_to_cos", c.flip_sin_to_cos},
          {"freq_shift", c.freq_shift}};
}

nlohmann::json vae_json(const models::SdVaeConfig& c) {
  return {{"_class_name", "AutoencoderKL"},
          {"in_channels", c.in_channels},
          {"out_channels", c.out_channels},
          {"latent_channels", c.latent_channels},
          {"block_out_channels", c.block_out_channels},
          {"down_block_types", c.down_block_types},
          {"up_block_types", c.up_block_types},
          {"layers_per_block", c.layers_per_block},
          {"norm_num_groups", c.norm_num_groups},
          {"scaling_factor", c.scaling_factor}};
}

void write_json(const fs::path& path, const nlohmann::json& j) {
  fs::create_directories(path.parent_path());
  std::ofstream out(path);
  out << j.dump(2) << '\n';
  if (!out) throw std::runtime_error("bench paint: cannot write " + path.string());
}

// unet/ vae/ scheduler/ of one diffusers pipeline folder.
void write_pipeline_folder(const fs::path& dir, const models::UNetConfig& unet,
                           const std::vector<std::pair<std::string, models::Shape>>& unet_tensors,
                           const models::SdVaeConfig& vae, std::uint64_t seed) {
  write_json(dir / "unet" / "config.json", unet_json(unet));
  write_random_weights(dir / "unet" / "diffusion_pytorch_model.safetensors", unet_tensors, seed);
  write_json(dir / "vae" / "config.json", vae_json(vae));
  write_random_weights(dir / "vae" / "diffusion_pytorch_model.safetensors",
                       models::SdVae::expected_tensors(vae), seed + 1);
  // SD2's training schedule (the samplers take their step rules from the stages).
  write_json(dir / "scheduler" / "scheduler_config.json", {{"num_train_timesteps", 1000},
                                                           {"beta_start", 0.00085},
                                                           {"beta_end", 0.012},
                                                           {"beta_schedule", "scaled_linear"},
                                                           {"prediction_type", "epsilon"},
                                                           {"timestep_spacing", "leading"},
                                                           {"steps_offset", 1}});
}

// The official folders' layout with random weights: hunyuan3d-paint-v2-0-turbo/ (or
// hunyuan3d-paint-v2-0/) and hunyuan3d-delight-v2-0/ with its text encoder (SD2's OpenCLIP text
// tower, 23 layers of 1024) and a tokenizer holding the empty prompt's special tokens.
void write_folders(const fs::path& paint, const fs::path& delight, const Configs& cfg, bool tiny) {
  write_pipeline_folder(paint, cfg.paint, models::MultiviewUNet::expected_tensors(cfg.paint),
                        cfg.vae, 21);
  write_pipeline_folder(delight, cfg.delight,
                        models::UNet2DCondition::expected_tensors(cfg.delight), cfg.vae, 31);
  models::ClipTextConfig text;
  if (tiny) {
    text.vocab_size = 8;
    text.hidden_size = cfg.delight.cross_attention_dim;
    text.intermediate_size = 2 * text.hidden_size;
    text.num_hidden_layers = 1;
    text.num_attention_heads = 2;
  }
  write_json(delight / "text_encoder" / "config.json",
             {{"vocab_size", text.vocab_size},
              {"hidden_size", text.hidden_size},
              {"intermediate_size", text.intermediate_size},
              {"num_hidden_layers", text.num_hidden_layers},
              {"num_attention_heads", text.num_attention_heads},
              {"max_position_embeddings", text.max_position_embeddings},
              {"layer_norm_eps", text.layer_norm_eps},
              {"hidden_act", text.hidden_act}});
  write_random_weights(delight / "text_encoder" / "model.safetensors",
                       models::ClipTextEncoder::expected_tensors(text), 41);
  // CLIP's ids: BOS and EOS last in the vocabulary, "!" (0) pads as SD2's tokenizer does.
  write_json(
      delight / "tokenizer" / "vocab.json",
      {{"!", 0}, {"<|startoftext|>", text.vocab_size - 2}, {"<|endoftext|>", text.vocab_size - 1}});
  write_json(
      delight / "tokenizer" / "special_tokens_map.json",
      {{"bos_token", "<|startoftext|>"}, {"eos_token", "<|endoftext|>"}, {"pad_token", "!"}});
}

// Writes both folders under `root` beside any others, each first as NAME.partial (removed when
// anything fails), so a folder appears only whole. A model folder already there is never
// written over: random weights would silently replace the real ones.
void write_model_folders(const fs::path& root, const Configs& cfg, bool turbo, bool tiny) {
  const std::string names[2] = {turbo ? "hunyuan3d-paint-v2-0-turbo" : "hunyuan3d-paint-v2-0",
                                "hunyuan3d-delight-v2-0"};
  for (const std::string& name : names)
    if (fs::exists(root / name))
      throw pipeline::ConfigError("bench paint: --write-models " + root.string() + " already has " +
                                  name + "/; random weights are never written over a model folder");
  const fs::path partial[2] = {root / (names[0] + ".partial"), root / (names[1] + ".partial")};
  try {
    for (const fs::path& p : partial) fs::remove_all(p);
    write_folders(partial[0], partial[1], cfg, tiny);
    for (int i = 0; i < 2; ++i) fs::rename(partial[i], root / names[i]);
  } catch (...) {
    std::error_code ec;
    for (const fs::path& p : partial) fs::remove_all(p, ec);
    throw;
  }
}

}  // namespace

void add_bench_paint(CLI::App& bench, BenchPaintOptions& opt) {
  auto* c = bench.add_subcommand(
      "paint",
      "Time the networks of a Hunyuan3D-2 texture at the official sizes with random weights: the "
      "delight model on the reference, then the paint model on N views (turbo: 10 LCM steps); "
      "prints one JSON line per run");
  c->add_option("--device", opt.device, "cpu, or cuda")->capture_default_str();
  c->add_option("--precision", opt.precision, "CPU weights: auto, fp32 or bf16 (cuda: bf16)")
      ->capture_default_str();
  c->add_flag("--turbo,!--normal", opt.turbo,
              "the turbo paint model (10 LCM steps, no guidance; the default) or the normal one "
              "(30 Euler steps, guidance 2)");
  c->add_option("--views", opt.views, "views painted")
      ->capture_default_str()
      ->check(CLI::Range(1, 12));
  c->add_option("--size", opt.size, "view size in pixels, a multiple of 64")
      ->capture_default_str()
      ->check(CLI::Range(64, 2048));
  c->add_option("--delight-steps", opt.delight_steps, "delight steps (0: no delight model)")
      ->capture_default_str()
      ->check(CLI::Range(0, 1000));
  c->add_flag("--tiny", opt.tiny, "tiny networks (checks the path, times nothing useful)");
  c->add_option("--write-models", opt.write_models,
                "instead of timing, write these networks with their random weights as model "
                "folders in the official layout (hunyuan3d-paint-v2-0[-turbo]/, "
                "hunyuan3d-delight-v2-0/) into this folder, for timing `gen3d texture --models` "
                "end to end");
  c->add_option("--reps", opt.reps, "runs (the first also uploads weights to a device)")
      ->capture_default_str()
      ->check(CLI::Range(1, 100));
  opt.command = c;
}

int cmd_bench_paint(const BenchPaintOptions& opt) {
  const models::Device device = models::parse_device(opt.device);
  if (opt.size % 64 != 0)
    throw pipeline::ConfigError("bench paint: --size " + std::to_string(opt.size) +
                                " is not a multiple of 64");
  models::Precision precision;
  try {
    precision = models::resolve_precision(models::parse_precision(opt.precision));
  } catch (const std::exception& e) {
    throw pipeline::ConfigError(std::string("bench paint: ") + e.what());
  }
  if (precision == models::Precision::kInt8)
    throw pipeline::ConfigError("bench paint: the paint networks run fp32 or bf16");
  if (device != models::Device::kCpu) {
    if (precision != models::Precision::kBf16 && opt.precision != "auto")
      throw pipeline::ConfigError("bench paint: --device cuda runs the networks in bf16");
    use_device(device);
    precision = models::Precision::kBf16;
  }
  const models::WeightStorage storage = models::storage_for(precision);
  const Configs cfg = configs(opt.tiny);
  if (!opt.write_models.empty()) {
    const auto t0 = Clock::now();
    write_model_folders(opt.write_models, cfg, opt.turbo, opt.tiny);
    spdlog::info("bench paint: random model folders written to {} in {:.1f} s", opt.write_models,
                 seconds_since(t0));
    return 0;
  }

  const auto t_build = Clock::now();
  models::PaintModel paint;
  paint.dir = "random";
  paint.unet = models::MultiviewUNet::random(cfg.paint, 11, 77, storage, device);
  paint.vae = random_vae(cfg.vae, storage, device);
  models::DelightModel delight;
  if (opt.delight_steps > 0) {
    delight.dir = "random";
    models::nn::RandomParams rnd(models::nn::uniform_init(12), storage);
    models::UNetLoadOptions lo;
    lo.storage = storage;
    lo.device = device;
    delight.unet = std::make_shared<const models::UNet2DCondition>(
        models::UNet2DCondition::load(cfg.delight, rnd, lo));
    delight.vae = paint.vae;  // the same SD VAE architecture; its weights do not change the time
    delight.empty_prompt = uniform({1, 77, cfg.delight.cross_attention_dim}, 13);
  }
  const double build_s = seconds_since(t_build);

  const int S = opt.size, N = opt.views;
  models::PaintInputs in;
  in.reference = uniform({1, S, S, 3}, 1);
  in.normals = uniform({N, S, S, 3}, 2);
  in.positions = uniform({N, S, S, 3}, 3);
  const int azim[6] = {0, 90, 180, 270, 0, 180}, elev[6] = {0, 0, 0, 0, 90, -90};
  for (int v = 0; v < N; ++v)
    in.cameras.push_back(models::MultiviewUNet::camera_id(azim[v % 6], elev[v % 6]));
  models::PaintOptions po;
  po.turbo = opt.turbo;
  models::DelightModelOptions dopt;
  dopt.steps = opt.delight_steps;

  for (int rep = 0; rep < opt.reps; ++rep) {
    nlohmann::json stages;
    const auto t0 = Clock::now();
    if (opt.delight_steps > 0) {
      const auto ts = Clock::now();
      (void)models::delight_network(delight, in.reference, dopt);
      stages["delight"] = seconds_since(ts);
    }
    int steps = 0;
    const auto tp = Clock::now();
    const models::Tensor views =
        models::paint_views(paint, in, po, nullptr, [&](const models::PaintStep&) { ++steps; });
    stages["paint"] = seconds_since(tp);
    nlohmann::json j;
    j["bench"] = "paint";
    j["rep"] = rep;
    j["model"] = std::string(opt.turbo ? "turbo" : "normal") + (opt.tiny ? " (tiny)" : "");
    j["device"] = models::device_name(device);
    if (device != models::Device::kCpu) j["gpu"] = device_description(device);
    j["precision"] = models::precision_name(precision);
    j["views"] = N;
    j["size"] = S;
    j["paint_steps"] = steps;
    j["delight_steps"] = opt.delight_steps;
    j["total_s"] = seconds_since(t0);
    j["stages"] = stages;
    j["build_s"] = build_s;
    j["parameters"] = {{"paint_unet", paint.unet->num_parameters()},
                       {"vae", paint.vae->num_parameters()},
                       {"delight_unet", delight.unet ? delight.unet->num_parameters() : 0}};
    j["output_shape"] = views.shape().str();
    rusage u{};
    getrusage(RUSAGE_SELF, &u);
    j["peak_rss_gib"] = static_cast<double>(u.ru_maxrss) / (1024.0 * 1024.0);  // KiB
    std::printf("%s\n", j.dump().c_str());
    std::fflush(stdout);
  }
  return 0;
}

}  // namespace gen3d::app::cli
