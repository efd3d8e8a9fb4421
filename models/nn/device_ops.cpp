#include "models/nn/device_ops.h"

#include <algorithm>
#include <array>
#include <atomic>
#include <string>
#include <vector>

#include <tbb/blocked_range.h>
#include <tbb/parallel_for.h>

#include <cmath>

#include "models/core/error.h"
#include "models/kernels/conv.h"
#include "models/kernels/elementwise.h"
#include "models/kernels/fused.h"
#include "models/kernels/key_selection.h"
#include "models/kernels/linear.h"
#include "models/nn/layers.h"

namespace gen3d::models::nn {

namespace {

// The exact (erf) GELU in float32, as the UNet's feed-forward has always computed it.
float gelu_erf(float x) {
  return 0.5f * x * (1.0f + std::erf(x * 0.70710678118654752f));
}

class CpuOps final : public DeviceOps {
 public:
  Device device() const override { return Device::kCpu; }
  void linear(const Linear& layer, float* y, i64 ldy, const float* x, i64 ldx, i64 rows,
              kernels::Act act) const override {
    layer(y, ldy, x, ldx, rows, act);
  }
  void ln_modulate(float* y, i64 ysb, const float* x, i64 xsb, i64 batch, i64 tokens, i64 dim,
                   const float* shift, const float* scale, i64 mod_stride,
                   float eps) const override {
    kernels::ln_modulate(y, ysb, x, xsb, batch, tokens, dim, shift, scale, mod_stride, eps);
  }
  void gated_residual(float* h, i64 hsb, const float* y, i64 ysb, i64 batch, i64 tokens, i64 dim,
                      const float* gate, i64 gate_stride) const override {
    kernels::gated_residual(h, hsb, y, ysb, batch, tokens, dim, gate, gate_stride);
  }
  void qk_rmsnorm(float* qkv, i64 rows, i64 ld, i64 heads, i64 head_dim, i64 head_stride,
                  i64 q_offset, i64 k_offset, const RMSNorm& q_norm,
                  const RMSNorm& k_norm) const override {
    kernels::qk_rmsnorm(qkv, rows, ld, heads, head_dim, head_stride, q_offset, k_offset,
                        q_norm.scale.data(), k_norm.scale.data(), q_norm.eps);
  }
  void attention(const kernels::HeadsOut& out, const kernels::HeadsView& q,
                 const kernels::HeadsView& k, const kernels::HeadsView& v,
                 const kernels::AttentionShape& s) const override {
    kernels::attention(out, q, k, v, s);
  }
  void layer_norm(const LayerNorm& norm, float* y, i64 ldy, const float* x, i64 ldx,
                  i64 rows) const override {
    norm(y, ldy, x, ldx, rows);
  }
  void swiglu(float* g, i64 ldg, const float* z, i64 ldz, i64 rows, i64 hidden) const override {
    tbb::parallel_for(tbb::blocked_range<i64>(0, rows, 16), [&](const tbb::blocked_range<i64>& r) {
      for (i64 i = r.begin(); i < r.end(); ++i) {
        const float* x1 = z + i * ldz;
        const float* x2 = x1 + hidden;
        float* gi = g + i * ldg;
        for (i64 j = 0; j < hidden; ++j) gi[j] = x1[j] / (1.0f + std::exp(-x1[j])) * x2[j];
      }
    });
  }
  void fourier(float* out, const float* xyz, i64 points, const float* freqs,
               i64 num_freqs) const override {
    const i64 F = num_freqs, E = 3 * (2 * F + 1);
    tbb::parallel_for(i64{0}, points, i64{1024}, [&](i64 p0) {
      const i64 p1 = std::min(points, p0 + 1024);
      for (i64 p = p0; p < p1; ++p) {
        float* o = out + p * E;
        for (int a = 0; a < 3; ++a) {
          const float v = xyz[p * 3 + a];
          o[a] = v;
          for (i64 j = 0; j < F; ++j) {
            const float arg = v * freqs[j];  // float32 product
            o[3 + a * F + j] = static_cast<float>(std::sin(static_cast<double>(arg)));
            o[3 + 3 * F + a * F + j] = static_cast<float>(std::cos(static_cast<double>(arg)));
          }
        }
      }
    });
  }
  void act_inplace(kernels::Act a, float* x, i64 n) const override {
    kernels::act_inplace(a, x, n);
  }
  void act_copy(kernels::Act a, float* dst, i64 ld_dst, const float* src, i64 ld_src, i64 rows,
                i64 cols) const override {
    kernels::act_copy(a, dst, ld_dst, src, ld_src, rows, cols);
  }
  void add(float* y, const float* x, i64 n) const override {
    tbb::parallel_for(tbb::blocked_range<i64>(0, n, 1 << 16),
                      [&](const tbb::blocked_range<i64>& r) {
                        for (i64 i = r.begin(); i < r.end(); ++i) y[i] += x[i];
                      });
  }
  void add_scaled(float* y, const float* x, float s, i64 n) const override {
    kernels::parallel_chunks(n, [&](i64 b, i64 e) {
      for (i64 i = b; i < e; ++i) y[i] += s * x[i];
    });
  }
  void rotate_pairs(float* x, i64 ld, i64 rows, i64 len, i64 heads, i64 hd, const float* cs_all,
                    const float* sn_all, i64 per_table) const override {
    tbb::parallel_for(tbb::blocked_range<i64>(0, rows, 64), [&](const tbb::blocked_range<i64>& r) {
      for (i64 row = r.begin(); row < r.end(); ++row) {
        const i64 b = row / len, t = row % len;
        const i64 off = ((b / per_table) * len + t) * hd;
        const float* cs = cs_all + off;
        const float* sn = sn_all + off;
        for (i64 h = 0; h < heads; ++h) {
          float* e = x + row * ld + h * hd;
          for (i64 i = 0; i + 1 < hd; i += 2) {
            const float a = e[i], bb = e[i + 1];
            const float p0 = a * cs[i], r0 = -bb * sn[i];
            const float p1 = bb * cs[i + 1], r1 = a * sn[i + 1];
            e[i] = p0 + r0;
            e[i + 1] = p1 + r1;
          }
        }
      }
    });
  }
  void copy_rows(float* dst, i64 ld_dst, const float* src, i64 ld_src, i64 rows,
                 i64 cols) const override {
    for (i64 r = 0; r < rows; ++r) std::copy_n(src + r * ld_src, cols, dst + r * ld_dst);
  }
  void rms_norm(const RMSNorm& norm, float* y, i64 ldy, const float* x, i64 ldx,
                i64 rows) const override {
    norm(y, ldy, x, ldx, rows);
  }
  void linear_f32(float* y, i64 ldy, const float* x, i64 ldx, i64 rows, const Tensor& w,
                  const DeviceCopy&) const override {
    kernels::linear(y, ldy, x, ldx, w.data(), nullptr, rows, w.dim(1), w.dim(0));
  }
  void gather_rows(float* dst, i64 ld_dst, const float* src, i64 ld_src, const i64* rows, i64 n,
                   i64 cols) const override {
    tbb::parallel_for(i64{0}, n,
                      [&](i64 i) { std::copy_n(src + rows[i] * ld_src, cols, dst + i * ld_dst); });
  }
  void scatter_add_rows(float* dst, i64 ld_dst, const float* src, i64 ld_src, const i64* rows,
                        const float* weight, i64 n, i64 cols) const override {
    tbb::parallel_for(i64{0}, n, [&](i64 i) {
      float* d = dst + rows[i] * ld_dst;
      const float* s = src + i * ld_src;
      const float w = weight[i];
      for (i64 c = 0; c < cols; ++c) d[c] += w * s[c];
    });
  }
  void zero(float* x, i64 n) const override { std::fill_n(x, n, 0.0f); }
  // Each group and head on its own: selection as kernels::top_keys_reference defines it, then
  // attention over the gathered keys. (The ShapeVAE's CPU decoder has a faster path of its own.)
  void selected_key_attention(const kernels::HeadsOut& out, const kernels::HeadsView& q,
                              const kernels::HeadsView& k, const kernels::HeadsView& v,
                              const kernels::AttentionShape& s, std::span<const i64> offsets,
                              i64 top_k, i64 stride) const override {
    if (s.batch != 1) throw ModelError("selected-key attention: batch must be 1");
    const i64 N = s.kv_len, D = s.head_dim, K = std::min(top_k, N);
    if (K < 1 || stride < 1)
      throw ModelError("selected-key attention: top_k and stride must be >= 1");
    const i64 groups = static_cast<i64>(offsets.size()) - 1;
    tbb::parallel_for(i64{0}, std::max<i64>(groups, 0), [&](i64 g) {
      const i64 g0 = offsets[static_cast<std::size_t>(g)];
      const i64 n = offsets[static_cast<std::size_t>(g + 1)] - g0;
      if (n <= 0) return;
      std::vector<double> mean(static_cast<std::size_t>(D));
      std::vector<i64> idx;
      std::vector<float> ks(static_cast<std::size_t>(K * D)), vs(ks.size());
      for (i64 h = 0; h < s.heads; ++h) {
        const float* qg = q.data + g0 * q.token_stride + h * q.head_stride;
        kernels::sampled_query_mean(qg, q.token_stride, n, stride, D, mean.data());
        kernels::top_keys_reference(mean.data(), k.data + h * k.head_stride, k.token_stride, N, D,
                                    K, idx);
        for (i64 t = 0; t < K; ++t) {
          const i64 j = idx[static_cast<std::size_t>(t)];
          std::copy_n(k.data + j * k.token_stride + h * k.head_stride, D, ks.data() + t * D);
          std::copy_n(v.data + j * v.token_stride + h * v.head_stride, D, vs.data() + t * D);
        }
        kernels::attention(
            {out.data + g0 * out.token_stride + h * out.head_stride, 0, out.token_stride, 0},
            {qg, 0, q.token_stride, 0}, {ks.data(), 0, D, 0}, {vs.data(), 0, D, 0},
            {1, 1, n, K, D, s.scale, s.bf16});
      }
    });
  }
  const float* parameter(const Tensor& t, const DeviceCopy&) const override { return t.data(); }
  void conv2d(const Conv2d& conv, float* y, const float* x, i64 batch, i64 h,
              i64 w) const override {
    conv(y, x, batch, h, w);
  }
  void group_norm(const GroupNorm& norm, float* y, const float* x, i64 batch, i64 pixels,
                  bool silu) const override {
    norm(y, x, batch, pixels, silu);
  }
  void upsample_nearest2x(float* y, const float* x, i64 batch, i64 h, i64 w, i64 c) const override {
    kernels::upsample_nearest2x(y, x, batch, h, w, c);
  }
  // As the UNet's feed-forward computed it in place: v[c] *= gelu_erf(gate[c]).
  void geglu(float* g, i64 ldg, const float* z, i64 ldz, i64 rows, i64 hidden) const override {
    tbb::parallel_for(tbb::blocked_range<i64>(0, rows, 16), [&](const tbb::blocked_range<i64>& r) {
      for (i64 i = r.begin(); i < r.end(); ++i) {
        const float* v = z + i * ldz;
        const float* gate = v + hidden;
        float* gi = g + i * ldg;
        for (i64 c = 0; c < hidden; ++c) gi[c] = v[c] * gelu_erf(gate[c]);
      }
    });
  }
  void add_broadcast(float* y, const float* x, i64 batch, i64 rows, i64 cols) const override {
    kernels::parallel_chunks(batch * rows, [&](i64 b, i64 e) {
      for (i64 px = b; px < e; ++px) {
        float* row = y + px * cols;
        const float* add = x + (px / rows) * cols;
        for (i64 c = 0; c < cols; ++c) row[c] += add[c];
      }
    });
  }
};

const CpuOps kCpuOps;
std::array<std::atomic<const DeviceOps*>, 2> g_ops{&kCpuOps, nullptr};

}  // namespace

const DeviceOps& device_ops(Device d) {
  const DeviceOps* ops = g_ops[static_cast<std::size_t>(d)].load();
  if (!ops)
    throw ModelError(std::string("no ") + device_name(d) +
                     " backend in this process: gen3d was built without CUDA (GEN3D_CUDA=OFF or "
                     "no nvcc at build time), or no GPU is visible");
  return *ops;
}

void register_device_ops(Device d, const DeviceOps* ops) {
  g_ops[static_cast<std::size_t>(d)].store(ops);
}

}  // namespace gen3d::models::nn
