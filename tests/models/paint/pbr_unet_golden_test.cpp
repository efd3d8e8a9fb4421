// Golden tests of the Hunyuan3D-2.1 PBR paint UNet2.5D (UNet2p5DConditionModel) against the
// official PyTorch code (paint21/README.md): voxel indices of the position maps (exact), the 3-D
// RoPE tables, and the CFG call of paint21_unet.forward.safetensors — reference features
// (ref.*), the reference pass (inter.unet_dual.*), every main-UNet intermediate (inter.unet.*),
// the projected DINO tokens, one block's branch outputs (trace.*) and out.sample — in fp32 and,
// by normalized MSE, in bf16; and the keys / values projected once per generation against those
// projected in every forward, bit for bit over several steps. Data-driven: the set directory is
// $GEN3D_GOLDEN_H21_DIR (default tests/data/golden/hunyuan3d-2.1), paint21/ inside; sizes, counts
// and settings come from its config.json and the stored shapes.

#include <gtest/gtest.h>

#include <algorithm>
#include <cmath>
#include <cstdio>
#include <cstring>
#include <filesystem>
#include <fstream>
#include <map>
#include <nlohmann/json.hpp>
#include <set>
#include <string>
#include <vector>

#include "models/bf16_golden.h"
#include "models/core/error.h"
#include "models/core/safetensors.h"
#include "models/kernels/conv.h"
#include "models/paint/pbr_paint.h"
#include "models/paint/pbr_unet.h"
#include "paint21_golden.h"
#include "support/paths.h"

