// Each CUDA operation against its CPU twin on random inputs (fresh per test, odd sizes, strided
// rows), with the output poisoned (NaN) before the run so an unwritten element fails.

#include <cuda_runtime.h>
#include <gtest/gtest.h>

#include <array>
#include <cmath>
#include <limits>
#include <random>
#include <string>
#include <vector>

#include "cuda_fixture.h"
#include "models/core/dtype.h"
#include "models/core/error.h"
#include "models/cuda/kernels.h"
#include "models/kernels/attention.h"
#include "models/kernels/fused.h"
#include "models/kernels/key_selection.h"
#include "models/kernels/linear.h"
#include "models/nn/device_ops.h"
#include "models/nn/layers.h"
#include "models/nn/params.h"

namespace gen3d::models {
namespace {

using i64 = std::int64_t;
using kernels::Act;

Tensor random(const Shape& s, std::uint64_t seed, float stddev = 1.0f, float mean = 0.0f) {
  Tensor t(s);
  std::mt19937_64 rng(seed);
  std::normal_distribution<float> d(mean, stddev);
  for (float& v : t.span()) v = d(rng);
  return t;
}

Tensor poisoned(const Shape& s) {
  Tensor t(s);
  for (float& v : t.span()) v = std::numeric_limits<float>::quiet_NaN();
  return t;
}

// sum (a - b)^2 / sum b^2 over the first n elements; NaN anywhere gives infinity.
double nmse(const Tensor& a, const Tensor& b) {
  EXPECT_EQ(a.numel(), b.numel());
  double num = 0, den = 0;
  for (i64 i = 0; i < b.numel(); ++i) {
    const double x = a.data()[i], y = b.data()[i];
    if (std::isnan(x) || std::isnan(y)) return INFINITY;
    num += (x - y) * (x - y);
    den += y * y;
  }
  return den > 0 ? num / den : num;
}

const nn::DeviceOps& gpu() {
  return nn::device_ops(Device::kCuda);
}

TEST(CudaTensor, RoundTripAndDeviceClone) {
  GEN3D_REQUIRE_GPU();
  const Tensor h = random({3, 5, 7}, 1);
  const Tensor d = h.to(Device::kCuda);
  EXPECT_EQ(d.device(), Device::kCuda);
  const Tensor d2 = d.clone();  // device to device
  const Tensor back = d2.to(Device::kCpu);
  ASSERT_EQ(back.shape(), h.shape());
  for (i64 i = 0; i < h.numel(); ++i) ASSERT_EQ(back.data()[i], h.data()[i]) << i;
  const Tensor zeros = Tensor({4, 4}, Device::kCuda).to(Device::kCpu);
  for (float v : zeros.span()) EXPECT_EQ(v, 0.0f);
}

// The GPU's GEMM against oneDNN's bf16 GEMM: both round x and W to bf16 and accumulate in
// float32, so they differ only in summation order.
void check_linear(i64 rows, i64 in, i64 out, bool bias, Act act, std::uint64_t seed) {
  nn::RandomParams params([](const std::string&, Tensor&) {}, WeightStorage::kBF16);
  nn::Linear layer;
  layer.set(params, random({out, in}, seed, 1.0f / std::sqrt(static_cast<float>(in))),
            bias ? random({out}, seed + 1, 0.1f) : Tensor(), in, out);
  const i64 ldx = in + 3, ldy = out + 5;  // strided rows, as the networks use
  const Tensor x = random({rows, ldx}, seed + 2);
  Tensor y_cpu = poisoned({rows, ldy});
  layer(y_cpu.data(), ldy, x.data(), ldx, rows, act);
  const Tensor xd = x.to(Device::kCuda);
  Tensor yd = poisoned({rows, ldy}).to(Device::kCuda);
  gpu().linear(layer, yd.data(), ldy, xd.data(), ldx, rows, act);
  const Tensor y_gpu = yd.to(Device::kCpu);
  Tensor a({rows, out}), b({rows, out});
  for (i64 r = 0; r < rows; ++r)
    for (i64 c = 0; c < out; ++c) {
      a.data()[r * out + c] = y_gpu.data()[r * ldy + c];
      b.data()[r * out + c] = y_cpu.data()[r * ldy + c];
    }
  const double e = nmse(a, b);
  // GELU may run in cuBLASLt's epilogue, with its own tanh: close to the CPU's tanh GELU, and
  // much closer to it than to the erf GELU.
  EXPECT_LE(e, act == Act::kGeluTanh ? 1e-7 : 1e-9)
      << rows << "x" << in << "->" << out << " bias " << bias << " act " << static_cast<int>(act);
  if (act == Act::kGeluTanh) {
    Tensor y_erf = poisoned({rows, ldy});
    layer(y_erf.data(), ldy, x.data(), ldx, rows, Act::kGeluErf);
    Tensor c({rows, out});
    for (i64 r = 0; r < rows; ++r)
      for (i64 col = 0; col < out; ++col) c.data()[r * out + col] = y_erf.data()[r * ldy + col];
    EXPECT_LT(100 * e, nmse(a, c)) << "the GPU's GELU is not the tanh approximation";
  }
  // The padding columns of y are left alone.
  for (i64 r = 0; r < rows; ++r) ASSERT_TRUE(std::isnan(y_gpu.data()[r * ldy + out]));
}

TEST(CudaOps, LinearMatchesOneDnnBf16) {
  GEN3D_REQUIRE_GPU();
  check_linear(37, 64, 96, true, Act::kNone, 10);
  check_linear(129, 256, 40, false, Act::kNone, 20);
  check_linear(300, 128, 512, true, Act::kGeluTanh, 30);
  check_linear(5, 96, 64, true, Act::kSilu, 40);
}

TEST(CudaOps, LnModulateGatedResidualAndQkNorm) {
  GEN3D_REQUIRE_GPU();
  const i64 B = 2, T = 45, Dm = 96, ld = T * Dm + 17;
  const Tensor x = random({B * ld}, 1);
  const Tensor mod = random({B, 6 * Dm}, 2, 0.5f);
  Tensor y_cpu = poisoned({B * ld});
  kernels::ln_modulate(y_cpu.data(), ld, x.data(), ld, B, T, Dm, mod.data(), mod.data() + Dm,
                       6 * Dm, 1e-6f);
  const Tensor xd = x.to(Device::kCuda), md = mod.to(Device::kCuda);
  Tensor yd = poisoned({B * ld}).to(Device::kCuda);
  gpu().ln_modulate(yd.data(), ld, xd.data(), ld, B, T, Dm, md.data(), md.data() + Dm, 6 * Dm,
                    1e-6f);
  Tensor y_gpu = yd.to(Device::kCpu);
  for (i64 b = 0; b < B; ++b)
    for (i64 i = 0; i < T * Dm; ++i)
      ASSERT_NEAR(y_gpu.data()[b * ld + i], y_cpu.data()[b * ld + i],
                  1e-5 * (1 + std::abs(y_cpu.data()[b * ld + i])))
          << b << " " << i;

  // h += gate * y
  Tensor h_cpu = random({B * ld}, 3);
  Tensor hd = h_cpu.to(Device::kCuda);
  kernels::gated_residual(h_cpu.data(), ld, x.data(), ld, B, T, Dm, mod.data() + 2 * Dm, 6 * Dm);
  gpu().gated_residual(hd.data(), ld, xd.data(), ld, B, T, Dm, md.data() + 2 * Dm, 6 * Dm);
  const Tensor h_gpu = hd.to(Device::kCpu);
  for (i64 i = 0; i < B * ld; ++i)
    ASSERT_NEAR(h_gpu.data()[i], h_cpu.data()[i], 1e-5 * (1 + std::abs(h_cpu.data()[i]))) << i;

  // RMSNorm of q and k heads inside packed [q | k | v] rows.
  const i64 rows = 77, heads = 3, hd_ = 32, W = 3 * heads * hd_ + 8;
  nn::RMSNorm qn, kn;
  qn.scale = random({hd_}, 4, 0.15f, 1.0f);
  kn.scale = random({hd_}, 5, 0.15f, 1.0f);
  qn.dim = kn.dim = hd_;
  qn.eps = kn.eps = 1e-6f;
  Tensor qkv_cpu = random({rows * W}, 6);
  Tensor qkv_d = qkv_cpu.to(Device::kCuda);
  kernels::qk_rmsnorm(qkv_cpu.data(), rows, W, heads, hd_, hd_, 0, heads * hd_, qn.scale.data(),
                      kn.scale.data(), 1e-6f);
  gpu().qk_rmsnorm(qkv_d.data(), rows, W, heads, hd_, hd_, 0, heads * hd_, qn, kn);
  const Tensor qkv_gpu = qkv_d.to(Device::kCpu);
  for (i64 i = 0; i < rows * W; ++i)
    ASSERT_NEAR(qkv_gpu.data()[i], qkv_cpu.data()[i], 1e-5 * (1 + std::abs(qkv_cpu.data()[i])))
        << i;

  // GELU into a strided block, and add.
  Tensor g_cpu = poisoned({rows * W});
  kernels::act_copy(Act::kGeluTanh, g_cpu.data(), W, x.data(), 50, rows, 40);
  Tensor gd = poisoned({rows * W}).to(Device::kCuda);
  gpu().act_copy(Act::kGeluTanh, gd.data(), W, xd.data(), 50, rows, 40);
  const Tensor g_gpu = gd.to(Device::kCpu);
  for (i64 r = 0; r < rows; ++r)
    for (i64 c = 0; c < 40; ++c)
      ASSERT_NEAR(g_gpu.data()[r * W + c], g_cpu.data()[r * W + c],
                  1e-5 * (1 + std::abs(g_cpu.data()[r * W + c])));
}

// LayerNorm (affine) and ln_modulate at the widths the networks use: a warp per row up to 2048
// columns, a block per row beyond.
TEST(CudaOps, RowNormsAtNetworkWidths) {
  GEN3D_REQUIRE_GPU();
  for (const i64 dim : {i64{8}, i64{64}, i64{96}, i64{1024}, i64{1536}, i64{2048}, i64{2304}}) {
    SCOPED_TRACE("dim " + std::to_string(dim));
    const i64 rows = 37, ld = dim + 5;
    nn::LayerNorm norm;
    norm.dim = dim;
    norm.eps = 1e-6f;
    norm.weight = random({dim}, 7, 0.2f, 1.0f);
    norm.bias = random({dim}, 8, 0.1f);
    const Tensor x = random({rows * ld}, 9, 1.0f, 0.3f);
    Tensor y_cpu = poisoned({rows * ld});
    norm(y_cpu.data(), ld, x.data(), ld, rows);
    const Tensor xd = x.to(Device::kCuda);
    Tensor yd = poisoned({rows * ld}).to(Device::kCuda);
    gpu().layer_norm(norm, yd.data(), ld, xd.data(), ld, rows);
    const Tensor y_gpu = yd.to(Device::kCpu);
    for (i64 r = 0; r < rows; ++r) {
      for (i64 c = 0; c < dim; ++c)
        ASSERT_NEAR(y_gpu.data()[r * ld + c], y_cpu.data()[r * ld + c],
                    1e-5 * (1 + std::abs(y_cpu.data()[r * ld + c])))
            << r << " " << c;
      if (r + 1 < rows) {
        ASSERT_TRUE(std::isnan(y_gpu.data()[r * ld + dim]));
      }
    }
    // In place, as the VAE normalizes q and k heads.
    Tensor in_place = x.to(Device::kCuda);
    gpu().layer_norm(norm, in_place.data(), ld, in_place.data(), ld, rows);
    const Tensor ip = in_place.to(Device::kCpu);
    for (i64 r = 0; r < rows; ++r)
      for (i64 c = 0; c < dim; ++c) ASSERT_EQ(ip.data()[r * ld + c], y_gpu.data()[r * ld + c]);

    const i64 B = 2, T = 19;
    const Tensor mod = random({B, 6 * dim}, 10, 0.5f);
    const Tensor h = random({B * T * dim}, 11);
    Tensor m_cpu = poisoned({B * T * dim});
    kernels::ln_modulate(m_cpu.data(), T * dim, h.data(), T * dim, B, T, dim, mod.data(),
                         mod.data() + dim, 6 * dim, 1e-6f);
    const Tensor hd = h.to(Device::kCuda), md = mod.to(Device::kCuda);
    Tensor m_d = poisoned({B * T * dim}).to(Device::kCuda);
    gpu().ln_modulate(m_d.data(), T * dim, hd.data(), T * dim, B, T, dim, md.data(),
                      md.data() + dim, 6 * dim, 1e-6f);
    const Tensor m_gpu = m_d.to(Device::kCpu);
    for (i64 i = 0; i < B * T * dim; ++i)
      ASSERT_NEAR(m_gpu.data()[i], m_cpu.data()[i], 1e-5 * (1 + std::abs(m_cpu.data()[i]))) << i;
  }
}

// The mixture of experts' operations: per-head RMSNorm rows (strided, in place), the float32
// router product, and the gather / weighted scatter-add of routed rows; and zero.
TEST(CudaOps, RmsNormRouterGatherScatterAndZero) {
  GEN3D_REQUIRE_GPU();
  const i64 rows = 301, dim = 128, ld = 2 * dim;  // k halves of [k | v] rows
  nn::RMSNorm norm;
  norm.scale = random({dim}, 11, 0.15f, 1.0f);
  norm.dim = dim;
  norm.eps = 1e-6f;
  Tensor x_cpu = random({rows * ld}, 12);
  Tensor xd = x_cpu.to(Device::kCuda);
  norm(x_cpu.data(), ld, x_cpu.data(), ld, rows);
  gpu().rms_norm(norm, xd.data(), ld, xd.data(), ld, rows);
  const Tensor x_gpu = xd.to(Device::kCpu);
  for (i64 i = 0; i < rows * ld; ++i)
    ASSERT_NEAR(x_gpu.data()[i], x_cpu.data()[i], 1e-5 * (1 + std::abs(x_cpu.data()[i]))) << i;

  // Router: [rows, 8] logits in float32, strided input rows.
  const i64 in = 200, E = 8, ldx = in + 9;
  const Tensor w = random({E, in}, 13, 0.2f);
  const Tensor xr = random({rows, ldx}, 14);
  Tensor l_cpu = poisoned({rows, E});
  kernels::linear(l_cpu.data(), E, xr.data(), ldx, w.data(), nullptr, rows, in, E);
  const Tensor xrd = xr.to(Device::kCuda);
  Tensor ld_ = poisoned({rows, E}).to(Device::kCuda);
  nn::DeviceCopy slot;
  gpu().linear_f32(ld_.data(), E, xrd.data(), ldx, rows, w, slot);
  const Tensor l_gpu = ld_.to(Device::kCpu);
  for (i64 i = 0; i < rows * E; ++i)
    ASSERT_NEAR(l_gpu.data()[i], l_cpu.data()[i], 1e-5 * (1 + std::abs(l_cpu.data()[i]))) << i;

  // Gather rows 3, 0, 299, ... and scatter them back weighted into distinct rows.
  const i64 cols = 37, lds = 41, ldd = 39, n = 5;
  const std::vector<i64> pick = {3, 0, 299, 150, 7};
  const std::vector<float> weight = {0.5f, -1.25f, 2.0f, 0.125f, 1.0f};
  const Tensor src = random({rows, lds}, 15);
  const Tensor srcd = src.to(Device::kCuda);
  Tensor gd = poisoned({n, ldd}).to(Device::kCuda);
  gpu().gather_rows(gd.data(), ldd, srcd.data(), lds, pick.data(), n, cols);
  const Tensor g = gd.to(Device::kCpu);
  for (i64 i = 0; i < n; ++i)
    for (i64 c = 0; c < cols; ++c)
      ASSERT_EQ(g.data()[i * ldd + c], src.data()[pick[static_cast<std::size_t>(i)] * lds + c]);
  Tensor acc = random({rows, ldd}, 16);
  Tensor accd = acc.to(Device::kCuda);
  gpu().scatter_add_rows(accd.data(), ldd, gd.data(), ldd, pick.data(), weight.data(), n, cols);
  nn::device_ops(Device::kCpu)
      .scatter_add_rows(acc.data(), ldd, g.data(), ldd, pick.data(), weight.data(), n, cols);
  const Tensor acc_gpu = accd.to(Device::kCpu);
  for (i64 i = 0; i < rows * ldd; ++i)  // a fused multiply-add on either side may round once
    ASSERT_NEAR(acc_gpu.data()[i], acc.data()[i], 1e-6 * (1 + std::abs(acc.data()[i]))) << i;

  gpu().zero(accd.data(), rows * ldd);
  for (float v : accd.to(Device::kCpu).span()) ASSERT_EQ(v, 0.0f);
}

// FlashVDM's key selection on the GPU against kernels::top_keys_reference on the host, for
// groups of several sizes and sampling strides, with exactly tied keys (copies) among them.
TEST(CudaOps, KeySelectionMatchesTheDoubleReference) {
  GEN3D_REQUIRE_GPU();
  for (const auto& [N, D, heads, top_k, stride] : std::vector<std::array<i64, 5>>{
           {3072, 64, 4, 1024, 50}, {300, 16, 3, 100, 7}, {37, 8, 2, 36, 1}}) {
    SCOPED_TRACE("N " + std::to_string(N) + " D " + std::to_string(D));
    const i64 W = heads * D, ldk = 2 * W;
    Tensor kv = random({N, ldk}, 21 + N);
    for (i64 j = 5; j < N; j += 9)  // exact ties: key j copies key j - 5 in every head
      std::copy_n(kv.data() + (j - 5) * ldk, ldk, kv.data() + j * ldk);
    const std::vector<i64> offsets = {0, 1, 130, 130, 700, 2000};
    const i64 P = offsets.back();
    const Tensor q = random({P, W}, 22 + N);
    const Tensor qd = q.to(Device::kCuda), kvd = kv.to(Device::kCuda);
    const i64 G = static_cast<i64>(offsets.size()) - 1;
    i64* offsets_d = nullptr;
    ASSERT_EQ(cudaMalloc(&offsets_d, offsets.size() * sizeof(i64)), cudaSuccess);
    ASSERT_EQ(
        cudaMemcpy(offsets_d, offsets.data(), offsets.size() * sizeof(i64), cudaMemcpyHostToDevice),
        cudaSuccess);
    ASSERT_EQ(cudaDeviceSynchronize(), cudaSuccess);  // the copy's last DMA, before g_stream reads
    int* idx_d = nullptr;
    ASSERT_EQ(cudaMalloc(&idx_d, static_cast<std::size_t>(G * heads * top_k) * sizeof(int)),
              cudaSuccess);
    cuda::select_keys(idx_d, {qd.data(), 0, W, D}, {kvd.data(), 0, ldk, 2 * D}, offsets_d, G, heads,
                      D, N, top_k, stride);
    // The kernel ran on the backend's non-blocking stream, which cudaMemcpy does not wait for.
    ASSERT_EQ(cudaDeviceSynchronize(), cudaSuccess);
    std::vector<int> idx(static_cast<std::size_t>(G * heads * top_k));
    ASSERT_EQ(cudaMemcpy(idx.data(), idx_d, idx.size() * sizeof(int), cudaMemcpyDeviceToHost),
              cudaSuccess);
    cudaFree(idx_d);
    cudaFree(offsets_d);
    std::vector<double> mean(static_cast<std::size_t>(D));
    std::vector<i64> want;
    for (i64 g = 0; g < G; ++g) {
      const i64 g0 = offsets[static_cast<std::size_t>(g)];
      const i64 n = offsets[static_cast<std::size_t>(g + 1)] - g0;
      if (n == 0) continue;  // no queries: nothing to select for
      for (i64 h = 0; h < heads; ++h) {
        kernels::sampled_query_mean(q.data() + g0 * W + h * D, W, n, stride, D, mean.data());
        kernels::top_keys_reference(mean.data(), kv.data() + h * 2 * D, ldk, N, D, top_k, want);
        for (i64 t = 0; t < top_k; ++t)
          ASSERT_EQ(idx[static_cast<std::size_t>((g * heads + h) * top_k + t)],
                    want[static_cast<std::size_t>(t)])
              << "group " << g << " head " << h << " rank " << t;
      }
    }
  }
}

// The selected-key attention, GPU against the CPU's twin (same selection, bf16 products), at the
// tiled head dim 64 and at a head dim the plain kernel takes.
TEST(CudaOps, SelectedKeyAttentionMatchesTheCpu) {
  GEN3D_REQUIRE_GPU();
  for (const auto& [N, D, heads, top_k] :
       std::vector<std::array<i64, 4>>{{3072, 64, 4, 1024}, {300, 16, 3, 100}}) {
    SCOPED_TRACE("D " + std::to_string(D));
    const i64 W = heads * D;
    const std::vector<i64> offsets = {0, 1, 300, 300, 1000, 1001, 2500};
    const i64 P = offsets.back();
    const Tensor q = random({P, W}, 31), kv = random({N, 2 * W}, 32);
    const kernels::AttentionShape s{1, heads, P, N, D, 0.0f, true};
    Tensor y_cpu = poisoned({P, W});
    nn::device_ops(Device::kCpu)
        .selected_key_attention({y_cpu.data(), 0, W, D}, {q.data(), 0, W, D},
                                {kv.data(), 0, 2 * W, 2 * D}, {kv.data() + D, 0, 2 * W, 2 * D}, s,
                                offsets, top_k, 13);
    const Tensor qd = q.to(Device::kCuda), kvd = kv.to(Device::kCuda);
    Tensor yd = poisoned({P, W}).to(Device::kCuda);
    gpu().selected_key_attention({yd.data(), 0, W, D}, {qd.data(), 0, W, D},
                                 {kvd.data(), 0, 2 * W, 2 * D}, {kvd.data() + D, 0, 2 * W, 2 * D},
                                 s, offsets, top_k, 13);
    const Tensor y_gpu = yd.to(Device::kCpu);
    const double e = nmse(y_gpu, y_cpu);
    std::printf("[ info ] selected-key attention D %lld: GPU vs CPU nmse %.3g\n",
                static_cast<long long>(D), e);
    EXPECT_LE(e, 1e-4);
  }
}

TEST(CudaOps, SwigluAndParameters) {
  GEN3D_REQUIRE_GPU();
  const i64 rows = 53, hidden = 200, ldz = 2 * hidden + 3, ldg = hidden + 1;
  const Tensor z = random({rows * ldz}, 12);
  Tensor g_cpu = poisoned({rows * ldg});
  nn::device_ops(Device::kCpu).swiglu(g_cpu.data(), ldg, z.data(), ldz, rows, hidden);
  const Tensor zd = z.to(Device::kCuda);
  Tensor gd = poisoned({rows * ldg}).to(Device::kCuda);
  gpu().swiglu(gd.data(), ldg, zd.data(), ldz, rows, hidden);
  const Tensor g_gpu = gd.to(Device::kCpu);
  for (i64 r = 0; r < rows; ++r) {
    for (i64 c = 0; c < hidden; ++c)
      ASSERT_NEAR(g_gpu.data()[r * ldg + c], g_cpu.data()[r * ldg + c],
                  1e-5 * (1 + std::abs(g_cpu.data()[r * ldg + c])));
    ASSERT_TRUE(std::isnan(g_gpu.data()[r * ldg + hidden]));
  }

  // A parameter is uploaded once per slot and read back unchanged.
  const Tensor p = random({hidden}, 13);
  nn::DeviceCopy slot;
  const float* a = gpu().parameter(p, slot);
  EXPECT_EQ(a, gpu().parameter(p, slot));
  const Tensor back = Tensor::view(a, {hidden}, Device::kCuda).to(Device::kCpu);
  for (i64 i = 0; i < hidden; ++i) ASSERT_EQ(back.data()[i], p.data()[i]);
  EXPECT_EQ(nn::device_ops(Device::kCpu).parameter(p, slot), p.data());
}

// The UNets' GEGLU gate (strided and in place) and per-item broadcast add against the CPU.
TEST(CudaOps, GegluAndBroadcastAdd) {
  GEN3D_REQUIRE_GPU();
  const i64 rows = 53, hidden = 300, ldz = 2 * hidden + 3, ldg = hidden + 1;
  const Tensor z = random({rows * ldz}, 31);
  Tensor g_cpu = poisoned({rows * ldg});
  nn::device_ops(Device::kCpu).geglu(g_cpu.data(), ldg, z.data(), ldz, rows, hidden);
  const Tensor zd = z.to(Device::kCuda);
  Tensor gd = poisoned({rows * ldg}).to(Device::kCuda);
  gpu().geglu(gd.data(), ldg, zd.data(), ldz, rows, hidden);
  const Tensor g_gpu = gd.to(Device::kCpu);
  Tensor zi = z.to(Device::kCuda);  // in place over the value half
  gpu().geglu(zi.data(), ldz, zi.data(), ldz, rows, hidden);
  const Tensor z_gpu = zi.to(Device::kCpu);
  for (i64 r = 0; r < rows; ++r) {
    for (i64 c = 0; c < hidden; ++c) {
      const float want = g_cpu.data()[r * ldg + c];
      ASSERT_NEAR(g_gpu.data()[r * ldg + c], want, 1e-5 * (1 + std::abs(want)));
      ASSERT_EQ(z_gpu.data()[r * ldz + c], g_gpu.data()[r * ldg + c]);
      ASSERT_EQ(z_gpu.data()[r * ldz + hidden + c], z.data()[r * ldz + hidden + c]);
    }
    ASSERT_TRUE(std::isnan(g_gpu.data()[r * ldg + hidden]));
  }

  const i64 batch = 3, n = 1000, cols = 321;
  const Tensor x = random({batch, cols}, 32), y0 = random({batch, n, cols}, 33);
  Tensor y_cpu = y0.clone();
  nn::device_ops(Device::kCpu).add_broadcast(y_cpu.data(), x.data(), batch, n, cols);
  const Tensor xd = x.to(Device::kCuda);
  Tensor yd = y0.to(Device::kCuda);
  gpu().add_broadcast(yd.data(), xd.data(), batch, n, cols);
  const Tensor y_gpu = yd.to(Device::kCpu);
  for (i64 i = 0; i < y_cpu.numel(); ++i) ASSERT_EQ(y_gpu.data()[i], y_cpu.data()[i]) << i;
}

// The UNet2.5D wrappers' scaled residual and the 2.1 paint UNet's rotary tables: each product
// and sum rounded on its own on both sides, so the GPU gives the CPU's bits.
TEST(CudaOps, ScaledAddAndRotaryPairs) {
  GEN3D_REQUIRE_GPU();
  const i64 n = 100003;
  const Tensor x = random({n}, 41), y0 = random({n}, 42);
  Tensor y_cpu = y0.clone();
  nn::device_ops(Device::kCpu).add_scaled(y_cpu.data(), x.data(), 0.37f, n);
  const Tensor xd = x.to(Device::kCuda);
  Tensor yd = y0.to(Device::kCuda);
  gpu().add_scaled(yd.data(), xd.data(), 0.37f, n);
  const Tensor y_gpu = yd.to(Device::kCpu);
  for (i64 i = 0; i < n; ++i) ASSERT_EQ(y_gpu.data()[i], y_cpu.data()[i]) << i;

  // 4 items sharing 2 tables (per_table 2), 3 heads of 16, rows padded to a stride of 50.
  const i64 items = 4, len = 37, heads = 3, hd = 16, ld = 50, rows = items * len;
  const Tensor cs = random({2, len, hd}, 43), sn = random({2, len, hd}, 44);
  const Tensor v0 = random({rows, ld}, 45);
  Tensor v_cpu = v0.clone();
  nn::device_ops(Device::kCpu)
      .rotate_pairs(v_cpu.data(), ld, rows, len, heads, hd, cs.data(), sn.data(), 2);
  const Tensor csd = cs.to(Device::kCuda), snd = sn.to(Device::kCuda);
  Tensor vd = v0.to(Device::kCuda);
  gpu().rotate_pairs(vd.data(), ld, rows, len, heads, hd, csd.data(), snd.data(), 2);
  const Tensor v_gpu = vd.to(Device::kCpu);
  i64 changed = 0;
  for (i64 i = 0; i < v_cpu.numel(); ++i) {
    ASSERT_EQ(v_gpu.data()[i], v_cpu.data()[i]) << i;
    changed += v_cpu.data()[i] != v0.data()[i];
  }
  EXPECT_EQ(changed, rows * heads * hd);  // the padding past heads · hd is left alone
}

// The VAE's Fourier features: float32 products, double sin and cos rounded to float on both.
TEST(CudaOps, FourierFeatures) {
  GEN3D_REQUIRE_GPU();
  const i64 P = 1000, F = 8, E = 3 * (2 * F + 1);
  Tensor xyz = random({P, 3}, 14, 0.7f);
  Tensor freqs({F});
  for (i64 j = 0; j < F; ++j) freqs.data()[j] = std::ldexp(1.0f, static_cast<int>(j)) * 3.14159265f;
  Tensor f_cpu = poisoned({P, E});
  nn::device_ops(Device::kCpu).fourier(f_cpu.data(), xyz.data(), P, freqs.data(), F);
  const Tensor xd = xyz.to(Device::kCuda), fd_ = freqs.to(Device::kCuda);
  Tensor fd = poisoned({P, E}).to(Device::kCuda);
  gpu().fourier(fd.data(), xd.data(), P, fd_.data(), F);
  const Tensor f_gpu = fd.to(Device::kCpu);
  for (i64 i = 0; i < P * E; ++i)
    ASSERT_NEAR(f_gpu.data()[i], f_cpu.data()[i], 1e-6 * (1 + std::abs(f_cpu.data()[i]))) << i;
}

// Attention over packed (3, heads, D) rows, against the CPU's bf16 path (the same bf16 roundings
// of q, k, v and the softmax weights) and its float32 reference.
void check_attention(i64 B, i64 heads, i64 Lq, i64 Lk, i64 D, std::uint64_t seed) {
  const i64 H = heads * D, W = 3 * H;
  const Tensor q = random({B, Lq, W}, seed);
  const Tensor kv = random({B, Lk, W}, seed + 1);
  const kernels::HeadsView qv{q.data(), Lq * W, W, D};
  const kernels::HeadsView kv_k{kv.data() + H, Lk * W, W, D};
  const kernels::HeadsView kv_v{kv.data() + 2 * H, Lk * W, W, D};
  Tensor o_bf = poisoned({B, Lq, H}), o_ref = poisoned({B, Lq, H});
  kernels::attention({o_bf.data(), Lq * H, H, D}, qv, kv_k, kv_v,
                     {B, heads, Lq, Lk, D, 0.0f, true});
  kernels::ref::attention({o_ref.data(), Lq * H, H, D}, qv, kv_k, kv_v,
                          {B, heads, Lq, Lk, D, 0.0f, false});
  const Tensor qd = q.to(Device::kCuda), kvd = kv.to(Device::kCuda);
  Tensor od = poisoned({B, Lq, H}).to(Device::kCuda);
  gpu().attention({od.data(), Lq * H, H, D}, {qd.data(), Lq * W, W, D},
                  {kvd.data() + H, Lk * W, W, D}, {kvd.data() + 2 * H, Lk * W, W, D},
                  {B, heads, Lq, Lk, D, 0.0f, true});
  const Tensor o = od.to(Device::kCpu);
  const double e_bf = nmse(o, o_bf), e_ref = nmse(o, o_ref), e_cpu = nmse(o_bf, o_ref);
  std::printf(
      "[ info ] attention B%lld h%lld Lq%lld Lk%lld D%lld: nmse vs CPU bf16 %.3g, vs "
      "float32 %.3g (CPU bf16 vs float32 %.3g)\n",
      static_cast<long long>(B), static_cast<long long>(heads), static_cast<long long>(Lq),
      static_cast<long long>(Lk), static_cast<long long>(D), e_bf, e_ref, e_cpu);
  EXPECT_LE(e_bf, 1e-4);
  EXPECT_LE(e_ref, 2 * e_cpu + 1e-5);
}

TEST(CudaOps, AttentionTiledHeadDims) {
  GEN3D_REQUIRE_GPU();
  check_attention(2, 3, 200, 333, 64, 100);  // partial query and key tiles
  check_attention(1, 2, 64, 64, 128, 200);
  check_attention(2, 2, 131, 70, 128, 300);
  check_attention(1, 4, 1, 500, 64, 400);     // one query
  check_attention(1, 2, 700, 1370, 64, 450);  // the DiT's context length, many key tiles
}

TEST(CudaOps, AttentionPlainHeadDims) {
  GEN3D_REQUIRE_GPU();
  check_attention(2, 2, 17, 29, 8, 500);
  check_attention(1, 3, 40, 300, 48, 600);
}

TEST(CudaOps, UnknownDeviceAndMissingBackendAreNamed) {
  EXPECT_THROW(parse_device("tpu"), ModelError);
  EXPECT_EQ(parse_device("cuda"), Device::kCuda);
}

}  // namespace
}  // namespace gen3d::models
