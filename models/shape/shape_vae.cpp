#include "models/shape/shape_vae.h"

#include <cblas.h>
#include <oneapi/tbb/parallel_for.h>
#include <spdlog/spdlog.h>

#include <algorithm>
#include <cmath>
#include <cstdlib>
#include <fstream>
#include <memory>
#include <mutex>
#include <nlohmann/json.hpp>
#include <numeric>
#include <random>
#include <sstream>

#include "models/core/blas_threads.h"
#include "models/core/dtype.h"
#include "models/core/error.h"
#include "models/core/safetensors.h"
#include "models/kernels/activations.h"
#include "models/kernels/attention.h"
#include "models/kernels/key_selection.h"
#include "models/kernels/linear.h"
#include "models/kernels/norms.h"
#include "models/nn/config_reader.h"
#include "models/nn/device_ops.h"
#include "models/nn/layers.h"
#include "models/shape/checkpoints.h"

namespace gen3d::models {

using kernels::sampled_query_mean;
using kernels::top_keys;
using kernels::TopKeysScratch;

namespace {

using kernels::Act;
using i64 = std::int64_t;

constexpr float kLnEps = 1e-6f;      // every VAE LayerNorm ...
constexpr float kLnPostEps = 1e-5f;  // ... except geo_decoder.ln_post

using nn::LayerNorm;
using nn::Linear;
using nn::ParamSource;
using nn::Quantize;

// In int8 mode the attention projections (c_qkv, c_q, c_kv, c_proj) and the MLPs of the latent
// transformer and of the geometry decoder run W8A8; post_kl, latents_proj, query_proj (on the
// Fourier features of the query coordinates) and output_proj, the network's first and last
// layers, stay bf16, as do the attention products, and the norms and residual stream float32.

// MLP(width, expand): c_fc -> GELU(erf) -> c_proj.
struct Mlp {
  Linear c_fc, c_proj;
  void load(ParamSource& c, const std::string& name, i64 W, i64 hidden) {
    c_fc.load(c, name + ".c_fc", W, hidden, true, Quantize::kInt8);
    c_proj.load(c, name + ".c_proj", hidden, W, true, Quantize::kInt8);
  }
};

// QKVMultiheadAttention's per-head q / k LayerNorms (over the head dim).
struct QKNorm {
  bool on = false;
  LayerNorm q_norm, k_norm;
  void load(ParamSource& c, const std::string& name, i64 D, bool enabled) {
    on = enabled;
    if (!on) return;
    q_norm.load(c, name + ".q_norm", D, kLnEps);
    k_norm.load(c, name + ".k_norm", D, kLnEps);
  }
};

struct ResidualAttentionBlock {
  LayerNorm ln_1, ln_2;
  Linear c_qkv, c_proj;  // attn.c_qkv (columns heads x (q|k|v) x D), attn.c_proj
  QKNorm norm;           // attn.attention.{q_norm,k_norm}
  Mlp mlp;
};

struct GeoDecoder {
  bool has_latents_proj = false;
  Linear latents_proj;         // W -> Wg (downsample ratio != 1 only)
  Linear query_proj;           // fourier_dim -> Wg
  LayerNorm ln_1, ln_2, ln_3;  // cross_attn_decoder.ln_*
  Linear c_q, c_kv, c_proj;    // cross_attn_decoder.attn.*; c_kv columns heads x (k|v) x D
  QKNorm norm;                 // cross_attn_decoder.attn.attention.*
  Mlp mlp;                     // cross_attn_decoder.mlp
  bool has_ln_post = false;
  LayerNorm ln_post;   // eps 1e-5
  Linear output_proj;  // W -> 1
};

// Heads of packed rows: row r, head h at base[r * ld + col0 + h * head_stride], D values ->
// [B, tokens, heads, D] (the golden trace layout).
Tensor gather_heads(const float* base, i64 B, i64 T, i64 ld, i64 col0, i64 heads, i64 head_stride,
                    i64 D) {
  Tensor out({B, T, heads, D});
  for (i64 r = 0; r < B * T; ++r)
    for (i64 h = 0; h < heads; ++h)
      std::copy_n(base + r * ld + col0 + h * head_stride, D, out.data() + (r * heads + h) * D);
  return out;
}

// Activation memory of geometry-decoder calls, kept for later calls: a fresh buffer costs page
// faults and zero-filling on every call, about a tenth of a decode's CPU time in perf. Requests
// over kMaxPooled floats (large FlashVDM chunks) get a buffer of their own, not kept. A lease is
// one call's; concurrent calls (and calls nested by TBB's work stealing) get different buffers.
class ScratchPool {
 public:
  static constexpr i64 kMaxPooled = i64{8} << 20;  // floats (32 MiB)
  struct Free {
    void operator()(float* p) const { std::free(p); }
  };
  using Buffer = std::unique_ptr<float[], Free>;

  class Lease {
   public:
    Lease(ScratchPool* pool, Buffer buf, i64 size)
        : pool_(pool), buf_(std::move(buf)), size_(size) {}
    Lease(const Lease&) = delete;
    Lease& operator=(const Lease&) = delete;
    ~Lease() {
      if (pool_) pool_->give_back(std::move(buf_), size_);
    }
    // The next n floats, 64-byte aligned.
    float* take(i64 n) {
      float* p = buf_.get() + used_;
      used_ += (n + 15) / 16 * 16;
      return p;
    }

   private:
    ScratchPool* pool_;
    Buffer buf_;
    i64 size_, used_ = 0;
  };

  // A buffer for `floats` floats plus 16 per take() for alignment (uninitialized).
  Lease lease(i64 floats, int takes) {
    const i64 n = floats + 16 * takes;
    if (n <= kMaxPooled) {
      std::lock_guard lock(mutex_);
      for (std::size_t i = 0; i < free_.size(); ++i)
        if (free_[i].second >= n) {
          auto [buf, size] = std::move(free_[i]);
          free_.erase(free_.begin() + static_cast<std::ptrdiff_t>(i));
          return Lease(this, std::move(buf), size);
        }
    }
    const i64 size = n <= kMaxPooled ? std::max(n, i64{1} << 20) : n;
    Buffer buf(static_cast<float*>(
        std::aligned_alloc(64, static_cast<std::size_t>((size * 4 + 63) / 64 * 64))));
    if (!buf) throw std::bad_alloc();
    return Lease(n <= kMaxPooled ? this : nullptr, std::move(buf), size);
  }

 private:
  void give_back(Buffer buf, i64 size) {
    std::lock_guard lock(mutex_);
    free_.emplace_back(std::move(buf), size);
  }
  std::mutex mutex_;
  std::vector<std::pair<Buffer, i64>> free_;
};

}  // namespace

struct ShapeVAE::Impl {
  ShapeVAEConfig cfg;
  mutable ScratchPool scratch;  // geometry-decoder activations
  i64 params = 0;
  std::size_t bytes = 0;     // weight memory as stored
  std::vector<float> freqs;  // [F] float32 frequencies (x pi if include_pi)
  Tensor freqs_t;            // the same as a tensor, for devices
  nn::DeviceCopy freqs_copy;
  Linear post_kl;  // C -> W
  std::vector<ResidualAttentionBlock> blocks;
  GeoDecoder geo;

