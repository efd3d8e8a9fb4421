#include "models/shape/dit21.h"

#include <spdlog/spdlog.h>
#include <tbb/parallel_for.h>

#include <algorithm>
#include <cmath>
#include <random>

#include "models/core/error.h"
#include "models/core/safetensors.h"
#include "models/kernels/activations.h"
#include "models/kernels/attention.h"
#include "models/kernels/fused.h"
#include "models/kernels/linear.h"
#include "models/kernels/norms.h"
#include "models/nn/layers.h"

namespace gen3d::models {

namespace {

using kernels::Act;
using i64 = std::int64_t;
using nn::LayerNorm;
using nn::Linear;
using nn::ParamSource;
using nn::Quantize;

constexpr float kEps = 1e-6f;  // every LayerNorm and RMSNorm of the model

// In int8 mode the blocks' attention projections, skip linears, MLPs and experts run W8A8; the
// x and time embedders, the final layer and the MoE gate do not (the gate stays float32), and the
// attention products run in bf16.

// q, k and v Linears of one attention fused into a single projection, columns [q | k | v]
// (or [k | v]) in the order the reference concatenates them before its head split.
Linear fused_projection(ParamSource& p, const std::string& name,
                        std::initializer_list<const char*> parts, i64 in, i64 H, bool bias) {
  const i64 n = static_cast<i64>(parts.size());
  Tensor w({n * H, in}), b = bias ? Tensor({n * H}) : Tensor();
  i64 k = 0;
  for (const char* part : parts) {
    const Tensor wp = p.take(name + "." + part + ".weight", {H, in});
    if (!wp.empty()) std::copy_n(wp.data(), H * in, w.data() + k * H * in);
    if (bias) {
      const Tensor bp = p.take(name + "." + part + ".bias", {H});
      if (!bp.empty()) std::copy_n(bp.data(), H, b.data() + k * H);
    }
    ++k;
  }
  Linear l;
  l.set(p, std::move(w), std::move(b), in, n * H, Quantize::kInt8);
  return l;
}

// diffusers FeedForward(dim, activation_fn="gelu"): net.0.proj (H -> 4H), GELU(erf), net.2.
struct FeedForward {
  Linear proj, out;
  void load(ParamSource& p, const std::string& name, i64 H, i64 hidden) {
    proj.load(p, name + ".net.0.proj", H, hidden, true, Quantize::kInt8);
    out.load(p, name + ".net.2", hidden, H, true, Quantize::kInt8);
  }
  // y[rows, H] = net(x[rows, H]); hid is scratch [rows, hidden].
  void operator()(float* y, const float* x, i64 rows, float* hid) const {
    proj(hid, x, rows, Act::kGeluErf);  // [rows, 4H]
    out(y, hid, rows);                  // [rows, H]
  }
};

// Self-attention `attn1`: to_q/to_k/to_v fused, per-head RMS norms, out_proj.
struct SelfAttention {
  Linear qkv;  // H -> 3H, columns [q | k | v]
  Tensor q_norm, k_norm;
  Linear out_proj;
  void load(ParamSource& p, const std::string& name, const DiT21Config& c) {
    const i64 H = c.hidden_size, D = c.head_dim();
    qkv = fused_projection(p, name, {"to_q", "to_k", "to_v"}, H, H, c.qkv_bias);
    if (c.qk_norm) {
      q_norm = p.take(name + ".q_norm.weight", {D});
      k_norm = p.take(name + ".k_norm.weight", {D});
    }
    out_proj.load(p, name + ".out_proj", H, H, true, Quantize::kInt8);
  }
};

// Cross-attention `attn2`: queries from the tokens, keys and values from the condition.
struct CrossAttention {
  Linear to_q;  // H -> H
  Linear kv;    // context_dim -> 2H, columns [k | v]
  Tensor q_norm, k_norm;
  Linear out_proj;
  void load(ParamSource& p, const std::string& name, const DiT21Config& c) {
    const i64 H = c.hidden_size, D = c.head_dim();
    to_q.load(p, name + ".to_q", H, H, c.qkv_bias, Quantize::kInt8);
    kv = fused_projection(p, name, {"to_k", "to_v"}, c.context_dim, H, c.qkv_bias);
    if (c.qk_norm) {
      q_norm = p.take(name + ".q_norm.weight", {D});
      k_norm = p.take(name + ".k_norm.weight", {D});
    }
    out_proj.load(p, name + ".out_proj", H, H, true, Quantize::kInt8);
  }
};

// MoEBlock (moe_layers.py): a softmax gate over the routed experts, top-k without
// renormalization, plus a shared expert every token goes through.
struct MoE {
  Tensor gate;  // [E, H], kept float32 whatever the storage: routing must not flip under bf16
  std::vector<FeedForward> experts;
  FeedForward shared;
  int top_k = 2;
  void load(ParamSource& p, const std::string& name, const DiT21Config& c) {
    const i64 H = c.hidden_size, M = c.ffn_hidden();
    gate = p.take(name + ".gate.weight", {c.num_experts, H});
    experts.resize(static_cast<std::size_t>(c.num_experts));
    for (int e = 0; e < c.num_experts; ++e)
      experts[static_cast<std::size_t>(e)].load(p, name + ".experts." + std::to_string(e), H, M);
    shared.load(p, name + ".shared_experts", H, M);
    top_k = c.moe_top_k;
  }
};

struct Block {
  LayerNorm norm1, norm2, norm3;
  SelfAttention attn1;
  CrossAttention attn2;
  bool skip = false;
  Linear skip_linear;  // 2H -> H over [skip | x]
  LayerNorm skip_norm;
  bool use_moe = false;
  Linear fc1, fc2;  // MLP: H -> 4H (GELU erf) -> H
  MoE moe;
  void load(ParamSource& p, const std::string& name, const DiT21Config& c, int index) {
    const i64 H = c.hidden_size, M = c.ffn_hidden();
    norm1.load(p, name + ".norm1", H, kEps);
    attn1.load(p, name + ".attn1", c);
    norm2.load(p, name + ".norm2", H, kEps);
    attn2.load(p, name + ".attn2", c);
    norm3.load(p, name + ".norm3", H, kEps);
    skip = c.has_skip(index);
    if (skip) {
      skip_norm.load(p, name + ".skip_norm", H, kEps);
      skip_linear.load(p, name + ".skip_linear", 2 * H, H, true, Quantize::kInt8);
    }
    use_moe = c.uses_moe(index);
    if (use_moe) {
      moe.load(p, name + ".moe", c);
    } else {
      fc1.load(p, name + ".mlp.fc1", H, M, true, Quantize::kInt8);
      fc2.load(p, name + ".mlp.fc2", M, H, true, Quantize::kInt8);
    }
  }
};

// Rows [r0, r0 + n) of each batch item of a [B, T, ld] buffer, columns [c0, c0 + w).
Tensor gather_rows(const float* base, i64 B, i64 T, i64 ld, i64 r0, i64 n, i64 c0, i64 w) {
  Tensor out({B, n, w});
  for (i64 b = 0; b < B; ++b)
    for (i64 t = 0; t < n; ++t)
      std::copy_n(base + (b * T + t + r0) * ld + c0, w, out.data() + (b * n + t) * w);
  return out;
}

// Head n of token t at base[(b * T + t) * ld + col0 + n * head_stride], D wide, as
// [B, heads, T, D] (heads_first) or [B, T, heads, D].
Tensor gather_heads(const float* base, i64 B, i64 T, i64 ld, i64 col0, i64 heads, i64 head_stride,
                    i64 D, bool heads_first) {
  Tensor out(heads_first ? Shape{B, heads, T, D} : Shape{B, T, heads, D});
  for (i64 b = 0; b < B; ++b)
    for (i64 n = 0; n < heads; ++n)
      for (i64 t = 0; t < T; ++t)
        std::copy_n(base + (b * T + t) * ld + col0 + n * head_stride, D,
                    out.data() + (heads_first ? ((b * heads + n) * T + t) * D
                                              : ((b * T + t) * heads + n) * D));
  return out;
}

}  // namespace

struct HunyuanDiTPlain::Impl {
  DiT21Config cfg;
  std::vector<float> freqs;  // [H / 2] sinusoid frequencies
  i64 params = 0;
  std::size_t bytes = 0;

