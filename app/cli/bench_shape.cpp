#include "app/cli/bench_shape.h"

#include <spdlog/spdlog.h>

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
#include "models/shape/field.h"
#include "models/shape/sampler.h"
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

// The geometry decoder's full cost on every point, a smooth surface's values (see the header).
class CostedSurfaceField final : public models::Field {
 public:
  explicit CostedSurfaceField(std::shared_ptr<const models::Field> decoder)
      : decoder_(std::move(decoder)), surface_(models::sphere_field(0.5, 10.0)) {}
  void evaluate(const float* xyz, i64 n, float* out) const override {
    decoder_->evaluate(xyz, n, out);
    surface_.evaluate(xyz, n, out);
  }
  void evaluate_groups(const float* xyz, std::span<const i64> offsets,
                       const models::KeySelection& selection, float* out) const override {
    decoder_->evaluate_groups(xyz, offsets, selection, out);
    if (!offsets.empty()) surface_.evaluate(xyz, offsets.back(), out);
  }
  i64 key_count() const override { return decoder_->key_count(); }

 private:
  std::shared_ptr<const models::Field> decoder_;
  models::AnalyticField surface_;
};

models::Tensor uniform(const models::Shape& s, std::uint64_t seed, float lo, float hi) {
  models::Tensor t(s);
  std::mt19937_64 rng(seed);
  std::uniform_real_distribution<float> u(lo, hi);
  for (float& v : t.span()) v = u(rng);
  return t;
}

}  // namespace

void add_bench_shape(CLI::App& bench, BenchShapeOptions& opt) {
  auto* c = bench.add_subcommand(
      "shape",
      "Time image -> mesh end to end with full-size random networks (DINOv2, every DiT step, the "
      "VAE, the volume decode, marching cubes); prints one JSON line");
  c->add_option("--device", opt.device, "cpu, or cuda")->capture_default_str();
  c->add_option("--precision", opt.precision, "CPU weights: auto, fp32 or bf16 (cuda: bf16)")
      ->capture_default_str();
  c->add_option("--steps", opt.steps, "sampler steps; a comma list runs each")
      ->delimiter(',')
      ->capture_default_str();
  c->add_option("--guidance", opt.guidance,
                "guidance scale (< 0: no CFG, batch 1); a comma list pairs with --steps")
      ->delimiter(',')
      ->capture_default_str();
  c->add_option("--octree", opt.octree, "octree resolution")
      ->capture_default_str()
      ->check(CLI::Range(16, 1024));
  c->add_option("--volume", opt.volume, "dense, hierarchical or flashvdm")->capture_default_str();
  c->add_flag("--tiny", opt.tiny, "tiny networks (checks the path, times nothing useful)");
  c->add_flag("--profile", opt.profile,
              "then profile one more volume decode on the device (GPU ms per operation)");
  c->add_option("--reps", opt.reps, "end-to-end runs (the first also uploads weights to a device)")
      ->capture_default_str()
      ->check(CLI::Range(1, 100));
  opt.command = c;
}

