#include "models/paint/delight_model.h"

#include <algorithm>
#include <cmath>
#include <cstring>
#include <filesystem>
#include <string>

#include <spdlog/spdlog.h>

#include "models/core/error.h"
#include "models/core/precision.h"
#include "models/core/safetensors.h"
#include "models/nn/init.h"
#include "models/nn/model_cache.h"
#include "models/nn/weight_files.h"
#include "models/paint/clip_text.h"
#include "models/paint/sd_vae.h"
#include "models/paint/unet.h"
#include "progress/progress.h"

namespace gen3d::models {

namespace {

namespace fs = std::filesystem;
using i64 = std::int64_t;

}  // namespace

std::shared_ptr<const DelightModel> load_delight_model(const std::string& dir,
                                                       WeightStorage storage, Device device) {
  if (!fs::is_directory(dir)) throw ModelError("delight model folder not found: " + dir);
  storage = storage_on(device, storage, "delight model " + dir);
  const fs::path root(dir);
  auto m = std::make_shared<DelightModel>();
  m->dir = dir;
  m->scheduler = SchedulerConfig::read((root / "scheduler" / "scheduler_config.json").string());
  std::unique_ptr<SdVae> vae = SdVae::load_folder((root / "vae").string(), storage);
  vae->set_device(device);
  m->vae = std::move(vae);
  {
    const UNetConfig cfg = UNetConfig::read((root / "unet" / "config.json").string());
    if (cfg.in_channels != 8)
      throw ModelError((root / "unet" / "config.json").string() + ": in_channels " +
                       std::to_string(cfg.in_channels) +
                       ", the InstructPix2Pix UNet has 8 (noisy latent + image latent)");
    m->unet = std::make_shared<const UNet2DCondition>(
        UNet2DCondition::load(cfg,
                              SafetensorsFile::open(nn::find_weights((root / "unet").string(),
                                                                     "diffusion_pytorch_model")),
                              storage, device));
  }
  {
    const auto text = ClipTextEncoder::load_folder((root / "text_encoder").string(), storage);
    const auto tokens = EmptyPromptTokens::read((root / "tokenizer").string());
    m->empty_prompt = text->encode(tokens.ids(text->config().max_position_embeddings));
  }
  if (m->empty_prompt.dim(2) != m->unet->config().cross_attention_dim)
    throw ModelError(dir + ": text encoder width " + std::to_string(m->empty_prompt.dim(2)) +
                     " does not match the UNet's cross_attention_dim " +
                     std::to_string(m->unet->config().cross_attention_dim));
  spdlog::info("delight model {}: networks in {} on {}", dir,
               storage == WeightStorage::kBF16
                   ? std::string("bf16")
                   : "fp32 (" + std::string(storage_name(storage)) + " weights)",
               device_name(device));
  return m;
}

std::shared_ptr<const DelightModel> shared_delight_model(const std::string& dir,
                                                         WeightStorage storage, Device device) {
  // Keyed by what loads: f32 and bf16 requests for a device share one bf16 model.
  storage = storage_on(device, storage, "delight model " + dir);
  return nn::shared_model<DelightModel>(nn::canonical_path(dir) + "|" +
                                            std::string(storage_name(storage)) + "|" +
                                            device_name(device),
                                        [&] { return *load_delight_model(dir, storage, device); });
}

Tensor delight_network(const DelightModel& model, const Tensor& image,
                       const DelightModelOptions& opt, const DelightObserver& observer) {
  const SdVae& vae = *model.vae;
  const UNet2DCondition& unet = *model.unet;
  if (image.rank() != 4 || image.dim(0) != 1 || image.dim(3) != 3)
    throw ModelError("delight: image has shape " + image.shape().str() + ", expected (1, H, W, 3)");

  // The image latent is the posterior's mode, unscaled (InstructPix2Pix conditioning).
  const Tensor image_lat = vae.encode(image).mean;  // (1, h, w, c)
  const i64 h = image_lat.dim(1), w = image_lat.dim(2), c = image_lat.dim(3);
  const i64 count = image_lat.numel();

  const bool cfg = opt.guidance > 1.0f && opt.image_guidance >= 1.0f;
  const int batch = cfg ? 3 : 1;
  // Rows [prompt, negative, negative] are all the empty prompt: one row serves every item.
  const Tensor& text = model.empty_prompt;

  EulerAncestralScheduler sched(model.scheduler);
  sched.set_timesteps(opt.steps);
  Tensor x = nn::gaussian_noise(Shape{1, h, w, c}, opt.seed);
  const float sigma0 = sched.init_noise_sigma();
  for (i64 k = 0; k < count; ++k) x.data()[k] *= sigma0;

  Tensor scaled(Shape{1, h, w, c});
  Tensor input(Shape{batch, h, w, 2 * c});
  Tensor eps(Shape{1, h, w, c});
  const i64 pixels = h * w;
  progress::Steps steps("delight step", sched.size());
  for (int i = 0; i < sched.size(); ++i) {
    const float t = sched.timesteps()[static_cast<std::size_t>(i)];
    sched.scale_model_input(x.data(), count, i, scaled.data());
    // [scaled latent | image latent]; the image latent is zero in the third (unconditional) row.
    for (int b = 0; b < batch; ++b)
      for (i64 px = 0; px < pixels; ++px) {
        float* dst = input.data() + (b * pixels + px) * 2 * c;
        std::memcpy(dst, scaled.data() + px * c, sizeof(float) * c);
        if (b < 2)
          std::memcpy(dst + c, image_lat.data() + px * c, sizeof(float) * c);
        else
          std::fill(dst + c, dst + 2 * c, 0.0f);
      }
    const std::vector<float> timesteps(static_cast<std::size_t>(batch), t);
    const Tensor out = unet.forward(input, timesteps, text);
    if (cfg) {
      const float* e_text = out.data();
      const float* e_image = out.data() + count;
      const float* e_none = out.data() + 2 * count;
      for (i64 k = 0; k < count; ++k)
        eps.data()[k] = e_none[k] + opt.guidance * (e_text[k] - e_image[k]) +
                        opt.image_guidance * (e_image[k] - e_none[k]);
    } else {
      std::memcpy(eps.data(), out.data(), sizeof(float) * count);
    }
    const Tensor noise =
        nn::gaussian_noise(Shape{1, h, w, c}, opt.seed + 1 + static_cast<std::uint64_t>(i));
    sched.step(x.data(), eps.data(), noise.data(), count, i);
    if (observer) observer(i, sched.size());
    steps.done(i + 1);
  }

  // The pipeline's PIL output: 8-bit.
  Tensor out = vae.decode_to_image(x);
  for (float& v : out.span()) v = std::round(v * 255.0f) / 255.0f;
  return out;
}

}  // namespace gen3d::models
