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
#include "models/nn/device_ops.h"
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

// A per-head RMSNorm (torch RMSNorm(D, eps, elementwise_affine) with its weight named .weight).
nn::RMSNorm head_norm(ParamSource& p, const std::string& weight_name, i64 D) {
  nn::RMSNorm n;
  n.scale = p.take(weight_name, {D});
  n.dim = D;
  n.eps = kEps;
  return n;
}

// diffusers FeedForward(dim, activation_fn="gelu"): net.0.proj (H -> 4H), GELU(erf), net.2.
struct FeedForward {
  Linear proj, out;
  void load(ParamSource& p, const std::string& name, i64 H, i64 hidden) {
    proj.load(p, name + ".net.0.proj", H, hidden, true, Quantize::kInt8);
    out.load(p, name + ".net.2", hidden, H, true, Quantize::kInt8);
  }
  // y[rows, H] = net(x[rows, H]) on k's device; hid is scratch [rows, hidden] there.
  void operator()(const nn::DeviceOps& k, float* y, const float* x, i64 rows, float* hid) const {
    k.linear(proj, hid, proj.out, x, proj.in, rows, Act::kGeluErf);  // [rows, 4H]
    k.linear(out, y, out.out, hid, out.in, rows);                    // [rows, H]
  }
};

// Self-attention `attn1`: to_q/to_k/to_v fused, per-head RMS norms, out_proj.
struct SelfAttention {
  Linear qkv;  // H -> 3H, columns [q | k | v]
  nn::RMSNorm q_norm, k_norm;
  Linear out_proj;
  void load(ParamSource& p, const std::string& name, const DiT21Config& c) {
    const i64 H = c.hidden_size, D = c.head_dim();
    qkv = fused_projection(p, name, {"to_q", "to_k", "to_v"}, H, H, c.qkv_bias);
    if (c.qk_norm) {
      q_norm = head_norm(p, name + ".q_norm.weight", D);
      k_norm = head_norm(p, name + ".k_norm.weight", D);
    }
    out_proj.load(p, name + ".out_proj", H, H, true, Quantize::kInt8);
  }
};

// Cross-attention `attn2`: queries from the tokens, keys and values from the condition.
struct CrossAttention {
  Linear to_q;  // H -> H
  Linear kv;    // context_dim -> 2H, columns [k | v]
  nn::RMSNorm q_norm, k_norm;
  Linear out_proj;
  void load(ParamSource& p, const std::string& name, const DiT21Config& c) {
    const i64 H = c.hidden_size, D = c.head_dim();
    to_q.load(p, name + ".to_q", H, H, c.qkv_bias, Quantize::kInt8);
    kv = fused_projection(p, name, {"to_k", "to_v"}, c.context_dim, H, c.qkv_bias);
    if (c.qk_norm) {
      q_norm = head_norm(p, name + ".q_norm.weight", D);
      k_norm = head_norm(p, name + ".k_norm.weight", D);
    }
    out_proj.load(p, name + ".out_proj", H, H, true, Quantize::kInt8);
  }
};

// MoEBlock (moe_layers.py): a softmax gate over the routed experts, top-k without
// renormalization, plus a shared expert every token goes through.
struct MoE {
  Tensor gate;  // [E, H], kept float32 whatever the storage: routing must not flip under bf16
  nn::DeviceCopy gate_copy;
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

// The device backends run bf16 layers: int8 weights are a CPU form.
void check_options(const DiT21Options& opt) {
  if (opt.device != Device::kCpu && opt.storage == WeightStorage::kInt8)
    throw ModelError(std::string("HunyuanDiTPlain: int8 weights run on the CPU only, not on ") +
                     device_name(opt.device));
}

}  // namespace

struct HunyuanDiTPlain::Impl {
  DiT21Config cfg;
  Device device = Device::kCpu;  // where forward passes run
  std::vector<float> freqs;      // [H / 2] sinusoid frequencies
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
// first), the long-skip stack and scratch buffers, all on the device the pass runs on (inputs are
// copied there; the output, the router's scores and traced values come back to the host).
class HunyuanDiTPlain::Pass final : public DiTPass {
 public:
  Pass(const Impl& m, const Tensor& x, const Tensor& t, const Tensor& context,
       const TraceFn* trace);

  int num_blocks() const override { return static_cast<int>(m_.blocks.size()); }
  Tensor image_rows() const override { return gather_rows(host(X).data(), B, T, H, 1, L, 0, H); }
  void set_image_rows(const Tensor& h) override;
  Tensor block0_modulated_input() override;
  void run_blocks(int begin, int end, BranchHook* hook) override;
  Tensor output() override;