  void load(ParamSource& c) {
    const i64 W = cfg.width, D = cfg.head_dim();
    post_kl.load(c, "post_kl", cfg.embed_dim, W, true);
    blocks.resize(static_cast<std::size_t>(cfg.num_decoder_layers));
    for (int i = 0; i < cfg.num_decoder_layers; ++i) {
      const std::string p = "transformer.resblocks." + std::to_string(i);
      ResidualAttentionBlock& b = blocks[static_cast<std::size_t>(i)];
      b.ln_1.load(c, p + ".ln_1", W, kLnEps);
      b.c_qkv.load(c, p + ".attn.c_qkv", W, 3 * W, cfg.qkv_bias, Quantize::kInt8);
      b.c_proj.load(c, p + ".attn.c_proj", W, W, true, Quantize::kInt8);
      b.norm.load(c, p + ".attn.attention", D, cfg.qk_norm);
      b.ln_2.load(c, p + ".ln_2", W, kLnEps);
      b.mlp.load(c, p + ".mlp", W, 4 * W);
    }
    // CrossAttentionDecoder(width=W / r, heads=heads / r) (hy3dgen/shapegen/models/autoencoders/
    // model.py, ShapeVAE.__init__), with latents_proj (W -> W / r) when r != 1.
    const std::string g = "geo_decoder.";
    const std::string x = g + "cross_attn_decoder.";
    const i64 Wg = cfg.geo_width();
    geo.has_latents_proj = cfg.geo_decoder_downsample_ratio != 1;
    if (geo.has_latents_proj) geo.latents_proj.load(c, g + "latents_proj", W, Wg, true);
    geo.query_proj.load(c, g + "query_proj", cfg.fourier_dim(), Wg, true);
    geo.ln_1.load(c, x + "ln_1", Wg, kLnEps);
    geo.ln_2.load(c, x + "ln_2", Wg, kLnEps);
    geo.ln_3.load(c, x + "ln_3", Wg, kLnEps);
    geo.c_q.load(c, x + "attn.c_q", Wg, Wg, cfg.qkv_bias, Quantize::kInt8);
    geo.c_kv.load(c, x + "attn.c_kv", Wg, 2 * Wg, cfg.qkv_bias, Quantize::kInt8);
    geo.c_proj.load(c, x + "attn.c_proj", Wg, Wg, true, Quantize::kInt8);
    geo.norm.load(c, x + "attn.attention", D, cfg.qk_norm && cfg.geo_decoder_ln_post);
    geo.mlp.load(c, x + "mlp", Wg, static_cast<i64>(cfg.geo_decoder_mlp_expand_ratio) * Wg);
    geo.has_ln_post = cfg.geo_decoder_ln_post;
    if (geo.has_ln_post) geo.ln_post.load(c, g + "ln_post", Wg, kLnPostEps);
    geo.output_proj.load(c, g + "output_proj", Wg, 1, true);
    params = c.parameters();
    bytes = c.bytes();
  }

  void init_freqs() {
    freqs.resize(static_cast<std::size_t>(cfg.num_freqs));
    const float pi = static_cast<float>(M_PI);
    for (int j = 0; j < cfg.num_freqs; ++j) {
      const float f = std::ldexp(1.0f, j);  // 2^j, exact
      freqs[static_cast<std::size_t>(j)] = cfg.include_pi ? f * pi : f;
    }
    freqs_t = Tensor({cfg.num_freqs});
    std::copy(freqs.begin(), freqs.end(), freqs_t.data());
  }

  // points [P, 3] -> out [P, 3 (2F + 1)]: [x y z | sin(x f_0..x f_F-1, y .., z ..) | cos(..)]
  void fourier(const float* xyz, i64 P, float* out) const {
    nn::device_ops(Device::kCpu).fourier(out, xyz, P, freqs.data(), cfg.num_freqs);
  }

  // Keys / values of the cross attention for B items: decoded [B, N, W] (on `k`'s device) -> KV
  // [B, N, 2Wg] there, with the keys k-normalized in place.
  Tensor cross_kv(const nn::DeviceOps& k, const float* decoded, i64 B, i64 N,
                  const ShapeVAE::TraceFn* trace) const {
    const i64 W = cfg.geo_width(), D = cfg.head_dim(), nh = cfg.geo_heads();
    Tensor projected;
    if (geo.has_latents_proj) {
      projected = Tensor({B, N, W}, k.device());                                   // [B, N, Wg]
      k.linear(geo.latents_proj, projected.data(), W, decoded, cfg.width, B * N);  // [B, N, Wg]
      decoded = projected.data();
    }
    Tensor y({B, N, W}, k.device());                         // [B, N, Wg]
    k.layer_norm(geo.ln_2, y.data(), W, decoded, W, B * N);  // [B, N, Wg]
    if (trace) (*trace)("trace.geo_decoder.cross_attn_decoder.ln_2.out", y);
    Tensor kv({B, N, 2 * W}, k.device());                      // [B, N, 2W]
    k.linear(geo.c_kv, kv.data(), 2 * W, y.data(), W, B * N);  // [B, N, 2W]
    if (trace) (*trace)("trace.geo_decoder.cross_attn_decoder.attn.c_kv.out", kv);
    if (geo.norm.on) {
      k.layer_norm(geo.norm.k_norm, kv.data(), 2 * D, kv.data(), 2 * D, B * N * nh);  // keys
      if (trace)
        (*trace)("trace.geo_decoder.cross_attn_decoder.attn.attention.k_norm.out",
                 gather_heads(kv.data(), B, N, 2 * W, 0, nh, 2 * D, D));  // [B, N, nh, D]
    }
    return kv;
  }

  // Buffers of one block of P points on a device.
  struct GeoScratch {
    Tensor fe, x, y, q, hid;
  };
  GeoScratch geo_scratch(Device d, i64 P) const {
    const i64 W = cfg.geo_width(), M = static_cast<i64>(cfg.geo_decoder_mlp_expand_ratio) * W;
    return {Tensor({P, cfg.fourier_dim()}, d), Tensor({P, W}, d), Tensor({P, W}, d),
            Tensor({P, W}, d), Tensor({P, M}, d)};
  }
  // The dense geometry decoder on a device, everything there: xyz [P, 3], kv [1, N, 2Wg] ->
  // logits [P]. In parts: the row-wise layers before the attention (xyz -> the residual x, the
  // normed input y and the queries q, each [P, Wg]; s.fe is used), the attention into y, and the
  // layers after it (x, y -> logits; q and s.hid are used).
  void geo_forward_device(const nn::DeviceOps& k, const float* xyz, i64 P, const float* kv, i64 N,
                          GeoScratch& s, float* logits) const;
  void geo_in_device(const nn::DeviceOps& k, const float* xyz, i64 P, GeoScratch& s, float* x,
                     float* y, float* q) const;
  void geo_out_device(const nn::DeviceOps& k, float* x, float* y, float* q, i64 P, GeoScratch& s,
                      float* logits) const;

