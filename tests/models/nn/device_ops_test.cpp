// The CPU's device operations that have no older caller to be checked through: the mixture of
// experts' gather and weighted scatter-add, the float32 router product, RMSNorm rows,
// FlashVDM's selected-key attention against a plain double-precision computation of its
// definition, and the UNets' GEGLU gate and per-item broadcast add. (They are also the twins the
// GPU's versions are tested against.)

#include "models/nn/device_ops.h"

#include <gtest/gtest.h>

#include <algorithm>
#include <cmath>
#include <random>
#include <string>
#include <vector>

#include "models/kernels/conv.h"
#include "models/kernels/key_selection.h"
#include "models/nn/layers.h"
#include "models/nn/params.h"

namespace gen3d::models::nn {
namespace {

using i64 = std::int64_t;

std::vector<float> randn(i64 n, std::uint64_t seed) {
  std::mt19937_64 rng(seed);
  std::normal_distribution<float> d(0.0f, 1.0f);
  std::vector<float> v(static_cast<std::size_t>(n));
  for (float& x : v) x = d(rng);
  return v;
}

const DeviceOps& cpu() {
  return device_ops(Device::kCpu);
}

TEST(CpuDeviceOps, GatherScatterZeroRouterAndRmsNorm) {
  const i64 rows = 9, cols = 5, ld = 7;
  std::vector<float> src = randn(rows * ld, 1);
  const std::vector<i64> pick = {4, 0, 8};
  const std::vector<float> w = {2.0f, -0.5f, 1.0f};
  std::vector<float> g(3 * ld, -7.0f);
  cpu().gather_rows(g.data(), ld, src.data(), ld, pick.data(), 3, cols);
  for (i64 i = 0; i < 3; ++i)
    for (i64 c = 0; c < ld; ++c)
      EXPECT_EQ(g[static_cast<std::size_t>(i * ld + c)],
                c < cols ? src[static_cast<std::size_t>(pick[static_cast<std::size_t>(i)] * ld + c)]
                         : -7.0f);
  std::vector<float> acc = src;
  cpu().scatter_add_rows(acc.data(), ld, g.data(), ld, pick.data(), w.data(), 3, cols);
  for (i64 r = 0; r < rows; ++r)
    for (i64 c = 0; c < ld; ++c) {
      const auto it = std::find(pick.begin(), pick.end(), r);
      float want = src[static_cast<std::size_t>(r * ld + c)];
      if (it != pick.end() && c < cols)
        want += w[static_cast<std::size_t>(it - pick.begin())] * want;
      EXPECT_FLOAT_EQ(acc[static_cast<std::size_t>(r * ld + c)], want) << r << " " << c;
    }
  cpu().zero(acc.data(), rows * ld);
  for (float v : acc) EXPECT_EQ(v, 0.0f);

  // Router: float32 products, exactly as a double sum rounded (within float rounding).
  const Tensor wt = [] {
    Tensor t({3, 6});
    const std::vector<float> v = randn(18, 2);
    std::copy(v.begin(), v.end(), t.data());
    return t;
  }();
  std::vector<float> x = randn(4 * 6, 3), y(4 * 3);
  DeviceCopy slot;
  cpu().linear_f32(y.data(), 3, x.data(), 6, 4, wt, slot);
  for (i64 r = 0; r < 4; ++r)
    for (i64 o = 0; o < 3; ++o) {
      double s = 0.0;
      for (i64 i = 0; i < 6; ++i)
        s += static_cast<double>(x[static_cast<std::size_t>(r * 6 + i)]) * wt.data()[o * 6 + i];
      EXPECT_NEAR(y[static_cast<std::size_t>(r * 3 + o)], s, 1e-5 * (1 + std::abs(s)));
    }

  RMSNorm norm;
  norm.scale = Tensor({4});
  for (i64 d = 0; d < 4; ++d) norm.scale.data()[d] = 0.5f + static_cast<float>(d);
  norm.dim = 4;
  norm.eps = 1e-6f;
  std::vector<float> h = randn(3 * 6, 4), h0 = h;
  cpu().rms_norm(norm, h.data(), 6, h.data(), 6, 3);  // in place, columns 4, 5 untouched
  for (i64 r = 0; r < 3; ++r) {
    double ss = 0.0;
    for (i64 d = 0; d < 4; ++d) ss += std::pow(h0[static_cast<std::size_t>(r * 6 + d)], 2);
    const double rr = 1.0 / std::sqrt(ss / 4 + 1e-6);
    for (i64 d = 0; d < 6; ++d) {
      const double want = d < 4
                              ? h0[static_cast<std::size_t>(r * 6 + d)] * rr * norm.scale.data()[d]
                              : h0[static_cast<std::size_t>(r * 6 + d)];
      EXPECT_NEAR(h[static_cast<std::size_t>(r * 6 + d)], want, 1e-5) << r << " " << d;
    }
  }
}

// Every group and head against its definition: the mean of the sampled rows, the top_k keys by
// their double scores (the reference's ties), and a float64 softmax over those keys only.
TEST(CpuDeviceOps, SelectedKeyAttentionFollowsItsDefinition) {
  const i64 N = 40, D = 8, heads = 2, W = heads * D, top_k = 11, stride = 3;
  const std::vector<i64> offsets = {0, 5, 5, 19, 20};
  const i64 P = offsets.back();
  std::vector<float> q = randn(P * W, 5), kv = randn(N * 2 * W, 6);
  std::vector<float> y(static_cast<std::size_t>(P * W), NAN);
  cpu().selected_key_attention({y.data(), 0, W, D}, {q.data(), 0, W, D},
                               {kv.data(), 0, 2 * W, 2 * D}, {kv.data() + D, 0, 2 * W, 2 * D},
                               {1, heads, P, N, D, 0.0f, false}, offsets, top_k, stride);
  const double scale = 1.0 / std::sqrt(static_cast<double>(D));
  int checked = 0;
  for (std::size_t g = 0; g + 1 < offsets.size(); ++g)
    for (i64 h = 0; h < heads; ++h) {
      const i64 g0 = offsets[g], n = offsets[g + 1] - g0;
      if (n == 0) continue;
      std::vector<double> mean(static_cast<std::size_t>(D), 0.0);
      i64 ns = 0;
      for (i64 s = 0; s < n; s += stride, ++ns)
        for (i64 d = 0; d < D; ++d)
          mean[static_cast<std::size_t>(d)] +=
              q[static_cast<std::size_t>((g0 + s) * W + h * D + d)];
      for (double& m : mean) m /= static_cast<double>(ns);
      std::vector<std::pair<double, i64>> sc;
      for (i64 j = 0; j < N; ++j) {
        double s = 0.0;
        for (i64 d = 0; d < D; ++d)
          s += mean[static_cast<std::size_t>(d)] *
               kv[static_cast<std::size_t>(j * 2 * W + h * 2 * D + d)];
        sc.push_back({-s, j});
      }
      std::sort(sc.begin(), sc.end());
      for (i64 r = g0; r < g0 + n; ++r) {
        std::vector<double> logit;
        double mx = -INFINITY;
        for (i64 t = 0; t < top_k; ++t) {
          const i64 j = sc[static_cast<std::size_t>(t)].second;
          double s = 0.0;
          for (i64 d = 0; d < D; ++d)
            s += static_cast<double>(q[static_cast<std::size_t>(r * W + h * D + d)]) *
                 kv[static_cast<std::size_t>(j * 2 * W + h * 2 * D + d)];
          logit.push_back(s * scale);
          mx = std::max(mx, s * scale);
        }
        double den = 0.0;
        for (double& l : logit) den += (l = std::exp(l - mx));
        for (i64 d = 0; d < D; ++d) {
          double o = 0.0;
          for (i64 t = 0; t < top_k; ++t) {
            const i64 j = sc[static_cast<std::size_t>(t)].second;
            o += logit[static_cast<std::size_t>(t)] *
                 kv[static_cast<std::size_t>(j * 2 * W + h * 2 * D + D + d)];
          }
          EXPECT_NEAR(y[static_cast<std::size_t>(r * W + h * D + d)], o / den, 1e-5)
              << "group " << g << " head " << h << " row " << r;
          ++checked;
        }
      }
    }
  EXPECT_EQ(checked, P * W);
}

// The convolutional operations against the scalar references of models/kernels/conv.h, on a
// map that is not square (so h and w cannot be swapped unnoticed) and the SD VAE downsampler's
// asymmetric padding.
TEST(CpuDeviceOps, ConvGroupNormAndUpsampleFollowTheReferences) {
  const i64 h = 7, w = 5, cin = 6, cout = 4;
  RandomParams params([](const std::string& name, Tensor& t) {
    const std::vector<float> v = randn(t.numel(), name.size());
    std::copy(v.begin(), v.end(), t.data());
  });
  Conv2d conv;
  conv.load(params, "conv", cout, cin, 3, kernels::ConvGeometry{2, 0, 1, 0, 1});
  const std::vector<float> x = randn(h * w * cin, 3);
  const i64 n = conv.out_h(h) * conv.out_w(w) * cout;
  ASSERT_EQ(n, 3 * 2 * cout);  // (7 + 1 - 3) / 2 + 1 rows, (5 + 1 - 3) / 2 + 1 columns
  std::vector<float> y(static_cast<std::size_t>(n)), r(y.size());
  cpu().conv2d(conv, y.data(), x.data(), 1, h, w);
  kernels::ref::conv2d(r.data(), x.data(), 1, h, w, conv.weight, conv.geometry);
  for (i64 i = 0; i < n; ++i) EXPECT_NEAR(y[i], r[i], 1e-4f * (1.0f + std::abs(r[i]))) << i;

  GroupNorm norm;
  norm.load(params, "norm", cin, 3, 1e-6f);
  std::vector<float> g(x.size()), gr(x.size());
  cpu().group_norm(norm, g.data(), x.data(), 1, h * w, true);
  kernels::ref::group_norm(gr.data(), x.data(), 1, h * w, cin, 3, 1e-6f, norm.weight.data(),
                           norm.bias.data(), true);
  for (std::size_t i = 0; i < g.size(); ++i) EXPECT_NEAR(g[i], gr[i], 1e-5f) << i;

  std::vector<float> u(4 * x.size());
  cpu().upsample_nearest2x(u.data(), x.data(), 1, h, w, cin);
  for (i64 oy = 0; oy < 2 * h; ++oy)
    for (i64 ox = 0; ox < 2 * w; ++ox)
      for (i64 c = 0; c < cin; ++c)
        ASSERT_EQ(u[static_cast<std::size_t>((oy * 2 * w + ox) * cin + c)],
                  x[static_cast<std::size_t>(((oy / 2) * w + ox / 2) * cin + c)]);
}

// The UNets' GEGLU gate (value times the exact GELU of the gate, strided rows, in place too) and
// the per-item broadcast add.
TEST(CpuDeviceOps, GegluAndBroadcastAdd) {
  const i64 rows = 37, hidden = 11, ldz = 2 * hidden + 3, ldg = hidden + 2;
  const std::vector<float> z = randn(rows * ldz, 21);
  std::vector<float> g(static_cast<std::size_t>(rows * ldg), -7.0f);
  cpu().geglu(g.data(), ldg, z.data(), ldz, rows, hidden);
  std::vector<float> in_place = z;
  cpu().geglu(in_place.data(), ldz, in_place.data(), ldz, rows, hidden);
  for (i64 r = 0; r < rows; ++r) {
    for (i64 c = 0; c < hidden; ++c) {
      const double v = z[static_cast<std::size_t>(r * ldz + c)];
      const double x = z[static_cast<std::size_t>(r * ldz + hidden + c)];
      const double want = v * 0.5 * x * (1.0 + std::erf(x / std::sqrt(2.0)));
      EXPECT_NEAR(g[static_cast<std::size_t>(r * ldg + c)], want, 1e-5 * (1 + std::abs(want)));
      EXPECT_EQ(in_place[static_cast<std::size_t>(r * ldz + c)],
                g[static_cast<std::size_t>(r * ldg + c)]);
      EXPECT_EQ(in_place[static_cast<std::size_t>(r * ldz + hidden + c)], x);  // gate kept
    }
    EXPECT_EQ(g[static_cast<std::size_t>(r * ldg + hidden)], -7.0f);  // past the row
  }

  const i64 batch = 3, n = 5, cols = 7;
  const std::vector<float> x = randn(batch * cols, 22);
  const std::vector<float> y0 = randn(batch * n * cols, 23);
  std::vector<float> y = y0;
  cpu().add_broadcast(y.data(), x.data(), batch, n, cols);
  for (i64 b = 0; b < batch; ++b)
    for (i64 r = 0; r < n; ++r)
      for (i64 c = 0; c < cols; ++c) {
        const auto i = static_cast<std::size_t>((b * n + r) * cols + c);
        EXPECT_EQ(y[i], y0[i] + x[static_cast<std::size_t>(b * cols + c)]);
      }
}

}  // namespace
}  // namespace gen3d::models::nn
