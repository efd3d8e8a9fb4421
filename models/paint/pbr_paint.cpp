#include "models/paint/pbr_paint.h"

#include <algorithm>
#include <array>
#include <cmath>
#include <cstring>
#include <filesystem>
#include <fstream>
#include <sstream>
#include <vector>

#include <spdlog/spdlog.h>
#include <nlohmann/json.hpp>

#include "models/core/error.h"
#include "models/core/precision.h"
#include "models/nn/config_reader.h"
#include "models/nn/init.h"
#include "models/nn/model_cache.h"
#include "models/nn/weight_files.h"
#include "models/paint/pbr_unet.h"
#include "models/paint/sd_vae.h"
#include "models/shape/dinov2.h"
#include "progress/progress.h"

namespace gen3d::models {

namespace {

namespace fs = std::filesystem;

// Noise streams of one generation (seeded, counter-based: models/nn/init.h).
enum Stream : std::uint64_t { kVaeRef = 1, kVaeNormal, kVaePosition, kInit };

// (mean + std·ε)·scaling_factor: the official encode_images draws posterior.sample().
Tensor encode_sample(const SdVae& vae, const Tensor& images, std::uint64_t seed,
                     std::uint64_t stream) {
  const SdVaeConfig& c = vae.config();
  const std::int64_t ds = c.downscale();
  const Tensor eps = nn::gaussian_noise(
      Shape{images.dim(0), images.dim(1) / ds, images.dim(2) / ds, c.latent_channels},
      nn::stream_seed(seed, stream));
  return vae.encode_scaled(images, &eps);
}

void check_images(const Tensor& t, const char* what, std::int64_t n, std::int64_t size) {
  if (t.rank() != 4 || (n > 0 && t.dim(0) != n) || t.dim(1) != size || t.dim(2) != size ||
      t.dim(3) != 3)
    throw ModelError(std::string("PBR paint input '") + what + "' has shape " + t.shape().str() +
                     ", expected (" + (n > 0 ? std::to_string(n) : std::string("N")) + ", " +
                     std::to_string(size) + ", " + std::to_string(size) + ", 3)");
}

std::string read_text(const fs::path& path) {
  std::ifstream in(path, std::ios::binary);
  if (!in) throw ModelError("cannot read " + path.string());
  std::ostringstream s;
  s << in.rdbuf();
  return s.str();
}

// Pillow's bicubic filter (Resample.c bicubic_filter, a = −0.5), support 2.
double pil_bicubic(double x) {
  constexpr double a = -0.5;
  if (x < 0.0) x = -x;
  if (x < 1.0) return ((a + 2.0) * x - (a + 3.0)) * x * x + 1;
  if (x < 2.0) return (((x - 5) * x + 8) * x - 4) * a;
  return 0.0;
}

constexpr int kPrecisionBits = 32 - 8 - 2;  // Resample.c PRECISION_BITS

// Pillow's precompute_coeffs + normalize_coeffs_8bpc for one axis: per output pixel the first
// input index, the tap count and the fixed-point weights (ksize per pixel).
struct Coeffs {
  int ksize = 0;
  std::vector<int> first, count;
  std::vector<std::int32_t> k;
};

Coeffs pil_coeffs(int in_size, int out_size) {
  const double scale = static_cast<double>(in_size) / out_size;
  const double filterscale = std::max(scale, 1.0);
  const double support = 2.0 * filterscale;
  Coeffs c;
  c.ksize = static_cast<int>(std::ceil(support)) * 2 + 1;
  c.first.resize(static_cast<std::size_t>(out_size));
  c.count.resize(static_cast<std::size_t>(out_size));
  c.k.assign(static_cast<std::size_t>(out_size) * c.ksize, 0);
  std::vector<double> w(static_cast<std::size_t>(c.ksize));
  for (int xx = 0; xx < out_size; ++xx) {
    const double center = (xx + 0.5) * scale;
    const double ss = 1.0 / filterscale;
    // (int) truncates towards zero as the C code does; negative starts clamp to 0 anyway.
    int xmin = static_cast<int>(center - support + 0.5);
    if (xmin < 0) xmin = 0;
    int xmax = static_cast<int>(center + support + 0.5);
    if (xmax > in_size) xmax = in_size;
    xmax -= xmin;
    double ww = 0.0;
    for (int x = 0; x < xmax; ++x) {
      w[static_cast<std::size_t>(x)] = pil_bicubic((x + xmin - center + 0.5) * ss);
      ww += w[static_cast<std::size_t>(x)];
    }
    for (int x = 0; x < xmax; ++x) {
      double v = w[static_cast<std::size_t>(x)];
      if (ww != 0.0) v /= ww;
      const double f = v * (1 << kPrecisionBits);
      c.k[static_cast<std::size_t>(xx) * c.ksize + x] =
          static_cast<std::int32_t>(v < 0 ? -0.5 + f : 0.5 + f);
    }
    c.first[static_cast<std::size_t>(xx)] = xmin;
    c.count[static_cast<std::size_t>(xx)] = xmax;
  }
  return c;
}

std::uint8_t clip8(std::int64_t v) {
  if (v >= (std::int64_t{1} << kPrecisionBits << 8)) return 255;
  if (v <= 0) return 0;
  return static_cast<std::uint8_t>(v >> kPrecisionBits);
}

// One axis of the resample: `along_x` resamples rows, else columns.
image::ImageU8 pil_pass(const image::ImageU8& in, int out_size, bool along_x) {
  const int in_size = along_x ? in.width : in.height;
  const Coeffs c = pil_coeffs(in_size, out_size);
  image::ImageU8 out(along_x ? out_size : in.width, along_x ? in.height : out_size, in.channels);
  const int ch = in.channels;
  for (int y = 0; y < out.height; ++y)
    for (int x = 0; x < out.width; ++x) {
      const int o = along_x ? x : y;
      const std::int32_t* k = c.k.data() + static_cast<std::size_t>(o) * c.ksize;
      const int first = c.first[static_cast<std::size_t>(o)];
      const int count = c.count[static_cast<std::size_t>(o)];
      for (int q = 0; q < ch; ++q) {
        // Resample.c accumulates in a 32-bit int; the weights sum to ~2^22 so 8-bit pixels fit.
        std::int64_t ss = std::int64_t{1} << (kPrecisionBits - 1);
        for (int t = 0; t < count; ++t) {
          const std::uint8_t p = along_x ? in.at(first + t, y)[q] : in.at(x, first + t)[q];
          ss += static_cast<std::int64_t>(p) * k[t];
        }
        out.at(x, y)[q] = clip8(ss);
      }
    }
  return out;
}

}  // namespace

image::ImageU8 resize_pil_bicubic(const image::ImageU8& image, int width, int height) {
  if (image.empty() || image.width <= 0 || image.height <= 0)
    throw ModelError("resize_pil_bicubic: empty image");
  if (width <= 0 || height <= 0)
    throw ModelError("resize_pil_bicubic: size " + std::to_string(width) + "x" +
                     std::to_string(height) + " is not positive");
  // ImagingResampleInner: horizontal pass first, then vertical, each only where the size changes.
  image::ImageU8 out = image;
  if (width != image.width) out = pil_pass(out, width, true);
  if (height != image.height) out = pil_pass(out, height, false);
  return out;
}

Tensor dino_pixel_values(const image::ImageU8& rgb, const DinoPreprocess& opt) {
  if (rgb.channels != 3 || rgb.empty())
    throw ModelError("DINO preprocessing needs an RGB image, got " + std::to_string(rgb.channels) +
                     " channels");
  if (opt.shortest_edge < opt.crop || opt.crop <= 0)
    throw ModelError("DINO preprocessing: crop " + std::to_string(opt.crop) +
                     " larger than the resized edge " + std::to_string(opt.shortest_edge));
  // transformers get_resize_output_image_size(default_to_square=False): the short side becomes
  // shortest_edge, the long one int(shortest_edge · long / short).
  const bool wide = rgb.width >= rgb.height;
  const int s = wide ? rgb.height : rgb.width, l = wide ? rgb.width : rgb.height;
  const int new_long = static_cast<int>(static_cast<double>(opt.shortest_edge) * l / s);
  const int w = wide ? new_long : opt.shortest_edge, h = wide ? opt.shortest_edge : new_long;
  const image::ImageU8 resized = resize_pil_bicubic(rgb, w, h);
  const int top = (h - opt.crop) / 2, left = (w - opt.crop) / 2;
  const std::int64_t c = opt.crop;
  Tensor px(Shape{1, 3, c, c});  // NCHW: the ViT's pixel_values
  for (int q = 0; q < 3; ++q)
    for (int y = 0; y < opt.crop; ++y)
      for (int x = 0; x < opt.crop; ++x) {
        // rescale: float64 multiply, cast to float32; normalize: float32 (x − mean) / std.
        const float v = static_cast<float>(resized.at(left + x, top + y)[q] * (1.0 / 255.0));
        px.data()[(q * c + y) * c + x] = (v - opt.image_mean[static_cast<std::size_t>(q)]) /
                                         opt.image_std[static_cast<std::size_t>(q)];
      }
  return px;
}

DinoPreprocess DinoPreprocess::parse(const std::string& json_text, const std::string& label) {
  nlohmann::json j;
  try {
    j = nlohmann::json::parse(json_text);
  } catch (const nlohmann::json::exception& e) {
    throw ModelError(label + ": not JSON (" + e.what() + ")");
  }
  if (!j.is_object()) throw ModelError(label + ": not a JSON object");
  nn::ConfigReader r(j, label);
  DinoPreprocess p;
  if (r.has("size")) {
    const auto& size = r.at("size");
    if (size.is_object() && size.contains("shortest_edge") &&
        size["shortest_edge"].is_number_integer() && size.size() == 1)
      p.shortest_edge = size["shortest_edge"].get<int>();
    else
      r.problem("size: only {\"shortest_edge\": N} is supported, got " + size.dump());
  }
  if (r.has("crop_size")) {
    const auto& crop = r.at("crop_size");
    if (crop.is_number_integer())
      p.crop = crop.get<int>();
    else if (crop.is_object() && crop.value("height", -1) == crop.value("width", -2))
      p.crop = crop["height"].get<int>();
    else
      r.problem("crop_size: a square crop is expected, got " + crop.dump());
  }
  for (const char* key : {"image_mean", "image_std"}) {
    if (!r.has(key)) continue;
    const auto& v = r.at(key);
    if (!v.is_array() || v.size() != 3 || !v[0].is_number() || !v[1].is_number() ||
        !v[2].is_number()) {
      r.problem(std::string(key) + ": three numbers expected, got " + v.dump());
      continue;
    }
    auto& dst = std::string_view(key) == "image_mean" ? p.image_mean : p.image_std;
    for (std::size_t c = 0; c < 3; ++c) dst[c] = v[c].get<float>();
  }
  for (const char* key :
       {"do_resize", "do_center_crop", "do_rescale", "do_normalize", "do_convert_rgb"})
    r.require(key, true, "this preprocessing");
  r.require("resample", 3, "bicubic resizing (PIL BICUBIC = 3)");
  if (r.has("rescale_factor")) {
    const auto& f = r.at("rescale_factor");
    if (!f.is_number() || std::abs(f.get<double>() - 1.0 / 255.0) > 1e-12)
      r.problem("rescale_factor: only 1/255 is supported, got " + f.dump());
  }
  r.ignore({"image_processor_type", "processor_class", "feature_extractor_type"});
  r.finish(nn::ConfigReader::Unknown::kWarn);
  if (p.crop <= 0 || p.shortest_edge < p.crop)
    throw ModelError(label + ": crop " + std::to_string(p.crop) +
                     " does not fit the resized edge " + std::to_string(p.shortest_edge));
  for (float s : p.image_std)
    if (!(s > 0.0f)) throw ModelError(label + ": image_std must be positive");
  return p;
}

std::string find_dino_weights(const std::string& dir) {
  for (const char* name : {"model.safetensors", "pytorch_model.bin"}) {
    const fs::path p = fs::path(dir) / name;
    if (fs::is_regular_file(p)) return p.string();
  }
  throw ModelError("DINOv2 folder " + dir +
                   " has no weights (looked for model.safetensors, pytorch_model.bin)");
}

std::shared_ptr<const PbrPaintModel> load_pbr_paint_model(const std::string& dir,
                                                          const std::string& dino_dir,
                                                          WeightStorage storage, Device device) {
  if (!fs::is_directory(dir)) throw ModelError("PBR paint model folder not found: " + dir);
  if (!fs::is_directory(dino_dir)) throw ModelError("DINOv2 folder not found: " + dino_dir);
  storage = storage_on(device, storage, "PBR paint model");
  auto m = std::make_shared<PbrPaintModel>();
  m->dir = dir;
  m->dino_dir = dino_dir;
  m->device = device;
  const fs::path root(dir);
  m->scheduler = SchedulerConfig::read((root / "scheduler" / "scheduler_config.json").string());
  {
    std::unique_ptr<SdVae> vae = SdVae::load_folder((root / "vae").string(), storage);
    vae->set_device(device);
    m->vae = std::move(vae);
  }
  m->unet = PbrUNet::load_folder((root / "unet").string(), storage, device);
  const fs::path dino_cfg = fs::path(dino_dir) / "config.json";
  if (!fs::is_regular_file(dino_cfg))
    throw ModelError("DINOv2 config not found: " + dino_cfg.string());
  const Dinov2Config dc = Dinov2Config::from_json(read_text(dino_cfg));
  // AutoImageProcessor reads preprocessor_config.json; the defaults are dinov2-giant's values.
  if (const fs::path pre = fs::path(dino_dir) / "preprocessor_config.json";
      fs::is_regular_file(pre))
    m->dino_preprocess = DinoPreprocess::parse(read_text(pre), pre.string());
  m->dino = std::make_shared<const Dinov2Model>(
      Dinov2Model::load(dc, find_dino_weights(dino_dir), Dinov2Options{storage, device}));
  // The widths must chain: VAE latents feed the UNet, DINO tokens its image projection.
  const SdVaeConfig& vc = m->vae->config();
  if (vc.latent_channels != m->unet->config().in_channels)
    throw ModelError("PBR paint model " + dir + ": vae/ has " + std::to_string(vc.latent_channels) +
                     " latent channels, unet/config.json in_channels " +
                     std::to_string(m->unet->config().in_channels));
  if (m->dino->config().hidden_size != m->unet->dino_dim())
    throw ModelError("PBR paint model " + dir + ": the DINOv2 folder " + dino_dir +
                     " has hidden_size " + std::to_string(m->dino->config().hidden_size) +
                     ", the UNet's image_proj_model_dino takes " +
                     std::to_string(m->unet->dino_dim()));
  spdlog::info("PBR paint model {} (DINOv2 {}): networks in {} on {}", dir, dino_dir,
               storage == WeightStorage::kBF16
                   ? std::string("bf16")
                   : "fp32 (" + std::string(storage_name(storage)) + " weights)",
               device_name(device));
  return m;
}

std::shared_ptr<const PbrPaintModel> shared_pbr_paint_model(const std::string& dir,
                                                            const std::string& dino_dir,
                                                            WeightStorage storage, Device device) {
  storage = storage_on(device, storage, "PBR paint model");
  return nn::shared_model<PbrPaintModel>(
      nn::canonical_path(dir) + "|" + nn::canonical_path(dino_dir) + "|" +
          std::string(storage_name(storage)) + "|" + device_name(device),
      [&] { return *load_pbr_paint_model(dir, dino_dir, storage, device); });
}

void pbr_cfg_combine(const Tensor& raw, float guidance, Tensor& out) {
  const std::int64_t count = out.numel();
  if (raw.numel() != 3 * count)
    throw ModelError("PBR CFG: " + raw.shape().str() + " is not three rows of " +
                     out.shape().str());
  // pipeline.py denoise: g·view_scale with view_scale 1 (no camera_azims passed).
  const float g = guidance * 1.0f;
  const float* u = raw.data();
  const float* r = u + count;
  const float* f = r + count;
  float* o = out.data();
  for (std::int64_t k = 0; k < count; ++k) {
    float v = u[k] + g * (r[k] - u[k]);
    v += g * (f[k] - r[k]);
    o[k] = v;
  }
}

UniPCScheduler pbr_paint_scheduler(const SchedulerConfig& folder_config, int steps) {
  SchedulerConfig sc = folder_config;
  sc.timestep_spacing = "trailing";  // multiview_utils.py: from_config(..., "trailing")
  UniPCScheduler sched(sc);
  sched.set_timesteps(steps);
  return sched;
}

int pbr_cfg_rows(const PbrPaintOptions& options) {
  if (options.guidance <= 1.0f) return 1;
  if (options.cfg_rows != 2 && options.cfg_rows != 3)
    throw ModelError("PBR paint: cfg_rows " + std::to_string(options.cfg_rows) +
                     " (2 or 3 rows with guidance)");
  return options.cfg_rows;
}

namespace {

// Row 0 (uncond) without the reference, every other row with it: [0, 1, 1], [0, 1] or [1].
std::vector<float> cfg_ref_scale(int rows) {
  std::vector<float> ref_scale(static_cast<std::size_t>(rows), 1.0f);
  if (rows > 1) ref_scale[0] = 0.0f;
  return ref_scale;
}

}  // namespace

PbrCondition pbr_paint_condition(const PbrUNet& unet, const Tensor& ref_latents,
                                 const Tensor& dino_tokens, const HalfPositionMaps& maps,
                                 std::int64_t latent_size, int rows) {
  if (dino_tokens.rank() != 3 || dino_tokens.dim(0) != 1)
    throw ModelError("PBR paint: DINO tokens " + dino_tokens.shape().str() +
                     ", expected (1, T, C)");
  if (rows < 1 || rows > 3) throw ModelError("PBR paint: 1 to 3 CFG rows");
  // DINO rows [0, 0, dino] with CFG (pipeline.py __call__): the zero rows still go through the
  // image projection (its LayerNorm of the bias), as the official forward does.
  Tensor dino_batch(Shape{rows, dino_tokens.dim(1), dino_tokens.dim(2)});
  std::memcpy(dino_batch.data() + (rows - 1) * dino_tokens.numel(), dino_tokens.data(),
              sizeof(float) * dino_tokens.numel());
  PbrCondition cond = unet.condition(ref_latents, 1, dino_batch, maps, latent_size);
  // What every step shares: the keys / values of the reference features, of the prompt and of
  // the DINO tokens, projected once. The features themselves are no longer needed.
  unet.project(cond, unet.learned_prompt(), cfg_ref_scale(rows));
  cond.ref = RefFeatures();
  cond.dino = Tensor();
  return cond;
}

Tensor pbr_guided_prediction(const PbrUNet& unet, const PbrCondition& cond, const Tensor& latents,
                             const Tensor& normals, const Tensor& positions, float timestep,
                             float guidance, int rows, Tensor* raw_out) {
  if (rows < 1 || rows > 3) throw ModelError("PBR paint: 1 to 3 CFG rows");
  const std::int64_t count = latents.numel();
  // latents.repeat(3, ...) (pipeline.py denoise); UniPC's scale_model_input is the identity.
  Tensor model_input(Shape{rows * latents.dim(0), latents.dim(1), latents.dim(2), latents.dim(3)});
  for (int b = 0; b < rows; ++b)
    std::memcpy(model_input.data() + b * count, latents.data(), sizeof(float) * count);
  const std::vector<float> ref_scale = cfg_ref_scale(rows);
  const Tensor text = unet.learned_prompt();  // (1, 2, T, D): every row the same prompt
  Tensor raw = unet.forward(model_input, normals, positions, timestep, text, cond, ref_scale);
  Tensor guided(latents.shape());
  if (rows == 3) {
    pbr_cfg_combine(raw, guidance, guided);
  } else if (rows == 2) {
    const float* u = raw.data();
    const float* f = u + count;
    for (std::int64_t k = 0; k < count; ++k) guided.data()[k] = u[k] + guidance * (f[k] - u[k]);
  } else {
    std::memcpy(guided.data(), raw.data(), sizeof(float) * count);
  }
  if (raw_out) *raw_out = std::move(raw);
  return guided;
}

PbrPaintResult paint_pbr_views(const PbrPaintModel& model, const PbrPaintInputs& in,
                               const PbrPaintOptions& opt, const PbrPaintObserver& observer) {
  const PbrUNet& unet = *model.unet;
  const SdVae& vae = *model.vae;
  if (in.normals.rank() != 4) throw ModelError("PBR paint input 'normals' must be (N, S, S, 3)");
  const std::int64_t n = in.normals.dim(0);
  const std::int64_t size = in.normals.dim(1);
  check_images(in.reference, "reference", 1, size);
  check_images(in.normals, "normals", n, size);
  check_images(in.positions, "positions", n, size);
  const std::int64_t ds = vae.config().downscale();
  if (n <= 0 || size % (8 * ds) != 0)
    throw ModelError("PBR paint: view size " + std::to_string(size) + " must be a multiple of " +
                     std::to_string(8 * ds) + " (the VAE's and the multiview grids' halvings)");
  if (opt.steps < 1) throw ModelError("PBR paint: steps must be >= 1");
  const int rows = pbr_cfg_rows(opt);
  constexpr int kM = PbrUNet::kMaterials;

  // DINOv2 on the 8-bit reference (the official processor works on the PIL image).
  Tensor dino_tokens;  // (1, 257, dino_dim)
  {
    image::ImageU8 ref_u8(static_cast<int>(size), static_cast<int>(size), 3);
    for (std::size_t k = 0; k < ref_u8.pixels.size(); ++k)
      ref_u8.pixels[k] = static_cast<std::uint8_t>(
          std::lround(std::clamp(in.reference.data()[k], 0.0f, 1.0f) * 255.0f));
    dino_tokens = model.dino->forward(dino_pixel_values(ref_u8, model.dino_preprocess));
  }

  // Conditions: the reference, normal and position images through the VAE (posterior samples).
  const Tensor ref_lat = encode_sample(vae, in.reference, opt.seed, kVaeRef);
  const Tensor normal_lat = encode_sample(vae, in.normals, opt.seed, kVaeNormal);
  const Tensor position_lat = encode_sample(vae, in.positions, opt.seed, kVaePosition);
  const std::int64_t lh = normal_lat.dim(1), lw = normal_lat.dim(2), lc = normal_lat.dim(3);

  // Position maps as the pipeline hands them to the UNet: half, (1, N, 3, S, S).
  std::vector<std::uint16_t> half(static_cast<std::size_t>(n * 3 * size * size));
  for (std::int64_t v = 0; v < n; ++v)
    for (std::int64_t c = 0; c < 3; ++c)
      for (std::int64_t p = 0; p < size * size; ++p)
        half[static_cast<std::size_t>((v * 3 + c) * size * size + p)] =
            float_to_half(in.positions.data()[(v * size * size + p) * 3 + c]);
  const HalfPositionMaps maps{half, 1, n, size, size};

  const PbrCondition cond = pbr_paint_condition(unet, ref_lat, dino_tokens, maps, lh, rows);
  UniPCScheduler sched = pbr_paint_scheduler(model.scheduler, opt.steps);

  const Shape lat_shape{kM * n, lh, lw, lc};  // (2·N, h, w, 4): albedo views, then mr views
  const std::int64_t count = lat_shape.numel();
  Tensor x = nn::gaussian_noise(lat_shape, nn::stream_seed(opt.seed, kInit));
  const float sigma0 = sched.init_noise_sigma();
  for (std::int64_t k = 0; k < count; ++k) x.data()[k] *= sigma0;

  Tensor raw;
  progress::Steps steps("PBR paint step", sched.size());
  for (int i = 0; i < sched.size(); ++i) {
    const float t = sched.timesteps()[static_cast<std::size_t>(i)];
    const Tensor guided =
        pbr_guided_prediction(unet, cond, x, normal_lat, position_lat, t, opt.guidance, rows, &raw);
    sched.step(x.data(), guided.data(), count, i);
    if (observer) observer(PbrPaintStep{i, sched.size(), t, &raw, &guided, &x});
    steps.done(i + 1);
  }

  // Decode per material: image = clamp(decode(latents / sf) / 2 + 0.5, 0, 1).
  const float sf = static_cast<float>(vae.config().scaling_factor);
  for (std::int64_t k = 0; k < count; ++k) x.data()[k] /= sf;
  const std::int64_t per_material = count / kM;
  PbrPaintResult out;
  for (int m = 0; m < kM; ++m) {
    Tensor z(Shape{n, lh, lw, lc});
    std::memcpy(z.data(), x.data() + m * per_material, sizeof(float) * per_material);
    Tensor image = vae.decode(z);  // (N, S, S, 3)
    for (float& v : image.span()) v = std::clamp(v / 2.0f + 0.5f, 0.0f, 1.0f);
    (m == 0 ? out.albedo : out.mr) = std::move(image);
  }
  return out;
}

}  // namespace gen3d::models