  // What a geometry field derives from its keys and values once, for every call (one item):
  // keys and values rounded to bf16, head-major [nh, N, D] (bf16 weights only), and per head the
  // largest L1 norm of a key (the error bound of the float32 selection scores).
  struct GeoKeys {
    std::vector<std::uint16_t> k16, v16;
    std::vector<double> key_l1_max;  // [nh]
  };
  GeoKeys geo_keys(const float* kv, i64 N) const;
  // FlashVDM attention of one item: each group of queries q [P, W] attends to its top_k keys
  // per head (kernels/key_selection.h) -> y [P, W].
  void select_and_attend(const float* q, float* y, const float* kv, i64 N,
                         std::span<const i64> groups, i64 top_k, i64 stride,
                         const GeoKeys& keys) const;

  // Geometry decoder for B items at shared points: xyz [P, 3], kv [B, N, 2Wg] -> out [B, P].
  // Inside, W is the decoder's width Wg and nh its heads.
  // groups (B == 1 only): attention groups with FlashVDM key selection, or empty (all keys).
  // keys: geo_keys(kv, N) when B == 1, or null (then derived here when needed).
  void geo_forward(const float* xyz, i64 P, const float* kv, i64 B, i64 N, float* out,
                   const ShapeVAE::TraceFn* trace, std::span<const i64> groups = {},
                   const KeySelection* sel = nullptr, const GeoKeys* keys = nullptr) const;
  // The same for one item with attention groups, the row-wise layers in blocks of kRowBlock
  // rows in parallel (the dense path's GEMM shapes, small buffers) around the grouped attention.
  void geo_forward_groups(const float* xyz, i64 P, const float* kv, i64 N,
                          std::span<const i64> groups, const KeySelection& sel, const GeoKeys& keys,
                          float* out) const;
  static constexpr i64 kRowBlock = 256;
  // Row-wise layers before the attention: xyz [P, 3] -> fe [P, E], residual x [B, P, W], q
  // [B, P, W] (normalized), y [B, P, W] scratch.
  void geo_in(const float* xyz, i64 P, i64 B, float* fe, float* x, float* y, float* q,
              const ShapeVAE::TraceFn* trace) const;
  // Row-wise layers after it: attention output y [B, P, W], residual x [B, P, W] -> logits out
  // [B, P]; q [B, P, W] and hid [B P, M] scratch.
  void geo_out(float* x, float* y, float* q, float* hid, i64 B, i64 P, float* out,
               const ShapeVAE::TraceFn* trace) const;
};

ShapeVAE::Impl::GeoKeys ShapeVAE::Impl::geo_keys(const float* kv, i64 N) const {
  const i64 W = cfg.geo_width(), D = cfg.head_dim(), nh = cfg.geo_heads();
  GeoKeys g;
  g.key_l1_max.assign(static_cast<std::size_t>(nh), 0.0);
  for (i64 h = 0; h < nh; ++h)
    for (i64 j = 0; j < N; ++j) {
      double l1 = 0.0;
      for (i64 d = 0; d < D; ++d) l1 += std::abs(kv[j * 2 * W + h * 2 * D + d]);
      g.key_l1_max[static_cast<std::size_t>(h)] =
          std::max(g.key_l1_max[static_cast<std::size_t>(h)], l1);
    }
  if (!geo.c_q.bf16()) return g;
  g.k16.resize(static_cast<std::size_t>(nh * N * D));
  g.v16.resize(g.k16.size());
  tbb::parallel_for(i64{0}, nh * N, [&](i64 r) {
    const i64 h = r / N, j = r % N;
    const float* src = kv + j * 2 * W + h * 2 * D;
    round_to_bf16(src, static_cast<std::size_t>(D), g.k16.data() + r * D);
    round_to_bf16(src + D, static_cast<std::size_t>(D), g.v16.data() + r * D);
  });
  return g;
}

void ShapeVAE::Impl::select_and_attend(const float* q, float* y, const float* kv, i64 N,
                                       std::span<const i64> groups, i64 K, i64 stride,
                                       const GeoKeys& keys) const {
  const i64 W = cfg.geo_width(), D = cfg.head_dim(), nh = cfg.geo_heads();
  const i64 ng = static_cast<i64>(groups.size()) - 1;
  const bool bf16 = geo.c_q.bf16();
  auto group = [&](i64 g) {
    return std::pair{groups[static_cast<std::size_t>(g)], groups[static_cast<std::size_t>(g + 1)]};
  };
  // Each group's mean sampled query per head, in double (the scores' definition) and rounded to
  // float for the score products: [nh, ng, D].
  std::vector<double> mean(static_cast<std::size_t>(nh * ng * D), 0.0);
  std::vector<float> mean_f(mean.size(), 0.0f);
  tbb::parallel_for(i64{0}, ng * nh, [&](i64 r) {
    const i64 h = r / ng, g = r % ng;
    const auto [g0, g1] = group(g);
    if (g1 <= g0) return;
    double* m = mean.data() + r * D;
    sampled_query_mean(q + g0 * W + h * D, W, g1 - g0, stride, D, m);
    for (i64 d = 0; d < D; ++d)
      mean_f[static_cast<std::size_t>(r * D + d)] = static_cast<float>(m[d]);
  });
  // Float scores of every group against every key: one product per head, [ng, D] x [D, N].
  std::vector<float> scores(static_cast<std::size_t>(nh * ng * N));
  tbb::parallel_for(i64{0}, nh, [&](i64 h) {
    ensure_serial_blas();
    cblas_sgemm(CblasRowMajor, CblasNoTrans, CblasTrans, static_cast<int>(ng), static_cast<int>(N),
                static_cast<int>(D), 1.0f, mean_f.data() + h * ng * D, static_cast<int>(D),
                kv + h * 2 * D, static_cast<int>(2 * W), 0.0f, scores.data() + h * ng * N,
                static_cast<int>(N));
  });
  // Per group: the selected keys per head, gathered ([nh, K, D]), and its attention.
  tbb::parallel_for(i64{0}, ng, [&](i64 g) {
    const auto [g0, g1] = group(g);
    if (g1 <= g0) return;
    std::vector<i64> idx;
    TopKeysScratch scratch;
    std::vector<std::uint16_t> k16, v16;
    std::vector<float> ks, vs;
    if (bf16) {
      k16.resize(static_cast<std::size_t>(nh * K * D));
      v16.resize(k16.size());
    } else {
      ks.resize(static_cast<std::size_t>(nh * K * D));
      vs.resize(ks.size());
    }
    for (i64 h = 0; h < nh; ++h) {
      const i64 r = h * ng + g;
      top_keys(mean.data() + r * D, scores.data() + r * N, kv + h * 2 * D, 2 * W, N, D, K,
               keys.key_l1_max[static_cast<std::size_t>(h)], idx, scratch);
      for (i64 t = 0; t < K; ++t) {
        const i64 j = idx[static_cast<std::size_t>(t)], at = (h * K + t) * D;
        if (bf16) {
          std::copy_n(keys.k16.data() + (h * N + j) * D, D, k16.data() + at);
          std::copy_n(keys.v16.data() + (h * N + j) * D, D, v16.data() + at);
        } else {
          std::copy_n(kv + j * 2 * W + h * 2 * D, D, ks.data() + at);
          std::copy_n(kv + j * 2 * W + h * 2 * D + D, D, vs.data() + at);
        }
      }
    }
    const kernels::AttentionShape shape{1, nh, g1 - g0, K, D, 0.0f, bf16};
    if (bf16)
      kernels::attention_bf16_kv({y + g0 * W, 0, W, D}, {q + g0 * W, 0, W, D}, k16.data(),
                                 v16.data(), shape);  // [n_g, W]
    else
      kernels::attention({y + g0 * W, 0, W, D}, {q + g0 * W, 0, W, D}, {ks.data(), 0, D, K * D},
                         {vs.data(), 0, D, K * D}, shape);  // [n_g, W]
  });
}

void ShapeVAE::Impl::geo_in(const float* xyz, i64 P, i64 B, float* fe_p, float* x_p, float* y_p,
                            float* q_p, const ShapeVAE::TraceFn* trace) const {
  const i64 W = cfg.geo_width(), D = cfg.head_dim(), nh = cfg.geo_heads(), E = cfg.fourier_dim();
  auto tr = [&](const char* name, const Tensor& v) {
    if (trace) (*trace)(name, v);
  };
  const i64 R = B * P;  // query rows
  const Tensor fe = Tensor::view(fe_p, {P, E}), x = Tensor::view(x_p, {B, P, W});
  const Tensor y = Tensor::view(y_p, {B, P, W}), q = Tensor::view(q_p, {B, P, W});
  fourier(xyz, P, fe_p);  // [P, E]
  tr("act.query_fourier", fe);
  geo.query_proj(x_p, W, fe_p, E, P);                                    // [P, W] (item 0)
  for (i64 b = 1; b < B; ++b) std::copy_n(x_p, P * W, x_p + b * P * W);  // [B, P, W]
  tr("trace.geo_decoder.query_proj.out", x);
  geo.ln_1(y_p, W, x_p, W, R);  // [B, P, W]
  tr("trace.geo_decoder.cross_attn_decoder.ln_1.out", y);
  geo.c_q(q_p, W, y_p, W, R);  // [B, P, W] heads x D
  tr("trace.geo_decoder.cross_attn_decoder.attn.c_q.out", q);
  if (geo.norm.on) {
    geo.norm.q_norm(q_p, D, q_p, D, R * nh);  // [B, P, nh, D]
    if (trace)
      tr("trace.geo_decoder.cross_attn_decoder.attn.attention.q_norm.out",
         Tensor::view(q_p, {B, P, nh, D}));
  }
}

void ShapeVAE::Impl::geo_out(float* x, float* y, float* q, float* hid, i64 B, i64 P, float* out,
                             const ShapeVAE::TraceFn* trace) const {
  const i64 W = cfg.geo_width(), M = static_cast<i64>(cfg.geo_decoder_mlp_expand_ratio) * W;
  const i64 R = B * P;
  auto tr = [&](const char* name, const float* v, i64 cols) {
    if (trace) (*trace)(name, Tensor::view(const_cast<float*>(v), {B, P, cols}));
  };
  tr("trace.geo_decoder.cross_attn_decoder.attn.c_proj.in", y, W);
  geo.c_proj(q, W, y, W, R);  // [R, W] (q reused)
  tr("trace.geo_decoder.cross_attn_decoder.attn.c_proj.out", q, W);
  for (i64 i = 0; i < R * W; ++i) x[i] += q[i];  // [R, W]
  geo.ln_3(y, W, x, W, R);                       // [R, W]
  tr("trace.geo_decoder.cross_attn_decoder.ln_3.out", y, W);
  geo.mlp.c_fc(hid, M, y, W, R, Act::kGeluErf);  // [R, M]
  geo.mlp.c_proj(q, W, hid, M, R);               // [R, W]
  tr("trace.geo_decoder.cross_attn_decoder.mlp.c_proj.out", q, W);
  for (i64 i = 0; i < R * W; ++i) x[i] += q[i];  // [R, W]
  const float* fin = x;
  if (geo.has_ln_post) {
    geo.ln_post(y, W, x, W, R);  // [R, W]
    tr("trace.geo_decoder.ln_post.out", y, W);
    fin = y;
  }
  geo.output_proj(out, 1, fin, W, R);  // [R, 1]
}

void ShapeVAE::Impl::geo_forward(const float* xyz, i64 P, const float* kv, i64 B, i64 N, float* out,
                                 const ShapeVAE::TraceFn* trace, std::span<const i64> groups,
                                 const KeySelection* sel, const GeoKeys* keys) const {
  const i64 W = cfg.geo_width(), D = cfg.head_dim(), nh = cfg.geo_heads(), E = cfg.fourier_dim();
  const i64 M = static_cast<i64>(cfg.geo_decoder_mlp_expand_ratio) * W;
  const i64 R = B * P;  // query rows
  ScratchPool::Lease mem = scratch.lease(P * E + 3 * R * W + R * M, 5);
  float *fe = mem.take(P * E), *x = mem.take(R * W), *y = mem.take(R * W), *q = mem.take(R * W);
  geo_in(xyz, P, B, fe, x, y, q, trace);
  // Attention into y (reused as the heads-concatenated output) [B, P, W].
  const i64 selected = sel ? std::min(sel->top_k, N) : 0;
  const bool bf16 = geo.c_q.bf16();
  if ((groups.empty() || selected <= 0) && !(bf16 && keys && B == 1)) {
    kernels::attention({y, P * W, W, D}, {q, P * W, W, D}, {kv, N * 2 * W, 2 * W, 2 * D},
                       {kv + D, N * 2 * W, 2 * W, 2 * D},
                       {B, nh, P, N, D, 0.0f, bf16});  // [B, P, W]
  } else if (groups.empty() || selected <= 0) {        // every key, already in bf16
    kernels::attention_bf16_kv({y, P * W, W, D}, {q, P * W, W, D}, keys->k16.data(),
                               keys->v16.data(), {1, nh, P, N, D, 0.0f, true});  // [P, W]
  } else {
    if (B != 1) throw ModelError("ShapeVAE: key selection needs one batch item");
    GeoKeys local;
    if (!keys) {
      local = geo_keys(kv, N);
      keys = &local;
    }
    select_and_attend(q, y, kv, N, groups, selected, std::max<i64>(1, sel->sample_stride), *keys);
  }
  geo_out(x, y, q, mem.take(R * M), B, P, out, trace);  // [B, P, 1]
}

void ShapeVAE::Impl::geo_forward_groups(const float* xyz, i64 P, const float* kv, i64 N,
                                        std::span<const i64> groups, const KeySelection& sel,
                                        const GeoKeys& keys, float* out) const {
  const i64 selected = std::min(sel.top_k, N);
  if (selected <= 0) return geo_forward(xyz, P, kv, 1, N, out, nullptr, {}, nullptr, &keys);
  const i64 W = cfg.geo_width(), E = cfg.fourier_dim();
  const i64 M = static_cast<i64>(cfg.geo_decoder_mlp_expand_ratio) * W;
  ScratchPool::Lease mem = scratch.lease(3 * P * W, 3);
  float *x = mem.take(P * W), *y = mem.take(P * W), *q = mem.take(P * W);
  const i64 blocks = (P + kRowBlock - 1) / kRowBlock;
  tbb::parallel_for(i64{0}, blocks, [&](i64 bi) {  // [P, W] each: x, q
    const i64 p0 = bi * kRowBlock, m = std::min(kRowBlock, P - p0);
    ScratchPool::Lease fe = scratch.lease(m * E, 1);
    geo_in(xyz + 3 * p0, m, 1, fe.take(m * E), x + p0 * W, y + p0 * W, q + p0 * W, nullptr);
  });
  select_and_attend(q, y, kv, N, groups, selected, std::max<i64>(1, sel.sample_stride),
                    keys);                         // [P, W]
  tbb::parallel_for(i64{0}, blocks, [&](i64 bi) {  // [P]
    const i64 p0 = bi * kRowBlock, m = std::min(kRowBlock, P - p0);
    ScratchPool::Lease hid = scratch.lease(m * M, 1);
    geo_out(x + p0 * W, y + p0 * W, q + p0 * W, hid.take(m * M), 1, m, out + p0, nullptr);
  });
}

void ShapeVAE::Impl::geo_forward_device(const nn::DeviceOps& k, const float* xyz, i64 P,
                                        const float* kv, i64 N, GeoScratch& s,
                                        float* logits) const {
  const i64 W = cfg.geo_width(), D = cfg.head_dim(), nh = cfg.geo_heads();
  float *x = s.x.data(), *y = s.y.data(), *q = s.q.data();
  geo_in_device(k, xyz, P, s, x, y, q);
  k.attention({y, P * W, W, D}, {q, P * W, W, D}, {kv, N * 2 * W, 2 * W, 2 * D},
              {kv + D, N * 2 * W, 2 * W, 2 * D}, {1, nh, P, N, D, 0.0f, true});  // [P, W]
  geo_out_device(k, x, y, q, P, s, logits);
}

void ShapeVAE::Impl::geo_in_device(const nn::DeviceOps& k, const float* xyz, i64 P, GeoScratch& s,
                                   float* x, float* y, float* q) const {
  const i64 W = cfg.geo_width(), D = cfg.head_dim(), nh = cfg.geo_heads(), E = cfg.fourier_dim();
  float* fe = s.fe.data();
  k.fourier(fe, xyz, P, k.parameter(freqs_t, freqs_copy), cfg.num_freqs);  // [P, E]
  k.linear(geo.query_proj, x, W, fe, E, P);                                // [P, W] residual stream
  k.layer_norm(geo.ln_1, y, W, x, W, P);
  k.linear(geo.c_q, q, W, y, W, P);  // [P, nh D]
  if (geo.norm.on) k.layer_norm(geo.norm.q_norm, q, D, q, D, P * nh);
}

void ShapeVAE::Impl::geo_out_device(const nn::DeviceOps& k, float* x, float* y, float* q, i64 P,
                                    GeoScratch& s, float* logits) const {
  const i64 W = cfg.geo_width(), M = static_cast<i64>(cfg.geo_decoder_mlp_expand_ratio) * W;
  float* hid = s.hid.data();
  k.linear(geo.c_proj, q, W, y, W, P);
  k.add(x, q, P * W);
  k.layer_norm(geo.ln_3, y, W, x, W, P);
  k.linear(geo.mlp.c_fc, hid, M, y, W, P, Act::kGeluErf);
  k.linear(geo.mlp.c_proj, q, W, hid, M, P);
  k.add(x, q, P * W);
  const float* fin = x;
  if (geo.has_ln_post) {
    k.layer_norm(geo.ln_post, y, W, x, W, P);
    fin = y;
  }
  k.linear(geo.output_proj, logits, 1, fin, W, P);  // [P]
}

// ---- config ----------------------------------------------------------------------------------

void ShapeVAEConfig::validate() const {
  std::vector<std::string> e;
  if (num_latents < 1) e.push_back("num_latents must be >= 1");
  if (embed_dim < 1) e.push_back("embed_dim must be >= 1");
  if (num_freqs < 0 || num_freqs > 30) e.push_back("num_freqs must be in 0..30");
  if (heads < 1) e.push_back("heads must be >= 1");
  if (width < 1 || (heads >= 1 && width % heads != 0))
    e.push_back("width (" + std::to_string(width) + ") must be a positive multiple of heads (" +
                std::to_string(heads) + ")");
  if (num_decoder_layers < 0) e.push_back("num_decoder_layers must be >= 0");
  if (!(scale_factor > 0.0) || !std::isfinite(scale_factor))
    e.push_back("scale_factor must be > 0");
  if (geo_decoder_mlp_expand_ratio < 1) e.push_back("geo_decoder_mlp_expand_ratio must be >= 1");
  if (geo_decoder_downsample_ratio < 1 || (heads >= 1 && heads % geo_decoder_downsample_ratio != 0))
    e.push_back("geo_decoder_downsample_ratio (" + std::to_string(geo_decoder_downsample_ratio) +
                ") must be a positive divisor of heads (" + std::to_string(heads) + ")");
  if (e.empty()) return;
  std::string msg = "ShapeVAE config:";
  for (const auto& s : e) msg += "\n  " + s;
  throw ModelError(msg);
}

ShapeVAEConfig ShapeVAEConfig::from_json(std::string_view json_text) {
  const nlohmann::json j = nn::parse_config(json_text, "ShapeVAE config");
  const nlohmann::json& p = j.contains("params") ? j["params"] : j;
  if (!p.is_object()) throw ModelError("ShapeVAE config: params must be a JSON object");
  ShapeVAEConfig c;
  nn::ConfigReader r(p, "ShapeVAE config");
  r.read("num_latents", c.num_latents);
  r.read("embed_dim", c.embed_dim);
  r.read("num_freqs", c.num_freqs);
  r.read("include_pi", c.include_pi);
  r.read("heads", c.heads);
  r.read("width", c.width);
  r.read("num_decoder_layers", c.num_decoder_layers);
  r.read("qkv_bias", c.qkv_bias);
  r.read("qk_norm", c.qk_norm);
  r.read("scale_factor", c.scale_factor);
  r.read("geo_decoder_mlp_expand_ratio", c.geo_decoder_mlp_expand_ratio);
  r.read("geo_decoder_downsample_ratio", c.geo_decoder_downsample_ratio);
  r.read("geo_decoder_ln_post", c.geo_decoder_ln_post);
  // Encoder-side keys of official configs: accepted, unused by the decoder.
  r.ignore({"ckpt_path", "num_encoder_layers", "pc_size", "pc_sharpedge_size", "point_feats",
            "downsample_ratio", "label_type", "drop_path_rate", "use_checkpoint",
            "enable_flashvdm"});
  r.finish();
  c.validate();
  return c;
}

ShapeVAEConfig ShapeVAEConfig::from_file(const std::string& path, std::string_view section) {
  const nlohmann::json j = nn::read_config_file(path, section);
  try {
    return from_json(j.dump());
  } catch (const ModelError& e) {
    throw ModelError(path + ": " + e.what());
  }
}

ShapeVAEConfig ShapeVAEConfig::with_geo_decoder_of(const WeightMap& weights) const {
  ShapeVAEConfig c = *this;
  const TensorInfo* q = weights.info("geo_decoder.query_proj.weight");  // [Wg, fourier_dim]
  const TensorInfo* fc = weights.info("geo_decoder.cross_attn_decoder.mlp.c_fc.weight");  // [M, Wg]
  if (!q || q->shape.size() != 2 || q->shape[0] < 1 || width % q->shape[0] != 0) return c;
  const std::int64_t wg = q->shape[0];
  c.geo_decoder_downsample_ratio = static_cast<int>(width / wg);
  if (fc && fc->shape.size() == 2 && fc->shape[0] % wg == 0)
    c.geo_decoder_mlp_expand_ratio = static_cast<int>(fc->shape[0] / wg);
  c.geo_decoder_ln_post = weights.contains("geo_decoder.ln_post.weight") ||
                          weights.contains("geo_decoder.ln_post.bias");
  if (c.geo_decoder_downsample_ratio != geo_decoder_downsample_ratio ||
      c.geo_decoder_mlp_expand_ratio != geo_decoder_mlp_expand_ratio ||
      c.geo_decoder_ln_post != geo_decoder_ln_post)
    spdlog::info(
        "ShapeVAE: geometry decoder as stored in {}: downsample ratio {}, MLP expand ratio {}, "
        "ln_post {} (config: {}, {}, {})",
        weights.file().path(), c.geo_decoder_downsample_ratio, c.geo_decoder_mlp_expand_ratio,
        c.geo_decoder_ln_post, geo_decoder_downsample_ratio, geo_decoder_mlp_expand_ratio,
        geo_decoder_ln_post);
  try {
    c.validate();
  } catch (const ModelError&) {
    return *this;  // not a decoder this config can describe: the loader names the tensors
  }
  return c;
}

std::int64_t flashvdm_top_k(std::int64_t n) {
  if (n == 3072) return 1024;
  if (n == 512) return 256;
  return n / 3;
}

// ---- model -----------------------------------------------------------------------------------

ShapeVAE::ShapeVAE(std::shared_ptr<const Impl> impl) : impl_(std::move(impl)) {}
ShapeVAE::ShapeVAE(ShapeVAE&&) noexcept = default;
ShapeVAE& ShapeVAE::operator=(ShapeVAE&&) noexcept = default;
ShapeVAE::~ShapeVAE() = default;

const ShapeVAEConfig& ShapeVAE::config() const {
  return impl_->cfg;
}
std::int64_t ShapeVAE::num_parameters() const {
  return impl_->params;
}
std::size_t ShapeVAE::weight_bytes() const {
  return impl_->bytes;
}

void ShapeVAE::set_device(Device device) {
  if (device != Device::kCpu && impl_->geo.c_q.int8())
    throw ModelError(std::string("ShapeVAE: int8 runs on the CPU only, not on ") +
                     device_name(device));
  device_ = device;
}

ShapeVAE ShapeVAE::load(const ShapeVAEConfig& config, const std::string& path,
                        WeightStorage storage) {
  return load(config, SafetensorsFile::open(path), storage);
}

ShapeVAE ShapeVAE::load(const ShapeVAEConfig& config, std::shared_ptr<const SafetensorsFile> file,
                        WeightStorage storage) {
  WeightMap w = WeightMap::for_submodel(std::move(file), kVaePrefix);
  return load(config, w, storage);
}

ShapeVAE ShapeVAE::load(const ShapeVAEConfig& config, WeightMap& weights, WeightStorage storage) {
  config.validate();
  auto impl = std::make_shared<Impl>();
  impl->cfg = config.with_geo_decoder_of(weights);
  impl->init_freqs();
  nn::CheckpointParams params(weights, storage);
  impl->load(params);
  weights.finish("ShapeVAE");
  spdlog::info("ShapeVAE: loaded {} parameters from {}", impl->params, weights.file().path());
  return ShapeVAE(std::move(impl));
}

std::vector<std::pair<std::string, Tensor>> ShapeVAE::random_weights(const ShapeVAEConfig& config,
                                                                     std::uint64_t seed) {
  config.validate();
  std::mt19937_64 rng(seed);
  std::vector<std::pair<std::string, Tensor>> out;
  // N(0, 1/sqrt(fan_in)) weights, N(1, 0.15) norm scales, N(0, 0.1) biases.
  nn::RandomParams params([&](const std::string& name, Tensor& t) {
    const bool is_norm =
        name.find("ln_") != std::string::npos || name.find("_norm") != std::string::npos;
    const bool is_bias = name.ends_with(".bias");
    double mean = 0.0, sd = 0.1;
    if (is_norm && !is_bias) {
      mean = 1.0;
      sd = 0.15;
    } else if (!is_bias && t.rank() == 2) {
      sd = 1.0 / std::sqrt(static_cast<double>(t.dim(1)));
    }
    std::normal_distribution<double> nd(mean, sd);
    for (float& v : t.span()) v = static_cast<float>(nd(rng));
    if (name == "geo_decoder.output_proj.weight")
      for (float& v : t.span()) v *= 3.0f;  // logits of a few units, like occupancy logits
    out.emplace_back(name, t);
  });
  Impl tmp;
  tmp.cfg = config;
  tmp.load(params);
  return out;
}

std::vector<std::pair<std::string, Shape>> ShapeVAE::expected_tensors(
    const ShapeVAEConfig& config) {
  config.validate();
  Impl impl;
  impl.cfg = config;
  nn::ShapeRecorder recorder;
  impl.load(recorder);
  return std::move(recorder.list);
}

ShapeVAE ShapeVAE::random(const ShapeVAEConfig& config, std::uint64_t seed, WeightStorage storage) {
  auto weights = random_weights(config, seed);
  auto impl = std::make_shared<Impl>();
  impl->cfg = config;
  impl->init_freqs();
  std::size_t next = 0;
  nn::RandomParams params(
      [&](const std::string&, Tensor& t) { t = std::move(weights[next++].second); }, storage);
  impl->load(params);
  return ShapeVAE(std::move(impl));
}

Tensor ShapeVAE::fourier(const Tensor& points) const {
  nn::check_shape(points, "ShapeVAE::fourier", "points", {-1, 3});
  Tensor out({points.dim(0), impl_->cfg.fourier_dim()});
  impl_->fourier(points.data(), points.dim(0), out.data());
  return out;
}

Tensor ShapeVAE::decode(const Tensor& latents, const TraceFn* trace) const {
  const Impl& m = *impl_;
  const ShapeVAEConfig& c = m.cfg;
  nn::check_shape(latents, "ShapeVAE::decode", "latents", {-1, -1, c.embed_dim});
  if (trace && device_ != Device::kCpu)
    throw ModelError("ShapeVAE::decode: traces are taken on the CPU only");
  const i64 B = latents.dim(0), N = latents.dim(1), C = c.embed_dim;
  const i64 W = c.width, nh = c.heads, D = c.head_dim(), R = B * N;
  const nn::DeviceOps& k = nn::device_ops(device_);
  const Device dev = device_;
  auto tr = [&](const std::string& name, const Tensor& v) {
    if (trace) (*trace)(name, v);
  };
  Tensor z({B, N, C});                                         // [B, N, C]
  const float inv = static_cast<float>(1.0 / c.scale_factor);  // python float -> fp32 op
  for (i64 i = 0; i < R * C; ++i) z.data()[i] = latents.data()[i] * inv;
  tr("act.latents_unscaled", z);
  if (dev != Device::kCpu) z = z.to(dev);
  Tensor h({B, N, W}, dev);                          // [B, N, W]
  k.linear(m.post_kl, h.data(), W, z.data(), C, R);  // [B, N, W]
  tr("act.post_kl", h);
  Tensor y({B, N, W}, dev), qkv({B, N, 3 * W}, dev), a({B, N, W}, dev), p({B, N, W}, dev);
  Tensor hid({R, 4 * W}, dev);  // [B N, 4W]
  for (std::size_t bi = 0; bi < m.blocks.size(); ++bi) {
    const ResidualAttentionBlock& blk = m.blocks[bi];
    const std::string pre = "trace.transformer.resblocks." + std::to_string(bi) + ".";
    k.layer_norm(blk.ln_1, y.data(), W, h.data(), W, R);  // [B, N, W]
    tr(pre + "ln_1.out", y);
    k.linear(blk.c_qkv, qkv.data(), 3 * W, y.data(), W, R);  // [B, N, nh (q|k|v) D]
    tr(pre + "attn.c_qkv.out", qkv);
    if (blk.norm.on) {
      k.layer_norm(blk.norm.q_norm, qkv.data(), 3 * D, qkv.data(), 3 * D, R * nh);  // q per head
      k.layer_norm(blk.norm.k_norm, qkv.data() + D, 3 * D, qkv.data() + D, 3 * D,
                   R * nh);  // k per head
      if (trace) {
        tr(pre + "attn.attention.q_norm.out",
           gather_heads(qkv.data(), B, N, 3 * W, 0, nh, 3 * D, D));
        tr(pre + "attn.attention.k_norm.out",
           gather_heads(qkv.data(), B, N, 3 * W, D, nh, 3 * D, D));
      }
    }
    k.attention({a.data(), N * W, W, D}, {qkv.data(), N * 3 * W, 3 * W, 3 * D},
                {qkv.data() + D, N * 3 * W, 3 * W, 3 * D},
                {qkv.data() + 2 * D, N * 3 * W, 3 * W, 3 * D},
                {B, nh, N, N, D, 0.0f, blk.c_qkv.bf16()});  // [B, N, W]
    tr(pre + "attn.c_proj.in", a);
    k.linear(blk.c_proj, p.data(), W, a.data(), W, R);  // [B, N, W]
    tr(pre + "attn.c_proj.out", p);
    k.add(h.data(), p.data(), R * W);                     // [B, N, W]
    k.layer_norm(blk.ln_2, y.data(), W, h.data(), W, R);  // [B, N, W]
    tr(pre + "ln_2.out", y);
    if (dev == Device::kCpu || trace) {
      k.linear(blk.mlp.c_fc, hid.data(), 4 * W, y.data(), W, R);  // [B N, 4W]
      tr(pre + "mlp.c_fc.out", hid);
      k.act_inplace(Act::kGeluErf, hid.data(), R * 4 * W);  // [B N, 4W]
    } else {
      k.linear(blk.mlp.c_fc, hid.data(), 4 * W, y.data(), W, R, Act::kGeluErf);  // [B N, 4W]
    }
    k.linear(blk.mlp.c_proj, p.data(), W, hid.data(), 4 * W, R);  // [B, N, W]
    tr(pre + "mlp.c_proj.out", p);
    k.add(h.data(), p.data(), R * W);  // [B, N, W]
    tr("act.transformer.resblocks." + std::to_string(bi), h);
  }
  if (dev != Device::kCpu) h = h.to(Device::kCpu);
  tr("out.decoded_latents", h);
  return h;
}

namespace {

class VaeGeometryField final : public Field {
 public:
  VaeGeometryField(std::shared_ptr<const ShapeVAE::Impl> impl, Tensor kv, i64 n)
      : impl_(std::move(impl)), kv_(std::move(kv)), n_(n), keys_(impl_->geo_keys(kv_.data(), n_)) {}
  // Points go through the decoder in blocks of kBlock rows, the last one padded, so every GEMM
  // and attention call has the same shape whatever the caller's chunking: a point's logit then
  // does not depend on which chunk it came in (kernels may pick other code paths, and so another
  // summation order, for other row counts).
  void evaluate(const float* xyz, std::int64_t n, float* out) const override {
    if (n <= 0) return;
    const i64 blocks = (n + kBlock - 1) / kBlock;
    tbb::parallel_for(i64{0}, blocks, [&](i64 bi) {
      const i64 p0 = bi * kBlock, m = std::min(kBlock, n - p0);
      if (m == kBlock) {
        impl_->geo_forward(xyz + 3 * p0, kBlock, kv_.data(), 1, n_, out + p0, nullptr, {}, nullptr,
                           &keys_);
        return;
      }
      std::vector<float> pts(static_cast<std::size_t>(3 * kBlock), 0.0f);
      std::vector<float> res(static_cast<std::size_t>(kBlock));
      std::copy_n(xyz + 3 * p0, 3 * m, pts.data());
      impl_->geo_forward(pts.data(), kBlock, kv_.data(), 1, n_, res.data(), nullptr, {}, nullptr,
                         &keys_);
      std::copy_n(res.data(), m, out + p0);
    });
  }
  void evaluate_groups(const float* xyz, std::span<const std::int64_t> offsets,
                       const KeySelection& selection, float* out) const override {
    if (offsets.empty() || offsets.back() == 0) return;
    impl_->geo_forward_groups(xyz, offsets.back(), kv_.data(), n_, offsets, selection, keys_, out);
  }
  std::int64_t key_count() const override { return n_; }