  Linear x_embedder;      // in_channels -> H
  Linear t_mlp0, t_mlp2;  // t_embedder.mlp.0 (H -> 4H), .2 (4H -> H)
  Linear t_cond_proj;     // t_embedder.cond_proj (guidance_cond_proj_dim -> 4H): loaded, unused
  std::vector<Block> blocks;
  LayerNorm norm_final;
  Linear final_linear;  // H -> in_channels

  mutable std::atomic<i64> moe_tokens{0}, moe_routed{0}, moe_dense{0};

  void load(ParamSource& p) {
    const i64 H = cfg.hidden_size;
    x_embedder.load(p, "x_embedder", cfg.in_channels, H, true);
    t_mlp0.load(p, "t_embedder.mlp.0", H, 4 * H, true);
    t_mlp2.load(p, "t_embedder.mlp.2", 4 * H, H, true);
    if (cfg.guidance_cond_proj_dim > 0)
      t_cond_proj.load(p, "t_embedder.cond_proj", cfg.guidance_cond_proj_dim, 4 * H, false);
    blocks.resize(static_cast<std::size_t>(cfg.depth));
    for (int i = 0; i < cfg.depth; ++i)
      blocks[static_cast<std::size_t>(i)].load(p, "blocks." + std::to_string(i), cfg, i);
    norm_final.load(p, "final_layer.norm_final", H, kEps);
    final_linear.load(p, "final_layer.linear", H, cfg.in_channels, true);
    params = p.parameters();
    bytes = p.bytes();
  }