int cmd_bench_shape(const BenchShapeOptions& opt) {
  const models::Device device = models::parse_device(opt.device);
  models::VolumeMethod method;
  models::Precision precision;
  try {
    method = models::parse_volume_method(opt.volume);
    precision = models::resolve_precision(models::parse_precision(opt.precision));
  } catch (const std::exception& e) {
    throw pipeline::ConfigError(std::string("bench shape: ") + e.what());
  }
  for (const int n : opt.steps)
    if (n < 1 || n > 1000)
      throw pipeline::ConfigError("bench shape: --steps " + std::to_string(n) +
                                  " is outside 1..1000");
  if (opt.guidance.size() != 1 && opt.guidance.size() != opt.steps.size())
    throw pipeline::ConfigError("bench shape: --guidance takes one value or one per --steps value");
  if (device != models::Device::kCpu) {
    if (precision == models::Precision::kFp32 && opt.precision != "auto")
      throw pipeline::ConfigError("bench shape: --device cuda runs the networks in bf16");
    use_device(device);
    precision = models::Precision::kBf16;
  }
  // On a device the host copy stays float32 (the backend rounds it to bf16 on upload).
  const models::WeightStorage storage =
      device == models::Device::kCpu ? models::storage_for(precision) : models::WeightStorage::kF32;

  models::Dinov2Config dino;  // dinov2-giant
  models::DiTConfig dit_cfg;  // 2.0
  models::ShapeVAEConfig vae_cfg;
  int image = 518;
  if (opt.tiny) {
    dino.hidden_size = 64;
    dino.num_hidden_layers = 2;
    dino.num_attention_heads = 4;
    dino.image_size = 56;
    image = 56;
    dit_cfg.context_in_dim = 64;
    dit_cfg.hidden_size = 64;
    dit_cfg.num_heads = 4;
    dit_cfg.axes_dim = {16};
    dit_cfg.depth = 1;
    dit_cfg.depth_single_blocks = 1;
    dit_cfg.in_channels = 8;
    vae_cfg.num_latents = 64;
    vae_cfg.embed_dim = 8;
    vae_cfg.width = 64;
    vae_cfg.heads = 4;
    vae_cfg.num_decoder_layers = 1;
  }

  const auto t_build = Clock::now();
  const models::Dinov2Model encoder =
      models::Dinov2Model::random(dino, 1, models::Dinov2Options{storage, device});
  const models::Hunyuan3DDiT dit = models::Hunyuan3DDiT::random(dit_cfg, 2, {storage, device});
  models::ShapeVAE vae = models::ShapeVAE::random(vae_cfg, 3, storage);
  vae.set_device(device);
  const double build_s = seconds_since(t_build);

  for (std::size_t run = 0; run < opt.steps.size(); ++run)
    for (int rep = 0; rep < opt.reps; ++rep) {
      const int steps = opt.steps[run];
      const double guidance = opt.guidance[opt.guidance.size() == 1 ? 0 : run];
      nlohmann::json stages;
      const auto t0 = Clock::now();
      auto timed = [&](const char* name, auto&& f) {
        const auto ts = Clock::now();
        auto r = f();
        stages[name] = seconds_since(ts);
        return r;
      };
      // Normalized pixels as the conditioner makes them.
      const models::Tensor pixels = uniform({1, 3, image, image}, 4, -2.0f, 2.0f);
      const models::Tensor cond = timed("dinov2", [&] { return encoder.forward(pixels); });
      const models::Tensor noise = uniform({1, vae_cfg.num_latents, dit_cfg.in_channels}, 5, -1.7f,
                                           1.7f);  // unit variance
      models::SamplerOptions so;
      so.steps = steps;
      so.guidance_scale = guidance;
      const models::Tensor latents =
          timed("sampler", [&] { return models::sample(dit, so, nullptr, noise, cond); });
      const models::Tensor decoded = timed("vae_decode", [&] { return vae.decode(latents); });
      models::VolumeDecodeOptions vo;
      vo.method = method;
      vo.resolution = opt.octree;
      // A device field takes whole blocks of points per call; fewer, larger calls.
      if (device != models::Device::kCpu) vo.num_chunks = i64{1} << 16;
      models::VolumeDecodeStats stats;
      const models::VolumeGrid grid = timed("volume_decode", [&] {
        const CostedSurfaceField field(vae.geometry_field(decoded, 0));
        return models::decode_volume(field, vo, &stats);
      });
      const mesh::Mesh m = timed("marching_cubes", [&] {
        return mesh::marching_cubes({grid.values.data(), grid.n(), grid.n(), grid.n()});
      });
      const double total_s = seconds_since(t0);

      nlohmann::json j;
      j["bench"] = "shape";
      j["rep"] = rep;
      j["model"] = opt.tiny ? "2.0 (tiny)" : "2.0";
      j["device"] = models::device_name(device);
      if (device != models::Device::kCpu) j["gpu"] = device_description(device);
      j["precision"] = models::precision_name(precision);
      j["steps"] = steps;
      j["guidance"] = guidance;
      j["octree"] = opt.octree;
      j["volume"] = models::volume_method_name(method);
      j["total_s"] = total_s;
      j["stages"] = stages;
      j["build_s"] = build_s;
      j["points"] = stats.points_queried;
      j["faces"] = m.faces.size();
      j["surface"] = "sphere r 0.5, logit 10 sdf; the VAE decoder runs on every point";
      std::printf("%s\n", j.dump().c_str());
      std::fflush(stdout);
    }
  if (opt.profile && device != models::Device::kCpu) {
    const models::Tensor pixels = uniform({1, 3, image, image}, 4, -2.0f, 2.0f);
    const models::Tensor noise =
        uniform({1, vae_cfg.num_latents, dit_cfg.in_channels}, 5, -1.7f, 1.7f);
    models::SamplerOptions so;
    so.steps = 1;
    so.guidance_scale = -1.0;
    const models::Tensor decoded =
        vae.decode(models::sample(dit, so, nullptr, noise, encoder.forward(pixels)));
    models::VolumeDecodeOptions vo;
    vo.method = method;
    vo.resolution = opt.octree;
    vo.num_chunks = i64{1} << 16;
    const CostedSurfaceField field(vae.geometry_field(decoded, 0));
    const auto ts = Clock::now();
    nlohmann::json ops;
    for (const auto& [name, ms] :
         profile_device(device, [&] { (void)models::decode_volume(field, vo); }))
      ops[name] = ms;
    nlohmann::json j;
    j["bench"] = "shape-profile";
    j["stage"] = "volume_decode";
    j["wall_s"] = seconds_since(ts);
    j["gpu_ms_by_op"] = ops;
    std::printf("%s\n", j.dump().c_str());
  }
  return 0;
}

}  // namespace gen3d::app::cli