 private:
  static constexpr i64 kBlock = 256;
  std::shared_ptr<const ShapeVAE::Impl> impl_;
  Tensor kv_;  // [1, N, 2W], keys normalized
  i64 n_;
  ShapeVAE::Impl::GeoKeys keys_;  // derived from kv_ once
};

// The geometry decoder on a device: points go through in blocks of kBlock rows (the last one
// padded, so a point's logit does not depend on the caller's chunking), one block at a time (the
// device runs one stream). evaluate() attends every key; evaluate_groups() runs FlashVDM's key
// selection and the grouped attention on the device.
class VaeDeviceGeometryField final : public Field {
 public:
  VaeDeviceGeometryField(std::shared_ptr<const ShapeVAE::Impl> impl, Tensor kv, i64 n, Device d)
      : impl_(std::move(impl)), kv_(std::move(kv)), n_(n), ops_(nn::device_ops(d)) {}
  void evaluate(const float* xyz, std::int64_t n, float* out) const override {
    if (n <= 0) return;
    std::lock_guard lock(mutex_);
    const Device d = ops_.device();
    const i64 blocks = (n + kBlock - 1) / kBlock, padded = blocks * kBlock;
    // Points and logits of the whole call stay on the device; one copy each way.
    Tensor pts({padded, 3});
    std::copy_n(xyz, 3 * n, pts.data());
    const Tensor pts_d = pts.to(d);
    Tensor logits({padded}, d);
    ShapeVAE::Impl::GeoScratch scratch = impl_->geo_scratch(d, kBlock);
    for (i64 b = 0; b < blocks; ++b)
      impl_->geo_forward_device(ops_, pts_d.data() + 3 * b * kBlock, kBlock, kv_.data(), n_,
                                scratch, logits.data() + b * kBlock);
    const Tensor host = logits.to(Device::kCpu);
    std::copy_n(host.data(), n, out);
  }
  // The row-wise layers in the same padded blocks as evaluate(), the queries of the whole call
  // kept for the grouped attention, then the layers after it.
  void evaluate_groups(const float* xyz, std::span<const std::int64_t> offsets,
                       const KeySelection& selection, float* out) const override {
    if (offsets.empty() || offsets.back() == 0) return;
    const i64 n = offsets.back(), top_k = std::min(selection.top_k, n_);
    if (top_k <= 0 || top_k >= n_) return evaluate(xyz, n, out);  // every key
    std::lock_guard lock(mutex_);
    const Device d = ops_.device();
    const ShapeVAEConfig& c = impl_->cfg;
    const i64 W = c.geo_width(), D = c.head_dim(), nh = c.geo_heads();
    const i64 blocks = (n + kBlock - 1) / kBlock, padded = blocks * kBlock;
    Tensor pts({padded, 3});
    std::copy_n(xyz, 3 * n, pts.data());
    const Tensor pts_d = pts.to(d);
    Tensor x({padded, W}, d), y({padded, W}, d), q({padded, W}, d), logits({padded}, d);
    ShapeVAE::Impl::GeoScratch scratch = impl_->geo_scratch(d, kBlock);
    for (i64 b = 0; b < blocks; ++b)
      impl_->geo_in_device(ops_, pts_d.data() + 3 * b * kBlock, kBlock, scratch,
                           x.data() + b * kBlock * W, y.data() + b * kBlock * W,
                           q.data() + b * kBlock * W);
    ops_.selected_key_attention({y.data(), 0, W, D}, {q.data(), 0, W, D},
                                {kv_.data(), 0, 2 * W, 2 * D}, {kv_.data() + D, 0, 2 * W, 2 * D},
                                {1, nh, n, n_, D, 0.0f, true}, offsets, top_k,
                                std::max<i64>(1, selection.sample_stride));  // [n, W] into y
    for (i64 b = 0; b < blocks; ++b)
      impl_->geo_out_device(ops_, x.data() + b * kBlock * W, y.data() + b * kBlock * W,
                            q.data() + b * kBlock * W, kBlock, scratch, logits.data() + b * kBlock);
    const Tensor host = logits.to(Device::kCpu);
    std::copy_n(host.data(), n, out);
  }
  std::int64_t key_count() const override { return n_; }

