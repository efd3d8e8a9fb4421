#include "models/paint/unet.h"

#include <spdlog/spdlog.h>

#include <algorithm>
#include <cmath>
#include <cstring>
#include <nlohmann/json.hpp>

#include "models/core/error.h"
#include "models/core/safetensors.h"
#include "models/kernels/activations.h"
#include "models/kernels/attention.h"
#include "models/kernels/conv.h"
#include "models/kernels/elementwise.h"
#include "models/kernels/linear.h"
#include "models/kernels/norms.h"
#include "models/nn/config_reader.h"
#include "models/nn/device_ops.h"
#include "models/nn/params.h"

namespace gen3d::models {

namespace {

using i64 = std::int64_t;
using nlohmann::json;

constexpr float kTransformerGroupNormEps = 1e-6f;
constexpr float kLayerNormEps = 1e-5f;
// Rows of the GEGLU feed-forward processed at once: its (rows, 8C) projection is the largest
// intermediate of the network, so it is bounded to ~32 MiB whatever the batch and resolution.
constexpr i64 kFeedForwardBudget = i64{1} << 23;

using kernels::add_inplace;
using kernels::parallel_chunks;

using nn::Conv2d;
using nn::GroupNorm;
using nn::LayerNorm;
using nn::Linear;
using nn::ParamSource;

// PyTorch's CPU float32 exp (SLEEF expf_u10: range reduction by ln 2 in two FMA steps, degree-6
// polynomial, 2^q scaling). Reproduced for the sinusoid frequencies: a correctly rounded exp
// differs from it by 1 ulp in ~10% of entries, which t ~ 1000 amplifies to ~1e-5 rad.
float torch_expf(float d) {
  const float q = std::rint(d * 1.442695040888963407359924681001892137426645954152985934f);
  float s = std::fma(q, -0.693145751953125f, d);
  s = std::fma(q, -1.428606765330187045e-06f, s);
  float u = 0.000198527617612853646278381f;
  u = std::fma(u, s, 0.00139304355252534151077271f);
  u = std::fma(u, s, 0.00833336077630519866943359f);
  u = std::fma(u, s, 0.0416664853692054748535156f);
  u = std::fma(u, s, 0.166666671633720397949219f);
  u = std::fma(u, s, 0.5f);
  u = 1.0f + std::fma(s * s, u, s);
  return d < -104.0f ? 0.0f : std::ldexp(u, static_cast<int>(q));
}

const nn::DeviceOps& cpu_ops() {
  return nn::device_ops(Device::kCpu);
}

}  // namespace

// ---------------------------------------------------------------------------------------------
// AttentionLayer

AttentionLayer AttentionLayer::load(ParamSource& p, const std::string& prefix, i64 dim, i64 kv_dim,
                                    int heads, const std::string& suffix) {
  AttentionLayer a;
  a.dim_ = dim;
  a.kv_dim_ = kv_dim;
  a.heads_ = heads;
  a.q_.load(p, prefix + ".to_q" + suffix, dim, dim, /*has_bias=*/false);
  Tensor wk = p.take(prefix + ".to_k" + suffix + ".weight", {dim, kv_dim});
  const Tensor wv = p.take(prefix + ".to_v" + suffix + ".weight", {dim, kv_dim});
  a.out_.load(p, prefix + ".to_out" + suffix + ".0", dim, dim);
  Tensor wkv;
  if (!wk.empty() && !wv.empty()) {
    // One GEMM projects the context to [k | v].
    wkv = Tensor({2 * dim, kv_dim});
    std::memcpy(wkv.data(), wk.data(), sizeof(float) * static_cast<std::size_t>(wk.numel()));
    std::memcpy(wkv.data() + wk.numel(), wv.data(),
                sizeof(float) * static_cast<std::size_t>(wv.numel()));
  }
  a.kv_.set(p, std::move(wkv), Tensor(), kv_dim, 2 * dim);
  return a;
}

void AttentionLayer::forward_add(float* resid, float scale, const float* x, i64 batch, i64 q_len,
                                 const float* ctx, i64 ctx_batch, i64 kv_len,
                                 const RotaryTables* rope) const {
  forward_add(cpu_ops(), resid, scale, x, batch, q_len, ctx, ctx_batch, kv_len, rope);
}

void AttentionLayer::forward_add(const nn::DeviceOps& k, float* resid, float scale, const float* x,
                                 i64 batch, i64 q_len, const float* ctx, i64 ctx_batch, i64 kv_len,
                                 const RotaryTables* rope) const {
  if (batch <= 0 || q_len <= 0) return;
  if (ctx_batch <= 0 || batch % ctx_batch != 0)
    throw ModelError("attention: context batch " + std::to_string(ctx_batch) +
                     " does not divide the query batch " + std::to_string(batch));
  const i64 C = dim_;
  const i64 hd = C / heads_;
  const i64 rows_q = batch * q_len;
  const i64 rows_kv = ctx_batch * kv_len;
  if (rope && (ctx_batch != batch || kv_len != q_len || rope->len != q_len ||
               rope->head_dim != hd || rope->batch <= 0 || batch % rope->batch != 0))
    throw ModelError("attention: rotary tables (" + std::to_string(rope->batch) + ", " +
                     std::to_string(rope->len) + ", " + std::to_string(rope->head_dim) +
                     ") do not fit a self-attention of batch " + std::to_string(batch) + ", " +
                     std::to_string(q_len) + " tokens, head_dim " + std::to_string(hd));
  Tensor q({rows_q, C}, k.device());
  k.linear(q_, q.data(), C, x, C, rows_q);  // [rows_q, C]
  Tensor kv({std::max<i64>(rows_kv, 1), 2 * C}, k.device());
  k.linear(kv_, kv.data(), 2 * C, ctx, kv_dim_, rows_kv);  // [rows_kv, 2C] = [k | v]
  if (rope) {
    // q (rows, C) and the k half of kv (rows, 2C): every head of token t of item b rotates by
    // table row (b / per_table, t), as x.float() * cos + x_rotated.float() * sin.
    const i64 per_table = batch / rope->batch;
    k.rotate_pairs(q.data(), C, rows_q, q_len, heads_, hd, rope->cos, rope->sin, per_table);
    k.rotate_pairs(kv.data(), 2 * C, rows_q, q_len, heads_, hd, rope->cos, rope->sin, per_table);
  }
  attend_add(k, resid, scale, q, kv.data(), batch, q_len, ctx_batch, kv_len);
}

Tensor AttentionLayer::project_kv(const float* ctx, i64 rows) const {
  return project_kv(cpu_ops(), ctx, rows);
}

Tensor AttentionLayer::project_kv(const nn::DeviceOps& k, const float* ctx, i64 rows) const {
  Tensor kv({std::max<i64>(rows, 1), 2 * dim_}, k.device());
  k.linear(kv_, kv.data(), 2 * dim_, ctx, kv_dim_, rows);  // [rows, 2C] = [k | v]
  return kv;
}

void AttentionLayer::forward_add_kv(float* resid, float scale, const float* x, i64 batch, i64 q_len,
                                    const float* kv, i64 ctx_batch, i64 kv_len) const {
  forward_add_kv(cpu_ops(), resid, scale, x, batch, q_len, kv, ctx_batch, kv_len);
}

void AttentionLayer::forward_add_kv(const nn::DeviceOps& k, float* resid, float scale,
                                    const float* x, i64 batch, i64 q_len, const float* kv,
                                    i64 ctx_batch, i64 kv_len) const {
  if (batch <= 0 || q_len <= 0) return;
  if (ctx_batch <= 0 || batch % ctx_batch != 0)
    throw ModelError("attention: context batch " + std::to_string(ctx_batch) +
                     " does not divide the query batch " + std::to_string(batch));
  const i64 rows_q = batch * q_len;
  Tensor q({rows_q, dim_}, k.device());
  k.linear(q_, q.data(), dim_, x, dim_, rows_q);  // [rows_q, C]
  attend_add(k, resid, scale, q, kv, batch, q_len, ctx_batch, kv_len);
}

void AttentionLayer::attend_add(const nn::DeviceOps& k, float* resid, float scale, Tensor& q,
                                const float* kv, i64 batch, i64 q_len, i64 ctx_batch,
                                i64 kv_len) const {
  const i64 C = dim_;
  const i64 hd = C / heads_;
  const i64 rows_q = batch * q_len;
  Tensor o({rows_q, C}, k.device());
  const i64 group = batch / ctx_batch;
  kernels::AttentionShape s;
  s.heads = heads_;
  s.q_len = q_len;
  s.kv_len = kv_len;
  s.head_dim = hd;
  s.bf16 = q_.bf16();
  if (group == 1) {
    s.batch = batch;
    k.attention({o.data(), q_len * C, C, hd}, {q.data(), q_len * C, C, hd},
                {kv, kv_len * 2 * C, 2 * C, hd}, {kv + C, kv_len * 2 * C, 2 * C, hd}, s);
  } else {
    // Every query item of a group reads the same context rows (batch stride 0).
    s.batch = group;
    for (i64 g = 0; g < ctx_batch; ++g) {
      const i64 qo = g * group * q_len * C;
      const float* kb = kv + g * kv_len * 2 * C;
      k.attention({o.data() + qo, q_len * C, C, hd}, {q.data() + qo, q_len * C, C, hd},
                  {kb, 0, 2 * C, hd}, {kb + C, 0, 2 * C, hd}, s);
    }
  }
  // to_out into the (now free) query buffer, then the scaled residual add.
  k.linear(out_, q.data(), C, o.data(), C, rows_q);  // [rows_q, C]
  if (scale == 1.0f)
    k.add(resid, q.data(), rows_q * C);
  else
    k.add_scaled(resid, q.data(), scale, rows_q * C);
}

void TransformerBlockLayers::feed_forward(float* out, const float* h, i64 rows) const {
  feed_forward(cpu_ops(), out, h, rows);
}

void TransformerBlockLayers::feed_forward(const nn::DeviceOps& k, float* out, const float* h,
                                          i64 rows) const {
  const i64 C = ff2.out;
  // GEGLU in row chunks: proj -> [value | gate], value · GELU(gate) in place over the value half,
  // then ff.net.2 into the chunk's rows of out (h's rows are consumed first, so out may be h).
  const i64 inner = 4 * C;
  const i64 chunk = std::clamp<i64>(kFeedForwardBudget / (2 * inner), 1, std::max<i64>(rows, 1));
  Tensor buf({chunk, 2 * inner}, k.device());
  for (i64 r0 = 0; r0 < rows; r0 += chunk) {
    const i64 n = std::min(chunk, rows - r0);
    k.linear(ff0, buf.data(), 2 * inner, h + r0 * C, C, n);           // [n, 8C] = [value | gate]
    k.geglu(buf.data(), 2 * inner, buf.data(), 2 * inner, n, inner);  // [n, 4C] (value half)
    k.linear(ff2, out + r0 * C, C, buf.data(), 2 * inner, n);         // [n, C]
  }
}

// ---------------------------------------------------------------------------------------------
// Network

namespace {

struct Resnet {
  i64 cin = 0, cout = 0;
  GroupNorm norm1, norm2;
  Conv2d conv1, conv2;
  Linear temb;
  bool has_shortcut = false;
  Linear shortcut;  // 1×1 conv as a Linear on the token matrix
  float out_scale = 1.0f;
};

struct TBlock {
  TransformerBlockLayers layers;
  int site = 0;
};

struct Transformer2D {
  i64 c = 0;
  GroupNorm norm;
  Linear proj_in, proj_out;
  std::vector<TBlock> blocks;
};

struct Block {
  std::vector<Resnet> resnets;
  std::vector<Transformer2D> attentions;  // empty for DownBlock2D / UpBlock2D
  bool has_sampler = false;
  Conv2d sampler;  // downsamplers.0.conv (stride 2) or upsamplers.0.conv
};

}  // namespace

struct UNet2DCondition::Impl {
  UNetConfig cfg;
  Device device = Device::kCpu;  // where forward passes run
  i64 params = 0;
  Conv2d conv_in;
  Linear time1, time2;
  std::vector<Block> down;
  Block mid;
  std::vector<Block> up;
  GroupNorm norm_out;
  Conv2d conv_out;
  std::vector<TransformerSite> sites;

