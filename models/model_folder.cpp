#include "models/model_folder.h"

#include <cstring>
#include <filesystem>
#include <fstream>
#include <iterator>
#include <map>

#include <fmt/format.h>

#include "models/core/dtype.h"
#include "models/core/error.h"
#include "models/core/safetensors.h"
#include "models/nn/config_reader.h"
#include "models/nn/weight_files.h"
#include "models/paint/mvunet.h"
#include "models/paint/pbr_paint.h"
#include "models/paint/pbr_unet.h"
#include "models/paint/realesrgan.h"
#include "models/paint/sd_vae.h"
#include "models/paint/unet.h"
#include "models/shape/checkpoints.h"
#include "models/shape/dinov2.h"
#include "models/shape/dit.h"
#include "models/shape/dit21.h"
#include "models/shape/shape_models.h"
#include "models/shape/shape_vae.h"

namespace gen3d::models {

namespace {

namespace fs = std::filesystem;
using Expected = std::vector<std::pair<std::string, Shape>>;

double stored_value(DType t, const unsigned char* p) {
  switch (t) {
    case DType::kF64: {
      double v;
      std::memcpy(&v, p, 8);
      return v;
    }
    case DType::kI64: {
      std::int64_t v;
      std::memcpy(&v, p, 8);
      return static_cast<double>(v);
    }
    case DType::kI32: {
      std::int32_t v;
      std::memcpy(&v, p, 4);
      return v;
    }
    case DType::kI16: {
      std::int16_t v;
      std::memcpy(&v, p, 2);
      return v;
    }
    case DType::kI8:
      return static_cast<std::int8_t>(*p);
    case DType::kU8:
    case DType::kBool:
      return *p;
    default: {
      float v;
      widen_to_f32(t, p, 1, &v);
      return v;
    }
  }
}

// The weights file's tensors against what a loader claims (names relative to `prefix`).
void compare(const SafetensorsFile& file, const std::string& prefix, const Expected& expected,
             NetworkCheck& check) {
  std::map<std::string, const TensorInfo*> stored;
  for (const TensorInfo& t : file.tensors())
    if (t.name.compare(0, prefix.size(), prefix) == 0) stored[t.name.substr(prefix.size())] = &t;
  std::vector<std::string> problems;
  for (const auto& [name, shape] : expected) {
    const auto it = stored.find(name);
    if (it == stored.end()) {
      problems.push_back("missing " + prefix + name + " " + shape.str());
      continue;
    }
    const std::vector<std::int64_t> want(shape.dims().begin(), shape.dims().end());
    if (it->second->shape != want)
      problems.push_back("mis-shaped " + prefix + name + ": " + it->second->shape_str() +
                         ", expected " + shape.str());
    stored.erase(it);
  }
  for (const auto& [name, info] : stored) problems.push_back("unexpected " + prefix + name);
  constexpr std::size_t kListed = 12;
  for (std::size_t i = 0; i < problems.size() && i < kListed; ++i)
    check.problems.push_back(problems[i]);
  if (problems.size() > kListed)
    check.problems.push_back(fmt::format("... and {} more", problems.size() - kListed));
  check.shapes_checked = true;
}

void count(const SafetensorsFile& file, const std::string& prefix, NetworkCheck& check) {
  for (const TensorInfo& t : file.tensors())
    if (t.name.compare(0, prefix.size(), prefix) == 0 && is_float_dtype(t.dtype)) {
      check.dtypes.insert(std::string(dtype_name(t.dtype)));
      check.parameters += t.numel();
    }
}

// A problem, not an exception: the check reports everything it can.
template <class F>
void attempt(NetworkCheck& check, F&& f) {
  try {
    f();
  } catch (const std::exception& e) {
    check.problems.push_back(e.what());
  }
}

// A diffusers component folder (config.json + weights) checked by `expected(config)`.
template <class Config, class ExpectedFn>
void check_component(const fs::path& dir, const std::string& stem, NetworkCheck& check,
                     ExpectedFn&& expected) {
  attempt(check, [&] {
    const std::string cfg_path = (dir / "config.json").string();
    check.files.push_back(cfg_path);
    const Config cfg = Config::read(cfg_path);
    const std::string weights = nn::find_weights(dir.string(), stem);
    check.files.push_back(weights);
    const auto file = SafetensorsFile::open(weights);
    count(*file, "", check);
    compare(*file, "", expected(cfg, *file), check);
  });
}

NetworkCheck named(std::string network, const fs::path& root) {
  NetworkCheck c;
  c.network = std::move(network);
  c.folder = root.filename().string();
  return c;
}

NetworkCheck check_paint(const fs::path& root, const std::string& name) {
  NetworkCheck c = named(name, root);
  check_component<UNetConfig>(root / "unet", "diffusion_pytorch_model", c,
                              [](const UNetConfig& cfg, const SafetensorsFile& f) {
                                std::int64_t tokens = 77;  // the checkpoint's learned prompts
                                if (const TensorInfo* t = f.find("unet.learned_text_clip_gen");
                                    t && t->shape.size() == 3)
                                  tokens = t->shape[1];
                                return MultiviewUNet::expected_tensors(cfg, tokens);
                              });
  check_component<SdVaeConfig>(
      root / "vae", "diffusion_pytorch_model", c,
      [](const SdVaeConfig& cfg, const SafetensorsFile&) { return SdVae::expected_tensors(cfg); });
  const fs::path sched = root / "scheduler" / "scheduler_config.json";
  if (!fs::is_regular_file(sched)) c.problems.push_back("missing " + sched.string());
  return c;
}

// Hunyuan3D-2.1's PBR paint folder: the UNet2.5D (unet.* / unet_dual.*, learned prompts and the
// DINO projection sized by the checkpoint), the SD VAE and the scheduler config.
NetworkCheck check_paint_pbr(const fs::path& root) {
  NetworkCheck c = named("paint-pbr", root);
  check_component<UNetConfig>(
      root / "unet", "diffusion_pytorch_model", c,
      [](const UNetConfig& cfg, const SafetensorsFile& f) {
        std::int64_t tokens = 77, dino = 1536;
        if (const TensorInfo* t = f.find("unet.learned_text_clip_albedo");
            t && t->shape.size() == 2)
          tokens = t->shape[0];
        if (const TensorInfo* t = f.find("unet.image_proj_model_dino.proj.weight");
            t && t->shape.size() == 2)
          dino = t->shape[1];
        return PbrUNet::expected_tensors(cfg, tokens, dino);
      });
  check_component<SdVaeConfig>(
      root / "vae", "diffusion_pytorch_model", c,
      [](const SdVaeConfig& cfg, const SafetensorsFile&) { return SdVae::expected_tensors(cfg); });
  const fs::path sched = root / "scheduler" / "scheduler_config.json";
  if (!fs::is_regular_file(sched)) c.problems.push_back("missing " + sched.string());
  return c;
}

NetworkCheck check_delight(const fs::path& root) {
  NetworkCheck c = named("delight", root);
  check_component<UNetConfig>(root / "unet", "diffusion_pytorch_model", c,
                              [](const UNetConfig& cfg, const SafetensorsFile&) {
                                return UNet2DCondition::expected_tensors(cfg);
                              });
  check_component<SdVaeConfig>(
      root / "vae", "diffusion_pytorch_model", c,
      [](const SdVaeConfig& cfg, const SafetensorsFile&) { return SdVae::expected_tensors(cfg); });
  attempt(c, [&] {
    const std::string weights = nn::find_weights((root / "text_encoder").string(), "model");
    c.files.push_back(weights);
    count(*SafetensorsFile::open(weights), "", c);
  });
  for (const char* f : {"scheduler/scheduler_config.json", "text_encoder/config.json",
                        "tokenizer/vocab.json", "tokenizer/special_tokens_map.json"})
    if (!fs::is_regular_file(root / f)) c.problems.push_back("missing " + (root / f).string());
  return c;
}

// The VAE tensors of `file` (names under `prefix`) against the loader, with the geometry decoder
// sized as the weights store it (ShapeVAEConfig::with_geo_decoder_of, as the loader does).
void compare_vae(std::shared_ptr<const SafetensorsFile> file, const std::string& config,
                 std::string_view section, NetworkCheck& c) {
  const WeightMap wm = WeightMap::for_submodel(file, kVaePrefix);
  const ShapeVAEConfig cfg = ShapeVAEConfig::from_file(config, section).with_geo_decoder_of(wm);
  compare(*file, wm.prefix(), ShapeVAE::expected_tensors(cfg), c);
}

// The shape checkpoint: the DiT and, when the file combines them, the ShapeVAE (both compared with
// what their loaders claim) and the conditioner (counted; checked when it is loaded). The network
// is named by the published folder (shape_models.h), else by its DiT class.
NetworkCheck check_shape(const fs::path& root) {
  const ShapeModelInfo* info = find_shape_model_info(root.filename().string());
  NetworkCheck c = named(info ? std::string(info->network) : "shape", root);
  attempt(c, [&] {
    const CheckpointSource src = resolve_checkpoint(root.string());
    c.files = {src.weights, src.config};
    const auto file = SafetensorsFile::open(src.weights);
    count(*file, "", c);
    const auto has = [&](std::string_view sub) {
      const std::string prefix = std::string(sub) + ".";
      for (const TensorInfo& t : file->tensors())
        if (t.name.compare(0, prefix.size(), prefix) == 0) return true;
      return false;
    };
    // Each sub-model's tensors against its loader (tensors outside its prefix belong to others).
    // The DiT section names the architecture: HunYuanDiTPlain (2.1) or Hunyuan3DDiT (2.0).
    const std::string section = nn::read_config_file(src.config, kDiTPrefix).dump();
    const bool v21 = DiT21Config::describes(section);
    if (v21 && !info) c.network = "shape-2.1";
    attempt(c, [&] { scheduler_of(src.config); });  // one the sampler cannot run is a problem
    const Expected dit =
        v21 ? HunyuanDiTPlain::expected_tensors(DiT21Config::from_json(section))
            : Hunyuan3DDiT::expected_tensors(DiTConfig::from_file(src.config, kDiTPrefix));
    compare(*file, has(kDiTPrefix) ? std::string(kDiTPrefix) + "." : "", dit, c);
    if (has(kVaePrefix)) compare_vae(file, src.config, kVaePrefix, c);
    for (std::string_view sub : {kVaePrefix, kConditionerPrefix})
      if (!has(sub))
        c.problems.push_back("no " + std::string(sub) + ".* tensors (a standalone checkpoint?)");
  });
  return c;
}

// A standalone ShapeVAE folder (config.yaml with target/params at the top, un-prefixed weights),
// such as the FlashVDM turbo VAEs.
NetworkCheck check_shape_vae(const fs::path& root, const ShapeVaeInfo& info) {
  NetworkCheck c = named(std::string(info.network), root);
  attempt(c, [&] {
    const CheckpointSource src = resolve_checkpoint(root.string());
    c.files = {src.weights, src.config};
    const auto file = SafetensorsFile::open(src.weights);
    count(*file, "", c);
    compare_vae(file, src.config, "", c);
  });
  return c;
}

std::string read_text(const fs::path& path) {
  std::ifstream in(path, std::ios::binary);
  if (!in) throw ModelError("cannot read " + path.string());
  return {std::istreambuf_iterator<char>(in), std::istreambuf_iterator<char>()};
}

// The 2.1 paint model's image encoder: facebook/dinov2-giant in the transformers layout
// (config.json + model.safetensors or pytorch_model.bin).
NetworkCheck check_dinov2(const fs::path& root) {
  NetworkCheck c = named("dinov2", root);
  attempt(c, [&] {
    const fs::path cfg_path = root / "config.json";
    c.files.push_back(cfg_path.string());
    const Dinov2Config cfg = Dinov2Config::from_json(read_text(cfg_path));
    const std::string weights = find_dino_weights(root.string());
    c.files.push_back(weights);
    const auto file = SafetensorsFile::open(weights);
    count(*file, "", c);
    compare(*file, "", Dinov2Model::expected_tensors(cfg), c);
  });
  return c;
}

// Real-ESRGAN x4plus (the 2.1 paint's super-resolution): the official .pth, its sizes inferred
// from the tensors as the loader does.
NetworkCheck check_realesrgan(const fs::path& path) {
  NetworkCheck c;
  c.network = "realesrgan";
  c.folder = path.parent_path().filename().string();
  attempt(c, [&] {
    c.files.push_back(path.string());
    const auto file = SafetensorsFile::open(path.string());
    std::string key;
    for (const char* k : {"params_ema", "params"})
      for (const TensorInfo& t : file->tensors())
        if (key.empty() && t.name.rfind(std::string(k) + ".", 0) == 0) key = k;
    const std::string prefix = key.empty() ? "" : key + ".";
    count(*file, prefix, c);
    const WeightMap wm = WeightMap::for_submodel(file, key);
    compare(*file, prefix, RrdbNet::expected_tensors(RrdbNetConfig::infer(wm, path.string())), c);
  });
  return c;
}

}  // namespace

std::vector<TensorSummary> summarize_weights(const std::string& path) {
  const auto file = SafetensorsFile::open(path);
  std::vector<TensorSummary> out;
  for (const TensorInfo& t : file->tensors()) {
    TensorSummary s;
    s.name = t.name;
    s.dtype = std::string(dtype_name(t.dtype));
    s.shape = t.shape;
    const auto bytes = file->bytes(t);
    const std::size_t es = dtype_size(t.dtype);
    for (std::int64_t i = 0; i < t.numel(); ++i) {
      const double v = stored_value(t.dtype, bytes.data() + static_cast<std::size_t>(i) * es);
      s.sum += v;
      s.abs_sum += std::abs(v);
    }
    out.push_back(std::move(s));
  }
  return out;
}

std::vector<NetworkCheck> check_model_folder(const std::string& dir) {
  fs::path root = fs::path(dir).lexically_normal();
  if (root.filename().empty()) root = root.parent_path();  // "dir/"
  if (!fs::is_directory(root)) throw ModelError("model folder not found: " + dir);
  std::vector<NetworkCheck> out;
  const auto look = [&](const fs::path& p) {
    const std::string name = p.filename().string();
    if (name == "hunyuan3d-paint-v2-0") out.push_back(check_paint(p, "paint"));
    if (name == "hunyuan3d-paint-v2-0-turbo") out.push_back(check_paint(p, "paint-turbo"));
    if (name == "hunyuan3d-delight-v2-0") out.push_back(check_delight(p));
    if (name == "hunyuan3d-paintpbr-v2-1") out.push_back(check_paint_pbr(p));
    if (name.rfind("hunyuan3d-dit-v2", 0) == 0) out.push_back(check_shape(p));
    if (const ShapeVaeInfo* vae = find_shape_vae_info(name))
      out.push_back(check_shape_vae(p, *vae));
  };
  look(root);  // one network's folder itself
  if (out.empty()) {
    for (const auto& e : fs::directory_iterator(root))
      if (e.is_directory()) look(e.path());
    // What the 2.1 paint model reads beside its folder (as `gen3d texture --models` finds them).
    if (!out.empty()) {
      for (const char* d : {"dinov2-giant", "facebook/dinov2-giant"})
        if (fs::is_directory(root / d)) {
          out.push_back(check_dinov2(root / d));
          break;
        }
      for (const char* f : {"RealESRGAN_x4plus.pth", "ckpt/RealESRGAN_x4plus.pth"})
        if (fs::is_regular_file(root / f)) {
          out.push_back(check_realesrgan(root / f));
          break;
        }
    }
  }
  if (out.empty())
    throw ModelError(dir +
                     " holds no official network folder (hunyuan3d-paint-v2-0[-turbo], "
                     "hunyuan3d-delight-v2-0, hunyuan3d-dit-v2-0[-fast|-turbo], "
                     "hunyuan3d-vae-v2-0[-turbo], hunyuan3d-paintpbr-v2-1, hunyuan3d-dit-v2-1, "
                     "the 2mini and 2mv folders)");
  return out;
}

static std::string bytes_text(double bytes) {
  return bytes >= 1e9 ? fmt::format("{:.2f} GB", bytes / 1e9)
                      : fmt::format("{:.1f} MB", bytes / 1e6);
}

std::string format_model_check(const std::vector<NetworkCheck>& checks) {
  std::string out;
  for (const NetworkCheck& c : checks) {
    std::string dtypes;
    for (const std::string& d : c.dtypes) dtypes += (dtypes.empty() ? "" : ", ") + d;
    const double p = static_cast<double>(c.parameters);
    out += fmt::format(
        "{} ({}): {}\n  {:.2f} M parameters, stored {}; weights in memory: fp32 {}, bf16 {}, "
        "int8 {}\n  tensor shapes: {}\n",
        c.network, c.folder, c.problems.empty() ? "ok" : "PROBLEMS", p / 1e6,
        dtypes.empty() ? "-" : dtypes, bytes_text(p * 4), bytes_text(p * 2), bytes_text(p),
        c.shapes_checked ? "checked against the loader" : "counted (checked when loaded)");
    for (const std::string& f : c.files) out += "  file " + f + "\n";
    for (const std::string& pr : c.problems) out += "  problem: " + pr + "\n";
  }
  return out;
}

}  // namespace gen3d::models