 private:
  void tr(const std::string& name, const Tensor& v) const {
    if (trace_) (*trace_)(name, v.device() == Device::kCpu ? v : v.to(Device::kCpu));
  }
  Tensor buf(const Shape& s) const { return Tensor(s, k_.device()); }
  Tensor on_device(const Tensor& t) const { return t.on(k_.device()); }
  static Tensor host(const Tensor& t) { return t.on(Device::kCpu); }
  // `t` as an owning host tensor (moved when it is on the host already).
  static Tensor to_host(Tensor t) {
    return t.device() == Device::kCpu ? std::move(t) : t.to(Device::kCpu);
  }
  void block(int index, BranchHook* hook);
  void self_attention(const Block& blk, const std::string& pre);
  void cross_attention(const Block& blk, const std::string& pre);
  void ffn(const Block& blk, const std::string& pre);
  void moe(const MoE& moe, const std::string& pre);
  // X += the branch in P, after telling the hook.
  void add_branch(int index, Branch branch, BranchHook* hook);

  const Impl& m_;
  const nn::DeviceOps& k_;
  Tensor context_;  // on the device
  const TraceFn* trace_;
  i64 B, L, Lc, T, H, nh, D, M, N;  // N = B * T rows
  int next_block_ = 0;
  std::vector<Tensor> skips_;  // outputs of blocks 0 .. depth/2 - 1, popped LIFO
  Tensor X;                    // [B, T, H]
  Tensor XN, QKV, ATT, P, KV, HID;
};

HunyuanDiTPlain::Pass::Pass(const Impl& m, const Tensor& x, const Tensor& t, const Tensor& context,
                            const TraceFn* trace)
    : m_(m), k_(nn::device_ops(m.device)), trace_(trace) {
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
  context_ = on_device(context);

  X = buf({B, T, H});
  // Time token: t_embedder(t) = mlp(Timesteps(t)) [B, 1, H] into row 0.
  {
    const Tensor emb = m.embed(host(t).data(), B);  // [B, H] (host)
    tr("act.t_embedder.time_embed", emb);
    const Tensor emb_d = on_device(emb);
    Tensor h1 = buf({B, 4 * H});                                               // [B, 4H]
    k_.linear(m.t_mlp0, h1.data(), 4 * H, emb_d.data(), H, B, Act::kGeluErf);  // [B, 4H]
    for (i64 b = 0; b < B; ++b)
      k_.linear(m.t_mlp2, X.data() + b * T * H, H, h1.data() + b * 4 * H, 4 * H, 1);  // [1, H]
    if (trace_) tr("act.t_embedder", gather_rows(host(X).data(), B, T, H, 0, 1, 0, H));
  }
  const Tensor xd = on_device(x);
  for (i64 b = 0; b < B; ++b)
    k_.linear(m.x_embedder, X.data() + (b * T + 1) * H, H, xd.data() + b * L * cfg.in_channels,
              cfg.in_channels, L);  // [L, H]
  if (trace_) tr("act.x_embedder", image_rows());

  XN = buf({N, H});                         // [N, H] normed input
  QKV = buf({N, 3 * H});                    // [N, 3H] self-attention q|k|v, or q
  ATT = buf({N, H});                        // [N, H] attention output
  P = buf({B, T, H});                       // [N, H] branch output
  KV = buf({B * Lc, 2 * H});                // [B, Lc, 2H] cross-attention k|v
  HID = buf({N, std::max<i64>(M, 2 * H)});  // [N, 4H] FFN hidden; [N, 2H] skip concat
}

void HunyuanDiTPlain::Pass::set_image_rows(const Tensor& h) {
  nn::check_shape(h, "HunyuanDiTPlain::forward", "image rows", {B, L, H});
  const Tensor hd = on_device(h);
  for (i64 b = 0; b < B; ++b)
    k_.copy_rows(X.data() + (b * T + 1) * H, H, hd.data() + b * L * H, H, L, H);  // [L, H]
}

Tensor HunyuanDiTPlain::Pass::block0_modulated_input() {
  if (m_.blocks.empty()) throw ModelError("HunyuanDiTPlain: no block to normalize for");
  Tensor m0 = buf({B, L, H});  // [B, L, H]
  for (i64 b = 0; b < B; ++b)
    k_.layer_norm(m_.blocks[0].norm1, m0.data() + b * L * H, H, X.data() + (b * T + 1) * H, H, L);
  return to_host(std::move(m0));
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
  if (hook) {
    const Tensor p = host(P);
    hook->computed({index, branch}, RowsView{p.data(), B, T, H, T * H});
  }
  k_.add(X.data(), P.data(), N * H);
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
    float* cat = HID.data();                                    // [N, 2H]
    k_.copy_rows(cat, 2 * H, s.data(), H, N, H);                // [N, H] left half
    k_.copy_rows(cat + H, 2 * H, X.data(), H, N, H);            // [N, H] right half
    k_.linear(blk.skip_linear, X.data(), H, cat, 2 * H, N);     // [N, H]
    k_.layer_norm(blk.skip_norm, X.data(), H, X.data(), H, N);  // [N, H]
    tr("act." + pre + ".skip_norm", X);
  }
  if (hook && hook->predicting()) {
    for (Branch b : {Branch::kSelfAttn, Branch::kCrossAttn, Branch::kFfn}) {
      Tensor y({B, T, H});  // [B, T, H] (host)
      hook->predict({index, b}, y);
      const Tensor yd = on_device(y);
      k_.add(X.data(), yd.data(), N * H);
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
  k_.layer_norm(blk.norm1, XN.data(), H, X.data(), H, N);  // [N, H]
  k_.linear(a.qkv, QKV.data(), 3 * H, XN.data(), H, N);    // [N, 3H]
  const bool traced = trace_ && pre == "blocks.0";
  if (traced) {
    const Tensor qkv = host(QKV);
    tr("trace.blocks.0.attn1.q_norm.in",
       gather_heads(qkv.data(), B, T, 3 * H, 0, nh, 3 * D, D, true));
    tr("trace.blocks.0.attn1.k_norm.in",
       gather_heads(qkv.data(), B, T, 3 * H, D, nh, 3 * D, D, true));
  }
  if (!a.q_norm.scale.empty())
    k_.qk_rmsnorm(QKV.data(), N, 3 * H, nh, D, 3 * D, 0, D, a.q_norm, a.k_norm);  // [N, 3H]
  if (traced) {
    const Tensor qkv = host(QKV);
    tr("trace.blocks.0.attn1.q_norm.out",
       gather_heads(qkv.data(), B, T, 3 * H, 0, nh, 3 * D, D, true));
    tr("trace.blocks.0.attn1.k_norm.out",
       gather_heads(qkv.data(), B, T, 3 * H, D, nh, 3 * D, D, true));
  }
  k_.attention({ATT.data(), T * H, H, D}, {QKV.data(), T * 3 * H, 3 * H, 3 * D},
               {QKV.data() + D, T * 3 * H, 3 * H, 3 * D},
               {QKV.data() + 2 * D, T * 3 * H, 3 * H, 3 * D},
               {B, nh, T, T, D, 0.0f, a.qkv.bf16()});    // [B, T, H]
  k_.linear(a.out_proj, P.data(), H, ATT.data(), H, N);  // [N, H]
  tr("act." + pre + ".attn1", P);
}

// P = attn2(norm2(X), context). Keys and values: [k | v] viewed as (heads, 2D), head n's k and v
// at columns [2nD, 2nD + D) and [2nD + D, 2nD + 2D) (CrossAttention.forward); q is plain.
void HunyuanDiTPlain::Pass::cross_attention(const Block& blk, const std::string& pre) {
  const CrossAttention& a = blk.attn2;
  const i64 Cc = m_.cfg.context_dim;
  k_.layer_norm(blk.norm2, XN.data(), H, X.data(), H, N);          // [N, H]
  float* Q = QKV.data();                                           // [N, H]
  k_.linear(a.to_q, Q, H, XN.data(), H, N);                        // [N, H]
  k_.linear(a.kv, KV.data(), 2 * H, context_.data(), Cc, B * Lc);  // [B * Lc, 2H]
  const bool traced = trace_ && pre == "blocks.0";
  if (traced) {
    const Tensor q = host(Tensor::view(Q, {N, H}, k_.device())), kv = host(KV);
    tr("trace.blocks.0.attn2.q_norm.in", gather_heads(q.data(), B, T, H, 0, nh, D, D, false));
    tr("trace.blocks.0.attn2.k_norm.in",
       gather_heads(kv.data(), B, Lc, 2 * H, 0, nh, 2 * D, D, false));
  }
  if (!a.q_norm.scale.empty()) {
    k_.rms_norm(a.q_norm, Q, D, Q, D, N * nh);                               // [N, H]
    k_.rms_norm(a.k_norm, KV.data(), 2 * D, KV.data(), 2 * D, B * Lc * nh);  // k halves
  }
  if (traced) {
    const Tensor q = host(Tensor::view(Q, {N, H}, k_.device())), kv = host(KV);
    tr("trace.blocks.0.attn2.q_norm.out", gather_heads(q.data(), B, T, H, 0, nh, D, D, false));
    tr("trace.blocks.0.attn2.k_norm.out",
       gather_heads(kv.data(), B, Lc, 2 * H, 0, nh, 2 * D, D, false));
  }
  k_.attention({ATT.data(), T * H, H, D}, {Q, T * H, H, D}, {KV.data(), Lc * 2 * H, 2 * H, 2 * D},
               {KV.data() + D, Lc * 2 * H, 2 * H, 2 * D},
               {B, nh, T, Lc, D, 0.0f, a.kv.bf16()});    // [B, T, H]
  k_.linear(a.out_proj, P.data(), H, ATT.data(), H, N);  // [N, H]
  tr("act." + pre + ".attn2", P);
}

void HunyuanDiTPlain::Pass::ffn(const Block& blk, const std::string& pre) {
  k_.layer_norm(blk.norm3, XN.data(), H, X.data(), H, N);  // [N, H]
  if (blk.use_moe) {
    moe(blk.moe, "act." + pre + ".moe");
    return;
  }
  k_.linear(blk.fc1, HID.data(), M, XN.data(), H, N, Act::kGeluErf);  // [N, 4H]
  k_.linear(blk.fc2, P.data(), H, HID.data(), M, N);                  // [N, H]
  tr("act." + pre + ".mlp", P);
}

// P = sum over each token's top-k experts of score * expert(x) + shared(x). Only the rows routed
// to an expert go through it (gathered, run as one GEMM pair, scattered back), in expert order
// as moe_infer accumulates them. The gate's scores come to the host, which picks the routes.
void HunyuanDiTPlain::Pass::moe(const MoE& moe, const std::string& pre) {
  const i64 E = static_cast<i64>(moe.experts.size()), K = moe.top_k;
  // Gate in float32: logits [N, E] = XN gate^T, softmax.
  Tensor logits = buf({N, E});
  k_.linear_f32(logits.data(), E, XN.data(), H, N, moe.gate, moe.gate_copy);
  Tensor scores = to_host(std::move(logits));  // [N, E]
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
  k_.zero(P.data(), N * H);
  Tensor G = buf({N, H}), Y = buf({B, T, H});  // gathered rows and their expert outputs [N, H]
  std::vector<i64> token;                      // the routed rows' tokens
  std::vector<float> token_weight;             // and their gate scores
  for (i64 e = 0; e < E; ++e) {
    const std::vector<i64>& slots = rows_of[static_cast<std::size_t>(e)];
    const i64 n = static_cast<i64>(slots.size());
    if (n == 0) continue;
    token.resize(slots.size());
    token_weight.resize(slots.size());
    for (std::size_t i = 0; i < slots.size(); ++i) {
      token[i] = slots[i] / K;
      token_weight[i] = weight[static_cast<std::size_t>(slots[i])];
    }
    k_.gather_rows(G.data(), H, XN.data(), H, token.data(), n, H);                    // [n, H]
    moe.experts[static_cast<std::size_t>(e)](k_, Y.data(), G.data(), n, HID.data());  // [n, H]
    // Each token appears once per expert: the rows written are distinct.
    k_.scatter_add_rows(P.data(), H, Y.data(), H, token.data(), token_weight.data(), n, H);
  }
  m_.moe_tokens += N;
  m_.moe_routed += N * K;
  m_.moe_dense += N * E;
  // Shared expert over every row, added last (y = y + shared_experts(identity)).
  moe.shared(k_, Y.data(), XN.data(), N, HID.data());  // [N, H]
  tr(pre + ".shared_experts", Y);
  k_.add(P.data(), Y.data(), N * H);
  tr(pre, P);
}

Tensor HunyuanDiTPlain::Pass::output() {
  const i64 C = m_.cfg.in_channels;
  k_.layer_norm(m_.norm_final, XN.data(), H, X.data(), H, N);  // [N, H]
  if (trace_) tr("act.final_layer.norm_final", gather_rows(host(XN).data(), B, T, H, 0, T, 0, H));
  Tensor out = buf({B, L, C});  // [B, L, C]: the time token dropped
  for (i64 b = 0; b < B; ++b)
    k_.linear(m_.final_linear, out.data() + b * L * C, C, XN.data() + (b * T + 1) * H, H,
              L);  // [L, C]
  Tensor host_out = to_host(std::move(out));
  tr("act.final_layer", host_out);
  tr("out", host_out);
  return host_out;
}

HunyuanDiTPlain::HunyuanDiTPlain(std::unique_ptr<Impl> impl) : impl_(std::move(impl)) {}
HunyuanDiTPlain::HunyuanDiTPlain(HunyuanDiTPlain&&) noexcept = default;
HunyuanDiTPlain& HunyuanDiTPlain::operator=(HunyuanDiTPlain&&) noexcept = default;
HunyuanDiTPlain::~HunyuanDiTPlain() = default;

HunyuanDiTPlain HunyuanDiTPlain::load(const DiT21Config& config, WeightMap& weights, Options opt) {
  config.validate();
  check_options(opt);
  auto impl = std::make_unique<Impl>();
  impl->cfg = config;
  impl->device = opt.device;
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
  check_options(opt);
  auto impl = std::make_unique<Impl>();
  impl->cfg = config;
  impl->device = opt.device;
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
