// The convolutional operations on the GPU (models/cuda/conv.cu) against their CPU twins, and the
// SD VAE on the GPU against its golden set (golden/texmodels, vae.forward.safetensors) and the
// CPU's bf16 path. Inputs are fresh random values with odd sizes; outputs are poisoned (NaN) with
// guard elements past their end, so an unwritten or overrun element fails.

#include <gtest/gtest.h>

#include <algorithm>
#include <array>
#include <cmath>
#include <cstdio>
#include <filesystem>
#include <limits>
#include <random>
#include <string>

#include "cuda_fixture.h"
#include "models/bf16_golden.h"
#include "models/core/error.h"
#include "models/core/safetensors.h"
#include "models/kernels/conv.h"
#include "models/nn/device_ops.h"
#include "models/nn/layers.h"
#include "models/nn/params.h"
#include "models/paint/sd_vae.h"
#include "models/paint/texmodels_golden.h"

namespace gen3d::models {
namespace {

using i64 = std::int64_t;
constexpr i64 kGuard = 67;  // poisoned elements past each output

void fill_random(Tensor& t, std::uint64_t seed, float stddev, float mean = 0.0f) {
  std::mt19937_64 rng(seed);
  std::normal_distribution<float> d(mean, stddev);
  for (float& v : t.span()) v = d(rng);
}

Tensor random(const Shape& s, std::uint64_t seed, float stddev = 1.0f, float mean = 0.0f) {
  Tensor t(s);
  fill_random(t, seed, stddev, mean);
  return t;
}

Tensor poisoned(i64 n) {
  Tensor t({n});
  for (float& v : t.span()) v = std::numeric_limits<float>::quiet_NaN();
  return t;
}

// sum (a - b)^2 / sum b^2 over the first n elements; NaN anywhere gives infinity.
double nmse(const float* a, const float* b, i64 n) {
  double num = 0, den = 0;
  for (i64 i = 0; i < n; ++i) {
    const double x = a[i], y = b[i];
    if (std::isnan(x) || std::isnan(y)) return INFINITY;
    num += (x - y) * (x - y);
    den += y * y;
  }
  return den > 0 ? num / den : num;
}

void expect_guard_untouched(const Tensor& t, i64 n, const std::string& what) {
  for (i64 i = n; i < t.numel(); ++i)
    ASSERT_TRUE(std::isnan(t.data()[i])) << what << ": wrote past the output at " << i - n;
}

const nn::DeviceOps& gpu() {
  return nn::device_ops(Device::kCuda);
}
const nn::DeviceOps& cpu() {
  return nn::device_ops(Device::kCpu);
}

// A Conv2d with random weights and bias in `storage`, loaded as a network loads it.
nn::Conv2d random_conv(i64 cout, i64 cin, i64 k, kernels::ConvGeometry g, std::uint64_t seed,
                       WeightStorage storage = WeightStorage::kBF16) {
  const float scale = 1.0f / std::sqrt(static_cast<float>(cin * k * k));
  nn::RandomParams params(
      [&](const std::string& name, Tensor& t) {
        const bool bias = name.size() > 5 && name.substr(name.size() - 5) == ".bias";
        fill_random(t, seed + (bias ? 1 : 0), bias ? 0.1f : scale);
      },
      storage);
  nn::Conv2d conv;
  conv.load(params, "conv", cout, cin, k, g);
  return conv;
}

// The GPU's im2col + GEMM against the CPU's oneDNN bf16 convolution: both round x and W to bf16
// and accumulate in float32, so they differ only in summation order.
void check_conv(i64 batch, i64 h, i64 w, i64 cin, i64 cout, i64 k, kernels::ConvGeometry g,
                std::uint64_t seed) {
  SCOPED_TRACE(std::to_string(batch) + "x" + std::to_string(h) + "x" + std::to_string(w) + "x" +
               std::to_string(cin) + " -> " + std::to_string(cout) + ", k " + std::to_string(k) +
               ", stride " + std::to_string(g.stride) + ", pad " + std::to_string(g.pad_top) +
               std::to_string(g.pad_bottom) + std::to_string(g.pad_left) +
               std::to_string(g.pad_right));
  const nn::Conv2d conv = random_conv(cout, cin, k, g, seed);
  const i64 oh = conv.out_h(h), ow = conv.out_w(w), n = batch * oh * ow * cout;
  const Tensor x = random({batch, h, w, cin}, seed + 2);
  Tensor y_cpu = poisoned(n);
  cpu().conv2d(conv, y_cpu.data(), x.data(), batch, h, w);
  const Tensor xd = x.to(Device::kCuda);
  Tensor yd = poisoned(n + kGuard).to(Device::kCuda);
  gpu().conv2d(conv, yd.data(), xd.data(), batch, h, w);
  const Tensor y_gpu = yd.to(Device::kCpu);
  EXPECT_LE(nmse(y_gpu.data(), y_cpu.data(), n), 1e-9);
  expect_guard_untouched(y_gpu, n, "conv2d");
  // The same layer again: its uploaded weights are reused.
  Tensor yd2 = poisoned(n).to(Device::kCuda);
  gpu().conv2d(conv, yd2.data(), xd.data(), batch, h, w);
  const Tensor y2 = yd2.to(Device::kCpu);
  for (i64 i = 0; i < n; ++i) ASSERT_EQ(y2.data()[i], y_gpu.data()[i]) << i;
}

TEST(CudaConv, ThreeByThreePaddedAndStrided) {
  GEN3D_REQUIRE_GPU();
  const auto same = kernels::ConvGeometry::same(1);
  check_conv(1, 13, 11, 3, 32, 3, same, 10);  // conv_in: k = 27, padded to 32
  check_conv(2, 9, 17, 37, 45, 3, same, 20);  // odd channels, a batch of two
  check_conv(1, 32, 24, 64, 64, 3, same, 30);
  // The SD VAE's downsampler: zero padding right and bottom only, stride 2, odd and even sizes.
  const kernels::ConvGeometry down{2, 0, 1, 0, 1};
  check_conv(1, 16, 16, 32, 32, 3, down, 40);
  check_conv(2, 15, 9, 19, 21, 3, down, 50);
  check_conv(1, 10, 7, 8, 5, 3, kernels::ConvGeometry::same(1, 2), 60);
}

TEST(CudaConv, PointwiseAndOtherKernels) {
  GEN3D_REQUIRE_GPU();
  check_conv(1, 7, 9, 37, 29, 1, {}, 70);   // 1×1: one GEMM on the map in place
  check_conv(2, 5, 6, 64, 128, 1, {}, 80);  // shortcut-like
  check_conv(1, 8, 8, 8, 8, 1, {}, 85);     // quant_conv-like
  check_conv(1, 5, 5, 4, 1, 1, {}, 90);     // a single output channel (the plain GEMM)
  check_conv(1, 11, 10, 6, 7, 1, kernels::ConvGeometry::same(1), 100);  // 1×1 padded
  check_conv(1, 12, 12, 5, 9, 5, kernels::ConvGeometry::same(2), 110);  // 5×5
}

TEST(CudaConv, Float32StorageIsRoundedToBf16) {
  GEN3D_REQUIRE_GPU();
  // A float32 layer runs on the GPU with its weights rounded to bf16: the same as the layer
  // loaded in bf16 on the CPU.
  const auto g = kernels::ConvGeometry::same(1);
  const nn::Conv2d f32 = random_conv(24, 16, 3, g, 120, WeightStorage::kF32);
  const nn::Conv2d b16 = random_conv(24, 16, 3, g, 120, WeightStorage::kBF16);
  const i64 h = 9, w = 7, n = h * w * 24;
  const Tensor x = random({1, h, w, 16}, 121);
  Tensor y_cpu = poisoned(n);
  cpu().conv2d(b16, y_cpu.data(), x.data(), 1, h, w);
  const Tensor xd = x.to(Device::kCuda);
  Tensor yd = poisoned(n).to(Device::kCuda);
  gpu().conv2d(f32, yd.data(), xd.data(), 1, h, w);
  const Tensor y = yd.to(Device::kCpu);
  EXPECT_LE(nmse(y.data(), y_cpu.data(), n), 1e-9);
}

void check_group_norm(i64 batch, i64 hw, i64 c, i64 groups, bool silu, bool affine, float mean,
                      std::uint64_t seed, bool in_place) {
  SCOPED_TRACE(std::to_string(batch) + "x" + std::to_string(hw) + "x" + std::to_string(c) + ", " +
               std::to_string(groups) + " groups, silu " + std::to_string(silu) + ", mean " +
               std::to_string(mean) + (in_place ? ", in place" : ""));
  nn::GroupNorm norm;
  nn::RandomParams params([&](const std::string& name, Tensor& t) {
    const bool bias = name.size() > 5 && name.substr(name.size() - 5) == ".bias";
    fill_random(t, seed + (bias ? 1 : 0), 0.3f, bias ? 0.0f : 1.0f);
  });
  norm.load(params, "norm", c, groups, 1e-6f);
  if (!affine) {
    norm.weight = Tensor();
    norm.bias = Tensor();
  }
  const i64 n = batch * hw * c;
  const Tensor x = random({batch, hw, c}, seed + 2, 2.0f, mean);
  Tensor y_cpu = poisoned(n);
  cpu().group_norm(norm, y_cpu.data(), x.data(), batch, hw, silu);
  Tensor y_gpu;
  if (in_place) {
    Tensor xd = x.to(Device::kCuda);
    gpu().group_norm(norm, xd.data(), xd.data(), batch, hw, silu);
    y_gpu = xd.to(Device::kCpu);
  } else {
    const Tensor xd = x.to(Device::kCuda);
    Tensor yd = poisoned(n + kGuard).to(Device::kCuda);
    gpu().group_norm(norm, yd.data(), xd.data(), batch, hw, silu);
    y_gpu = yd.to(Device::kCpu);
    expect_guard_untouched(y_gpu, n, "group_norm");
  }
  // The same double sums and float32 formula as the CPU: only the order of the sums (and expf
  // in SiLU) differ.
  double worst = 0.0;
  for (i64 i = 0; i < n; ++i) {
    const double a = y_gpu.data()[i], b = y_cpu.data()[i];
    ASSERT_FALSE(std::isnan(a)) << i;
    worst = std::max(worst, std::abs(a - b) / (1e-3 + std::abs(b)));
  }
  EXPECT_LE(worst, 1e-5);
}

TEST(CudaConv, GroupNormWithAndWithoutSilu) {
  GEN3D_REQUIRE_GPU();
  check_group_norm(1, 37, 64, 32, true, true, 0.0f, 200, false);
  check_group_norm(2, 41, 96, 32, false, true, 0.5f, 210, false);
  check_group_norm(1, 7 * 9, 12, 3, true, false, 0.0f, 220, false);
  check_group_norm(3, 5, 30, 5, false, false, 0.0f, 230, true);
  // A large mean next to a small spread (the shifted sums keep the variance), and a map big
  // enough to split each group's pixels over many blocks.
  check_group_norm(1, 50, 32, 8, false, true, 1000.0f, 240, false);
  check_group_norm(1, 128 * 96, 128, 32, true, true, 0.1f, 250, true);
}

TEST(CudaConv, GroupNormRejectsChannelsThatDoNotSplit) {
  GEN3D_REQUIRE_GPU();
  nn::GroupNorm norm;
  norm.channels = 10;
  norm.groups = 4;
  Tensor xd = Tensor({1, 3, 10}, Device::kCuda);
  EXPECT_THROW(gpu().group_norm(norm, xd.data(), xd.data(), 1, 3, false), ModelError);
}

TEST(CudaConv, UpsampleNearest2x) {
  GEN3D_REQUIRE_GPU();
  for (const auto& [b, h, w, c] : {std::array<i64, 4>{1, 5, 7, 3}, std::array<i64, 4>{2, 8, 3, 64},
                                   std::array<i64, 4>{1, 1, 1, 1}}) {
    const Tensor x = random({b, h, w, c}, 300 + static_cast<std::uint64_t>(c));
    const i64 n = b * 4 * h * w * c;
    Tensor y_cpu = poisoned(n);
    cpu().upsample_nearest2x(y_cpu.data(), x.data(), b, h, w, c);
    const Tensor xd = x.to(Device::kCuda);
    Tensor yd = poisoned(n + kGuard).to(Device::kCuda);
    gpu().upsample_nearest2x(yd.data(), xd.data(), b, h, w, c);
    const Tensor y = yd.to(Device::kCpu);
    for (i64 i = 0; i < n; ++i) ASSERT_EQ(y.data()[i], y_cpu.data()[i]) << i;
    expect_guard_untouched(y, n, "upsample_nearest2x");
  }
}

// ---------------------------------------------------------------------------------------------
// The SD VAE's golden set.

using namespace texmodels_golden;

bool same_values(const Tensor& a, const Tensor& b) {
  if (!(a.shape() == b.shape())) return false;
  for (i64 i = 0; i < a.numel(); ++i)
    if (!(a.data()[i] == b.data()[i])) return false;
  return true;
}

class SdVaeCudaGolden : public ::testing::Test {
 protected:
  void SetUp() override {
    GEN3D_REQUIRE_GPU();
    const std::string dir = golden_dir();
    for (const char* f : {"config.json", "vae.forward.safetensors", "vae.weights.fp32.safetensors"})
      if (!std::filesystem::exists(dir + "/" + f)) GTEST_SKIP() << "golden file absent: " << f;
    cfg_json_ = load_config();
    cfg_ = SdVaeConfig::parse(cfg_json_["vae"]["cfg"].dump(), "config.json vae");
    gold_ = SafetensorsFile::open(dir + "/vae.forward.safetensors");
    weights_ = SafetensorsFile::open(dir + "/vae.weights.fp32.safetensors");
  }
  std::unique_ptr<SdVae> load(WeightStorage storage) const {
    WeightMap wm(weights_, "");
    auto vae = SdVae::load(cfg_, wm, storage);
    wm.finish("SD VAE");
    return vae;
  }
  nlohmann::json cfg_json_;
  SdVaeConfig cfg_;
  std::shared_ptr<const SafetensorsFile> gold_, weights_;
};

TEST_F(SdVaeCudaGolden, EncodeDecodeOnTheGpuWithinTheBf16Tolerance) {
  auto gpu_vae = load(WeightStorage::kBF16);
  gpu_vae->set_device(Device::kCuda);
  auto cpu_vae = load(WeightStorage::kBF16);
  const Tensor image = to_nhwc(gold_->to_f32("in.image"));
  const Tensor eps = to_nhwc(gold_->to_f32("in.posterior_noise"));

  bf16test::NmseCheck golden("SD VAE on the GPU", bf16test::kUNetNmse);
  int probed = 0;
  auto compare = [&](const std::string& name, const Tensor& nhwc) {
    ASSERT_EQ(nhwc.device(), Device::kCpu) << name;
    const Tensor g = to_nhwc(gold_->to_f32(name));
    ASSERT_EQ(g.shape(), nhwc.shape()) << name;
    golden.add(name, nhwc.data(), g.data(), g.numel());
  };
  const VaeProbe probe = [&](const std::string& name, const Tensor& t) {
    ++probed;
    compare("inter." + name, t);
  };
  const SdVae::Posterior post = gpu_vae->encode(image, probe);
  compare("out.latent_mean", post.mean);
  compare("out.latent_std", post.std);
  const Tensor scaled = gpu_vae->encode_scaled(image, &eps);
  compare("out.latent_scaled", scaled);
  Tensor z(scaled.shape());
  const float sf = static_cast<float>(cfg_.scaling_factor);
  for (i64 i = 0; i < z.numel(); ++i) z.data()[i] = scaled.data()[i] / sf;
  const Tensor decoded = gpu_vae->decode(z, probe);
  compare("out.decoded", decoded);
  compare("out.image", gpu_vae->decode_to_image(scaled));
  compare("out.decoded_from_mean", gpu_vae->decode(post.mean));
  golden.report();
  EXPECT_GT(probed, 0);

  // Deterministic on the GPU, and close to the CPU's bf16 path.
  EXPECT_TRUE(same_values(decoded, gpu_vae->decode(z))) << "two GPU decodes differ";
  const SdVae::Posterior cpost = cpu_vae->encode(image);
  const Tensor cdec = cpu_vae->decode(z);
  const double em = bf16test::nmse(post.mean.data(), cpost.mean.data(), cpost.mean.numel());
  const double ed = bf16test::nmse(decoded.data(), cdec.data(), cdec.numel());
  std::printf("[ info ] SD VAE GPU vs CPU bf16: latent mean nmse %.3g, decoded nmse %.3g\n", em,
              ed);
  EXPECT_LE(em, bf16test::kUNetNmse);
  EXPECT_LE(ed, bf16test::kUNetNmse);
}

TEST_F(SdVaeCudaGolden, OtherStoragesAreRefusedOnTheGpu) {
  for (WeightStorage s : {WeightStorage::kF32, WeightStorage::kF16, WeightStorage::kInt8}) {
    auto vae = load(s);
    try {
      vae->set_device(Device::kCuda);
      ADD_FAILURE() << "storage " << storage_name(s) << " was accepted on the GPU";
    } catch (const ModelError& e) {
      EXPECT_NE(std::string(e.what()).find("storage"), std::string::npos) << e.what();
    }
    EXPECT_EQ(vae->device(), Device::kCpu);
  }
}

}  // namespace
}  // namespace gen3d::models
