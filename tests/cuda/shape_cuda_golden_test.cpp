// DINOv2 and the ShapeVAE on the GPU against the golden float32 outputs of the official code, with
// the bf16 tolerance of the CPU's bf16 path (bf16_golden.h), and against the CPU's bf16 outputs.
// Data-driven over the golden sets in $GEN3D_GOLDEN_DIR (default tests/data/golden); a test skips
// when they are absent.

#include <gtest/gtest.h>

#include <cmath>
#include <filesystem>
#include <fstream>
#include <nlohmann/json.hpp>

#include "cuda_fixture.h"
#include "models/bf16_golden.h"
#include "models/core/safetensors.h"
#include "models/shape/band_error.h"
#include "models/shape/dinov2.h"
#include "models/shape/shape_vae.h"
#include "models/shape/volume_decoder.h"
#include "support/paths.h"

namespace gen3d::models {
namespace {

using i64 = std::int64_t;

std::string golden_root() {
  return test::env_or("GEN3D_GOLDEN_DIR", test::source_dir() + "/tests/data/golden");
}

nlohmann::json read_json(const std::string& path) {
  std::ifstream in(path);
  return nlohmann::json::parse(in);
}

bool same_values(const Tensor& a, const Tensor& b) {
  if (!(a.shape() == b.shape())) return false;
  for (i64 i = 0; i < a.numel(); ++i)
    if (!(a.data()[i] == b.data()[i])) return false;
  return true;
}

// Every encoder run of the DINOv2 set, from its stored pixel values.
TEST(ShapeCudaGolden, Dinov2RunsOnTheGpuWithinTheBf16Tolerance) {
  GEN3D_REQUIRE_GPU();
  const std::string dir = golden_root() + "/dinov2";
  if (!std::filesystem::exists(dir + "/config.json")) GTEST_SKIP() << "no DINOv2 set in " << dir;
  const nlohmann::json cfg = read_json(dir + "/config.json");
  int ran = 0;
  for (const auto& [run, r] : cfg.at("runs").items()) {
    SCOPED_TRACE("encoder run " + run);
    const std::string model = r.at("model");
    const std::string gfile = dir + "/encoder_" + run + ".safetensors";
    const std::string wfile = dir + "/dinov2_" + model + ".weights.fp32.safetensors";
    if (!std::filesystem::exists(gfile) || !std::filesystem::exists(wfile)) continue;
    const ImageEncoderConfig ec =
        ImageEncoderConfig::from_json(cfg.at("models").at(model).at("conditioner_config").dump());
    const auto gold = SafetensorsFile::open(gfile);
    const Tensor pixels = gold->to_f32("tf.pixel_values");
    const Tensor want = gold->to_f32("last_hidden_state");
    const Dinov2Model gpu =
        Dinov2Model::load(ec.model, wfile, Dinov2Options{WeightStorage::kF32, Device::kCuda});
    const Dinov2Model cpu = Dinov2Model::load(ec.model, wfile, Dinov2Options{WeightStorage::kBF16});
    const Tensor out = gpu.forward(pixels);
    ASSERT_EQ(out.device(), Device::kCpu);
    ASSERT_EQ(out.shape(), want.shape());
    bf16test::NmseCheck check("DINOv2 on the GPU, run " + run, bf16test::kNetworkNmse);
    check.add("last_hidden_state", out.data(), want.data(), want.numel());
    check.report();
    EXPECT_TRUE(same_values(out, gpu.forward(pixels))) << "two GPU forwards differ";
    const Tensor c = cpu.forward(pixels);
    const double e = bf16test::nmse(out.data(), c.data(), c.numel());
    std::printf("[ info ] DINOv2 run %s: GPU vs CPU bf16 nmse %.3g\n", run.c_str(), e);
    EXPECT_LE(e, bf16test::kNetworkNmse);
    ++ran;
  }
  if (ran == 0) GTEST_SKIP() << "no encoder run with its files in " << dir;
}

class VaeCudaGolden : public ::testing::Test {
 protected:
  void SetUp() override {
    GEN3D_REQUIRE_GPU();
    const std::string root = golden_root();
    for (const char* f : {"config.json", "vae_decode.safetensors", "vae_weights.fp32.safetensors"})
      if (!std::filesystem::exists(root + "/" + f)) GTEST_SKIP() << "golden file absent: " << f;
    config_ = ShapeVAEConfig::from_file(root + "/config.json", "vae");
    weights_ = root + "/vae_weights.fp32.safetensors";
    gold_ = SafetensorsFile::open(root + "/vae_decode.safetensors");
  }
  ShapeVAEConfig config_;
  std::string weights_;
  std::shared_ptr<const SafetensorsFile> gold_;
};

TEST_F(VaeCudaGolden, DecodeAndQueryOnTheGpuWithinTheBf16Tolerance) {
  ShapeVAE gpu = ShapeVAE::load(config_, weights_);
  gpu.set_device(Device::kCuda);
  const ShapeVAE cpu = ShapeVAE::load(config_, weights_, WeightStorage::kBF16);
  const Tensor latents = gold_->to_f32("in.latents"), queries = gold_->to_f32("in.queries");
  const Tensor decoded = gpu.decode(latents);
  ASSERT_EQ(decoded.device(), Device::kCpu);
  const Tensor logits = gpu.query(decoded, queries);
  const Tensor want_d = gold_->to_f32("out.decoded_latents");
  const Tensor want_l = gold_->to_f32("out.query_logits");
  ASSERT_EQ(decoded.numel(), want_d.numel());
  ASSERT_EQ(logits.numel(), want_l.numel());
  bf16test::NmseCheck check("ShapeVAE on the GPU", bf16test::kNetworkNmse);
  check.add("out.decoded_latents", decoded.data(), want_d.data(), want_d.numel());
  check.add("out.query_logits", logits.data(), want_l.data(), want_l.numel());
  check.report();
  EXPECT_TRUE(same_values(decoded, gpu.decode(latents))) << "two GPU decodes differ";
  const Tensor cd = cpu.decode(latents);
  const Tensor cl = cpu.query(cd, queries);
  const double ed = bf16test::nmse(decoded.data(), cd.data(), cd.numel());
  const double el = bf16test::nmse(logits.data(), cl.data(), cl.numel());
  std::printf("[ info ] ShapeVAE GPU vs CPU bf16: decoded nmse %.3g, logits nmse %.3g\n", ed, el);
  EXPECT_LE(ed, bf16test::kNetworkNmse);
  EXPECT_LE(el, bf16test::kNetworkNmse);
}

// A dense volume decode through the GPU geometry field against the golden vanilla grid; the
// field's fixed-size blocks make every logit independent of the caller's chunking.
TEST_F(VaeCudaGolden, DenseVolumeOnTheGpu) {
  const std::string vol = golden_root() + "/vae_volume.safetensors";
  if (!std::filesystem::exists(vol)) GTEST_SKIP() << "golden file absent: " << vol;
  const nlohmann::json run = read_json(golden_root() + "/config.json")["golden"]["vae_volume"];
  ShapeVAE vae = ShapeVAE::load(config_, weights_);
  const Tensor decoded = vae.decode(gold_->to_f32("in.latents"));  // on the CPU, float32
  vae.set_device(Device::kCuda);
  const auto gold = SafetensorsFile::open(vol);
  const Tensor grid = gold->to_f32("vanilla.grid_logits");  // [B, n, n, n]
  const i64 n = grid.dim(1);
  VolumeDecodeOptions o;
  o.method = VolumeMethod::kDense;
  o.resolution = static_cast<int>(n - 1);
  const double bound = run.value("bounds", 1.01);
  o.bbox_min = {-bound, -bound, -bound};
  o.bbox_max = {bound, bound, bound};
  for (i64 b = 0; b < grid.dim(0); ++b) {
    const auto field = vae.geometry_field(decoded, b);
    const VolumeGrid g = decode_volume(*field, o);
    ASSERT_EQ(static_cast<i64>(g.values.size()), n * n * n);
    bf16test::NmseCheck check("dense volume on the GPU, item " + std::to_string(b),
                              bf16test::kNetworkNmse);
    check.add("grid_logits", g.values.data(), grid.data() + b * n * n * n, n * n * n);
    check.report();
    VolumeDecodeOptions o2 = o;
    o2.num_chunks = 7;
    const VolumeGrid g2 = decode_volume(*field, o2);
    ASSERT_EQ(g2.values.size(), g.values.size());
    for (std::size_t i = 0; i < g.values.size(); ++i)
      ASSERT_EQ(g2.values[i], g.values[i]) << "chunking changed vertex " << i;
  }
}

// FlashVDM on the GPU (key selection and the grouped attention there) against the golden grids,
// as the CPU's int8 FlashVDM test holds them (bf16's bound here): the level-0 grid by nmse, the
// final grid on the vertices both queried (band_error), at most 5% of the golden vertices
// queried differently; the same decode chunked otherwise gives the same values; and it follows
// the CPU's bf16 FlashVDM decode.
TEST_F(VaeCudaGolden, FlashVdmOnTheGpu) {
  const std::string vol = golden_root() + "/vae_volume.safetensors";
  if (!std::filesystem::exists(vol)) GTEST_SKIP() << "golden file absent: " << vol;
  const nlohmann::json run = read_json(golden_root() + "/config.json")["golden"]["vae_volume"];
  const nlohmann::json& f = run["flashvdm"];
  VolumeDecodeOptions o;
  const double bound = run.value("bounds", 1.01);
  o.bbox_min = {-bound, -bound, -bound};
  o.bbox_max = {bound, bound, bound};
  o.resolution = f["octree_resolution"].get<int>();
  o.num_chunks = run.value("num_chunks", 8000);
  o.level = run.value("mc_level", 0.0f);
  o.method = VolumeMethod::kFlashVDM;
  o.min_resolution = f["min_resolution"].get<int>();
  o.mini_grid_num = f.value("mini_grid_num", 4);
  o.keep_levels = true;
  const auto gold = SafetensorsFile::open(vol);
  const Tensor level0 = gold->to_f32("flashvdm.level0.grid_logits");
  const Tensor fin = gold->to_f32("flashvdm.grid_logits");

  ShapeVAE gpu = ShapeVAE::load(config_, weights_);
  const Tensor decoded = gpu.decode(gold_->to_f32("in.latents"));  // on the CPU, float32
  gpu.set_device(Device::kCuda);
  VolumeDecodeStats st;
  const VolumeGrid g = decode_volume(*gpu.geometry_field(decoded, 0), o, &st);
  ASSERT_EQ(static_cast<i64>(st.level_grids.front().values.size()), level0.numel());
  ASSERT_EQ(static_cast<i64>(g.values.size()), fin.numel());
  const double e0 =
      bf16test::nmse(st.level_grids.front().values.data(), level0.data(), level0.numel());
  EXPECT_LE(e0, bf16test::kNetworkNmse) << "level 0";
  const BandError ef = band_error(g.values, fin, level0);
  EXPECT_LE(ef.nmse, bf16test::kNetworkNmse) << "final grid, common vertices";
  EXPECT_LE(static_cast<double>(ef.differ), 0.05 * static_cast<double>(ef.golden_queried));

  VolumeDecodeOptions o2 = o;
  o2.num_chunks = 50;
  o2.keep_levels = false;
  const VolumeGrid g2 = decode_volume(*gpu.geometry_field(decoded, 0), o2);
  ASSERT_EQ(g2.values.size(), g.values.size());
  for (std::size_t i = 0; i < g.values.size(); ++i) {
    if (std::isnan(g.values[i]) && std::isnan(g2.values[i])) continue;  // unqueried in both
    ASSERT_EQ(g2.values[i], g.values[i]) << "chunking changed vertex " << i;
  }

  const ShapeVAE cpu = ShapeVAE::load(config_, weights_, WeightStorage::kBF16);
  const VolumeGrid c = decode_volume(*cpu.geometry_field(decoded, 0), o);
  const BandError ec = band_error(
      g.values, Tensor::view(c.values.data(), {static_cast<i64>(c.values.size())}), level0);
  std::printf(
      "[ info ] FlashVDM on the GPU: level-0 nmse %.3g; final grid %.3g over %lld common "
      "vertices, %lld of %lld golden vertices queried differently; against the CPU's bf16: %.3g, "
      "%lld differ\n",
      e0, ef.nmse, static_cast<long long>(ef.common), static_cast<long long>(ef.differ),
      static_cast<long long>(ef.golden_queried), ec.nmse, static_cast<long long>(ec.differ));
  EXPECT_LE(ec.nmse, bf16test::kNetworkNmse);
}

}  // namespace
}  // namespace gen3d::models