  // --- building
  Resnet load_resnet(ParamSource& p, const std::string& pre, i64 cin, i64 cout, float scale) {
    Resnet r;
    r.cin = cin;
    r.cout = cout;
    r.out_scale = scale;
    const i64 G = cfg.norm_num_groups;
    const auto eps = static_cast<float>(cfg.norm_eps);
    r.norm1.load(p, pre + ".norm1", cin, G, eps);
    r.conv1.load_padded(p, pre + ".conv1", cout, cin, 3);
    r.temb.load(p, pre + ".time_emb_proj", cfg.time_embed_dim(), cout);
    r.norm2.load(p, pre + ".norm2", cout, G, eps);
    r.conv2.load_padded(p, pre + ".conv2", cout, cout, 3);
    if (cin != cout) {
      r.has_shortcut = true;
      Tensor w = p.take(pre + ".conv_shortcut.weight", {cout, cin, 1, 1});
      Tensor b = p.take(pre + ".conv_shortcut.bias", {cout});
      r.shortcut.set(p, std::move(w), std::move(b), cin, cout);
    }
    return r;
  }

  Transformer2D load_transformer(ParamSource& p, const std::string& pre, const std::string& name,
                                 i64 c, int heads, int layers, const UNetLoadOptions& opt) {
    Transformer2D t;
    t.c = c;
    t.norm.load(p, pre + ".norm", c, cfg.norm_num_groups, kTransformerGroupNormEps);
    t.proj_in.load(p, pre + ".proj_in", c, c);
    for (int k = 0; k < layers; ++k) {
      const std::string path = pre + ".transformer_blocks." + std::to_string(k);
      const std::string bp = path + "." + opt.block_infix;
      TBlock tb;
      TransformerBlockLayers& b = tb.layers;
      b.norm1.load(p, bp + "norm1", c, kLayerNormEps);
      b.attn1 = AttentionLayer::load(p, bp + "attn1", c, c, heads);
      b.norm2.load(p, bp + "norm2", c, kLayerNormEps);
      b.attn2 = AttentionLayer::load(p, bp + "attn2", c, cfg.cross_attention_dim, heads);
      b.norm3.load(p, bp + "norm3", c, kLayerNormEps);
      b.ff0.load(p, bp + "ff.net.0.proj", c, 8 * c);
      b.ff2.load(p, bp + "ff.net.2", 4 * c, c);
      tb.site = static_cast<int>(sites.size());
      sites.push_back({name + "_" + std::to_string(k), path, c, heads});
      t.blocks.push_back(std::move(tb));
    }
    t.proj_out.load(p, pre + ".proj_out", c, c);
    return t;
  }

