#include "models/paint/multiview_diffusion.h"

#include <algorithm>
#include <cstring>
#include <filesystem>

#include <spdlog/spdlog.h>

#include "models/core/error.h"
#include "models/core/precision.h"
#include "models/nn/init.h"
#include "models/nn/model_cache.h"
#include "models/nn/weight_files.h"
#include "models/paint/mvunet.h"
#include "models/paint/sd_vae.h"
#include "progress/progress.h"

namespace gen3d::models {

namespace {

namespace fs = std::filesystem;

enum Stream : std::uint64_t { kVaeRef = 1, kVaeNormal, kVaePosition, kInit, kStep0 };

Tensor noise_or(const Tensor* injected, const Shape& shape, std::uint64_t seed,
                std::uint64_t stream, const char* what) {
  if (injected && !injected->empty()) {
    if (!(injected->shape() == shape))
      throw ModelError(std::string("injected noise '") + what + "' has shape " +
                       injected->shape().str() + ", expected " + shape.str());
    return injected->clone();
  }
  return nn::gaussian_noise(shape, nn::stream_seed(seed, stream));
}

// (mean + std·ε)·scaling_factor of a batch of images (the pipeline's encode_images).
Tensor encode_sample(const SdVae& vae, const Tensor& images, const Tensor* injected,
                     std::uint64_t seed, std::uint64_t stream, const char* what) {
  const SdVaeConfig& c = vae.config();
  const std::int64_t ds = c.downscale();
  const Tensor eps = noise_or(
      injected, Shape{images.dim(0), images.dim(1) / ds, images.dim(2) / ds, c.latent_channels},
      seed, stream, what);
  return vae.encode_scaled(images, &eps);
}

// `copies` copies of x stacked along dim 0 (any rank >= 1).
Tensor repeat0(const Tensor& x, int copies) {
  std::vector<std::int64_t> dims(x.shape().dims().begin(), x.shape().dims().end());
  dims[0] *= copies;
  Tensor out(Shape::from(dims));
  for (int c = 0; c < copies; ++c)
    std::memcpy(out.data() + c * x.numel(), x.data(), sizeof(float) * x.numel());
  return out;
}

// The prompt batch: [zeros, cond] with CFG, else cond; cond is (1, T, D).
Tensor text_batch(const Tensor& cond, bool cfg) {
  if (!cfg) return cond.clone();
  const Shape& s = cond.shape();
  Tensor out(Shape{2, s[1], s[2]});
  std::memcpy(out.data() + cond.numel(), cond.data(), sizeof(float) * cond.numel());
  return out;
}

void check_images(const Tensor& t, const char* what, std::int64_t n, std::int64_t size) {
  if (t.rank() != 4 || (n > 0 && t.dim(0) != n) || t.dim(1) != size || t.dim(2) != size ||
      t.dim(3) != 3)
    throw ModelError(std::string("paint input '") + what + "' has shape " + t.shape().str() +
                     ", expected (" + (n > 0 ? std::to_string(n) : std::string("N")) + ", " +
                     std::to_string(size) + ", " + std::to_string(size) + ", 3)");
}

}  // namespace

std::shared_ptr<const PaintModel> load_paint_model(const std::string& dir, WeightStorage storage,
                                                   Device device) {
  if (!fs::is_directory(dir)) throw ModelError("paint model folder not found: " + dir);
  storage = storage_on(device, storage, "paint model " + dir);
  auto m = std::make_shared<PaintModel>();
  m->dir = dir;
  const fs::path root(dir);
  m->scheduler = SchedulerConfig::read((root / "scheduler" / "scheduler_config.json").string());
  std::unique_ptr<SdVae> vae = SdVae::load_folder((root / "vae").string(), storage);
  vae->set_device(device);
  m->vae = std::move(vae);
  m->unet = MultiviewUNet::load_folder((root / "unet").string(), storage, device);
  spdlog::info("paint model {}: networks in {} on {}", dir,
               storage == WeightStorage::kBF16
                   ? std::string("bf16")
                   : "fp32 (" + std::string(storage_name(storage)) + " weights)",
               device_name(device));
  return m;
}

std::shared_ptr<const PaintModel> shared_paint_model(const std::string& dir, WeightStorage storage,
                                                     Device device) {
  // Keyed by what loads: f32 and bf16 requests for a device share one bf16 model.
  storage = storage_on(device, storage, "paint model " + dir);
  return nn::shared_model<PaintModel>(nn::canonical_path(dir) + "|" +
                                          std::string(storage_name(storage)) + "|" +
                                          device_name(device),
                                      [&] { return *load_paint_model(dir, storage, device); });
}

Tensor paint_views(const PaintModel& model, const PaintInputs& in, const PaintOptions& opt,
                   const PaintNoise* noise, const PaintObserver& observer,
                   PaintLatents* latents_out, Tensor* decoded_out) {
  const MultiviewUNet& unet = *model.unet;
  const SdVae& vae = *model.vae;
  if (in.normals.rank() != 4) throw ModelError("paint input 'normals' must be (N, S, S, 3)");
  const std::int64_t n = in.normals.dim(0);
  const std::int64_t size = in.normals.dim(1);
  check_images(in.reference, "reference", 1, size);
  check_images(in.normals, "normals", n, size);
  check_images(in.positions, "positions", n, size);
  if (static_cast<std::int64_t>(in.cameras.size()) != n)
    throw ModelError("paint: " + std::to_string(in.cameras.size()) + " camera ids for " +
                     std::to_string(n) + " views");
  const int views = static_cast<int>(n);

  // Conditions: the reference, normal and position images through the VAE (posterior samples).
  const Tensor ref_lat = encode_sample(vae, in.reference, noise ? &noise->vae_ref : nullptr,
                                       opt.seed, kVaeRef, "vae_ref");
  const Tensor normal_lat = encode_sample(vae, in.normals, noise ? &noise->vae_normal : nullptr,
                                          opt.seed, kVaeNormal, "vae_normal");
  const Tensor position_lat =
      encode_sample(vae, in.positions, noise ? &noise->vae_position : nullptr, opt.seed,
                    kVaePosition, "vae_position");
  if (latents_out) *latents_out = {ref_lat.clone(), normal_lat.clone(), position_lat.clone()};

  if (opt.cache_interval < 1)
    throw ModelError("paint: cache_interval must be >= 1, got " +
                     std::to_string(opt.cache_interval));
  const bool cfg = !opt.turbo && opt.guidance > 1.0f;
  const int batch = cfg ? 2 : 1;
  const Shape lat_shape = normal_lat.shape();  // (N, h, w, 4)

  // Reference features once: [zeros, ref] with CFG (the zero row only meets ref_scale 0).
  RefFeatures ref;
  {
    Tensor ref_batch =
        cfg ? Tensor(Shape{2, ref_lat.dim(1), ref_lat.dim(2), ref_lat.dim(3)}) : ref_lat.clone();
    if (cfg)
      std::memcpy(ref_batch.data() + ref_lat.numel(), ref_lat.data(),
                  sizeof(float) * ref_lat.numel());
    const Tensor& text_ref = unet.learned_text_ref();
    ref = unet.reference_features(ref_batch, 1, repeat0(text_ref, batch));
  }
  const Tensor text = text_batch(unet.learned_text_gen(), cfg);
  const Tensor normals_b = repeat0(normal_lat, batch);
  const Tensor positions_b = repeat0(position_lat, batch);
  std::vector<int> cameras;
  for (int b = 0; b < batch; ++b)
    cameras.insert(cameras.end(), in.cameras.begin(), in.cameras.end());
  const std::vector<float> ref_scale =
      cfg ? std::vector<float>{0.0f, 1.0f} : std::vector<float>{1.0f};
  // What every step shares: the keys / values of the reference features and of the prompt.
  const MultiviewConditions cond = unet.conditions(text, ref, ref_scale);
  ref = RefFeatures();  // projected: the features themselves are no longer needed
  UNetFeatureCache deep_cache;
  const bool use_cache = !opt.turbo && opt.cache_interval > 1;

  const std::int64_t count = normal_lat.numel();
  Tensor x = noise_or(noise ? &noise->init : nullptr, lat_shape, opt.seed, kInit, "init");
  Tensor model_input(Shape{batch * n, lat_shape[1], lat_shape[2], lat_shape[3]});
  Tensor guided(lat_shape);

  progress::Steps steps;  // "paint step" i of N, to the progress hub
  const auto run_step = [&](int i, float t, const auto& scale_input, const auto& update) {
    for (int b = 0; b < batch; ++b) scale_input(model_input.data() + b * count);
    const bool reuse = use_cache && i % opt.cache_interval != 0;
    Tensor raw = unet.forward(model_input, normals_b, positions_b, t, cameras, cond, views,
                              use_cache ? &deep_cache : nullptr, reuse);
    if (cfg) {
      const float g = opt.guidance;
      const float* u = raw.data();
      const float* c = raw.data() + count;
      for (std::int64_t k = 0; k < count; ++k) guided.data()[k] = u[k] + g * (c[k] - u[k]);
    } else {
      std::memcpy(guided.data(), raw.data(), sizeof(float) * count);
    }
    update(i);
    if (observer) observer(PaintStep{i, t, &model_input, &raw, &guided, &x});
    steps.done(i + 1);
  };

  const auto step_noise = [&](int i) {
    const Tensor* injected =
        noise && static_cast<std::size_t>(i) < noise->steps.size() ? &noise->steps[i] : nullptr;
    return noise_or(injected, lat_shape, opt.seed, kStep0 + static_cast<std::uint64_t>(i), "step");
  };

  if (!opt.turbo) {
    SchedulerConfig sc = model.scheduler;
    sc.timestep_spacing = "trailing";  // the paint pipeline's override
    EulerAncestralScheduler sched(sc);
    sched.set_timesteps(opt.steps);
    steps = progress::Steps("paint step", sched.size());
    const float sigma0 = sched.init_noise_sigma();
    for (std::int64_t k = 0; k < count; ++k) x.data()[k] *= sigma0;
    for (int i = 0; i < sched.size(); ++i) {
      const float t = sched.timesteps()[static_cast<std::size_t>(i)];
      run_step(
          i, t, [&](float* dst) { sched.scale_model_input(x.data(), count, i, dst); },
          [&](int s) {
            const Tensor eps = step_noise(s);
            sched.step(x.data(), guided.data(), eps.data(), count, s);
          });
    }
  } else {
    SchedulerConfig sc = model.scheduler;
    sc.timestep_spacing = "trailing";
    LcmScheduler sched(sc);
    sched.set_timesteps(LcmScheduler::turbo_timesteps(10));
    const int turbo_steps = static_cast<int>(sched.timesteps().size());
    steps = progress::Steps("paint step", turbo_steps);
    for (int i = 0; i < turbo_steps; ++i) {
      const float t = sched.timesteps()[static_cast<std::size_t>(i)];
      run_step(
          i, t, [&](float* dst) { std::memcpy(dst, x.data(), sizeof(float) * count); },
          [&](int s) {
            if (s + 1 < turbo_steps) {
              const Tensor eps = step_noise(s);
              sched.step(x.data(), guided.data(), eps.data(), count, s, nullptr);
            } else {
              sched.step(x.data(), guided.data(), nullptr, count, s, nullptr);
            }
          });
    }
  }

  // Decode: image = clamp(decode(latents / sf) / 2 + 0.5, 0, 1).
  const float sf = static_cast<float>(vae.config().scaling_factor);
  for (std::int64_t k = 0; k < count; ++k) x.data()[k] /= sf;
  Tensor decoded = vae.decode(x);
  Tensor image(decoded.shape());
  for (std::int64_t k = 0; k < image.numel(); ++k)
    image.data()[k] = std::clamp(decoded.data()[k] / 2.0f + 0.5f, 0.0f, 1.0f);
  if (decoded_out) *decoded_out = std::move(decoded);
  return image;
}

}  // namespace gen3d::models
