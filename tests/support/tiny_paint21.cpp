#include "support/tiny_paint21.h"

#include <cmath>
#include <filesystem>
#include <fstream>
#include <random>
#include <stdexcept>

#include <nlohmann/json.hpp>

#include "models/core/safetensors.h"
#include "models/paint/pbr_unet.h"
#include "models/paint/sd_vae.h"
#include "support/tiny_models.h"
#include "support/torch_save.h"

namespace gen3d::test {
namespace {

namespace fs = std::filesystem;
using models::Shape;
using models::Tensor;
using nlohmann::json;

constexpr int kDinoWidth = 16;
constexpr int kTextTokens = 5;

// SD2-style UNet, two levels (the paint21 golden set's widths): in_channels 4 = VAE latents.
json unet_config() {
  return {{"_class_name", "UNet2DConditionModel"},
          {"sample_size", 8},
          {"in_channels", 4},
          {"out_channels", 4},
          {"down_block_types", {"CrossAttnDownBlock2D", "DownBlock2D"}},
          {"up_block_types", {"UpBlock2D", "CrossAttnUpBlock2D"}},
          {"block_out_channels", {32, 32}},
          {"layers_per_block", 1},
          {"attention_head_dim", {2, 2}},
          {"cross_attention_dim", 24},
          {"norm_num_groups", 8},
          {"use_linear_projection", true},
          {"upcast_attention", false}};
}

// Four levels: downsampling 8 as the SD VAE.
json vae_config() {
  return {
      {"_class_name", "AutoencoderKL"},
      {"in_channels", 3},
      {"out_channels", 3},
      {"down_block_types",
       {"DownEncoderBlock2D", "DownEncoderBlock2D", "DownEncoderBlock2D", "DownEncoderBlock2D"}},
      {"up_block_types",
       {"UpDecoderBlock2D", "UpDecoderBlock2D", "UpDecoderBlock2D", "UpDecoderBlock2D"}},
      {"block_out_channels", {8, 8, 16, 16}},
      {"layers_per_block", 1},
      {"act_fn", "silu"},
      {"latent_channels", 4},
      {"norm_num_groups", 4},
      {"sample_size", 64},
      {"scaling_factor", 0.18215}};
}

json scheduler_config() {
  return {{"_class_name", "DDIMScheduler"},
          {"num_train_timesteps", 1000},
          {"beta_start", 0.00085},
          {"beta_end", 0.012},
          {"beta_schedule", "scaled_linear"},
          {"prediction_type", "v_prediction"},
          {"steps_offset", 1},
          {"timestep_spacing", "leading"},
          {"clip_sample", false},
          {"set_alpha_to_one", false},
          {"rescale_betas_zero_snr", false}};
}

void write_text(const fs::path& path, const std::string& text) {
  fs::create_directories(path.parent_path());
  std::ofstream out(path);
  out << text;
  if (!out) throw std::runtime_error("cannot write " + path.string());
}

bool ends_with(const std::string& s, const std::string& tail) {
  return s.size() >= tail.size() && s.compare(s.size() - tail.size(), tail.size(), tail) == 0;
}

// Seeded values by role: norm scales around 1, biases small, learned prompts N(0, 1), other
// weights N(0, 1 / fan_in) — every branch contributes and activations stay O(1).
NamedTensors random_weights(const std::vector<std::pair<std::string, Shape>>& shapes,
                            std::uint64_t seed) {
  std::mt19937_64 rng(seed);
  NamedTensors out;
  for (const auto& [name, shape] : shapes) {
    Tensor t(shape);
    const bool norm = name.find("norm") != std::string::npos;
    double mean = 0.0, sd = 0.1;
    if (name.find("learned_text_clip") != std::string::npos) {
      sd = 1.0;
    } else if (ends_with(name, ".bias")) {
      sd = norm ? 0.05 : 0.1;
    } else if (norm) {
      mean = 1.0;
      sd = 0.1;
    } else if (shape.rank() >= 2) {
      sd = 1.0 / std::sqrt(static_cast<double>(t.numel() / shape[0]));
    }
    std::normal_distribution<double> nd(mean, sd);
    for (float& v : t.span()) v = static_cast<float>(nd(rng));
    out.emplace_back(name, std::move(t));
  }
  return out;
}

}  // namespace

TinyPaint21Folder write_tiny_paint21_folder(const std::string& root, std::uint64_t seed) {
  TinyPaint21Folder f;
  const fs::path paint = fs::path(root) / "hunyuan3d-paintpbr-v2-1";
  const fs::path dino = fs::path(root) / "dinov2-giant";  // where gen3d texture --models looks
  f.dir = paint.string();
  f.dino_dir = dino.string();
  f.dino_width = kDinoWidth;
  f.downscale = 8;

  const json unet = unet_config();
  write_text(paint / "unet" / "config.json", unet.dump(2));
  const auto unet_shapes = models::PbrUNet::expected_tensors(
      models::UNetConfig::parse(unet.dump(), "tiny unet"), kTextTokens, kDinoWidth);
  write_torch_save((paint / "unet" / "diffusion_pytorch_model.bin").string(),
                   {{"", random_weights(unet_shapes, seed)}}, models::DType::kF32);

  const json vae = vae_config();
  write_text(paint / "vae" / "config.json", vae.dump(2));
  const auto vae_shapes =
      models::SdVae::expected_tensors(models::SdVaeConfig::parse(vae.dump(), "tiny vae"));
  write_torch_save((paint / "vae" / "diffusion_pytorch_model.bin").string(),
                   {{"", random_weights(vae_shapes, seed + 1)}}, models::DType::kF32);

  write_text(paint / "scheduler" / "scheduler_config.json", scheduler_config().dump(2));

  // DINOv2: image_size 28 (a 2 × 2 stored grid, resampled to the 16 × 16 patches of 224).
  write_text(dino / "config.json", tiny_dinov2_config_json(kDinoWidth, 2, 1, 28));
  write_text(dino / "preprocessor_config.json",
             json{{"crop_size", {{"height", 224}, {"width", 224}}},
                  {"do_center_crop", true},
                  {"do_convert_rgb", true},
                  {"do_normalize", true},
                  {"do_rescale", true},
                  {"do_resize", true},
                  {"image_mean", {0.485, 0.456, 0.406}},
                  {"image_processor_type", "BitImageProcessor"},
                  {"image_std", {0.229, 0.224, 0.225}},
                  {"resample", 3},
                  {"rescale_factor", 1.0 / 255.0},
                  {"size", {{"shortest_edge", 256}}}}
                 .dump(2));
  const auto dw = tiny_dinov2_weights(seed + 2, kDinoWidth, 1, 28);
  std::vector<std::pair<std::string, const Tensor*>> refs;
  for (const auto& [name, t] : dw) refs.emplace_back(name, &t);
  models::write_safetensors((dino / "model.safetensors").string(), refs, models::DType::kF32,
                            {{"format", "pt"}});
  return f;
}

}  // namespace gen3d::test