  void build(ParamSource& p, const UNetLoadOptions& opt) {
    const UNetConfig& c = cfg;
    const int L = c.levels();
    const i64 c0 = c.block_out_channels[0];
    const i64 E = c.time_embed_dim();
    conv_in.load_padded(p, "conv_in", c0, c.in_channels, c.conv_in_kernel);
    time1.load(p, "time_embedding.linear_1", c0, E);
    time2.load(p, "time_embedding.linear_2", E, E);

    for (int i = 0; i < L; ++i) {
      const std::string pre = "down_blocks." + std::to_string(i);
      const bool cross = c.down_block_types[static_cast<std::size_t>(i)] == "CrossAttnDownBlock2D";
      const i64 out = c.block_out_channels[static_cast<std::size_t>(i)];
      const i64 in = i == 0 ? c0 : c.block_out_channels[static_cast<std::size_t>(i - 1)];
      Block b;
      for (int j = 0; j < c.layers_per_block; ++j) {
        b.resnets.push_back(
            load_resnet(p, pre + ".resnets." + std::to_string(j), j == 0 ? in : out, out, 1.0f));
        if (cross)
          b.attentions.push_back(
              load_transformer(p, pre + ".attentions." + std::to_string(j),
                               "down_" + std::to_string(i) + "_" + std::to_string(j), out,
                               c.attention_head_dim[static_cast<std::size_t>(i)],
                               c.transformer_layers_per_block[static_cast<std::size_t>(i)], opt));
      }
      if (i < L - 1) {
        b.has_sampler = true;
        b.sampler.load_padded(p, pre + ".downsamplers.0.conv", out, out, 3, 2);
      }
      down.push_back(std::move(b));
    }

    {
      const i64 cm = c.block_out_channels.back();
      const float s = static_cast<float>(c.mid_block_scale_factor);
      mid.resnets.push_back(load_resnet(p, "mid_block.resnets.0", cm, cm, s));
      mid.attentions.push_back(load_transformer(p, "mid_block.attentions.0", "mid_0", cm,
                                                c.attention_head_dim.back(),
                                                c.transformer_layers_per_block.back(), opt));
      mid.resnets.push_back(load_resnet(p, "mid_block.resnets.1", cm, cm, s));
    }

    i64 prev_out = c.block_out_channels.back();
    for (int i = 0; i < L; ++i) {
      const std::size_t ri = static_cast<std::size_t>(L - 1 - i);  // reversed level index
      const std::size_t rn = static_cast<std::size_t>(std::max(L - 2 - i, 0));
      const std::string pre = "up_blocks." + std::to_string(i);
      const bool cross = c.up_block_types[static_cast<std::size_t>(i)] == "CrossAttnUpBlock2D";
      const i64 out = c.block_out_channels[ri];
      const i64 in = c.block_out_channels[rn];
      const int layers = c.layers_per_block + 1;
      Block b;
      for (int j = 0; j < layers; ++j) {
        const i64 skip = j == layers - 1 ? in : out;
        const i64 rin = j == 0 ? prev_out : out;
        b.resnets.push_back(
            load_resnet(p, pre + ".resnets." + std::to_string(j), rin + skip, out, 1.0f));
        if (cross)
          b.attentions.push_back(
              load_transformer(p, pre + ".attentions." + std::to_string(j),
                               "up_" + std::to_string(i) + "_" + std::to_string(j), out,
                               c.attention_head_dim[ri], c.transformer_layers_per_block[ri], opt));
      }
      if (i < L - 1) {
        b.has_sampler = true;
        b.sampler.load_padded(p, pre + ".upsamplers.0.conv", out, out, 3, 1);
      }
      up.push_back(std::move(b));
      prev_out = out;
    }

    norm_out.load(p, "conv_norm_out", c0, c.norm_num_groups, static_cast<float>(c.norm_eps));
    conv_out.load_padded(p, "conv_out", c.out_channels, c0, c.conv_out_kernel);
  }

