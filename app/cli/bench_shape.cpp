#include "app/cli/bench_shape.h"

#include <spdlog/spdlog.h>
#include <sys/resource.h>

#include <algorithm>
#include <chrono>
#include <cstdio>
#include <memory>
#include <nlohmann/json.hpp>
#include <random>

#include "app/cli/device_option.h"
#include "mesh/marching_cubes.h"
#include "models/core/precision.h"
#include "models/core/tensor.h"
#include "models/nn/device_ops.h"
#include "models/shape/dinov2.h"
#include "models/shape/dit.h"
#include "models/shape/dit21.h"
#include "models/shape/field.h"
#include "models/shape/multiview.h"
#include "models/shape/sampler.h"
#include "models/shape/shape_models.h"
#include "models/shape/shape_vae.h"
#include "models/shape/volume_decoder.h"
#include "pipeline/error.h"

namespace gen3d::app::cli {

namespace {

using Clock = std::chrono::steady_clock;
using i64 = std::int64_t;

double seconds_since(Clock::time_point t0) {
  return std::chrono::duration<double>(Clock::now() - t0).count();
}

// CPU seconds of this process, every thread (user + system): on a shared machine the share of
// the cores a stage got is its CPU seconds over its wall seconds.
double cpu_seconds() {
  rusage u{};
  getrusage(RUSAGE_SELF, &u);
  return static_cast<double>(u.ru_utime.tv_sec + u.ru_stime.tv_sec) +
         1e-6 * static_cast<double>(u.ru_utime.tv_usec + u.ru_stime.tv_usec);
}

// The geometry decoder's full cost on every point, a smooth surface's values (see the header).
class CostedSurfaceField final : public models::Field {
 public:
  explicit CostedSurfaceField(std::shared_ptr<const models::Field> decoder)
      : decoder_(std::move(decoder)), surface_(models::sphere_field(0.5, 10.0)) {}
  void evaluate(const float* xyz, i64 n, float* out) const override {
    timed([&] { decoder_->evaluate(xyz, n, out); });
    surface_.evaluate(xyz, n, out);
  }
  void evaluate_groups(const float* xyz, std::span<const i64> offsets,
                       const models::KeySelection& selection, float* out) const override {
    timed([&] { decoder_->evaluate_groups(xyz, offsets, selection, out); });
    if (!offsets.empty()) surface_.evaluate(xyz, offsets.back(), out);
  }
  i64 key_count() const override { return decoder_->key_count(); }
  // Wall seconds inside the decoder's calls, and their number: the rest of a volume decode is
  // its own bookkeeping on the host (and the sphere's values).
  double decoder_s() const { return decoder_s_; }
  i64 decoder_calls() const { return calls_; }

