// Golden tests of the schedules and the CFG sampler against the official PyTorch reference
// (golden/README.md "Scheduler and sampler"). Data-driven: $GEN3D_GOLDEN_DIR (default
// tests/data/golden); sizes and settings come from its config.json and the tensors' shapes; a
// test skips only when its file is absent.

#include <gtest/gtest.h>

#include <cmath>
#include <filesystem>
#include <fstream>

#include <nlohmann/json.hpp>

#include "mesh/marching_cubes.h"
#include "models/bf16_golden.h"
#include "models/core/safetensors.h"
#include "models/shape/dit.h"
#include "models/shape/sampler.h"
#include "models/shape/shape_vae.h"
#include "models/shape/volume_decoder.h"
#include "support/mesh_distance.h"
#include "support/paths.h"

namespace gen3d::models {
namespace {

constexpr double kSamplerStrict = 1e-4;  // README: sampler, multi-step (atol = rtol)

std::string golden_file(const std::string& name) {
  return test::env_or("GEN3D_GOLDEN_DIR", test::source_dir() + "/tests/data/golden") + "/" + name;
}

#define REQUIRE_GOLDEN(path)                                                              \
  do {                                                                                    \
    if (!std::filesystem::exists(path)) GTEST_SKIP() << "golden file absent: " << (path); \
  } while (0)

nlohmann::json golden_config() {
  std::ifstream f(golden_file("config.json"));
  return nlohmann::json::parse(f);
}

std::vector<float> values(const SafetensorsFile& f, const std::string& name) {
  const Tensor t = f.to_f32(name);
  return std::vector<float>(t.data(), t.data() + t.numel());
}

void expect_tables(const SafetensorsFile& f, const std::string& prefix, const Schedule& s) {
  EXPECT_EQ(values(f, prefix + "sigmas"), s.sigmas) << prefix;
  EXPECT_EQ(values(f, prefix + "timesteps"), s.timesteps) << prefix;
  EXPECT_EQ(values(f, prefix + "model_t"), s.model_t) << prefix;
  if (f.find(prefix + "dt")) {
    EXPECT_EQ(values(f, prefix + "dt"), s.dt) << prefix;
  }
}

TEST(SamplerGolden, SchedulerTablesExact) {
  const auto path = golden_file("scheduler.safetensors");
  REQUIRE_GOLDEN(path);
  REQUIRE_GOLDEN(golden_file("config.json"));
  const auto file = SafetensorsFile::open(path);
  const auto run = golden_config()["golden"]["scheduler"];
  int tables = 0;
  for (int n : run["flow_steps"]) {
    expect_tables(*file, "flowmatch.steps" + std::to_string(n) + ".", flow_match_schedule(n));
    ++tables;
  }
  for (const auto& c : run["consistency"]) {
    const int pcm = c["pcm_timesteps"], n = c["steps"];
    expect_tables(*file,
                  "consistency.pcm" + std::to_string(pcm) + ".steps" + std::to_string(n) + ".",
                  consistency_schedule(n, pcm));
    ++tables;
  }
  EXPECT_GT(tables, 0);
}

// max over elements of |a - g| / (atol + rtol |g|); <= 1 passes.
double usage(const Tensor& a, const Tensor& g, double tol) {
  EXPECT_EQ(a.shape(), g.shape());
  double u = 0.0;
  for (std::int64_t i = 0; i < g.numel(); ++i)
    u = std::max(u, std::abs(static_cast<double>(a.data()[i]) - g.data()[i]) /
                        (tol + tol * std::abs(static_cast<double>(g.data()[i]))));
  return u;
}

TEST(SamplerGolden, CfgTrajectory) {
  const auto path = golden_file("sampler.safetensors");
  REQUIRE_GOLDEN(path);
  REQUIRE_GOLDEN(golden_file("config.json"));
  const auto cfg = golden_config();
  const auto run = cfg["golden"]["sampler"];
  const auto weights = golden_file(run["dit_weights_file"].get<std::string>());
  REQUIRE_GOLDEN(weights);
  const auto file = SafetensorsFile::open(path);
  const auto model =
      Hunyuan3DDiT::load(DiTConfig::from_file(golden_file("config.json"), "model"), weights);

  SamplerOptions o;
  o.steps = run["steps"];
  o.guidance_scale = run["guidance_scale"];
  expect_tables(*file, "schedule.", flow_match_schedule(o.steps));

  const Tensor cond = file->to_f32("in.cond_context");
  const Tensor uncond = file->to_f32("in.uncond_context");
  for (float v : uncond.span()) ASSERT_EQ(v, 0.0f) << "the official unconditional context is zero";

  // Elision off: the golden has the DiT outputs of the last (dt = 0) step too.
  for (const bool elide : {false, true}) {
    o.elide_zero_dt_steps = elide;
    FlowMatchSampler s(model, o);
    EXPECT_EQ(s.cfg(), run["cfg"].get<bool>());
    s.start(file->to_f32("in.initial_latents"), cond, &uncond);
    double worst = 0.0;
    int compared = 0;
    StepObserver obs = [&](const StepObservation& ob) {
      const std::string p = "step." + std::to_string(ob.step) + ".";
      auto check = [&](const std::string& name, const Tensor* t) {
        if (!t || !file->find(p + name)) return;
        const double u = usage(*t, file->to_f32(p + name), kSamplerStrict);
        EXPECT_LE(u, 1.0) << p << name << (elide ? " (elided run)" : "");
        worst = std::max(worst, u);
        ++compared;
      };
      check("latents", ob.latents);
      check("pred_cond", ob.v_cond);
      check("pred_uncond", ob.v_uncond);
      check("pred_guided", ob.v);
    };
    while (!s.done()) s.step(&obs);
    const double u = usage(s.latents(), file->to_f32("out.final_latents"), kSamplerStrict);
    EXPECT_LE(u, 1.0) << "final latents";
    EXPECT_EQ(compared, elide ? 4 * o.steps - 3 : 4 * o.steps);
    std::printf("[ info ] sampler (elide %d): %d tensors, worst strict usage %.4f, final %.4f\n",
                elide ? 1 : 0, compared, worst, u);
  }
}

// bf16 and int8 modes: the DiT in bf16 (or int8) drives the same sampler (state float32); every
// step's latents and predictions against the same golden trajectory by normalized MSE (README
// "Precision").
void reduced_trajectory(WeightStorage storage, const std::string& label, double tolerance,
                        const std::string& mode) {
  const auto path = golden_file("sampler.safetensors");
  const auto cfg = golden_config();
  const auto run = cfg["golden"]["sampler"];
  const auto weights = golden_file(run["dit_weights_file"].get<std::string>());
  REQUIRE_GOLDEN(weights);
  const auto file = SafetensorsFile::open(path);
  const auto model = Hunyuan3DDiT::load(DiTConfig::from_file(golden_file("config.json"), "model"),
                                        weights, {storage});
  SamplerOptions o;
  o.steps = run["steps"];
  o.guidance_scale = run["guidance_scale"];
  o.elide_zero_dt_steps = false;
  const Tensor cond = file->to_f32("in.cond_context");
  const Tensor uncond = file->to_f32("in.uncond_context");
  FlowMatchSampler s(model, o);
  s.start(file->to_f32("in.initial_latents"), cond, &uncond);
  bf16test::NmseCheck check(label, tolerance, mode);
  StepObserver obs = [&](const StepObservation& ob) {
    const std::string p = "step." + std::to_string(ob.step) + ".";
    auto add = [&](const std::string& name, const Tensor* t) {
      if (!t || !file->find(p + name)) return;
      const Tensor g = file->to_f32(p + name);
      ASSERT_EQ(t->numel(), g.numel()) << p << name;
      check.add(p + name, t->data(), g.data(), g.numel());
    };
    add("latents", ob.latents);
    add("pred_cond", ob.v_cond);
    add("pred_uncond", ob.v_uncond);
    add("pred_guided", ob.v);
  };
  while (!s.done()) s.step(&obs);
  const Tensor g = file->to_f32("out.final_latents");
  check.add("out.final_latents", s.latents().data(), g.data(), g.numel());
  EXPECT_EQ(check.count(), 4 * o.steps + 1);
  check.report();
}

TEST(SamplerGolden, CfgTrajectory_bf16) {
  REQUIRE_GOLDEN(golden_file("sampler.safetensors"));
  REQUIRE_GOLDEN(golden_file("config.json"));
  reduced_trajectory(WeightStorage::kBF16, "sampler bf16", bf16test::kNetworkNmse, "bf16");
}

TEST(SamplerGolden, CfgTrajectory_int8) {
  REQUIRE_GOLDEN(golden_file("sampler.safetensors"));
  REQUIRE_GOLDEN(golden_file("config.json"));
  reduced_trajectory(WeightStorage::kInt8, "sampler int8", bf16test::kInt8NetworkNmse, "int8");
}

// ---- the end-to-end decode ----------------------------------------------------------------

// The sampler run, then its final latents through the VAE (vae_weights_file) to the dense grid at
// decode_octree_resolution over the box of bounds 1.01 (golden/README.md "Scheduler and sampler":
// the official _export path) and marching cubes at level 0; the DiT and the VAE both with
// `storage`.
struct DecodedRun {
  Tensor grid;                     // [B, n, n, n] logits, n = R + 1
  std::vector<mesh::Mesh> meshes;  // one per batch item
};

DecodedRun sample_and_decode(WeightStorage storage) {
  const auto file = SafetensorsFile::open(golden_file("sampler.safetensors"));
  const auto run = golden_config()["golden"]["sampler"];
  const auto model =
      Hunyuan3DDiT::load(DiTConfig::from_file(golden_file("config.json"), "model"),
                         golden_file(run["dit_weights_file"].get<std::string>()), {storage});
  SamplerOptions o;
  o.steps = run["steps"];
  o.guidance_scale = run["guidance_scale"];
  FlowMatchSampler s(model, o);
  const Tensor cond = file->to_f32("in.cond_context");
  const Tensor uncond = file->to_f32("in.uncond_context");
  s.start(file->to_f32("in.initial_latents"), cond, &uncond);
  while (!s.done()) s.step();
  const ShapeVAE vae =
      ShapeVAE::load(ShapeVAEConfig::from_file(golden_file("config.json"), "vae"),
                     golden_file(run["vae_weights_file"].get<std::string>()), storage);
  const Tensor decoded = vae.decode(s.latents());  // [B, N, W]
  VolumeDecodeOptions vo;
  const double b = run.value("bounds", 1.01);
  vo.bbox_min = {-b, -b, -b};
  vo.bbox_max = {b, b, b};
  vo.resolution = run["decode_octree_resolution"];
  const std::int64_t B = decoded.dim(0), n = vo.resolution + 1;
  DecodedRun out;
  out.grid = Tensor({B, n, n, n});
  for (std::int64_t item = 0; item < B; ++item) {
    const VolumeGrid g = decode_volume(*vae.geometry_field(decoded, item), vo);
    std::copy(g.values.begin(), g.values.end(), out.grid.data() + item * n * n * n);
    mesh::MarchingCubesOptions mc;
    for (int a = 0; a < 3; ++a) {
      mc.bbox_min[a] = static_cast<float>(vo.bbox_min[a]);
      mc.bbox_max[a] = static_cast<float>(vo.bbox_max[a]);
    }
    out.meshes.push_back(mesh::marching_cubes({g.values.data(), n, n, n}, mc));
  }
  return out;
}

// float32: the decoded grid against out.decoded_grid_logits at the sampler's strict tolerance,
// and its meshes' vertex and face counts against the run's decoded_mesh_counts.
TEST(SamplerGolden, EndToEndDecode) {
  REQUIRE_GOLDEN(golden_file("sampler.safetensors"));
  REQUIRE_GOLDEN(golden_file("config.json"));
  REQUIRE_GOLDEN(golden_file("vae_weights.fp32.safetensors"));
  const auto file = SafetensorsFile::open(golden_file("sampler.safetensors"));
  const auto run = golden_config()["golden"]["sampler"];
  const DecodedRun r = sample_and_decode(WeightStorage::kF32);
  const double u = usage(r.grid, file->to_f32("out.decoded_grid_logits"), kSamplerStrict);
  EXPECT_LE(u, 1.0) << "decoded grid";
  const auto counts = run.value("decoded_mesh_counts", nlohmann::json::array());
  for (std::size_t item = 0; item < counts.size() && item < r.meshes.size(); ++item) {
    EXPECT_EQ(r.meshes[item].positions.size(), counts[item][0].get<std::size_t>()) << item;
    EXPECT_EQ(r.meshes[item].faces.size(), counts[item][1].get<std::size_t>()) << item;
  }
  std::printf("[ info ] end-to-end decode: grid strict usage %.4f\n", u);
}

// int8 against bf16 on the golden sampler run: the DiT and the VAE in int8, then in bf16, each
// sampling and decoding the run; the two meshes of each item must lie within a symmetric Chamfer
// distance of 0.5% of the bf16 mesh's bounding-box diagonal (bound fixed before measuring). A
// vertex sits on a grid edge where the logit crosses 0, so a logit error moves it along that edge
// by about the error over the logit's change across the edge: int8's logit nmse bound 5e-3 is a
// relative error of about 7%, about 7% of a cell, which at R 16 in a 2.02 box is 0.25% of the
// diagonal; the bound is twice that. The grids are also held to the int8 nmse bound against the
// golden float32 grid.
TEST(SamplerGolden, DecodedMesh_int8) {
  REQUIRE_GOLDEN(golden_file("sampler.safetensors"));
  REQUIRE_GOLDEN(golden_file("config.json"));
  REQUIRE_GOLDEN(golden_file("vae_weights.fp32.safetensors"));
  constexpr double kChamferOfDiagonal = 5e-3;
  const auto file = SafetensorsFile::open(golden_file("sampler.safetensors"));
  const Tensor golden_grid = file->to_f32("out.decoded_grid_logits");
  const DecodedRun r8 = sample_and_decode(WeightStorage::kInt8);
  const DecodedRun r16 = sample_and_decode(WeightStorage::kBF16);
  const DecodedRun r32 = sample_and_decode(WeightStorage::kF32);
  ASSERT_EQ(r8.grid.numel(), golden_grid.numel());
  const double e8 = bf16test::nmse(r8.grid.data(), golden_grid.data(), golden_grid.numel());
  EXPECT_LE(e8, bf16test::kInt8NetworkNmse) << "int8 decoded grid";
  std::printf(
      "[ info ] decoded grid nmse: int8 vs fp32 %.3g, int8 vs bf16 %.3g, bf16 vs fp32 "
      "%.3g\n",
      e8, bf16test::nmse(r8.grid.data(), r16.grid.data(), golden_grid.numel()),
      bf16test::nmse(r16.grid.data(), golden_grid.data(), golden_grid.numel()));
  ASSERT_EQ(r8.meshes.size(), r16.meshes.size());
  for (std::size_t item = 0; item < r8.meshes.size(); ++item) {
    const auto& m8 = r8.meshes[item].positions;
    const auto& m16 = r16.meshes[item].positions;
    ASSERT_FALSE(m16.empty()) << "item " << item << ": no surface";
    const double diag = test::bbox_diagonal(m16);
    const test::MeshDistance d = test::mesh_distance(m8, m16);
    const test::MeshDistance d32 = test::mesh_distance(m8, r32.meshes[item].positions);
    const test::MeshDistance d16 = test::mesh_distance(m16, r32.meshes[item].positions);
    EXPECT_LE(d.chamfer, kChamferOfDiagonal * diag) << "item " << item;
    std::printf(
        "[ info ] item %zu: int8 mesh %zu vertices, bf16 %zu; Chamfer int8-bf16 %.3g = "
        "%.3g%% of the diagonal %.3f (Hausdorff %.3g); int8-fp32 %.3g%%, bf16-fp32 "
        "%.3g%%\n",
        item, m8.size(), m16.size(), d.chamfer, 100.0 * d.chamfer / diag, diag, d.hausdorff,
        100.0 * d32.chamfer / diag, 100.0 * d16.chamfer / diag);
  }
}

}  // namespace
}  // namespace gen3d::models