  // --- forward
  // One forward pass's state: the ops of the UNet's device and the per-call inputs, on it.
  struct Run {
    const nn::DeviceOps* k = nullptr;
    const Tensor* temb_silu = nullptr;  // (B, E)
    const float* text = nullptr;
    i64 text_batch = 1, text_len = 0;
    const TransformerHook* hook = nullptr;
    const TransformerBlockFn* block = nullptr;
    const std::vector<Tensor>* text_kv = nullptr;  // per site (on the device), or null

    Tensor buf(const Shape& s) const { return Tensor(s, k->device()); }
    // y (B, out_h, out_w, cout) = conv(x (B, H, W, cin)).
    Tensor conv(const Conv2d& conv, const Tensor& x) const {
      const i64 B = x.dim(0), h = x.dim(1), w = x.dim(2);
      Tensor y = buf({B, conv.out_h(h), conv.out_w(w), conv.weight.cout});
      k->conv2d(conv, y.data(), x.data(), B, h, w);
      return y;
    }
  };

  template <class F>
  void for_each_block(F&& f) const {
    auto visit = [&](const Block& b) {
      for (const Transformer2D& t : b.attentions)
        for (const TBlock& tb : t.blocks) f(tb);
    };
    for (const Block& b : down) visit(b);
    visit(mid);
    for (const Block& b : up) visit(b);
  }

  Tensor resnet(const Resnet& r, const Tensor& x, const Run& run) const {
    const nn::DeviceOps& k = *run.k;
    const i64 B = x.dim(0), H = x.dim(1), W = x.dim(2), HW = H * W;
    Tensor h;
    {
      Tensor t = run.buf({B, H, W, r.cin});
      k.group_norm(r.norm1, t.data(), x.data(), B, HW, true);  // [B, H, W, cin]
      h = run.conv(r.conv1, t);                                // [B, H, W, cout]
    }
    Tensor tp = run.buf({B, r.cout});
    k.linear(r.temb, tp.data(), r.cout, run.temb_silu->data(), r.temb.in, B);  // [B, cout]
    k.add_broadcast(h.data(), tp.data(), B, HW, r.cout);                       // h[b, px] += tp[b]
    k.group_norm(r.norm2, h.data(), h.data(), B, HW, true);
    Tensor out = run.conv(r.conv2, h);  // [B, H, W, cout]
    if (r.has_shortcut) {
      k.linear(r.shortcut, h.data(), r.cout, x.data(), r.cin, B * HW);  // [B·H·W, cout]
      k.add(out.data(), h.data(), out.numel());
    } else {
      k.add(out.data(), x.data(), out.numel());
    }
    if (r.out_scale != 1.0f) {  // the CPU only: load() refuses it on a device
      float* o = out.data();
      const float s = r.out_scale;
      parallel_chunks(out.numel(), [&](i64 b, i64 e) {
        for (i64 i = b; i < e; ++i) o[i] /= s;
      });
    }
    return out;
  }

  void block(const TBlock& tb, Tensor& x, const Run& run) const {
    if (run.block && *run.block) {
      (*run.block)(tb.site, tb.layers, x);
      return;
    }
    const nn::DeviceOps& k = *run.k;
    const TransformerBlockLayers& b = tb.layers;
    const i64 B = x.dim(0), L = x.dim(1), C = x.dim(2), rows = B * L;
    Tensor h = run.buf({B, L, C});
    k.layer_norm(b.norm1, h.data(), C, x.data(), C, rows);  // [B, L, C]
    b.attn1.forward_add(k, x.data(), 1.0f, h.data(), B, L, h.data(), B, L);
    if (run.hook && *run.hook) (*run.hook)(tb.site, h, x);

    k.layer_norm(b.norm2, h.data(), C, x.data(), C, rows);
    if (run.text_kv)
      b.attn2.forward_add_kv(k, x.data(), 1.0f, h.data(), B, L,
                             (*run.text_kv)[static_cast<std::size_t>(tb.site)].data(),
                             run.text_batch, run.text_len);
    else
      b.attn2.forward_add(k, x.data(), 1.0f, h.data(), B, L, run.text, run.text_batch,
                          run.text_len);

    k.layer_norm(b.norm3, h.data(), C, x.data(), C, rows);
    b.feed_forward(k, h.data(), h.data(), rows);
    k.add(x.data(), h.data(), rows * C);
  }

  Tensor transformer(const Transformer2D& t, const Tensor& x, const Run& run) const {
    const nn::DeviceOps& k = *run.k;
    const i64 B = x.dim(0), H = x.dim(1), W = x.dim(2), C = t.c, L = H * W;
    Tensor n = run.buf({B, H, W, C});
    k.group_norm(t.norm, n.data(), x.data(), B, L, false);
    Tensor hs = run.buf({B, L, C});
    k.linear(t.proj_in, hs.data(), C, n.data(), C, B * L);  // [B, L, C]
    for (const TBlock& b : t.blocks) block(b, hs, run);
    k.linear(t.proj_out, n.data(), C, hs.data(), C, B * L);  // [B, H, W, C]
    k.add(n.data(), x.data(), n.numel());
    return n;
  }

  // The sinusoidal projection (B, c0) of the timesteps, on the host.
  Tensor sinusoid(std::span<const float> timesteps) const;
  // time_embedding's MLP on the pass's device: (B, E).
  Tensor time_mlp(const Tensor& proj_host, const Run& run) const {
    const nn::DeviceOps& k = *run.k;
    const i64 B = proj_host.dim(0), E = cfg.time_embed_dim();
    const Tensor proj = proj_host.to(k.device());
    Tensor hidden = run.buf({B, E});
    k.linear(time1, hidden.data(), E, proj.data(), time1.in, B, kernels::Act::kSilu);  // [B, E]
    Tensor out = run.buf({B, E});
    k.linear(time2, out.data(), E, hidden.data(), E, B);  // [B, E]
    return out;
  }