 private:
  static constexpr i64 kBlock = 16384;
  std::shared_ptr<const ShapeVAE::Impl> impl_;
  Tensor kv_;  // [1, N, 2W] on the device, keys normalized
  i64 n_;
  const nn::DeviceOps& ops_;
  mutable std::mutex mutex_;
};

}  // namespace

Tensor ShapeVAE::query(const Tensor& decoded, const Tensor& points, const TraceFn* trace) const {
  const Impl& m = *impl_;
  nn::check_shape(decoded, "ShapeVAE::query", "decoded latents", {-1, -1, m.cfg.width});
  nn::check_shape(points, "ShapeVAE::query", "points", {-1, 3});
  const i64 B = decoded.dim(0), N = decoded.dim(1), P = points.dim(0);
  Tensor out({B, P, 1});  // [B, P, 1]
  if (device_ != Device::kCpu) {
    if (trace) throw ModelError("ShapeVAE::query: traces are taken on the CPU only");
    const nn::DeviceOps& k = nn::device_ops(device_);
    const Tensor dd = decoded.to(device_);
    for (i64 b = 0; b < B; ++b) {
      Tensor kv = m.cross_kv(k, dd.data() + b * N * m.cfg.width, 1, N, nullptr);
      VaeDeviceGeometryField(impl_, std::move(kv), N, device_)
          .evaluate(points.data(), P, out.data() + b * P);
    }
    return out;
  }
  Tensor kv = m.cross_kv(nn::device_ops(Device::kCpu), decoded.data(), B, N, trace);  // [B, N, 2W]
  m.geo_forward(points.data(), P, kv.data(), B, N, out.data(), trace);
  if (trace) (*trace)("out.query_logits", out);
  return out;
}

std::shared_ptr<const Field> ShapeVAE::geometry_field(const Tensor& decoded, std::int64_t b) const {
  nn::check_shape(decoded, "ShapeVAE::geometry_field", "decoded latents",
                  {-1, -1, impl_->cfg.width});
  if (b < 0 || b >= decoded.dim(0))
    throw ModelError("ShapeVAE::geometry_field: batch item " + std::to_string(b) + " outside [0, " +
                     std::to_string(decoded.dim(0)) + ")");
  const i64 N = decoded.dim(1), W = impl_->cfg.width;
  if (device_ != Device::kCpu) {
    const Tensor item = Tensor::view(decoded.data() + b * N * W, {1, N, W}).to(device_);
    Tensor kv = impl_->cross_kv(nn::device_ops(device_), item.data(), 1, N, nullptr);
    return std::make_shared<VaeDeviceGeometryField>(impl_, std::move(kv), N, device_);
  }
  Tensor kv =
      impl_->cross_kv(nn::device_ops(Device::kCpu), decoded.data() + b * N * W, 1, N, nullptr);
  return std::make_shared<VaeGeometryField>(impl_, std::move(kv), N);
}

}  // namespace gen3d::models