  // Timesteps(H) (hunyuandit.py): exponent_i = float32(-ln 10000) * i / (H / 2), in float32 as
  // torch computes it from a float32 arange.
  void init_freqs() {
    const i64 half = cfg.hidden_size / 2;
    const float neg_log_period = static_cast<float>(-std::log(10000.0));
    freqs.resize(static_cast<std::size_t>(half));
    for (i64 i = 0; i < half; ++i) {
      const float a = static_cast<float>(i) * neg_log_period / static_cast<float>(half);
      freqs[static_cast<std::size_t>(i)] = static_cast<float>(std::exp(static_cast<double>(a)));
    }
  }

  // [B] -> [B, H] = [sin(t f) | cos(t f)]: sine first and t unscaled, unlike 2.0's embedding.
  Tensor embed(const float* t, i64 B) const {
    const i64 H = cfg.hidden_size, half = H / 2;
    Tensor e({B, H});
    for (i64 b = 0; b < B; ++b)
      for (i64 i = 0; i < half; ++i) {
        const float a = t[b] * freqs[static_cast<std::size_t>(i)];  // float32 product
        e.data()[b * H + i] = static_cast<float>(std::sin(static_cast<double>(a)));
        e.data()[b * H + half + i] = static_cast<float>(std::cos(static_cast<double>(a)));
      }
    return e;
  }
};

// The working state of one forward call: the residual stream X [B, T = L + 1, H] (the time token
// first), the long-skip stack and scratch buffers.
class HunyuanDiTPlain::Pass final : public DiTPass {
 public:
  Pass(const Impl& m, const Tensor& x, const Tensor& t, const Tensor& context,
       const TraceFn* trace);

  int num_blocks() const override { return static_cast<int>(m_.blocks.size()); }
  Tensor image_rows() const override { return gather_rows(X.data(), B, T, H, 1, L, 0, H); }
  void set_image_rows(const Tensor& h) override;
  Tensor block0_modulated_input() override;
  void run_blocks(int begin, int end, BranchHook* hook) override;
  Tensor output() override;

 private:
  void tr(const std::string& name, const Tensor& v) const {
    if (trace_) (*trace_)(name, v);
  }
  void block(int index, BranchHook* hook);
  void self_attention(const Block& blk, const std::string& pre);
  void cross_attention(const Block& blk, const std::string& pre);
  void ffn(const Block& blk, const std::string& pre);
  void moe(const MoE& moe, const std::string& pre);
  // X += the branch in P, after telling the hook.
  void add_branch(int index, Branch branch, BranchHook* hook);