namespace gen3d::models {
namespace {

using json = nlohmann::json;
using i64 = std::int64_t;
using namespace paint21_golden;

// paint21/README.md "Suggested tolerances (fp32)": inter/trace 2e-4 abs + 1e-4 rel, out 3e-4
// abs, voxel_indices exact, rope 1e-6.
constexpr double kInterAbs = 2e-4;
constexpr double kInterRel = 1e-4;
constexpr double kOutAbs = 3e-4;
constexpr double kRopeTol = 1e-6;

#define REQUIRE_GOLDEN(path)                                                              \
  do {                                                                                    \
    if (!std::filesystem::exists(path)) GTEST_SKIP() << "golden file absent: " << (path); \
  } while (0)

json golden_json() {
  std::ifstream f(set_file("config.json"));
  return json::parse(f);
}

// max over elements of |a − g| / (abs + rel·|g|); <= 1 passes.
double usage(const float* a, const float* g, i64 n, double abs, double rel) {
  double u = 0.0;
  for (i64 i = 0; i < n; ++i) {
    if (std::isnan(a[i]) || std::isnan(g[i])) return INFINITY;
    u = std::max(u, std::abs(static_cast<double>(a[i]) - g[i]) / (abs + rel * std::abs(g[i])));
  }
  return u;
}

std::vector<std::int32_t> ints(const SafetensorsFile& f, const std::string& name) {
  const TensorInfo* info = f.find(name);
  if (!info || info->dtype != DType::kI32) throw ModelError(name + " is not I32");
  const auto bytes = f.bytes(*info);
  std::vector<std::int32_t> v(bytes.size() / 4);
  std::memcpy(v.data(), bytes.data(), v.size() * 4);
  return v;
}

// The voxel grid of a multiview sequence length: config.json's voxel_resolution_by_seq_len, the
// grid from len = N·g².
struct Level {
  int grid = 0, res = 0;
};
Level level_of(const json& fwd_cfg, i64 views, i64 len) {
  Level l;
  l.res = fwd_cfg.at("voxel_resolution_by_seq_len").at(std::to_string(len)).get<int>();
  l.grid = static_cast<int>(std::lround(std::sqrt(static_cast<double>(len / views))));
  if (views * l.grid * l.grid != len) throw ModelError("sequence length is not N·g²");
  return l;
}

struct Fixture {
  json cfg = golden_json();
  const json& fwd_cfg = cfg.at("golden").at("paint21_unet.forward");
  std::shared_ptr<const SafetensorsFile> fwd =
      SafetensorsFile::open(set_file("paint21_unet.forward.safetensors"));
  UNetConfig base = UNetConfig::parse(cfg.at("unet").dump(), "paint21 unet");
};

TEST(PbrUNetGolden, VoxelIndicesExact) {
  REQUIRE_GOLDEN(set_file("paint21_unet.forward.safetensors"));
  Fixture g;
  const PositionMaps pm = position_maps(*g.fwd);
  ASSERT_EQ(pm.maps.views, g.fwd_cfg.at("num_views").get<i64>());
  const std::vector<VoxelLevel> levels =
      pbr_multires_voxel_indices(pm.maps, g.fwd_cfg.at("latent").get<i64>());
  int checked = 0;
  for (const TensorInfo& info : g.fwd->tensors()) {
    if (info.name.rfind("voxel_indices.", 0) != 0) continue;
    const i64 len = std::stoll(info.name.substr(14));
    const Level lv = level_of(g.fwd_cfg, pm.maps.views, len);
    const std::vector<std::int32_t> want = ints(*g.fwd, info.name);
    const VoxelLevel* mine = nullptr;
    for (const VoxelLevel& v : levels)
      if (v.grid == lv.grid) mine = &v;
    ASSERT_TRUE(mine) << "no level of grid " << lv.grid;
    EXPECT_EQ(mine->voxel_resolution, lv.res) << info.name;
    const std::vector<std::int32_t>& got = mine->voxels;
    ASSERT_EQ(got.size(), want.size()) << info.name;
    i64 wrong = 0, first = -1;
    for (std::size_t i = 0; i < want.size(); ++i)
      if (got[i] != want[i]) {
        ++wrong;
        if (first < 0) first = static_cast<i64>(i);
      }
    EXPECT_EQ(wrong, 0) << info.name << ": " << wrong << " of " << want.size()
                        << " differ, first at " << first << " (got " << got[first] << ", expected "
                        << want[first] << ")";
    std::printf("  %s (grid %d, voxel resolution %d): %lld of %zu differ\n", info.name.c_str(),
                lv.grid, lv.res, static_cast<long long>(wrong), want.size());
    ++checked;
  }
  EXPECT_GT(checked, 0);
}

TEST(PbrUNetGolden, RopeTables) {
  REQUIRE_GOLDEN(set_file("paint21_unet.forward.safetensors"));
  Fixture g;
  const PositionMaps pm = position_maps(*g.fwd);
  const std::vector<VoxelLevel> levels =
      pbr_multires_voxel_indices(pm.maps, g.fwd_cfg.at("latent").get<i64>());
  int checked = 0;
  double worst = 0;
  for (const TensorInfo& info : g.fwd->tensors()) {
    const std::string& n = info.name;
    if (n.rfind("rope.", 0) != 0 || n.size() < 4 || n.compare(n.size() - 4, 4, ".cos") != 0)
      continue;
    // rope.<seq>.head_dim<D>.cos
    const std::size_t a = 5, b = n.find(".head_dim", a);
    ASSERT_NE(b, std::string::npos) << n;
    const i64 len = std::stoll(n.substr(a, b - a));
    const i64 hd = std::stoll(n.substr(b + 9, n.size() - 4 - (b + 9)));
    const Level lv = level_of(g.fwd_cfg, pm.maps.views, len);
    std::vector<std::int32_t> vox;
    for (const VoxelLevel& v : levels)
      if (v.grid == lv.grid) vox = v.voxels;
    ASSERT_FALSE(vox.empty()) << "no level of grid " << lv.grid;
    const RopeTables t = pbr_rope_tables(vox, pm.maps.batch, len, hd, lv.res);
    for (const char* which : {"cos", "sin"}) {
      const std::string name = n.substr(0, n.size() - 3) + which;
      const Tensor want = flat(*g.fwd, name);
      const Tensor& got = std::string(which) == "cos" ? t.cos : t.sin;
      ASSERT_EQ(got.numel(), want.numel()) << name;
      const double u = usage(got.data(), want.data(), want.numel(), kRopeTol, 0.0);
      EXPECT_LE(u, 1.0) << name;
      worst = std::max(worst, u);
      ++checked;
    }
  }
  std::printf("  %d RoPE tables, worst max|diff| %.3g of %.1e\n", checked, worst * kRopeTol,
              kRopeTol);
  EXPECT_GT(checked, 0);
}

// The CFG call of README.md: the stored inputs repeated for the ref_scale rows, DINO zeros for
// every row but the last ("full").
void check_forward(bool bf16) {
  REQUIRE_GOLDEN(set_file("paint21_unet.forward.safetensors"));
  const std::string wpath = set_file("paint21_unet.weights.fp16.safetensors");
  REQUIRE_GOLDEN(wpath);
  Fixture g;
  const SafetensorsFile& f = *g.fwd;
  const PositionMaps pm = position_maps(f);
  const Tensor rs = f.to_f32("in.ref_scale");
  const i64 R = rs.numel();  // CFG rows
  const std::vector<float> ref_scale(rs.data(), rs.data() + R);
  const TensorInfo* si = f.find("in.sample");
  ASSERT_TRUE(si && si->shape.size() == 6);
  ASSERT_EQ(si->shape[0], 1);
  ASSERT_EQ(si->shape[1], PbrUNet::kMaterials);
  const i64 N = si->shape[2], h = si->shape[4];
  ASSERT_EQ(N, g.fwd_cfg.at("num_views").get<i64>());
  ASSERT_EQ(h, g.fwd_cfg.at("latent").get<i64>());
  const Tensor sample = rows_nhwc(f, "in.sample", R);  // (R·2·N, h, h, 4)
  const Tensor normals = rows_nhwc(f, "in.embeds_normal", R);
  const Tensor positions = rows_nhwc(f, "in.embeds_position", R);
  const TensorInfo* ri = f.find("in.ref_latents");
  ASSERT_TRUE(ri && ri->shape.size() == 5);
  const Tensor ref_latents = rows_nhwc(f, "in.ref_latents");  // one item: all CFG rows equal
  const Tensor prompt = f.to_f32("in.learned_prompt");        // (1, 2, T, D)
  const Tensor dino_in = f.to_f32("in.dino_hidden_states");   // (1, T_dino, dino_dim)
  Tensor dino({R, dino_in.dim(1), dino_in.dim(2)});
  std::memcpy(dino.data() + (R - 1) * dino_in.numel(), dino_in.data(),
              sizeof(float) * dino_in.numel());
  const Tensor ts = f.to_f32("in.timestep");
  ASSERT_EQ(ts.numel(), 1);

  const auto net = PbrUNet::load(g.base, wpath, bf16 ? WeightStorage::kBF16 : WeightStorage::kF32);
  // The pipeline's prompt is stack(learned_text_clip_albedo, _mr).
  {
    const Tensor lp = net->learned_prompt();
    ASSERT_EQ(lp.shape(), prompt.shape());
    EXPECT_EQ(0, std::memcmp(lp.data(), prompt.data(), sizeof(float) * lp.numel()));
  }

  bf16test::NmseCheck nmse("paint21 PBR UNet2.5D bf16", bf16test::kUNetNmse);
  double worst = 0;
  std::string worst_name;
  int checked = 0;
  // Compares a golden tensor with the last numel values of `got` (stored intermediates are the
  // last CFG row's, "full").
  auto check = [&](const std::string& name, const Tensor& got, double abs, double rel) {
    const Tensor want = flat(f, name);
    ASSERT_GE(got.numel(), want.numel()) << name << ": got " << got.shape().str();
    ASSERT_EQ(got.numel() % want.numel(), 0) << name << ": got " << got.shape().str();
    const float* a = got.data() + (got.numel() - want.numel());
    ++checked;
    if (bf16) {
      nmse.add(name, a, want.data(), want.numel());
      return;
    }
    const double u = usage(a, want.data(), want.numel(), abs, rel);
    EXPECT_LE(u, 1.0) << name << " uses " << u << " of its tolerance";
    if (u > worst) {
      worst = u;
      worst_name = name;
    }
  };
  auto as_stored = [](const Tensor& t) { return t.rank() == 4 ? to_nchw(t) : t.clone(); };

  std::set<std::string> seen;
  // Reference pass (batch 1; the reference repeats it for every CFG row).
  std::map<std::string, Tensor> dual_probes;
  PbrCondition cond;
  cond.ref = net->reference_features(
      ref_latents, static_cast<int>(ri->shape[1]),
      [&](const std::string& n, const Tensor& v) { dual_probes[n] = as_stored(v); });
  cond.dino = net->project_dino(dino);
  net->prepare_positions(cond, pm.maps, h);

  std::map<std::string, Tensor> probes;
  const Tensor out =
      net->forward(sample, normals, positions, ts.data()[0], prompt, cond, ref_scale, 1.0f,
                   [&](const std::string& n, const Tensor& v) { probes[n] = as_stored(v); });
  probes["conv_out"] = to_nchw(out);
  probes["time_embedding"] = probes.at("time_emb");
  probes["image_proj_model_dino"] = cond.dino.clone();

  for (const TensorInfo& info : f.tensors()) {
    const std::string& n = info.name;
    if (n.rfind("in.", 0) == 0 || n.rfind("voxel_indices.", 0) == 0 || n.rfind("rope.", 0) == 0)
      continue;
    seen.insert(n);
    if (n.rfind("ref.", 0) == 0) {
      const std::string layer = n.substr(4);
      ASSERT_TRUE(cond.ref.layers.count(layer)) << "no reference features for " << layer;
      check(n, cond.ref.layers.at(layer), kInterAbs, kInterRel);
    } else if (n.rfind("inter.unet_dual.", 0) == 0) {
      const std::string p = n.substr(16);
      ASSERT_TRUE(dual_probes.count(p)) << "no reference probe " << p;
      check(n, dual_probes.at(p), kInterAbs, kInterRel);
    } else if (n == "inter.dino_proj") {
      check(n, cond.dino, kInterAbs, kInterRel);
    } else if (n.rfind("inter.unet.", 0) == 0) {
      const std::string p = n.substr(11);
      ASSERT_TRUE(probes.count(p)) << "no probe " << p;
      check(n, probes.at(p), kInterAbs, kInterRel);
    } else if (n.rfind("trace.unet.", 0) == 0) {
      const std::string p = n.substr(11);
      ASSERT_TRUE(probes.count(p)) << "no probe " << p;
      check(n, probes.at(p), kInterAbs, kInterRel);
    } else if (n == "out.sample") {
      ASSERT_EQ(to_nchw(out).numel(), flat(f, n).numel());
      check(n, to_nchw(out), kOutAbs, 0.0);
    } else {
      ADD_FAILURE() << "golden tensor not checked: " << n;
    }
  }
  EXPECT_TRUE(seen.count("out.sample"));
  if (bf16) {
    nmse.report();
  } else {
    std::printf(
        "[ info ] paint21 PBR UNet2.5D fp32: B=%lld N=%lld, %d tensors, worst %.3f of tolerance "
        "(%s)\n",
        static_cast<long long>(R), static_cast<long long>(N), checked, worst, worst_name.c_str());
  }
}

TEST(PbrUNetGolden, CfgCallMatchesEveryStoredTensor) {
  check_forward(false);
}

// bf16: the same call with WeightStorage::kBF16, every tensor by normalized MSE within the
// convolutional UNets' bound (bf16_golden.h kUNetNmse, 1e-2). Measured here: 1.1e-4 at worst
// (out.sample). Swapping the interleaved reference values or truncating the DINO tokens gives 0.1
// or more; voxel indices that ignore the reference's in-place background zeroing gave 3.7e-3
// (within this bound), which VoxelIndicesExact, RopeTables and the fp32 test catch instead.
TEST(PbrUNetGolden, CfgCall_bf16) {
  check_forward(true);
}

// The keys / values of the reference features, the prompt and the DINO tokens projected once
// per generation (PbrUNet::project) give the same bits as projecting them in every forward. The
// stored call's inputs go through the first steps of the official UniPC schedule (the set's
// scheduler config, 15 trailing steps), the latents updated by each step, and every step's
// network output is compared bit for bit: with the stored CFG rows' ref_scale, with two rows
// [0, 1] and with one [1] (bf16, whose tiny oneDNN calls are slow here: the stored rows over two
// steps). A condition projected for another prompt or other ref_scale values is refused.
void check_projected_steps(bool bf16) {
  REQUIRE_GOLDEN(set_file("paint21_unet.forward.safetensors"));
  const std::string wpath = set_file("paint21_unet.weights.fp16.safetensors");
  REQUIRE_GOLDEN(wpath);
  Fixture g;
  const SafetensorsFile& f = *g.fwd;
  const PositionMaps pm = position_maps(f);
  const Tensor latents = rows_nhwc(f, "in.sample");  // (2·N, h, h, 4): one CFG row
  const Tensor normals = rows_nhwc(f, "in.embeds_normal");
  const Tensor positions = rows_nhwc(f, "in.embeds_position");
  const TensorInfo* ri = f.find("in.ref_latents");
  ASSERT_TRUE(ri && ri->shape.size() == 5);
  const Tensor ref_latents = rows_nhwc(f, "in.ref_latents");
  const Tensor prompt = f.to_f32("in.learned_prompt");       // (1, 2, T, D)
  const Tensor dino_in = f.to_f32("in.dino_hidden_states");  // (1, T_dino, dino_dim)
  const Tensor rs = f.to_f32("in.ref_scale");
  const i64 h = latents.dim(1);
  const auto net = PbrUNet::load(g.base, wpath, bf16 ? WeightStorage::kBF16 : WeightStorage::kF32);
  const SchedulerConfig sc = SchedulerConfig::parse(
      g.cfg.at("golden").at("paint21_scheduler").at("base_scheduler_config_assumed").dump(),
      "paint21 base scheduler config");
  const int steps = bf16 ? 2 : 3;
  std::vector<std::vector<float>> scales = {std::vector<float>(rs.data(), rs.data() + rs.numel())};
  if (!bf16) scales.insert(scales.end(), {{0.0f, 1.0f}, {1.0f}});
  for (const std::vector<float>& scale : scales) {
    const i64 B = static_cast<i64>(scale.size());
    SCOPED_TRACE(std::to_string(B) + " CFG rows");
    // DINO rows [0, .., 0, dino] (the pipeline's).
    Tensor dino({B, dino_in.dim(1), dino_in.dim(2)});
    std::memcpy(dino.data() + (B - 1) * dino_in.numel(), dino_in.data(),
                sizeof(float) * dino_in.numel());
    const int num_ref = static_cast<int>(ri->shape[1]);
    const PbrCondition every_step = net->condition(ref_latents, num_ref, dino, pm.maps, h);
    PbrCondition once = net->condition(ref_latents, num_ref, dino, pm.maps, h);
    net->project(once, prompt, scale);
    EXPECT_GT(once.projected.bytes(), 0);
    // The projections alone: the features they came from are not read again.
    once.ref = RefFeatures();
    once.dino = Tensor();

    UniPCScheduler sched = pbr_paint_scheduler(sc, 15);
    Tensor x = latents.clone();
    const i64 count = x.numel();
    for (int i = 0; i < steps; ++i) {
      const float t = sched.timesteps()[static_cast<std::size_t>(i)];
      Tensor input({B * x.dim(0), x.dim(1), x.dim(2), x.dim(3)});
      for (i64 b = 0; b < B; ++b)
        std::memcpy(input.data() + b * count, x.data(), sizeof(float) * count);
      const Tensor a = net->forward(input, normals, positions, t, prompt, every_step, scale);
      const Tensor c = net->forward(input, normals, positions, t, prompt, once, scale);
      ASSERT_EQ(a.shape(), c.shape());
      i64 differ = 0;
      for (i64 k = 0; k < a.numel(); ++k)
        differ += std::memcmp(a.data() + k, c.data() + k, sizeof(float)) != 0;
      EXPECT_EQ(differ, 0) << "step " << i << " (t " << t << "): " << differ << " of " << a.numel()
                           << " values differ";
      // The next step's latents from the last row's prediction.
      sched.step(x.data(), a.data() + (B - 1) * count, count, i);
    }

    // Projections of another prompt or for other ref_scale values are refused.
    Tensor input({B * x.dim(0), x.dim(1), x.dim(2), x.dim(3)});
    for (i64 b = 0; b < B; ++b)
      std::memcpy(input.data() + b * count, x.data(), sizeof(float) * count);
    Tensor other = prompt.clone();
    other.data()[0] += 1.0f;
    EXPECT_THROW(net->forward(input, normals, positions, 500.0f, other, once, scale), ModelError);
    std::vector<float> other_scale = scale;
    other_scale.back() = 0.5f;
    EXPECT_THROW(net->forward(input, normals, positions, 500.0f, prompt, once, other_scale),
                 ModelError);
  }
}

TEST(PbrUNetGolden, ProjectedConditionIsBitIdenticalOverSteps) {
  check_projected_steps(false);
}

TEST(PbrUNetGolden, ProjectedConditionIsBitIdenticalOverSteps_bf16) {
  check_projected_steps(true);
}

// A diffusers-style folder: config.json beside diffusion_pytorch_model.safetensors.
TEST(PbrUNetGolden, LoadsADiffusersFolder) {
  const std::string wpath = set_file("paint21_unet.weights.fp16.safetensors");
  REQUIRE_GOLDEN(wpath);
  Fixture g;
  const std::string dir = test::temp_dir("pbr_unet_folder");
  {
    std::ofstream c(dir + "/config.json");
    c << g.cfg.at("unet").dump(1);
  }
  std::filesystem::copy_file(wpath, dir + "/diffusion_pytorch_model.fp16.safetensors");
  const auto net = PbrUNet::load_folder(dir);
  EXPECT_EQ(net->config().cross_attention_dim, g.base.cross_attention_dim);
  EXPECT_EQ(net->main_unet().config().in_channels, 3 * g.base.in_channels);
  EXPECT_EQ(net->num_parameters(), PbrUNet::load(g.base, wpath)->num_parameters());
}

// Strict loading: a missing and a mis-shaped tensor are both named.
TEST(PbrUNetGolden, LoaderNamesMissingAndMisShapedTensors) {
  const std::string wpath = set_file("paint21_unet.weights.fp16.safetensors");
  REQUIRE_GOLDEN(wpath);
  Fixture g;
  // Token count and DINO width from the stored inputs.
  const i64 tokens = g.fwd->find("in.learned_prompt")->shape.at(2);
  const i64 dino_dim = g.fwd->find("in.dino_hidden_states")->shape.at(2);
  const auto expected = PbrUNet::expected_tensors(g.base, tokens, dino_dim);
  const auto file = SafetensorsFile::open(wpath);
  EXPECT_EQ(expected.size(), file->tensors().size());
  i64 stored = 0;
  for (const TensorInfo& t : file->tensors()) {
    i64 n = 1;
    for (i64 d : t.shape) n *= d;
    stored += n;
  }
  EXPECT_EQ(PbrUNet::load(g.base, file)->num_parameters(), stored);
  for (const auto& [name, shape] : expected) {
    const TensorInfo* t = file->find(name);
    ASSERT_TRUE(t) << "expected tensor absent from the golden file: " << name;
    EXPECT_EQ(Shape::from(t->shape), shape) << name;
  }
  // Mis-shaped: another cross-attention width.
  UNetConfig wrong = g.base;
  wrong.cross_attention_dim += 8;
  try {
    PbrUNet::load(wrong, file);
    ADD_FAILURE() << "a mis-shaped checkpoint loaded";
  } catch (const ModelError& e) {
    const std::string msg = e.what();
    EXPECT_NE(msg.find("mis-shaped unet.down_blocks.0.attentions.0.transformer_blocks.0.attn_dino"
                       ".to_k.weight"),
              std::string::npos)
        << msg;
    EXPECT_NE(msg.find("learned_text_clip_mr"), std::string::npos) << msg;
  }
  // Missing: a second resnet per level that the file does not have.
  UNetConfig deeper = g.base;
  deeper.layers_per_block += 1;
  try {
    PbrUNet::load(deeper, file);
    ADD_FAILURE() << "a checkpoint with missing tensors loaded";
  } catch (const ModelError& e) {
    const std::string msg = e.what();
    EXPECT_NE(msg.find("missing unet.down_blocks.0.resnets.1.conv1.weight"), std::string::npos)
        << msg;
    EXPECT_NE(msg.find("missing unet_dual.down_blocks.0.resnets.1.conv1.weight"), std::string::npos)
        << msg;
  }
}

}  // namespace
}  // namespace gen3d::models