 private:
  template <typename F>
  void timed(F&& f) const {
    const auto t0 = Clock::now();
    f();
    decoder_s_ += seconds_since(t0);
    ++calls_;
  }
  std::shared_ptr<const models::Field> decoder_;
  models::AnalyticField surface_;
  mutable double decoder_s_ = 0.0;  // the decoders are called from one thread
  mutable i64 calls_ = 0;
};

models::Tensor uniform(const models::Shape& s, std::uint64_t seed, float lo, float hi) {
  models::Tensor t(s);
  std::mt19937_64 rng(seed);
  std::uniform_real_distribution<float> u(lo, hi);
  for (float& v : t.span()) v = u(rng);
  return t;
}

// One published shape model as the official pipeline runs it (hy3dgen/shapegen/pipelines.py with
// the folder's config.yaml; the turbo ones with enable_flashvdm() as in
// examples/fast_shape_gen_with_flashvdm.py): its networks' sizes and its sampling and decoding
// choices. Sizes the repository does not pin are marked where they are set.
struct BenchModel {
  std::string name;    // --model
  std::string folder;  // published DiT folder (shape_models.h)
  models::Dinov2Config dino;
  bool plain = false;          // HunYuanDiTPlain (2mini) instead of Hunyuan3DDiT (2.0)
  models::DiTConfig dit;       // 2.0 DiTs
  models::DiT21Config dit21;   // 2mini DiTs
  models::ShapeVAEConfig vae;  // the VAE the pipeline decodes with (its geometry decoder)
  std::string vae_folder;      // "" = the DiT folder's own VAE
  int steps = 50;
  double guidance = 5.0;  // with a guidance-embedded DiT: its input, one forward per step
  models::ScheduleKind schedule = models::ScheduleKind::kFlowMatch;
  std::string volume = "hierarchical";
  int views = 1;  // 2mv: the named views, each through DINOv2, with the view embedding
};

// DINOv2-large (dinov2-large: hidden 1024, 24 layers, 16 heads, MLP FFN).
models::Dinov2Config dinov2_large() {
  models::Dinov2Config c;
  c.hidden_size = 1024;
  c.num_hidden_layers = 24;
  c.num_attention_heads = 16;
  c.use_swiglu_ffn = false;
  return c;
}

// The FlashVDM turbo VAEs' geometry decoder (hunyuan3d-vae-v2-0-turbo, -v2-mini-turbo): width and
// heads divided by 8 behind latents_proj, MLP expand ratio 1, no ln_post. These values are not
// stored in this repository (gen3d reads them from the folder's weights): assumed from the
// published config, not checked against the files.
void turbo_geo_decoder(models::ShapeVAEConfig& v) {
  v.geo_decoder_downsample_ratio = 8;
  v.geo_decoder_mlp_expand_ratio = 1;
  v.geo_decoder_ln_post = false;
}

std::vector<BenchModel> bench_models() {
  std::vector<BenchModel> out;
  BenchModel full;  // hunyuan3d-dit-v2-0: DINOv2-giant, the 2.0 DiT, CFG, 50 steps
  full.name = "full";
  full.folder = "hunyuan3d-dit-v2-0";
  out.push_back(full);

  BenchModel fast = full;  // guidance-distilled: guidance embedded, one forward per step
  fast.name = "fast";
  fast.folder = "hunyuan3d-dit-v2-0-fast";
  fast.dit.guidance_embed = true;
  out.push_back(fast);

  BenchModel turbo = fast;  // also step-distilled: consistency schedule, 5 steps, turbo VAE
  turbo.name = "turbo";
  turbo.folder = "hunyuan3d-dit-v2-0-turbo";
  turbo.steps = 5;
  turbo.schedule = models::ScheduleKind::kConsistency;
  turbo.volume = "flashvdm";
  turbo_geo_decoder(turbo.vae);
  out.push_back(turbo);

  // hunyuan3d-dit-v2-mini: HunYuanDiTPlain on 512 latents with DINOv2-large's 1024-wide tokens,
  // run with CFG (no guidance embedding). Its width, depth, heads and experts are not stored in
  // this repository; assumed from the published config, not checked against the files: H 1024,
  // 16 blocks, 16 heads, the last 6 with 8 experts (top 2).
  BenchModel mini;
  mini.name = "mini";
  mini.folder = "hunyuan3d-dit-v2-mini";
  mini.dino = dinov2_large();
  mini.plain = true;
  mini.dit21.input_size = 512;
  mini.dit21.hidden_size = 1024;
  mini.dit21.context_dim = 1024;
  mini.dit21.depth = 16;
  mini.dit21.num_heads = 16;
  mini.vae.num_latents = 512;
  out.push_back(mini);

  BenchModel mini_turbo = mini;  // consistency schedule, 5 steps, still CFG; the mini turbo VAE
  mini_turbo.name = "mini-turbo";
  mini_turbo.folder = "hunyuan3d-dit-v2-mini-turbo";
  mini_turbo.steps = 5;
  mini_turbo.schedule = models::ScheduleKind::kConsistency;
  mini_turbo.volume = "flashvdm";
  turbo_geo_decoder(mini_turbo.vae);
  out.push_back(mini_turbo);

  // hunyuan3d-dit-v2-mv-turbo with all four named views: the turbo model's sizes and schedule,
  // each view through DINOv2 with the view embedding, 4 x 1370 context tokens. That 2mv keeps
  // 2.0's DiT and DINOv2-giant is assumed from the published parameter count (1.1B, as 2.0),
  // not checked against the files.
  BenchModel mv_turbo = turbo;
  mv_turbo.name = "mv-turbo";
  mv_turbo.folder = "hunyuan3d-dit-v2-mv-turbo";
  mv_turbo.views = 4;
  out.push_back(mv_turbo);

  // hunyuan3d-dit-v2-1 as hy3dshape runs it: DINOv2-large at 518 px, the 3.3B HunYuanDiTPlain at
  // its official size (the DiT21Config defaults), 4096 latents, CFG 5, 50 steps, full-width VAE
  // (ARCHITECTURE.md of the 2.1 golden sets).
  BenchModel v21;
  v21.name = "2.1";
  v21.folder = "hunyuan3d-dit-v2-1";
  v21.dino = dinov2_large();
  v21.plain = true;
  v21.vae.num_latents = v21.dit21.input_size;
  out.push_back(v21);

  for (BenchModel& m : out)
    if (const models::ShapeModelInfo* info = models::find_shape_model_info(m.folder))
      m.vae_folder = std::string(info->turbo_vae);
  return out;
}

// The same model at test size (checks the path, times nothing useful).
void make_tiny(BenchModel& m) {
  m.dino.hidden_size = 64;
  m.dino.num_hidden_layers = 2;
  m.dino.num_attention_heads = 4;
  m.dino.image_size = 56;
  m.dit.context_in_dim = 64;
  m.dit.hidden_size = 64;
  m.dit.num_heads = 4;
  m.dit.axes_dim = {16};
  m.dit.depth = 1;
  m.dit.depth_single_blocks = 1;
  m.dit.in_channels = 8;
  m.dit21.input_size = 64;
  m.dit21.in_channels = 8;
  m.dit21.hidden_size = 64;
  m.dit21.context_dim = 64;
  m.dit21.depth = 3;
  m.dit21.num_heads = 4;
  m.dit21.num_moe_layers = 1;
  m.dit21.num_experts = 2;
  m.dit21.moe_top_k = 1;
  m.vae.num_latents = 64;
  m.vae.embed_dim = 8;
  m.vae.width = 64;
  m.vae.heads = 4;
  m.vae.num_decoder_layers = 1;
  if (m.vae.geo_decoder_downsample_ratio > 1) m.vae.geo_decoder_downsample_ratio = 2;
}

std::string model_names() {
  std::string names;
  for (const BenchModel& m : bench_models()) names += (names.empty() ? "" : ", ") + m.name;
  return names;
}

}  // namespace

void add_bench_shape(CLI::App& bench, BenchShapeOptions& opt) {
  auto* c = bench.add_subcommand(
      "shape",
      "Time image -> mesh end to end with full-size random networks of a published model (DINOv2, "
      "every DiT step, the VAE, the volume decode, marching cubes); prints one JSON line per run");
  c->add_option("--model", opt.model,
                "full (2.0), fast, turbo, mini, mini-turbo, mv-turbo or 2.1: sizes, steps, "
                "guidance, schedule, "
                "VAE and volume decoding as the official pipeline runs it")
      ->capture_default_str();
  c->add_option("--device", opt.device, "cpu, or cuda")->capture_default_str();
  c->add_option("--precision", opt.precision,
                "CPU weights: auto, fp32, bf16 or int8 (the attention and MLP products of the DiT, "
                "DINOv2 and the VAE in int8, the rest bf16; cuda: bf16)")
      ->capture_default_str();
  c->add_option("--steps", opt.steps,
                "sampler steps (default: the model's); a comma list runs each")
      ->delimiter(',');
  c->add_option("--guidance", opt.guidance,
                "guidance scale (default: the model's; < 0: no CFG, batch 1); a comma list pairs "
                "with --steps")
      ->delimiter(',');
  c->add_option("--octree", opt.octree, "octree resolution")
      ->capture_default_str()
      ->check(CLI::Range(16, 1024));
  c->add_option("--image-size", opt.image_size,
                "the conditioner's image size in pixels, a multiple of 14 (default: the model's, "
                "518); sets its context tokens, (size / 14)^2 + 1 per view")
      ->check(CLI::Range(14, 2044));
  c->add_option("--volume", opt.volume,
                "dense, hierarchical or flashvdm (default: the model's; flashvdm for the turbos)");
  c->add_flag("--tiny", opt.tiny, "tiny networks (checks the path, times nothing useful)");
  c->add_option("--chunk", opt.chunks,
                "points per volume-decoder call on a device (a memory knob: the values do not "
                "change); a comma list runs each, the profile takes the first")
      ->delimiter(',')
      ->capture_default_str()
      ->check(CLI::Range(1 << 12, 1 << 24));
  c->add_flag("--profile", opt.profile,
              "then profile one more volume decode on the device (GPU ms per operation)");
  c->add_option("--reps", opt.reps, "end-to-end runs (the first also uploads weights to a device)")
      ->capture_default_str()
      ->check(CLI::Range(1, 100));
  opt.command = c;
}

int cmd_bench_shape(const BenchShapeOptions& opt) {
  const models::Device device = models::parse_device(opt.device);
  std::vector<BenchModel> known = bench_models();
  auto found = std::find_if(known.begin(), known.end(),
                            [&](const BenchModel& m) { return m.name == opt.model; });
  if (found == known.end())
    throw pipeline::ConfigError("bench shape: unknown --model " + opt.model + " (" + model_names() +
                                ")");
  BenchModel model = *found;
  if (opt.tiny) make_tiny(model);
  if (opt.image_size > 0) {
    if (opt.image_size % model.dino.patch_size != 0)
      throw pipeline::ConfigError("bench shape: --image-size " + std::to_string(opt.image_size) +
                                  " is not a multiple of the patch size " +
                                  std::to_string(model.dino.patch_size));
    model.dino.image_size = opt.image_size;
  }
  const std::vector<int> steps_list = opt.steps.empty() ? std::vector<int>{model.steps} : opt.steps;
  const std::vector<double> guidance_list =
      opt.guidance.empty() ? std::vector<double>{model.guidance} : opt.guidance;
  models::VolumeMethod method;
  models::Precision precision;
  try {
    method = models::parse_volume_method(opt.volume.empty() ? model.volume : opt.volume);
    precision = models::resolve_precision(models::parse_precision(opt.precision));
  } catch (const std::exception& e) {
    throw pipeline::ConfigError(std::string("bench shape: ") + e.what());
  }
  for (const int n : steps_list)
    if (n < 1 || n > 1000)
      throw pipeline::ConfigError("bench shape: --steps " + std::to_string(n) +
                                  " is outside 1..1000");
  if (guidance_list.size() != 1 && guidance_list.size() != steps_list.size())
    throw pipeline::ConfigError("bench shape: --guidance takes one value or one per --steps value");
  if (device != models::Device::kCpu) {
    if (precision != models::Precision::kBf16 && opt.precision != "auto")
      throw pipeline::ConfigError("bench shape: --device cuda runs the networks in bf16");
    use_device(device);
    precision = models::Precision::kBf16;
  }
  // On a device the host copy stays float32 (the backend rounds it to bf16 on upload).
  const models::WeightStorage storage =
      device == models::Device::kCpu ? models::storage_for(precision) : models::WeightStorage::kF32;
  const int image = model.dino.image_size;

  const auto t_build = Clock::now();
  const models::Dinov2Model encoder =
      models::Dinov2Model::random(model.dino, 1, models::Dinov2Options{storage, device});
  std::unique_ptr<models::ShapeDenoiser> dit;
  if (model.plain)
    dit = std::make_unique<models::HunyuanDiTPlain>(
        models::HunyuanDiTPlain::random(model.dit21, 2, {storage, device}));
  else
    dit = std::make_unique<models::Hunyuan3DDiT>(
        models::Hunyuan3DDiT::random(model.dit, 2, {storage, device}));
  models::ShapeVAE vae = models::ShapeVAE::random(model.vae, 3, storage);
  vae.set_device(device);
  const double build_s = seconds_since(t_build);
  const models::ShapeVAEConfig& vae_cfg = model.vae;

  for (std::size_t run = 0; run < steps_list.size(); ++run)
    for (const long long chunk : opt.chunks)
      for (int rep = 0; rep < opt.reps; ++rep) {
        const int steps = steps_list[run];
        const double guidance = guidance_list[guidance_list.size() == 1 ? 0 : run];
        nlohmann::json stages, stages_cpu;
        const auto t0 = Clock::now();
        const double c0 = cpu_seconds();
        auto timed = [&](const char* name, auto&& f) {
          const auto ts = Clock::now();
          const double cs = cpu_seconds();
          auto r = f();
          stages[name] = seconds_since(ts);
          stages_cpu[name] = cpu_seconds() - cs;
          return r;
        };
        // Normalized pixels as the conditioner makes them, one image per view.
        const models::Tensor pixels = uniform({model.views, 3, image, image}, 4, -2.0f, 2.0f);
        const models::Tensor cond = timed("dinov2", [&] {
          models::Tensor hidden = encoder.forward(pixels);
          if (model.views == 1) return hidden;
          std::vector<int> idxs(static_cast<std::size_t>(model.views));
          for (int v = 0; v < model.views; ++v) idxs[static_cast<std::size_t>(v)] = v;
          return models::add_multiview_embedding(
              hidden, idxs, models::multiview_embedding(model.dino.hidden_size, model.views));
        });
        const models::Tensor noise = uniform({1, vae_cfg.num_latents, dit->latent_channels()}, 5,
                                             -1.7f, 1.7f);  // unit variance
        models::SamplerOptions so;
        so.steps = steps;
        so.guidance_scale = guidance;
        so.schedule = model.schedule;
        int forwards = 0;
        const models::StepObserver count = [&](const models::StepObservation& o) {
          if (o.v) ++forwards;
        };
        const models::Tensor latents = timed("sampler", [&] {
          return models::sample(*dit, so, nullptr, noise, cond, nullptr, &count);
        });
        const models::Tensor decoded = timed("vae_decode", [&] { return vae.decode(latents); });
        models::VolumeDecodeOptions vo;
        vo.method = method;
        vo.resolution = opt.octree;
        // A device field takes whole blocks of points per call; fewer, larger calls.
        if (device != models::Device::kCpu) vo.num_chunks = chunk;
        models::VolumeDecodeStats stats;
        double decoder_s = 0.0;
        i64 decoder_calls = 0;
        const models::VolumeGrid grid = timed("volume_decode", [&] {
          const CostedSurfaceField field(vae.geometry_field(decoded, 0));
          models::VolumeGrid g = models::decode_volume(field, vo, &stats);
          decoder_s = field.decoder_s();
          decoder_calls = field.decoder_calls();
          return g;
        });
        const mesh::Mesh m = timed("marching_cubes", [&] {
          return mesh::marching_cubes({grid.values.data(), grid.n(), grid.n(), grid.n()});
        });
        const double total_s = seconds_since(t0), total_cpu_s = cpu_seconds() - c0;
        const bool cfg = guidance >= 0.0 && !dit->guidance_embedded();

        nlohmann::json j;
        j["bench"] = "shape";
        j["rep"] = rep;
        j["model"] = opt.tiny ? model.name + " (tiny)" : model.name;
        j["folder"] = model.folder;
        j["vae"] = model.vae_folder.empty() ? model.folder : model.vae_folder;
        j["device"] = models::device_name(device);
        if (device != models::Device::kCpu) j["gpu"] = device_description(device);
        j["precision"] = models::precision_name(precision);
        j["views"] = model.views;
        j["image_size"] = image;
        j["context_tokens"] = cond.dim(1);
        j["steps"] = steps;
        j["guidance"] = guidance;
        j["cfg"] = cfg;
        j["schedule"] =
            model.schedule == models::ScheduleKind::kConsistency ? "consistency" : "flow";
        j["dit_forwards"] = forwards;
        if (forwards > 0) j["dit_forward_s"] = stages["sampler"].get<double>() / forwards;
        j["octree"] = opt.octree;
        j["volume"] = models::volume_method_name(method);
        j["total_s"] = total_s;
        j["stages"] = stages;
        j["total_cpu_s"] = total_cpu_s;
        j["stages_cpu_s"] = stages_cpu;
        j["build_s"] = build_s;
        rusage u{};
        getrusage(RUSAGE_SELF, &u);
        j["peak_rss_gib"] = static_cast<double>(u.ru_maxrss) / (1024.0 * 1024.0);  // KiB
        j["points"] = stats.points_queried;
        j["points_per_call"] = vo.num_chunks;
        j["volume_decoder_calls"] = decoder_calls;
        j["volume_decoder_s"] = decoder_s;
        j["points_per_level"] = stats.points_per_level;
        j["levels"] = stats.levels;
        j["geo_decoder_width"] = vae_cfg.geo_width();
        j["faces"] = m.faces.size();
        j["surface"] = "sphere r 0.5, logit 10 sdf; the VAE decoder runs on every point";
        std::printf("%s\n", j.dump().c_str());
        std::fflush(stdout);
      }
  if (opt.profile && device != models::Device::kCpu) {
    const models::Tensor pixels = uniform({1, 3, image, image}, 4, -2.0f, 2.0f);
    const models::Tensor noise =
        uniform({1, vae_cfg.num_latents, dit->latent_channels()}, 5, -1.7f, 1.7f);
    models::SamplerOptions so;
    so.steps = 1;
    so.guidance_scale = -1.0;
    const models::Tensor decoded =
        vae.decode(models::sample(*dit, so, nullptr, noise, encoder.forward(pixels)));
    models::VolumeDecodeOptions vo;
    vo.method = method;
    vo.resolution = opt.octree;
    vo.num_chunks = opt.chunks.front();
    const CostedSurfaceField field(vae.geometry_field(decoded, 0));
    const auto ts = Clock::now();
    nlohmann::json ops;
    for (const auto& [name, ms] :
         profile_device(device, [&] { (void)models::decode_volume(field, vo); }))
      ops[name] = ms;
    nlohmann::json j;
    j["bench"] = "shape-profile";
    j["model"] = opt.tiny ? model.name + " (tiny)" : model.name;
    j["stage"] = "volume_decode";
    j["wall_s"] = seconds_since(ts);
    j["decoder_calls_s"] = field.decoder_s();
    j["decoder_calls"] = field.decoder_calls();
    j["points_per_call"] = vo.num_chunks;
    j["gpu_ms_by_op"] = ops;
    std::printf("%s\n", j.dump().c_str());
  }
  return 0;
}

}  // namespace gen3d::app::cli