  const Impl& m_;
  const Tensor& context_;
  const TraceFn* trace_;
  i64 B, L, Lc, T, H, nh, D, M, N;  // N = B * T rows
  int next_block_ = 0;
  std::vector<Tensor> skips_;  // outputs of blocks 0 .. depth/2 - 1, popped LIFO
  Tensor X;                    // [B, T, H]
  Tensor XN, QKV, ATT, P, KV, HID;
};

HunyuanDiTPlain::Pass::Pass(const Impl& m, const Tensor& x, const Tensor& t, const Tensor& context,
                            const TraceFn* trace)
    : m_(m), context_(context), trace_(trace) {
  const DiT21Config& cfg = m.cfg;
  nn::check_shape(x, "HunyuanDiTPlain::forward", "x", {-1, -1, cfg.in_channels});
  B = x.dim(0);
  L = x.dim(1);
  nn::check_shape(t, "HunyuanDiTPlain::forward", "t", {B});
  nn::check_shape(context, "HunyuanDiTPlain::forward", "context", {B, -1, cfg.context_dim});
  Lc = context.dim(1);
  T = L + 1;
  H = cfg.hidden_size;
  nh = cfg.num_heads;
  D = cfg.head_dim();
  M = cfg.ffn_hidden();
  N = B * T;

  X = Tensor({B, T, H});
  // Time token: t_embedder(t) = mlp(Timesteps(t)) [B, 1, H] into row 0.
  {
    const Tensor emb = m.embed(t.data(), B);  // [B, H]
    tr("act.t_embedder.time_embed", emb);
    Tensor h1({B, 4 * H});                              // [B, 4H]
    m.t_mlp0(h1.data(), emb.data(), B, Act::kGeluErf);  // [B, 4H]
    for (i64 b = 0; b < B; ++b)
      m.t_mlp2(X.data() + b * T * H, H, h1.data() + b * 4 * H, 4 * H, 1);  // [1, H]
    if (trace_) tr("act.t_embedder", gather_rows(X.data(), B, T, H, 0, 1, 0, H));
  }
  for (i64 b = 0; b < B; ++b)
    m.x_embedder(X.data() + (b * T + 1) * H, H, x.data() + b * L * cfg.in_channels, cfg.in_channels,
                 L);  // [L, H]
  if (trace_) tr("act.x_embedder", image_rows());

  XN = Tensor({N, H});                         // [N, H] normed input
  QKV = Tensor({N, 3 * H});                    // [N, 3H] self-attention q|k|v, or q
  ATT = Tensor({N, H});                        // [N, H] attention output
  P = Tensor({B, T, H});                       // [N, H] branch output
  KV = Tensor({B * Lc, 2 * H});                // [B, Lc, 2H] cross-attention k|v
  HID = Tensor({N, std::max<i64>(M, 2 * H)});  // [N, 4H] FFN hidden; [N, 2H] skip concat
}

void HunyuanDiTPlain::Pass::set_image_rows(const Tensor& h) {
  nn::check_shape(h, "HunyuanDiTPlain::forward", "image rows", {B, L, H});
  for (i64 b = 0; b < B; ++b)
    std::copy_n(h.data() + b * L * H, L * H, X.data() + (b * T + 1) * H);  // [L, H]
}

Tensor HunyuanDiTPlain::Pass::block0_modulated_input() {
  if (m_.blocks.empty()) throw ModelError("HunyuanDiTPlain: no block to normalize for");
  Tensor m0({B, L, H});  // [B, L, H]
  for (i64 b = 0; b < B; ++b)
    m_.blocks[0].norm1(m0.data() + b * L * H, H, X.data() + (b * T + 1) * H, H, L);
  return m0;
}

void HunyuanDiTPlain::Pass::run_blocks(int begin, int end, BranchHook* hook) {
  // The long skips tie each block to the earlier ones: blocks run in order, once each.
  if (begin != next_block_ || end < begin || end > num_blocks())
    throw ModelError("HunyuanDiTPlain: blocks [" + std::to_string(begin) + ", " +
                     std::to_string(end) + ") asked for where block " +
                     std::to_string(next_block_) + " of " + std::to_string(num_blocks()) +
                     " is next");
  for (int i = begin; i < end; ++i) block(i, hook);
  next_block_ = end;
}

void HunyuanDiTPlain::Pass::add_branch(int index, Branch branch, BranchHook* hook) {
  if (hook) hook->computed({index, branch}, RowsView{P.data(), B, T, H, T * H});
  const i64 n = N * H;
  float* x = X.data();
  const float* p = P.data();
  tbb::parallel_for(tbb::blocked_range<i64>(0, n, 1 << 16), [&](const tbb::blocked_range<i64>& r) {
    for (i64 k = r.begin(); k < r.end(); ++k) x[k] += p[k];
  });
}

void HunyuanDiTPlain::Pass::block(int index, BranchHook* hook) {
  const Block& blk = m_.blocks[static_cast<std::size_t>(index)];
  const std::string pre = "blocks." + std::to_string(index);
  const int half = m_.cfg.depth / 2;
  if (blk.skip) {
    if (skips_.empty()) throw ModelError("HunyuanDiTPlain: " + pre + " has no skip to take");
    // x = skip_norm(skip_linear(cat([skip, x], -1)))
    const Tensor s = std::move(skips_.back());  // [B, T, H]
    skips_.pop_back();
    float* cat = HID.data();  // [N, 2H]
    for (i64 r = 0; r < N; ++r) {
      std::copy_n(s.data() + r * H, H, cat + r * 2 * H);
      std::copy_n(X.data() + r * H, H, cat + r * 2 * H + H);
    }
    blk.skip_linear(X.data(), cat, N);     // [N, H]
    blk.skip_norm(X.data(), X.data(), N);  // [N, H]
    tr("act." + pre + ".skip_norm", X);
  }
  if (hook && hook->predicting()) {
    for (Branch b : {Branch::kSelfAttn, Branch::kCrossAttn, Branch::kFfn}) {
      Tensor y({B, T, H});  // [B, T, H]
      hook->predict({index, b}, y);
      std::copy_n(y.data(), N * H, P.data());
      add_branch(index, b, nullptr);
    }
  } else {
    self_attention(blk, pre);
    add_branch(index, Branch::kSelfAttn, hook);
    cross_attention(blk, pre);
    add_branch(index, Branch::kCrossAttn, hook);
    ffn(blk, pre);
    add_branch(index, Branch::kFfn, hook);
  }
  if (index < half) skips_.push_back(X.clone());
  tr("act." + pre, X);
}

// P = attn1(norm1(X)). The reference concatenates [q | k | v] and views it as (heads, 3D): head
// n's q, k, v are columns [3nD, 3nD + D), [3nD + D, 3nD + 2D), [3nD + 2D, 3nD + 3D) of the
// concatenation (hunyuandit.py Attention.forward), so heads are read with a 3D stride.
void HunyuanDiTPlain::Pass::self_attention(const Block& blk, const std::string& pre) {
  const SelfAttention& a = blk.attn1;
  blk.norm1(XN.data(), X.data(), N);  // [N, H]
  a.qkv(QKV.data(), XN.data(), N);    // [N, 3H]
  const bool traced = trace_ && pre == "blocks.0";
  if (traced) {
    tr("trace.blocks.0.attn1.q_norm.in",
       gather_heads(QKV.data(), B, T, 3 * H, 0, nh, 3 * D, D, true));
    tr("trace.blocks.0.attn1.k_norm.in",
       gather_heads(QKV.data(), B, T, 3 * H, D, nh, 3 * D, D, true));
  }
  if (!a.q_norm.empty())
    kernels::qk_rmsnorm(QKV.data(), N, 3 * H, nh, D, 3 * D, 0, D, a.q_norm.data(), a.k_norm.data(),
                        kEps);  // [N, 3H]
  if (traced) {
    tr("trace.blocks.0.attn1.q_norm.out",
       gather_heads(QKV.data(), B, T, 3 * H, 0, nh, 3 * D, D, true));
    tr("trace.blocks.0.attn1.k_norm.out",
       gather_heads(QKV.data(), B, T, 3 * H, D, nh, 3 * D, D, true));
  }
  kernels::attention({ATT.data(), T * H, H, D}, {QKV.data(), T * 3 * H, 3 * H, 3 * D},
                     {QKV.data() + D, T * 3 * H, 3 * H, 3 * D},
                     {QKV.data() + 2 * D, T * 3 * H, 3 * H, 3 * D},
                     {B, nh, T, T, D, 0.0f, a.qkv.bf16()});  // [B, T, H]
  a.out_proj(P.data(), ATT.data(), N);                       // [N, H]
  tr("act." + pre + ".attn1", P);
}

// P = attn2(norm2(X), context). Keys and values: [k | v] viewed as (heads, 2D), head n's k and v
// at columns [2nD, 2nD + D) and [2nD + D, 2nD + 2D) (CrossAttention.forward); q is plain.
void HunyuanDiTPlain::Pass::cross_attention(const Block& blk, const std::string& pre) {
  const CrossAttention& a = blk.attn2;
  blk.norm2(XN.data(), X.data(), N);         // [N, H]
  float* Q = QKV.data();                     // [N, H]
  a.to_q(Q, XN.data(), N);                   // [N, H]
  a.kv(KV.data(), context_.data(), B * Lc);  // [B * Lc, 2H]
  const bool traced = trace_ && pre == "blocks.0";
  if (traced) {
    tr("trace.blocks.0.attn2.q_norm.in", gather_heads(Q, B, T, H, 0, nh, D, D, false));
    tr("trace.blocks.0.attn2.k_norm.in",
       gather_heads(KV.data(), B, Lc, 2 * H, 0, nh, 2 * D, D, false));
  }
  if (!a.q_norm.empty()) {
    kernels::rms_norm(Q, D, Q, D, N * nh, D, kEps, a.q_norm.data());  // [N, H]
    kernels::rms_norm(KV.data(), 2 * D, KV.data(), 2 * D, B * Lc * nh, D, kEps, a.k_norm.data());
  }
  if (traced) {
    tr("trace.blocks.0.attn2.q_norm.out", gather_heads(Q, B, T, H, 0, nh, D, D, false));
    tr("trace.blocks.0.attn2.k_norm.out",
       gather_heads(KV.data(), B, Lc, 2 * H, 0, nh, 2 * D, D, false));
  }
  kernels::attention({ATT.data(), T * H, H, D}, {Q, T * H, H, D},
                     {KV.data(), Lc * 2 * H, 2 * H, 2 * D},
                     {KV.data() + D, Lc * 2 * H, 2 * H, 2 * D},
                     {B, nh, T, Lc, D, 0.0f, a.kv.bf16()});  // [B, T, H]
  a.out_proj(P.data(), ATT.data(), N);                       // [N, H]
  tr("act." + pre + ".attn2", P);
}

void HunyuanDiTPlain::Pass::ffn(const Block& blk, const std::string& pre) {
  blk.norm3(XN.data(), X.data(), N);  // [N, H]
  if (blk.use_moe) {
    moe(blk.moe, "act." + pre + ".moe");
    return;
  }
  blk.fc1(HID.data(), XN.data(), N, Act::kGeluErf);  // [N, 4H]
  blk.fc2(P.data(), HID.data(), N);                  // [N, H]
  tr("act." + pre + ".mlp", P);
}

// P = sum over each token's top-k experts of score * expert(x) + shared(x). Only the rows routed
// to an expert go through it (gathered, run as one GEMM pair, scattered back), in expert order
// as moe_infer accumulates them.
void HunyuanDiTPlain::Pass::moe(const MoE& moe, const std::string& pre) {
  const i64 E = static_cast<i64>(moe.experts.size()), K = moe.top_k;
  // Gate in float32: logits [N, E] = XN gate^T, softmax.
  Tensor scores({N, E});
  kernels::linear(scores.data(), E, XN.data(), H, moe.gate.data(), nullptr, N, H, E);
  kernels::softmax_rows(scores.data(), N, E, E);
  tr(pre + ".gate.scores", scores);
  // Top-k by descending score (the lower index first on a tie).
  std::vector<std::int32_t> idx(static_cast<std::size_t>(N * K));
  std::vector<float> weight(static_cast<std::size_t>(N * K));
  std::vector<std::vector<i64>> rows_of(static_cast<std::size_t>(E));
  {
    std::vector<std::int32_t> order(static_cast<std::size_t>(E));
    for (i64 r = 0; r < N; ++r) {
      const float* s = scores.data() + r * E;
      for (i64 e = 0; e < E; ++e) order[static_cast<std::size_t>(e)] = static_cast<std::int32_t>(e);
      std::partial_sort(
          order.begin(), order.begin() + K, order.end(),
          [&](std::int32_t a, std::int32_t b) { return s[a] > s[b] || (s[a] == s[b] && a < b); });
      for (i64 k = 0; k < K; ++k) {
        const std::int32_t e = order[static_cast<std::size_t>(k)];
        idx[static_cast<std::size_t>(r * K + k)] = e;
        weight[static_cast<std::size_t>(r * K + k)] = s[e];
        rows_of[static_cast<std::size_t>(e)].push_back(r * K + k);  // routed slot
      }
    }
  }
  if (trace_) {
    Tensor ti({N, K}), tw({N, K});
    for (std::size_t i = 0; i < idx.size(); ++i) {
      ti.data()[i] = static_cast<float>(idx[i]);
      tw.data()[i] = weight[i];
    }
    tr(pre + ".gate.topk_idx", ti);
    tr(pre + ".gate.topk_weight", tw);
  }
  // Routed experts into P (zeroed), each over its gathered rows.
  std::fill_n(P.data(), N * H, 0.0f);
  Tensor G({N, H}), Y({B, T, H});  // gathered rows and their expert outputs [N, H]
  for (i64 e = 0; e < E; ++e) {
    const std::vector<i64>& slots = rows_of[static_cast<std::size_t>(e)];
    const i64 n = static_cast<i64>(slots.size());
    if (n == 0) continue;
    tbb::parallel_for(i64{0}, n, [&](i64 i) {
      std::copy_n(XN.data() + slots[static_cast<std::size_t>(i)] / K * H, H, G.data() + i * H);
    });
    moe.experts[static_cast<std::size_t>(e)](Y.data(), G.data(), n, HID.data());  // [n, H]
    // Each token appears once per expert: the rows written are distinct.
    tbb::parallel_for(i64{0}, n, [&](i64 i) {
      const i64 slot = slots[static_cast<std::size_t>(i)];
      const float w = weight[static_cast<std::size_t>(slot)];
      float* dst = P.data() + slot / K * H;
      const float* y = Y.data() + i * H;
      for (i64 c = 0; c < H; ++c) dst[c] += w * y[c];
    });
  }
  m_.moe_tokens += N;
  m_.moe_routed += N * K;
  m_.moe_dense += N * E;
  // Shared expert over every row, added last (y = y + shared_experts(identity)).
  moe.shared(Y.data(), XN.data(), N, HID.data());  // [N, H]
  tr(pre + ".shared_experts", Y);
  tbb::parallel_for(tbb::blocked_range<i64>(0, N * H, 1 << 16),
                    [&](const tbb::blocked_range<i64>& r) {
                      for (i64 k = r.begin(); k < r.end(); ++k) P.data()[k] += Y.data()[k];
                    });
  tr(pre, P);
}

Tensor HunyuanDiTPlain::Pass::output() {
  const i64 C = m_.cfg.in_channels;
  m_.norm_final(XN.data(), X.data(), N);  // [N, H]
  if (trace_) tr("act.final_layer.norm_final", gather_rows(XN.data(), B, T, H, 0, T, 0, H));
  Tensor out({B, L, C});  // [B, L, C]: the time token dropped
  for (i64 b = 0; b < B; ++b)
    m_.final_linear(out.data() + b * L * C, C, XN.data() + (b * T + 1) * H, H, L);  // [L, C]
  tr("act.final_layer", out);
  tr("out", out);
  return out;
}

HunyuanDiTPlain::HunyuanDiTPlain(std::unique_ptr<Impl> impl) : impl_(std::move(impl)) {}
HunyuanDiTPlain::HunyuanDiTPlain(HunyuanDiTPlain&&) noexcept = default;
HunyuanDiTPlain& HunyuanDiTPlain::operator=(HunyuanDiTPlain&&) noexcept = default;
HunyuanDiTPlain::~HunyuanDiTPlain() = default;

HunyuanDiTPlain HunyuanDiTPlain::load(const DiT21Config& config, WeightMap& weights, Options opt) {
  config.validate();
  auto impl = std::make_unique<Impl>();
  impl->cfg = config;
  impl->init_freqs();
  nn::CheckpointParams params(weights, opt.storage);
  impl->load(params);
  weights.finish("HunyuanDiTPlain");
  spdlog::info("HunyuanDiTPlain: loaded {} parameters from {} ({} MiB in memory)", impl->params,
               weights.file().path(), impl->bytes >> 20);
  return HunyuanDiTPlain(std::move(impl));
}

std::vector<std::pair<std::string, Shape>> HunyuanDiTPlain::expected_tensors(
    const DiT21Config& config) {
  config.validate();
  Impl impl;
  impl.cfg = config;
  nn::ShapeRecorder recorder;
  impl.load(recorder);
  return std::move(recorder.list);
}

HunyuanDiTPlain HunyuanDiTPlain::random(const DiT21Config& config, std::uint64_t seed,
                                        Options opt) {
  config.validate();
  auto impl = std::make_unique<Impl>();
  impl->cfg = config;
  impl->init_freqs();
  std::mt19937_64 rng(seed);
  // The golden set's recipe: Linear W ~ N(0, 1/fan_in), biases N(0, 0.1^2), norm weights
  // 1 + N(0, 0.15^2), the MoE gate N(0, 9/fan_in) (routing margins of order 1e-2, like trained
  // gates rather than a near-uniform split).
  nn::RandomParams params(
      [&](const std::string& name, Tensor& t) {
        double mean = 0.0, stddev = 0.1;
        if (name.ends_with(".weight") && t.rank() == 1) {
          mean = 1.0;
          stddev = 0.15;
        } else if (name.ends_with(".weight")) {
          const bool gate = name.ends_with(".gate.weight");
          stddev = (gate ? 3.0 : 1.0) / std::sqrt(static_cast<double>(t.dim(1)));
        }
        std::normal_distribution<float> dist(static_cast<float>(mean), static_cast<float>(stddev));
        for (auto& v : t.span()) v = dist(rng);
      },
      opt.storage);
  impl->load(params);
  return HunyuanDiTPlain(std::move(impl));
}

const DiT21Config& HunyuanDiTPlain::config() const {
  return impl_->cfg;
}
std::int64_t HunyuanDiTPlain::num_parameters() const {
  return impl_->params;
}
std::size_t HunyuanDiTPlain::weight_bytes() const {
  return impl_->bytes;
}
MoEUsage HunyuanDiTPlain::moe_usage() const {
  return {impl_->moe_tokens.load(), impl_->moe_routed.load(), impl_->moe_dense.load()};
}

Tensor HunyuanDiTPlain::forward(const Tensor& x, const Tensor& t, const Tensor& context,
                                const TraceFn* trace) const {
  Pass pass(*impl_, x, t, context, trace);
  pass.run_blocks(0, pass.num_blocks(), nullptr);
  return pass.output();
}

std::unique_ptr<DiTPass> HunyuanDiTPlain::begin_pass(const Tensor& x, const Tensor& t,
                                                     const Tensor& context,
                                                     const Tensor* guidance) const {
  if (guidance)
    throw ModelError("HunyuanDiTPlain has no guidance embedding: guidance runs as CFG rows");
  return std::make_unique<Pass>(*impl_, x, t, context, nullptr);
}

}  // namespace gen3d::models
