// Golden tests of Hunyuan3D-2's speed models (the guidance-distilled "fast" and step-distilled
// "turbo" DiTs, the turbo VAEs; 2mini's turbo) against the official pipeline
// (fast_models/README.md), and the sampling and decoding of Hunyuan3D-2mv's runs
// (multiview/README.md, same layout). Data-driven: every sub-folder of $GEN3D_GOLDEN_FAST_DIR
// (default tests/data/golden/fast_models and tests/data/golden/multiview) holding a
// golden.safetensors is one variant, a tiny model folder in the official layout; sizes, steps and
// settings come from the files. Each variant is run as `gen3d shape` would run it: the DiT, its
// scheduler and the VAE it picks, from the folder's own config.yaml.

#include <gtest/gtest.h>

#include <algorithm>
#include <cmath>
#include <filesystem>

#include <nlohmann/json.hpp>

#include "models/core/safetensors.h"
#include "models/model_folder.h"
#include "models/shape/checkpoints.h"
#include "models/shape/denoiser.h"
#include "models/shape/sampler.h"
#include "models/shape/shape_models.h"
#include "models/shape/shape_vae.h"
#include "models/shape/volume_decoder.h"
#include "support/paths.h"

namespace gen3d::models {
namespace {

namespace fs = std::filesystem;

// Fixed before the comparison (golden/README.md "Tolerances", strict: fp32 compute, the exact
// float32 timestep / guidance sinusoid): element-wise |a - g| <= tol (1 + |g|).
constexpr double kSamplerTol = 1e-4;  // multi-step latents and DiT outputs
constexpr double kVaeTol = 3e-5;      // decoded latents and grid logits

std::vector<fs::path> variants() {
  const std::string golden = test::source_dir() + "/tests/data/golden/";
  const std::string dir = test::env_or("GEN3D_GOLDEN_FAST_DIR", "");
  const std::vector<fs::path> roots =
      dir.empty() ? std::vector<fs::path>{golden + "fast_models", golden + "multiview"}
                  : std::vector<fs::path>{dir};
  std::vector<fs::path> out;
  for (const fs::path& root : roots) {
    std::error_code ec;
    for (const auto& e : fs::directory_iterator(root, ec))
      if (fs::is_regular_file(e.path() / "golden.safetensors")) out.push_back(e.path());
  }
  std::sort(out.begin(), out.end());
  return out;
}

// max over elements of |a - g| / (tol (1 + |g|)); <= 1 passes.
double usage(const Tensor& a, const Tensor& g, double tol) {
  EXPECT_EQ(a.shape(), g.shape());
  if (!(a.shape() == g.shape())) return INFINITY;
  double u = 0.0;
  for (std::int64_t i = 0; i < g.numel(); ++i) {
    const double x = a.data()[i], y = g.data()[i];
    if (std::isnan(x) || std::isnan(y)) return INFINITY;
    u = std::max(u, std::abs(x - y) / (tol * (1.0 + std::abs(y))));
  }
  return u;
}

std::vector<float> values(const Tensor& t) {
  return std::vector<float>(t.data(), t.data() + t.numel());
}

struct Variant {
  fs::path dir;
  std::shared_ptr<const SafetensorsFile> golden;
  nlohmann::json run;
  explicit Variant(const fs::path& d)
      : dir(d), golden(SafetensorsFile::open((d / "golden.safetensors").string())) {
    run = nlohmann::json::parse(golden->metadata().at("run"));
  }
  Tensor g(const std::string& name) const { return golden->to_f32(name); }
};

TEST(FastModelsGolden, VariantsPresent) {
  if (variants().empty()) GTEST_SKIP() << "no fast_models golden set";
  for (const fs::path& d : variants()) {
    const Variant v(d);
    EXPECT_TRUE(find_shape_model_info(v.run["dit_folder"].get<std::string>()))
        << v.run["dit_folder"] << " is a published folder name";
  }
}

// `gen3d models check` on the variant's folder: every network recognised by its folder name and
// complete.
TEST(FastModelsGolden, ModelsCheckRecognisesTheFolders) {
  for (const fs::path& d : variants()) {
    const Variant v(d);
    const auto checks = check_model_folder(d.string());
    std::size_t expected = 1 + (v.run["turbo_vae_folder"].is_string() ? 1 : 0);
    EXPECT_EQ(checks.size(), expected) << d;
    for (const NetworkCheck& c : checks) {
      EXPECT_TRUE(c.problems.empty()) << c.network << ": " << c.problems.front();
      EXPECT_TRUE(c.shapes_checked) << c.network;
      if (const ShapeModelInfo* m = find_shape_model_info(c.folder)) {
        EXPECT_EQ(c.network, m->network);
      } else {
        const ShapeVaeInfo* vae = find_shape_vae_info(c.folder);
        ASSERT_TRUE(vae) << c.folder;
        EXPECT_EQ(c.network, vae->network);
      }
    }
  }
}

// The sampling run: the folder's scheduler and guidance embedding (one forward per step, no CFG
// rows), every step's DiT output and latents against the official pipeline's.
TEST(FastModelsGolden, SamplerFromTheFolderConfig) {
  if (variants().empty()) GTEST_SKIP() << "no fast_models golden set";
  for (const fs::path& d : variants()) {
    const Variant v(d);
    SCOPED_TRACE(d.filename().string());
    const CheckpointSource src =
        resolve_checkpoint((d / v.run["dit_folder"].get<std::string>()).string());
    const auto model = shared_denoiser(src);
    // Guidance-distilled: the scale goes into the DiT (as the pipeline passes it), no CFG rows;
    // otherwise CFG over [cond; uncond] rows (the 2mini DiT).
    const bool cfg = v.run["cfg"].get<bool>();
    EXPECT_EQ(model->guidance_embedded(), !cfg);
    if (v.golden->find("step.0.guidance")) {
      const Tensor guidance = v.g("step.0.guidance");
      for (float g : guidance.span()) {
        EXPECT_EQ(g, static_cast<float>(v.run["guidance_scale"].get<double>()));
      }
    }
    const auto sched = scheduler_of(src.config);
    ASSERT_TRUE(sched) << src.config << " has a scheduler section";
    SamplerOptions o;
    o.steps = static_cast<int>(v.g("schedule.timesteps").numel());
    EXPECT_EQ(o.steps, v.run["steps"].get<int>());
    o.guidance_scale = v.run["guidance_scale"].get<double>();
    o.schedule = sched->kind;
    o.pcm_timesteps = sched->pcm_timesteps;
    o.num_train_timesteps = sched->num_train_timesteps;
    o.shift = sched->shift;
    const bool consistency = v.run["scheduler"]["target"].get<std::string>().ends_with(
        ".ConsistencyFlowMatchEulerDiscreteScheduler");
    EXPECT_EQ(sched->kind == ScheduleKind::kConsistency, consistency);

    for (const bool elide : {false, true}) {
      o.elide_zero_dt_steps = elide;
      FlowMatchSampler s(*model, o);
      EXPECT_EQ(s.cfg(), v.run["cfg"].get<bool>());
      EXPECT_EQ(values(v.g("schedule.timesteps")), s.schedule().timesteps);
      EXPECT_EQ(values(v.g("schedule.sigmas")), s.schedule().sigmas);
      s.start(v.g("in.noise"), v.g("in.cond"));
      double worst = 0.0;
      int preds = 0;
      StepObserver obs = [&](const StepObservation& ob) {
        const std::string p = "step." + std::to_string(ob.step) + ".";
        const Tensor t = v.g(p + "t");
        for (float x : t.span()) EXPECT_EQ(x, ob.t) << p << "t";
        worst = std::max(worst, usage(*ob.latents, v.g(p + "latents"), kSamplerTol));
        if (!ob.v) return;                    // an elided step
        const Tensor pred = v.g(p + "pred");  // [MB, L, C]: cond rows, then uncond rows with CFG
        if (cfg) {
          const std::int64_t n = pred.numel() / 2;
          Tensor c(ob.v_cond->shape()), u(ob.v_uncond->shape());
          std::copy_n(pred.data(), n, c.data());
          std::copy_n(pred.data() + n, n, u.data());
          worst = std::max(worst, usage(*ob.v_cond, c, kSamplerTol));
          worst = std::max(worst, usage(*ob.v_uncond, u, kSamplerTol));
        } else {
          worst = std::max(worst, usage(*ob.v, pred, kSamplerTol));
        }
        ++preds;
      };
      while (!s.done()) s.step(&obs);
      const double u = usage(s.latents(), v.g("out.final_latents"), kSamplerTol);
      EXPECT_LE(worst, 1.0) << "steps" << (elide ? " (elided run)" : "");
      EXPECT_LE(u, 1.0) << "final latents";
      if (!elide) {
        EXPECT_EQ(preds, v.run["model_calls"].get<int>());
      }
      std::printf("[ info ] %s (elide %d): %d DiT calls, worst usage %.4f, final %.4f\n",
                  d.filename().c_str(), elide ? 1 : 0, preds, worst, u);
    }
  }
}

// Decoding: each VAE of the variant (the checkpoint's own, and the turbo VAE `gen3d shape` picks
// beside a turbo DiT) on the golden final latents: decoded latents and the dense grid.
TEST(FastModelsGolden, VaeDecodeAndDenseGrid) {
  if (variants().empty()) GTEST_SKIP() << "no fast_models golden set";
  for (const fs::path& d : variants()) {
    const Variant v(d);
    SCOPED_TRACE(d.filename().string());
    const std::string dit_dir = (d / v.run["dit_folder"].get<std::string>()).string();
    const std::string turbo = find_turbo_vae(dit_dir);
    if (v.run["turbo_vae_folder"].is_string()) {
      EXPECT_EQ(fs::path(turbo), d / v.run["turbo_vae_folder"].get<std::string>());
    } else {
      EXPECT_EQ(turbo, "");
    }
    const Tensor latents = v.g("out.final_latents");
    for (const auto& folder : v.run["vae_folders"]) {
      const std::string name = folder.get<std::string>();
      CheckpointSource src = resolve_checkpoint((d / name).string());
      src.section = name == v.run["dit_folder"] ? std::string(kVaePrefix) : "";
      const auto vae = shared_shape_vae(src);
      const Tensor dec = vae->decode(latents);
      const std::string p = "decode." + name + ".";
      EXPECT_LE(usage(dec, v.g(p + "decoded_latents"), kVaeTol), 1.0) << p << "decoded_latents";
      const Tensor grid = v.g(p + "grid_logits");  // [B, R+1, R+1, R+1]
      VolumeDecodeOptions vo;
      vo.method = VolumeMethod::kDense;
      vo.resolution = v.run["octree_resolution"].get<int>();
      const double b = v.run["bounds"].get<double>();
      vo.bbox_min = {-b, -b, -b};
      vo.bbox_max = {b, b, b};
      ASSERT_EQ(grid.dim(1), vo.resolution + 1);
      for (std::int64_t item = 0; item < grid.dim(0); ++item) {
        const VolumeGrid ours = decode_volume(*vae->geometry_field(dec, item), vo);
        const std::int64_t n = grid.numel() / grid.dim(0);
        Tensor want({n}), have({n});
        std::copy_n(grid.data() + item * n, n, want.data());
        std::copy(ours.values.begin(), ours.values.end(), have.data());
        const double u = usage(have, want, kVaeTol);
        EXPECT_LE(u, 1.0) << p << "grid_logits item " << item;
        std::printf("[ info ] %s %s item %lld: grid usage %.4f\n", d.filename().c_str(),
                    name.c_str(), static_cast<long long>(item), u);
      }
    }
  }
}

}  // namespace
}  // namespace gen3d::models