  static Tensor concat_channels(const Tensor& a, const Tensor& b, const Run& run) {
    if (a.dim(0) != b.dim(0) || a.dim(1) != b.dim(1) || a.dim(2) != b.dim(2))
      throw ModelError("UNet: up-block skip " + b.shape().str() + " does not match the hidden " +
                       a.shape().str());
    const i64 ca = a.dim(3), cb = b.dim(3), px = a.dim(0) * a.dim(1) * a.dim(2);
    Tensor y = run.buf({a.dim(0), a.dim(1), a.dim(2), ca + cb});  // [B, H, W, ca + cb]
    run.k->copy_rows(y.data(), ca + cb, a.data(), ca, px, ca);
    run.k->copy_rows(y.data() + ca, ca + cb, b.data(), cb, px, cb);
    return y;
  }
};

namespace {

// The device backends run bf16 layers: int8 weights are a CPU form; the resnets' output scale
// is a CPU loop.
void check_device(const UNetConfig& c, const UNetLoadOptions& opt) {
  if (opt.device == Device::kCpu) return;
  if (opt.storage == WeightStorage::kInt8)
    throw ModelError(std::string("UNet2DCondition: int8 runs on the CPU only, not on ") +
                     device_name(opt.device));
  if (c.mid_block_scale_factor != 1.0)
    throw ModelError(std::string("UNet2DCondition: mid_block_scale_factor != 1 runs on the CPU "
                                 "only, not on ") +
                     device_name(opt.device));
}

}  // namespace

UNet2DCondition::UNet2DCondition(std::unique_ptr<Impl> impl) : impl_(std::move(impl)) {}
UNet2DCondition::UNet2DCondition(UNet2DCondition&&) noexcept = default;
UNet2DCondition& UNet2DCondition::operator=(UNet2DCondition&&) noexcept = default;
UNet2DCondition::~UNet2DCondition() = default;

const UNetConfig& UNet2DCondition::config() const {
  return impl_->cfg;
}
std::int64_t UNet2DCondition::num_parameters() const {
  return impl_->params;
}
const std::vector<TransformerSite>& UNet2DCondition::transformer_sites() const {
  return impl_->sites;
}
Device UNet2DCondition::device() const {
  return impl_->device;
}

UNet2DCondition UNet2DCondition::load(const UNetConfig& config, ParamSource& params,
                                      const UNetLoadOptions& opt) {
  config.validate();
  check_device(config, opt);
  auto impl = std::make_unique<Impl>();
  impl->cfg = config;
  impl->device = opt.device;
  const std::int64_t before = params.parameters();
  impl->build(params, opt);
  impl->params = params.parameters() - before;
  return UNet2DCondition(std::move(impl));
}

UNet2DCondition UNet2DCondition::load(const UNetConfig& config, WeightMap& weights,
                                      const UNetLoadOptions& opt) {
  nn::CheckpointParams src(weights, opt.storage);
  return load(config, src, opt);
}

UNet2DCondition UNet2DCondition::load(const UNetConfig& config,
                                      std::shared_ptr<const SafetensorsFile> file,
                                      WeightStorage storage, Device device) {
  WeightMap weights(std::move(file), "");
  UNetLoadOptions opt;
  opt.storage = storage;
  opt.device = device;
  UNet2DCondition unet = load(config, weights, opt);
  weights.finish("UNet2DConditionModel");
  spdlog::info("UNet2DConditionModel: loaded {} parameters from {}", unet.num_parameters(),
               weights.file().path());
  return unet;
}

std::vector<std::pair<std::string, Shape>> UNet2DCondition::expected_tensors(
    const UNetConfig& config, const UNetLoadOptions& opt) {
  config.validate();
  nn::ShapeRecorder rec;
  Impl impl;
  impl.cfg = config;
  impl.build(rec, opt);
  return std::move(rec.list);
}

Tensor UNet2DCondition::Impl::sinusoid(std::span<const float> timesteps) const {
  const Impl& m = *this;
  const i64 B = static_cast<i64>(timesteps.size());
  const i64 c0 = m.cfg.block_out_channels[0];
  const i64 half = c0 / 2;
  // diffusers get_timestep_embedding in float32: exponent = float(-ln(10000)) · i / (half − shift),
  // f = exp(exponent), arg = t · f, [sin | cos] (flipped to [cos | sin]); odd widths pad a zero.
  // sin / cos are evaluated in double and rounded (within 1 ulp of the reference's).
  std::vector<float> freqs(static_cast<std::size_t>(half));
  const float neg_log = static_cast<float>(-std::log(10000.0));
  const float denom = static_cast<float>(static_cast<double>(half) - m.cfg.freq_shift);
  for (i64 i = 0; i < half; ++i) {
    const float e = (neg_log * static_cast<float>(i)) / denom;
    freqs[static_cast<std::size_t>(i)] = torch_expf(e);
  }
  Tensor proj({B, c0});
  for (i64 b = 0; b < B; ++b) {
    float* row = proj.data() + b * c0;
    for (i64 i = 0; i < half; ++i) {
      const float a = timesteps[static_cast<std::size_t>(b)] * freqs[static_cast<std::size_t>(i)];
      const float s = static_cast<float>(std::sin(static_cast<double>(a)));
      const float c = static_cast<float>(std::cos(static_cast<double>(a)));
      row[i] = m.cfg.flip_sin_to_cos ? c : s;
      row[half + i] = m.cfg.flip_sin_to_cos ? s : c;
    }
  }
  return proj;
}

Tensor UNet2DCondition::time_embedding(std::span<const float> timesteps) const {
  const Impl& m = *impl_;
  Impl::Run run;
  run.k = &nn::device_ops(m.device);
  Tensor out = m.time_mlp(m.sinusoid(timesteps), run);
  return out.device() == Device::kCpu ? out : out.to(Device::kCpu);
}

std::vector<Tensor> UNet2DCondition::text_kv(const Tensor& text) const {
  const Impl& m = *impl_;
  if (text.rank() != 3 || text.dim(2) != m.cfg.cross_attention_dim)
    throw ModelError("UNet: text must be (Bt, T, " + std::to_string(m.cfg.cross_attention_dim) +
                     "), got " + text.shape().str());
  const nn::DeviceOps& k = nn::device_ops(m.device);
  const Tensor td = text.device() == k.device()
                        ? Tensor::view(text.data(), text.shape(), k.device())
                        : text.to(k.device());
  std::vector<Tensor> out(m.sites.size());
  const i64 rows = text.dim(0) * text.dim(1);
  m.for_each_block([&](const TBlock& tb) {
    out[static_cast<std::size_t>(tb.site)] = tb.layers.attn2.project_kv(k, td.data(), rows);
  });
  return out;
}

Tensor UNet2DCondition::forward(const Tensor& sample, std::span<const float> timesteps,
                                const Tensor& text, const UNetProbe& probe) const {
  UNetCall call;
  call.probe = probe;
  return forward(sample, timesteps, text, call);
}

Tensor UNet2DCondition::forward(const Tensor& sample, std::span<const float> timesteps,
                                const Tensor& text, const UNetCall& call) const {
  const Impl& m = *impl_;
  const UNetConfig& c = m.cfg;
  if (sample.rank() != 4 || sample.dim(3) != c.in_channels)
    throw ModelError("UNet: sample must be (B, H, W, " + std::to_string(c.in_channels) +
                     ") NHWC, got " + sample.shape().str());
  const i64 B = sample.dim(0), H = sample.dim(1), W = sample.dim(2);
  if (static_cast<i64>(timesteps.size()) != B)
    throw ModelError("UNet: " + std::to_string(timesteps.size()) + " timesteps for batch " +
                     std::to_string(B));
  if (text.rank() != 3 || text.dim(2) != c.cross_attention_dim || text.dim(0) <= 0 ||
      B % text.dim(0) != 0 || text.dim(1) <= 0)
    throw ModelError("UNet: text must be (Bt, T, " + std::to_string(c.cross_attention_dim) +
                     ") with Bt dividing the batch " + std::to_string(B) + ", got " +
                     text.shape().str());
  const i64 factor = i64{1} << (c.levels() - 1);
  if (H <= 0 || W <= 0 || H % factor != 0 || W % factor != 0)
    throw ModelError("UNet: sample size " + std::to_string(H) + "x" + std::to_string(W) +
                     " is not divisible by " + std::to_string(factor));
  const i64 E = c.time_embed_dim();
  if (call.class_emb && !(call.class_emb->shape() == Shape{B, E}))
    throw ModelError("UNet: class embedding must be (" + std::to_string(B) + ", " +
                     std::to_string(E) + "), got " + call.class_emb->shape().str());
  if (call.text_kv) {
    if (call.text_kv->size() != m.sites.size())
      throw ModelError("UNet: " + std::to_string(call.text_kv->size()) +
                       " text key/value tensors for " + std::to_string(m.sites.size()) +
                       " transformer blocks");
    for (std::size_t s = 0; s < m.sites.size(); ++s)
      if (!((*call.text_kv)[s].shape() ==
            Shape{text.dim(0) * text.dim(1), 2 * m.sites[s].channels}))
        throw ModelError("UNet: text keys/values of " + m.sites[s].name + " are " +
                         (*call.text_kv)[s].shape().str() + ", expected (" +
                         std::to_string(text.dim(0) * text.dim(1)) + ", " +
                         std::to_string(2 * m.sites[s].channels) + ")");
  }
  // DeepCache branch: the first `shallow` layers of level 0 run; the last up block resumes at
  // layer `resume` on the stored deep state.
  const int L = c.levels();
  const int shallow = call.cache ? call.cache->shallow_layers : 0;
  const int resume = c.layers_per_block - shallow;
  const bool reuse = call.cache && call.reuse_deep;
  if (call.cache) {
    if (L < 2 || shallow < 1 || shallow > c.layers_per_block)
      throw ModelError("UNet: the feature cache needs 2 or more levels and 1 .. " +
                       std::to_string(c.layers_per_block) + " shallow layers, got " +
                       std::to_string(shallow));
    // The state entering layer `resume` of the last up block: the previous layer's output, or
    // the upsampled output of the up block before (channels of level 1) when resume is 0.
    const i64 deep_c = c.block_out_channels[resume > 0 ? 0 : 1];
    if (reuse && !(call.cache->deep.shape() == Shape{B, H, W, deep_c}))
      throw ModelError("UNet: the cached deep features " + call.cache->deep.shape().str() +
                       " do not fit this pass (" + std::to_string(B) + ", " + std::to_string(H) +
                       ", " + std::to_string(W) + ", " + std::to_string(deep_c) +
                       "): run a full pass first");
  }
  Impl::Run run;
  run.k = &nn::device_ops(m.device);
  const nn::DeviceOps& k = *run.k;
  // `t` on the pass's device: a view when it is there already, else a copy.
  auto on_device = [&](const Tensor& t) { return t.on(k.device()); };
  auto probe = [&](const std::string& name, const Tensor& t) {
    if (call.probe) call.probe(name, t.device() == Device::kCpu ? t : t.to(Device::kCpu));
  };

  Tensor temb = m.time_mlp(m.sinusoid(timesteps), run);  // [B, E]
  probe("time_emb", temb);
  if (call.class_emb) {
    probe("class_emb", *call.class_emb);
    const Tensor ce = on_device(*call.class_emb);
    k.add(temb.data(), ce.data(), temb.numel());
  }
  Tensor temb_silu = run.buf({B, E});
  k.act_copy(kernels::Act::kSilu, temb_silu.data(), E, temb.data(), E, B, E);  // [B, E]

  const Tensor text_d = on_device(text);
  std::vector<Tensor> text_kv_d;  // call.text_kv on the device
  if (call.text_kv) {
    for (const Tensor& t : *call.text_kv) text_kv_d.push_back(on_device(t));
    run.text_kv = &text_kv_d;
  }
  run.temb_silu = &temb_silu;
  run.text = text_d.data();
  run.text_batch = text.dim(0);
  run.text_len = text.dim(1);
  run.hook = call.hook;
  run.block = call.block;

  // Skip stack: conv_in's output, then every resnet/attention layer and downsampler output.
  std::vector<Tensor> skips;
  if (c.center_input_sample) {
    Tensor s = sample.device() == Device::kCpu ? sample.clone() : sample.to(Device::kCpu);
    for (float& v : s.span()) v = 2.0f * v - 1.0f;
    skips.push_back(run.conv(m.conv_in, on_device(s)));
  } else {
    skips.push_back(run.conv(m.conv_in, on_device(sample)));  // [B, H, W, c0]
  }
  probe("conv_in", skips.back());

  for (std::size_t i = 0; i < m.down.size(); ++i) {
    const Block& b = m.down[i];
    for (std::size_t j = 0; j < b.resnets.size(); ++j) {
      if (reuse && static_cast<int>(j) >= shallow) break;
      Tensor h = m.resnet(b.resnets[j], skips.back(), run);
      if (!b.attentions.empty()) h = m.transformer(b.attentions[j], h, run);
      skips.push_back(std::move(h));
    }
    if (reuse) break;  // the rest of the down path is in the deep part
    if (b.has_sampler) {
      Tensor d = run.conv(b.sampler, skips.back());  // [B, H / 2, W / 2, C]
      skips.push_back(std::move(d));
    }
    probe("down_blocks." + std::to_string(i), skips.back());
  }

  Tensor h;
  if (!reuse) {
    h = m.resnet(m.mid.resnets[0], skips.back(), run);
    for (std::size_t j = 0; j < m.mid.attentions.size(); ++j) {
      h = m.transformer(m.mid.attentions[j], h, run);
      h = m.resnet(m.mid.resnets[j + 1], h, run);
    }
    probe("mid_block", h);
  } else {
    h = on_device(call.cache->deep).clone();  // (B, H, W, deep_c)
  }

  for (std::size_t i = reuse ? m.up.size() - 1 : 0; i < m.up.size(); ++i) {
    const Block& b = m.up[i];
    const bool last = i + 1 == m.up.size();
    for (std::size_t j = 0; j < b.resnets.size(); ++j) {
      if (last && call.cache && static_cast<int>(j) == resume) {
        if (!reuse) call.cache->deep = h.clone();
      } else if (reuse && static_cast<int>(j) < resume) {
        continue;
      }
      Tensor cat = Impl::concat_channels(h, skips.back(), run);
      skips.pop_back();
      h = m.resnet(b.resnets[j], cat, run);
      if (!b.attentions.empty()) h = m.transformer(b.attentions[j], h, run);
    }
    if (b.has_sampler) {
      Tensor u = run.buf({h.dim(0), 2 * h.dim(1), 2 * h.dim(2), h.dim(3)});  // [B, 2H, 2W, C]
      k.upsample_nearest2x(u.data(), h.data(), h.dim(0), h.dim(1), h.dim(2), h.dim(3));
      h = run.conv(b.sampler, u);
    }
    probe("up_blocks." + std::to_string(i), h);
  }
  if (call.skip_output) return Tensor();

  k.group_norm(m.norm_out, h.data(), h.data(), B, H * W, true);
  Tensor out = run.conv(m.conv_out, h);  // [B, H, W, out_channels]
  return out.device() == Device::kCpu ? out : out.to(Device::kCpu);
}

// ---------------------------------------------------------------------------------------------
// Config

void UNetConfig::validate() const {
  std::vector<std::string> errors;
  const int L = levels();
  auto str = [](auto v) { return std::to_string(v); };
  if (L < 1) errors.push_back("block_out_channels must not be empty");
  if (in_channels <= 0) errors.push_back("in_channels must be > 0, got " + str(in_channels));
  if (out_channels <= 0) errors.push_back("out_channels must be > 0, got " + str(out_channels));
  if (layers_per_block < 1)
    errors.push_back("layers_per_block must be >= 1, got " + str(layers_per_block));
  if (cross_attention_dim <= 0)
    errors.push_back("cross_attention_dim must be > 0, got " + str(cross_attention_dim));
  if (norm_num_groups <= 0)
    errors.push_back("norm_num_groups must be > 0, got " + str(norm_num_groups));
  if (!(norm_eps > 0)) errors.push_back("norm_eps must be > 0");
  if (!use_linear_projection)
    errors.push_back("use_linear_projection: false (conv proj_in/proj_out) is not supported");
  if (conv_in_kernel < 1 || conv_in_kernel % 2 == 0)
    errors.push_back("conv_in_kernel must be odd, got " + str(conv_in_kernel));
  if (conv_out_kernel < 1 || conv_out_kernel % 2 == 0)
    errors.push_back("conv_out_kernel must be odd, got " + str(conv_out_kernel));
  if (!(mid_block_scale_factor != 0)) errors.push_back("mid_block_scale_factor must not be 0");
  if (time_embedding_dim < 0) errors.push_back("time_embedding_dim must be >= 0");
  auto check_len = [&](const char* key, std::size_t n) {
    if (static_cast<int>(n) != L)
      errors.push_back(std::string(key) + " has " + str(n) + " entries, block_out_channels " +
                       str(L));
  };
  check_len("down_block_types", down_block_types.size());
  check_len("up_block_types", up_block_types.size());
  check_len("attention_head_dim", attention_head_dim.size());
  check_len("transformer_layers_per_block", transformer_layers_per_block.size());
  for (const auto& t : down_block_types)
    if (t != "CrossAttnDownBlock2D" && t != "DownBlock2D")
      errors.push_back("down_block_types: '" + t +
                       "' is not supported (CrossAttnDownBlock2D, DownBlock2D)");
  for (const auto& t : up_block_types)
    if (t != "CrossAttnUpBlock2D" && t != "UpBlock2D")
      errors.push_back("up_block_types: '" + t +
                       "' is not supported (UpBlock2D, CrossAttnUpBlock2D)");
  for (int i = 0; i < L; ++i) {
    const int ch = block_out_channels[static_cast<std::size_t>(i)];
    if (ch <= 0) {
      errors.push_back("block_out_channels[" + str(i) + "] must be > 0");
      continue;
    }
    if (norm_num_groups > 0 && ch % norm_num_groups != 0)
      errors.push_back("block_out_channels[" + str(i) + "] = " + str(ch) +
                       " is not divisible by norm_num_groups " + str(norm_num_groups));
    if (static_cast<int>(attention_head_dim.size()) == L) {
      const int h = attention_head_dim[static_cast<std::size_t>(i)];
      if (h <= 0 || ch % h != 0)
        errors.push_back("attention_head_dim[" + str(i) + "] = " + str(h) +
                         " (heads) must be > 0 and divide block_out_channels[" + str(i) +
                         "] = " + str(ch));
    }
    if (static_cast<int>(transformer_layers_per_block.size()) == L &&
        transformer_layers_per_block[static_cast<std::size_t>(i)] < 1)
      errors.push_back("transformer_layers_per_block[" + str(i) + "] must be >= 1");
  }
  if (!errors.empty()) {
    std::string msg = "invalid UNet config:";
    for (const auto& e : errors) msg += "\n  " + e;
    throw ModelError(msg);
  }
}

namespace {

// The keys this runtime implements.
void read_supported(nn::ConfigReader& r, UNetConfig& c, bool& heads_scalar, bool& layers_scalar) {
  r.read("in_channels", c.in_channels);
  r.read("out_channels", c.out_channels);
  r.read("block_out_channels", c.block_out_channels);
  r.read("down_block_types", c.down_block_types);
  r.read("up_block_types", c.up_block_types);
  if (r.has("layers_per_block") && r.at("layers_per_block").is_array())
    r.problem("layers_per_block: per-level lists are not supported, got " +
              r.at("layers_per_block").dump());
  else
    r.read("layers_per_block", c.layers_per_block);
  heads_scalar = r.has("attention_head_dim")
                     ? r.read_per_level("attention_head_dim", c.attention_head_dim)
                     : true;
  if (!r.has("attention_head_dim")) c.attention_head_dim = {8};  // diffusers' default
  if (r.has("cross_attention_dim") && r.at("cross_attention_dim").is_array())
    r.problem("cross_attention_dim: per-block lists are not supported, got " +
              r.at("cross_attention_dim").dump());
  else
    r.read("cross_attention_dim", c.cross_attention_dim);
  if (r.contains("norm_num_groups") && !r.has("norm_num_groups"))
    r.problem("norm_num_groups: null (no output norm) is not supported");
  else
    r.read("norm_num_groups", c.norm_num_groups);
  r.read("norm_eps", c.norm_eps);
  r.require("use_linear_projection", true, "only true: conv proj_in/proj_out is not implemented");
  r.read("flip_sin_to_cos", c.flip_sin_to_cos);
  r.read("freq_shift", c.freq_shift);
  if (r.has("transformer_layers_per_block") && r.at("transformer_layers_per_block").is_array() &&
      !r.at("transformer_layers_per_block").empty() &&
      r.at("transformer_layers_per_block")[0].is_array())
    r.problem("transformer_layers_per_block: nested per-layer lists are not supported");
  else if (r.has("transformer_layers_per_block"))
    layers_scalar =
        r.read_per_level("transformer_layers_per_block", c.transformer_layers_per_block);
  else {
    layers_scalar = true;
    c.transformer_layers_per_block = {1};
  }
  r.read("center_input_sample", c.center_input_sample);
  r.read("mid_block_scale_factor", c.mid_block_scale_factor);
  r.read("time_embedding_dim", c.time_embedding_dim);
  r.read("conv_in_kernel", c.conv_in_kernel);
  r.read("conv_out_kernel", c.conv_out_kernel);
  r.read("upcast_attention", c.upcast_attention);
}

// Options of diffusers' UNet2DConditionModel that this implementation does not have: accepted
// only at their default (no-op) value.
void reject_unsupported(nn::ConfigReader& r) {
  for (const char* key :
       {"class_embed_type", "num_class_embeds", "addition_embed_type", "encoder_hid_dim",
        "encoder_hid_dim_type", "reverse_transformer_layers_per_block", "time_embedding_act_fn",
        "timestep_post_act", "time_cond_proj_dim", "cross_attention_norm"})
    r.require(key, nullptr, "only null");
  r.require("num_attention_heads", nullptr, "use attention_head_dim, the SD2 convention");
  r.require("dual_cross_attention", false, "only false");
  r.require("class_embeddings_concat", false, "only false");
  r.require("act_fn", "silu", "only \"silu\"");
  r.require_exactly("mid_block_type", "UNetMidBlock2DCrossAttn",
                    "only \"UNetMidBlock2DCrossAttn\"");
  r.require("downsample_padding", 1, "only 1");
  r.require("resnet_time_scale_shift", "default", "only \"default\"");
  r.require("resnet_skip_time_act", false, "only false");
  r.require("time_embedding_type", "positional", "only \"positional\"");
  r.require("attention_type", "default", "only \"default\"");
  r.require("resnet_out_scale_factor", 1.0, "only 1.0");
  r.require("mid_block_only_cross_attention", false, "only false");
  if (r.has("only_cross_attention")) {
    const nlohmann::json& v = r.at("only_cross_attention");
    bool ok = v == false;
    if (v.is_array()) {
      ok = true;
      for (const auto& e : v) ok = ok && e == false;
    }
    if (!ok) r.problem("only_cross_attention: " + v.dump() + " is not supported (only false)");
  }
  // Keys with no effect on inference with the options above.
  r.ignore({"_class_name", "_diffusers_version", "_name_or_path", "_use_default_values",
            "sample_size", "dropout", "addition_embed_type_num_heads", "addition_time_embed_dim",
            "projection_class_embeddings_input_dim"});
}

}  // namespace

UNetConfig UNetConfig::parse(const std::string& json_text, const std::string& label) {
  const json j = nn::parse_config(json_text, label);
  UNetConfig c;
  nn::ConfigReader r(j, label + ": unsupported UNet config");
  bool heads_scalar = false, layers_scalar = false;
  read_supported(r, c, heads_scalar, layers_scalar);
  reject_unsupported(r);
  r.finish(nn::ConfigReader::Unknown::kWarn);
  const std::size_t L = c.block_out_channels.size();
  if (heads_scalar) c.attention_head_dim.assign(L, c.attention_head_dim.at(0));
  if (layers_scalar) c.transformer_layers_per_block.assign(L, c.transformer_layers_per_block.at(0));
  try {
    c.validate();
  } catch (const ModelError& e) {
    throw ModelError(label + ": " + e.what());
  }
  return c;
}

UNetConfig UNetConfig::read(const std::string& path) {
  return parse(nn::read_config_file(path).dump(), path);
}

}  // namespace gen3d::models
