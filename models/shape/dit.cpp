#include "models/shape/dit.h"

#include <spdlog/spdlog.h>
#include <algorithm>
#include <cmath>
#include <random>

#include "models/core/dtype.h"
#include "models/core/error.h"
#include "models/core/safetensors.h"
#include "models/kernels/activations.h"
#include "models/kernels/attention.h"
#include "models/kernels/fused.h"
#include "models/kernels/linear.h"
#include "models/nn/device_ops.h"
#include "models/nn/layers.h"
#include "models/shape/checkpoints.h"

namespace gen3d::models {

namespace {

using kernels::Act;
using i64 = std::int64_t;

constexpr float kNormEps = 1e-6f;  // LayerNorm (no affine) and RMSNorm eps
constexpr int kTimeEmbedDim = 256;

using nn::Linear;
using nn::ParamSource;
using nn::Quantize;
using nn::RMSNorm;

// QKNorm: RMSNorm over the head dim of q and of k.
struct QKNorm {
  RMSNorm query_norm, key_norm;
  void load(ParamSource& c, const std::string& name, i64 head_dim) {
    query_norm.load(c, name + ".query_norm", head_dim, kNormEps);
    key_norm.load(c, name + ".key_norm", head_dim, kNormEps);
  }
};

// SelfAttention(dim, heads, qkv_bias): qkv Linear (columns (3, heads, D)), QKNorm, proj. In int8
// mode qkv and proj run W8A8 (as do the MLPs and the single blocks' linear1 / linear2); the
// embedders, the modulations and the final layer stay bf16, and the attention products bf16.
struct SelfAttention {
  Linear qkv;
  QKNorm norm;
  Linear proj;
  void load(ParamSource& c, const std::string& name, i64 H, i64 D, bool qkv_bias) {
    qkv.load(c, name + ".qkv", H, 3 * H, qkv_bias, Quantize::kInt8);
    norm.load(c, name + ".norm", D);
    proj.load(c, name + ".proj", H, H, true, Quantize::kInt8);
  }
};

// Modulation(dim, double): lin(SiLU(vec)) -> chunks shift, scale, gate (x2 if double).
struct Modulation {
  Linear lin;
  void load(ParamSource& c, const std::string& name, i64 H, int multiplier) {
    lin.load(c, name + ".lin", H, multiplier * H, true);
  }
};

// nn.Sequential(Linear, GELU(tanh), Linear): members named after the Sequential indices.
struct Mlp {
  Linear fc0;  // "<name>.0"
  Linear fc2;  // "<name>.2"
  void load(ParamSource& c, const std::string& name, i64 H, i64 hidden) {
    fc0.load(c, name + ".0", H, hidden, true, Quantize::kInt8);
    fc2.load(c, name + ".2", hidden, H, true, Quantize::kInt8);
  }
};

// MLPEmbedder(in_dim, hidden): out_layer(SiLU(in_layer(x))).
struct MLPEmbedder {
  Linear in_layer, out_layer;
  void load(ParamSource& c, const std::string& name, i64 in_dim, i64 H) {
    in_layer.load(c, name + ".in_layer", in_dim, H, true);
    out_layer.load(c, name + ".out_layer", H, H, true);
  }
};

struct DoubleStreamBlock {
  Modulation img_mod, txt_mod;
  SelfAttention img_attn, txt_attn;
  Mlp img_mlp, txt_mlp;
  void load(ParamSource& c, const std::string& name, const DiTConfig& cfg) {
    const i64 H = cfg.hidden_size, D = cfg.head_dim(), M = cfg.mlp_hidden();
    img_mod.load(c, name + ".img_mod", H, 6);
    img_attn.load(c, name + ".img_attn", H, D, cfg.qkv_bias);
    img_mlp.load(c, name + ".img_mlp", H, M);
    txt_mod.load(c, name + ".txt_mod", H, 6);
    txt_attn.load(c, name + ".txt_attn", H, D, cfg.qkv_bias);
    txt_mlp.load(c, name + ".txt_mlp", H, M);
  }
};

struct SingleStreamBlock {
  Linear linear1;  // H -> 3H + mlp_hidden
  Linear linear2;  // H + mlp_hidden -> H
  QKNorm norm;
  Modulation modulation;
  void load(ParamSource& c, const std::string& name, const DiTConfig& cfg) {
    const i64 H = cfg.hidden_size, D = cfg.head_dim(), M = cfg.mlp_hidden();
    linear1.load(c, name + ".linear1", H, 3 * H + M, true, Quantize::kInt8);
    linear2.load(c, name + ".linear2", H + M, H, true, Quantize::kInt8);
    norm.load(c, name + ".norm", D);
    modulation.load(c, name + ".modulation", H, 3);
  }
};

struct LastLayer {
  Linear linear;              // H -> in_channels
  Linear adaLN_modulation_1;  // "adaLN_modulation.1": H -> 2H (shift, scale)
  void load(ParamSource& c, const std::string& name, i64 H, i64 out_channels) {
    linear.load(c, name + ".linear", H, out_channels, true);
    adaLN_modulation_1.load(c, name + ".adaLN_modulation.1", H, 2 * H, true);
  }
};

// Copies rows [r0, r0 + n) of each batch item out of a [B, T, ld] buffer (columns [c0, c0+w)).
Tensor gather_rows(const float* base, i64 B, i64 T, i64 ld, i64 r0, i64 n, i64 c0, i64 w) {
  Tensor out({B, n, w});
  for (i64 b = 0; b < B; ++b)
    for (i64 t = 0; t < n; ++t)
      std::copy_n(base + (b * T + r0 + t) * ld + c0, w, out.data() + (b * n + t) * w);
  return out;
}

// Heads of rows [r0, r0 + n) in packed rows as [B, heads, n, D] (the golden trace layout).
Tensor gather_heads(const float* base, i64 B, i64 T, i64 ld, i64 r0, i64 n, i64 col0, i64 heads,
                    i64 D) {
  Tensor out({B, heads, n, D});
  for (i64 b = 0; b < B; ++b)
    for (i64 h = 0; h < heads; ++h)
      for (i64 t = 0; t < n; ++t)
        std::copy_n(base + (b * T + r0 + t) * ld + col0 + h * D, D,
                    out.data() + ((b * heads + h) * n + t) * D);
  return out;
}

// The device backends run bf16 layers: int8 weights are a CPU form.
void check_options(const DiTOptions& opt) {
  if (opt.device != Device::kCpu && opt.storage == WeightStorage::kInt8)
    throw ModelError(std::string("Hunyuan3DDiT: int8 runs on the CPU only, not on ") +
                     device_name(opt.device));
}

}  // namespace

struct Hunyuan3DDiT::Impl {
  DiTConfig cfg;
  Device device = Device::kCpu;  // where forward passes run
  std::vector<float> freqs;      // [128] sinusoid frequencies
  i64 params = 0;
  std::size_t bytes = 0;

  Linear latent_in;     // in_channels -> H
  MLPEmbedder time_in;  // 256 -> H
  bool has_guidance = false;
  MLPEmbedder guidance_in;  // 256 -> H (guidance_embed only)
  Linear cond_in;           // context_in_dim -> H
  std::vector<DoubleStreamBlock> double_blocks;
  std::vector<SingleStreamBlock> single_blocks;
  LastLayer final_layer;

  void load(ParamSource& c) {
    const i64 H = cfg.hidden_size;
    latent_in.load(c, "latent_in", cfg.in_channels, H, true);
    time_in.load(c, "time_in", kTimeEmbedDim, H);
    has_guidance = cfg.guidance_embed;
    if (has_guidance) guidance_in.load(c, "guidance_in", kTimeEmbedDim, H);
    cond_in.load(c, "cond_in", cfg.context_in_dim, H, true);
    double_blocks.resize(static_cast<std::size_t>(cfg.depth));
    for (int i = 0; i < cfg.depth; ++i)
      double_blocks[static_cast<std::size_t>(i)].load(c, "double_blocks." + std::to_string(i), cfg);
    single_blocks.resize(static_cast<std::size_t>(cfg.depth_single_blocks));
    for (int i = 0; i < cfg.depth_single_blocks; ++i)
      single_blocks[static_cast<std::size_t>(i)].load(c, "single_blocks." + std::to_string(i), cfg);
    final_layer.load(c, "final_layer", H, cfg.in_channels);
    params = c.parameters();
    bytes = c.bytes();
  }

  // Mirrors the reference's float32 arithmetic: a_i = float32(float32(i * float32(-ln P)) / 128),
  // f_i = exp(a_i) rounded to float32 (P = time_factor, the effective max_period).
  void init_freqs() {
    const int half = kTimeEmbedDim / 2;
    const float neg_log_period = static_cast<float>(-std::log(cfg.time_factor));
    freqs.resize(static_cast<std::size_t>(half));
    for (int i = 0; i < half; ++i) {
      const float a = static_cast<float>(i) * neg_log_period / static_cast<float>(half);
      freqs[static_cast<std::size_t>(i)] = static_cast<float>(std::exp(static_cast<double>(a)));
    }
  }

  // [B] -> [B, 256]
  Tensor embed(const float* t, i64 B) const {
    const i64 half = kTimeEmbedDim / 2;
    Tensor e({B, kTimeEmbedDim});
    for (i64 b = 0; b < B; ++b) {
      const float tt = t[b] * 1000.0f;  // float32, like the reference
      for (i64 i = 0; i < half; ++i) {
        const float a = tt * freqs[static_cast<std::size_t>(i)];
        e.data()[b * kTimeEmbedDim + i] = static_cast<float>(std::cos(static_cast<double>(a)));
        e.data()[b * kTimeEmbedDim + half + i] =
            static_cast<float>(std::sin(static_cast<double>(a)));
      }
    }
    return e;
  }
};

// The working state of one forward call: the joint residual stream X [B, Lc + L, H] (context rows
// first), SiLU(vec) and scratch buffers, all on the device the pass runs on (inputs are copied
// there; the output comes back to the host). forward() runs every stage of it in order; step
// caches drive the stages themselves through the DiTPass interface.
class Hunyuan3DDiT::Pass final : public DiTPass {
 public:
  Pass(const Impl& m, const Tensor& x, const Tensor& t, const Tensor& context,
       const Tensor* guidance, const TraceFn* trace, bool eager_context);

  int num_blocks() const override {
    return static_cast<int>(m_.double_blocks.size() + m_.single_blocks.size());
  }
  Tensor image_rows() const override { return gather_rows(host(X).data(), B, T, H, Lc, L, 0, H); }
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
  void ensure_context();
  void double_block(std::size_t bi, BranchHook* hook);
  void single_block(std::size_t bi, BranchHook* hook);

  const Impl& m_;
  const nn::DeviceOps& k_;
  Tensor context_;  // on the device
  const TraceFn* trace_;
  i64 B, L, Lc, T, H, nh, D, M, W1, W2;
  bool have_context_ = false;
  Tensor vec, svec;        // [B, H]
  Tensor X;                // [B, T, H]
  Tensor XM, QKV, ATT, P;  // scratch (sizes below)
  Tensor HID;              // [rows, M]
};

Hunyuan3DDiT::Pass::Pass(const Impl& m, const Tensor& x, const Tensor& t, const Tensor& context,
                         const Tensor* guidance, const TraceFn* trace, bool eager_context)
    : m_(m), k_(nn::device_ops(m.device)), trace_(trace) {
  const DiTConfig& cfg = m.cfg;
  nn::check_shape(x, "Hunyuan3DDiT::forward", "x", {-1, -1, cfg.in_channels});
  B = x.dim(0);
  L = x.dim(1);
  nn::check_shape(t, "Hunyuan3DDiT::forward", "t", {B});
  nn::check_shape(context, "Hunyuan3DDiT::forward", "context", {B, -1, cfg.context_in_dim});
  if (m.has_guidance && !guidance)
    throw ModelError("Hunyuan3DDiT::forward: guidance_embed model needs a guidance tensor [B]");
  if (guidance) nn::check_shape(*guidance, "Hunyuan3DDiT::forward", "guidance", {B});
  Lc = context.dim(1);
  T = Lc + L;  // joint tokens, context first
  H = cfg.hidden_size;
  nh = cfg.num_heads;
  D = cfg.head_dim();
  M = cfg.mlp_hidden();
  W1 = 3 * H + M;  // single-block linear1 width
  W2 = H + M;      // single-block linear2 input width
  context_ = on_device(context);

  // Conditioning vector.
  const Tensor emb = m.embed(host(t).data(), B);  // [B, 256] (host)
  tr("act.timestep_freqs", emb);
  vec = buf({B, H});  // [B, H]
  {
    const Tensor emb_d = on_device(emb);
    Tensor h1 = buf({B, H});                                                      // [B, H]
    k_.linear(m.time_in.in_layer, h1.data(), H, emb_d.data(), kTimeEmbedDim, B);  // [B, H]
    tr("trace.time_in.in_layer.out", h1);
    k_.act_inplace(Act::kSilu, h1.data(), B * H);                    // [B, H]
    k_.linear(m.time_in.out_layer, vec.data(), H, h1.data(), H, B);  // [B, H]
    tr("trace.time_in.out_layer.out", vec);
    if (m.has_guidance && guidance) {
      const Tensor gemb_host = m.embed(host(*guidance).data(), B);  // [B, 256]
      const Tensor gemb = on_device(gemb_host);  // a view of gemb_host on the CPU
      k_.linear(m.guidance_in.in_layer, h1.data(), H, gemb.data(), kTimeEmbedDim, B,
                Act::kSilu);                                             // [B, H]
      Tensor g = buf({B, H});                                            // [B, H]
      k_.linear(m.guidance_in.out_layer, g.data(), H, h1.data(), H, B);  // [B, H]
      k_.add(vec.data(), g.data(), B * H);                               // [B, H]
    }
  }
  tr("act.vec", vec);
  svec = vec.clone();                              // [B, H]
  k_.act_inplace(Act::kSilu, svec.data(), B * H);  // [B, H] SiLU(vec), shared by all mods

  // Joint residual stream X [B, T, H]: context rows [0, Lc), latent rows [Lc, T).
  X = buf({B, T, H});
  const Tensor xd = on_device(x);
  for (i64 b = 0; b < B; ++b)
    k_.linear(m.latent_in, X.data() + (b * T + Lc) * H, H, xd.data() + b * L * cfg.in_channels,
              cfg.in_channels, L);  // [L, H]
  if (eager_context) ensure_context();
  if (trace) tr("act.latent_in", gather_rows(host(X).data(), B, T, H, Lc, L, 0, H));

  XM = buf({B, T, H});                            // [B, T, H] modulated input
  QKV = buf({B * T * std::max<i64>(3 * H, W1)});  // [B, T, 3H] or [B, T, 3H+M]
  ATT = buf({B * T * std::max<i64>(H, W2)});      // [B, T, H] or [B, T, H+M]
  P = buf({B, T, H});                             // [B, T, H] projection outputs
  HID = buf({B * T * M});                         // [rows, M] MLP hidden
}

// cond_in(context) into the context rows; deferred so a skipped step need not pay for it.
void Hunyuan3DDiT::Pass::ensure_context() {
  if (have_context_) return;
  const i64 Cc = m_.cfg.context_in_dim;
  for (i64 b = 0; b < B; ++b)
    k_.linear(m_.cond_in, X.data() + b * T * H, H, context_.data() + b * Lc * Cc, Cc,
              Lc);  // [Lc, H]
  have_context_ = true;
  if (trace_) tr("act.cond_in", gather_rows(host(X).data(), B, T, H, 0, Lc, 0, H));
}

void Hunyuan3DDiT::Pass::set_image_rows(const Tensor& h) {
  nn::check_shape(h, "Hunyuan3DDiT::forward", "image rows", {B, L, H});
  const Tensor hd = on_device(h);
  for (i64 b = 0; b < B; ++b)
    k_.copy_rows(X.data() + (b * T + Lc) * H, H, hd.data() + b * L * H, H, L, H);  // [L, H]
}

Tensor Hunyuan3DDiT::Pass::block0_modulated_input() {
  if (m_.double_blocks.empty()) throw ModelError("Hunyuan3DDiT: no double block to modulate");
  Tensor mod = buf({B, 6 * H});                                                      // [B, 6H]
  k_.linear(m_.double_blocks[0].img_mod.lin, mod.data(), 6 * H, svec.data(), H, B);  // [B, 6H]
  Tensor m0 = buf({B, L, H});                                                        // [B, L, H]
  k_.ln_modulate(m0.data(), L * H, X.data() + Lc * H, T * H, B, L, H, mod.data(), mod.data() + H,
                 6 * H, kNormEps);  // [B, L, H]
  return host(m0).clone();
}

void Hunyuan3DDiT::Pass::run_blocks(int begin, int end, BranchHook* hook) {
  const int nd = static_cast<int>(m_.double_blocks.size());
  if (begin < 0 || end > num_blocks() || begin > end)
    throw ModelError("Hunyuan3DDiT: block range [" + std::to_string(begin) + ", " +
                     std::to_string(end) + ") outside [0, " + std::to_string(num_blocks()) + ")");
  const bool lean_predict = hook && hook->predicting() && hook->image_rows_only();
  if (!lean_predict) ensure_context();
  for (int i = begin; i < end; ++i) {
    if (i < nd)
      double_block(static_cast<std::size_t>(i), hook);
    else
      single_block(static_cast<std::size_t>(i - nd), hook);
  }
}

void Hunyuan3DDiT::Pass::double_block(std::size_t bi, BranchHook* hook) {
  const DoubleStreamBlock& blk = m_.double_blocks[bi];
  const std::string pre = "trace.double_blocks." + std::to_string(bi) + ".";
  const bool predict = hook && hook->predicting();
  const bool lean = hook && hook->image_rows_only();
  const int key_block = static_cast<int>(bi);
  struct Stream {
    const char* name;
    const Modulation* mod;
    const SelfAttention* attn;
    const Mlp* mlp;
    i64 r0, n;
    Branch attn_key, mlp_key;
    Tensor m;  // [B, 6H] shift1, scale1, gate1, shift2, scale2, gate2
  };
  Stream streams[2] = {{"txt", &blk.txt_mod, &blk.txt_attn, &blk.txt_mlp, 0, Lc, Branch::kTxtAttn,
                        Branch::kTxtMlp, Tensor()},
                       {"img", &blk.img_mod, &blk.img_attn, &blk.img_mlp, Lc, L, Branch::kImgAttn,
                        Branch::kImgMlp, Tensor()}};

  if (predict) {
    // No attention, no MLP: gated residual adds of the predicted branches, current gates.
    for (Stream& s : streams) {
      if (lean && s.r0 == 0) continue;                              // condition stream not needed
      s.m = buf({B, 6 * H});                                        // [B, 6H]
      k_.linear(s.mod->lin, s.m.data(), 6 * H, svec.data(), H, B);  // [B, 6H]
      Tensor y({B, s.n, H});                                        // [B, n, H] (host)
      hook->predict({key_block, s.attn_key}, y);                    // [B, n, H]
      Tensor yd = on_device(y);
      k_.gated_residual(X.data() + s.r0 * H, T * H, yd.data(), s.n * H, B, s.n, H,
                        s.m.data() + 2 * H, 6 * H);  // [B, n, H]
      hook->predict({key_block, s.mlp_key}, y);      // [B, n, H]
      yd = on_device(y);
      k_.gated_residual(X.data() + s.r0 * H, T * H, yd.data(), s.n * H, B, s.n, H,
                        s.m.data() + 5 * H, 6 * H);  // [B, n, H]
    }
    return;
  }
  auto report = [&](const Stream& s, Branch key) {
    if (hook && !(lean && s.r0 == 0)) {
      const Tensor p = host(P);
      hook->computed({key_block, key}, RowsView{p.data() + s.r0 * H, B, s.n, H, T * H});
    }
  };

  for (Stream& s : streams) {
    const std::string sp = pre + s.name;
    s.m = buf({B, 6 * H});                                        // [B, 6H]
    k_.linear(s.mod->lin, s.m.data(), 6 * H, svec.data(), H, B);  // [B, 6H]
    tr(sp + "_mod.lin.out", s.m);
    k_.ln_modulate(XM.data() + s.r0 * H, T * H, X.data() + s.r0 * H, T * H, B, s.n, H, s.m.data(),
                   s.m.data() + H, 6 * H, kNormEps);  // [B, n, H]
    for (i64 b = 0; b < B; ++b)
      k_.linear(s.attn->qkv, QKV.data() + (b * T + s.r0) * 3 * H, 3 * H,
                XM.data() + (b * T + s.r0) * H, H, s.n);  // [n, 3H]
    if (trace_)
      tr(sp + "_attn.qkv.out", gather_rows(host(QKV).data(), B, T, 3 * H, s.r0, s.n, 0, 3 * H));
    for (i64 b = 0; b < B; ++b)
      k_.qk_rmsnorm(QKV.data() + (b * T + s.r0) * 3 * H, s.n, 3 * H, nh, D, D, 0, H,
                    s.attn->norm.query_norm, s.attn->norm.key_norm);  // [n, 3H]
    if (trace_) {
      const Tensor qkv = host(QKV);
      tr(sp + "_attn.norm.query_norm.out",
         gather_heads(qkv.data(), B, T, 3 * H, s.r0, s.n, 0, nh, D));  // [B, nh, n, D]
      tr(sp + "_attn.norm.key_norm.out",
         gather_heads(qkv.data(), B, T, 3 * H, s.r0, s.n, H, nh, D));  // [B, nh, n, D]
    }
  }
  // Joint attention over [txt; img]: q, k, v columns (3, nh, D) of QKV [B, T, 3H].
  k_.attention({ATT.data(), T * H, H, D}, {QKV.data(), T * 3 * H, 3 * H, D},
               {QKV.data() + H, T * 3 * H, 3 * H, D}, {QKV.data() + 2 * H, T * 3 * H, 3 * H, D},
               {B, nh, T, T, D, 0.0f, streams[0].attn->qkv.bf16()});  // [B, T, H]
  for (Stream& s : streams) {
    const std::string sp = pre + s.name;
    for (i64 b = 0; b < B; ++b)
      k_.linear(s.attn->proj, P.data() + (b * T + s.r0) * H, H, ATT.data() + (b * T + s.r0) * H, H,
                s.n);  // [n, H]
    if (trace_) {
      tr(sp + "_attn.proj.in", gather_rows(host(ATT).data(), B, T, H, s.r0, s.n, 0, H));
      tr(sp + "_attn.proj.out", gather_rows(host(P).data(), B, T, H, s.r0, s.n, 0, H));
    }
    report(s, s.attn_key);
    k_.gated_residual(X.data() + s.r0 * H, T * H, P.data() + s.r0 * H, T * H, B, s.n, H,
                      s.m.data() + 2 * H, 6 * H);  // [B, n, H]
    k_.ln_modulate(XM.data() + s.r0 * H, T * H, X.data() + s.r0 * H, T * H, B, s.n, H,
                   s.m.data() + 3 * H, s.m.data() + 4 * H, 6 * H, kNormEps);  // [B, n, H]
    for (i64 b = 0; b < B; ++b) {
      k_.linear(s.mlp->fc0, HID.data(), M, XM.data() + (b * T + s.r0) * H, H, s.n,
                Act::kGeluTanh);                                                    // [n, M]
      k_.linear(s.mlp->fc2, P.data() + (b * T + s.r0) * H, H, HID.data(), M, s.n);  // [n, H]
    }
    if (trace_) tr(sp + "_mlp.2.out", gather_rows(host(P).data(), B, T, H, s.r0, s.n, 0, H));
    report(s, s.mlp_key);
    k_.gated_residual(X.data() + s.r0 * H, T * H, P.data() + s.r0 * H, T * H, B, s.n, H,
                      s.m.data() + 5 * H, 6 * H);  // [B, n, H]
  }
  if (trace_) {
    const std::string ap = "act.double_blocks." + std::to_string(bi) + ".";
    const Tensor x = host(X);
    tr(ap + "img", gather_rows(x.data(), B, T, H, Lc, L, 0, H));
    tr(ap + "txt", gather_rows(x.data(), B, T, H, 0, Lc, 0, H));
  }
}

void Hunyuan3DDiT::Pass::single_block(std::size_t bi, BranchHook* hook) {
  const SingleStreamBlock& blk = m_.single_blocks[bi];
  const std::string sp = "trace.single_blocks." + std::to_string(bi) + ".";
  const BranchKey key{static_cast<int>(m_.double_blocks.size() + bi), Branch::kTotal};
  const bool lean = hook && hook->image_rows_only();
  const i64 r0 = lean ? Lc : 0, n = lean ? L : T;                     // rows the hook sees
  Tensor m = buf({B, 3 * H});                                         // [B, 3H]
  k_.linear(blk.modulation.lin, m.data(), 3 * H, svec.data(), H, B);  // [B, 3H] shift, scale, gate
  tr(sp + "modulation.lin.out", m);
  if (hook && hook->predicting()) {
    Tensor y({B, n, H});    // [B, n, H] (host)
    hook->predict(key, y);  // [B, n, H]
    const Tensor yd = on_device(y);
    k_.gated_residual(X.data() + r0 * H, T * H, yd.data(), n * H, B, n, H, m.data() + 2 * H,
                      3 * H);  // [B, n, H]
    return;
  }
  k_.ln_modulate(XM.data(), T * H, X.data(), T * H, B, T, H, m.data(), m.data() + H, 3 * H,
                 kNormEps);                                     // [B, T, H]
  k_.linear(blk.linear1, QKV.data(), W1, XM.data(), H, B * T);  // [B, T, 3H + M]
  if (trace_) tr(sp + "linear1.out", gather_rows(host(QKV).data(), B, T, W1, 0, T, 0, W1));
  k_.qk_rmsnorm(QKV.data(), B * T, W1, nh, D, D, 0, H, blk.norm.query_norm,
                blk.norm.key_norm);  // [B, T, 3H + M]
  if (trace_) {
    const Tensor qkv = host(QKV);
    tr(sp + "norm.query_norm.out", gather_heads(qkv.data(), B, T, W1, 0, T, 0, nh, D));
    tr(sp + "norm.key_norm.out", gather_heads(qkv.data(), B, T, W1, 0, T, H, nh, D));
  }
  k_.attention({ATT.data(), T * W2, W2, D}, {QKV.data(), T * W1, W1, D},
               {QKV.data() + H, T * W1, W1, D}, {QKV.data() + 2 * H, T * W1, W1, D},
               {B, nh, T, T, D, 0.0f, blk.linear1.bf16()});  // ATT[:, :, :H] = attn
  k_.act_copy(Act::kGeluTanh, ATT.data() + H, W2, QKV.data() + 3 * H, W1, B * T,
              M);  // ATT[:, :, H:] = GELU(mlp)
  if (trace_) tr(sp + "linear2.in", gather_rows(host(ATT).data(), B, T, W2, 0, T, 0, W2));
  k_.linear(blk.linear2, P.data(), H, ATT.data(), W2, B * T);  // [B, T, H]
  if (trace_) tr(sp + "linear2.out", P);
  if (hook) {
    const Tensor p = host(P);
    hook->computed(key, RowsView{p.data() + r0 * H, B, n, H, T * H});
  }
  k_.gated_residual(X.data(), T * H, P.data(), T * H, B, T, H, m.data() + 2 * H,
                    3 * H);  // [B, T, H]
  if (trace_) tr("act.single_blocks." + std::to_string(bi), X);
}

Tensor Hunyuan3DDiT::Pass::output() {
  const i64 C = m_.cfg.in_channels;
  if (trace_) tr("act.final_layer_in", gather_rows(host(X).data(), B, T, H, Lc, L, 0, H));
  Tensor fm = buf({B, 2 * H});                                                        // [B, 2H]
  k_.linear(m_.final_layer.adaLN_modulation_1, fm.data(), 2 * H, svec.data(), H, B);  // [B, 2H]
  tr("trace.final_layer.adaLN_modulation.1.out", fm);
  k_.ln_modulate(XM.data(), L * H, X.data() + Lc * H, T * H, B, L, H, fm.data(), fm.data() + H,
                 2 * H, kNormEps);                                       // [B, L, H]
  Tensor out = buf({B, L, C});                                           // [B, L, C]
  k_.linear(m_.final_layer.linear, out.data(), C, XM.data(), H, B * L);  // [B, L, C]
  Tensor host_out = out.device() == Device::kCpu ? std::move(out) : out.to(Device::kCpu);
  tr("out", host_out);
  return host_out;
}

Hunyuan3DDiT::Hunyuan3DDiT(std::unique_ptr<Impl> impl) : impl_(std::move(impl)) {}
Hunyuan3DDiT::Hunyuan3DDiT(Hunyuan3DDiT&&) noexcept = default;
Hunyuan3DDiT& Hunyuan3DDiT::operator=(Hunyuan3DDiT&&) noexcept = default;
Hunyuan3DDiT::~Hunyuan3DDiT() = default;

Hunyuan3DDiT Hunyuan3DDiT::load(const DiTConfig& config, const std::string& path, Options opt) {
  return load(config, SafetensorsFile::open(path), opt);
}

Hunyuan3DDiT Hunyuan3DDiT::load(const DiTConfig& config,
                                std::shared_ptr<const SafetensorsFile> file, Options opt) {
  WeightMap w = WeightMap::for_submodel(std::move(file), kDiTPrefix);
  return load(config, w, opt);
}

Hunyuan3DDiT Hunyuan3DDiT::load(const DiTConfig& config, WeightMap& weights, Options opt) {
  config.validate();
  check_options(opt);
  auto impl = std::make_unique<Impl>();
  impl->cfg = config;
  impl->device = opt.device;
  impl->init_freqs();
  nn::CheckpointParams params(weights, opt.storage);
  impl->load(params);
  weights.finish("Hunyuan3DDiT");
  spdlog::info("Hunyuan3DDiT: loaded {} parameters from {} ({} MiB in memory)", impl->params,
               weights.file().path(), impl->bytes >> 20);
  return Hunyuan3DDiT(std::move(impl));
}

std::vector<std::pair<std::string, Shape>> Hunyuan3DDiT::expected_tensors(const DiTConfig& config) {
  config.validate();
  Impl impl;
  impl.cfg = config;
  nn::ShapeRecorder recorder;
  impl.load(recorder);
  return std::move(recorder.list);
}

Hunyuan3DDiT Hunyuan3DDiT::random(const DiTConfig& config, std::uint64_t seed, Options opt) {
  return random(config, seed, opt, nullptr);
}

Hunyuan3DDiT Hunyuan3DDiT::random(const DiTConfig& config, std::uint64_t seed, Options opt,
                                  const WeightAdjustFn& adjust) {
  config.validate();
  check_options(opt);
  auto impl = std::make_unique<Impl>();
  impl->cfg = config;
  impl->device = opt.device;
  impl->init_freqs();
  std::mt19937_64 rng(seed);
  // The golden set's recipe: N(0, 1/sqrt(fan_in)) weights (x1.25 in the modulation and
  // timestep paths), N(1, 0.15) norm scales, N(0, 0.1) biases.
  nn::RandomParams params(
      [&](const std::string& name, Tensor& t) {
        const bool mod = name.find("_mod.") != std::string::npos ||
                         name.find("modulation") != std::string::npos ||
                         name.find("time_in") != std::string::npos ||
                         name.find("guidance_in") != std::string::npos;
        double mean = 0.0, stddev = 0.1;  // biases
        if (name.ends_with(".scale")) {
          mean = 1.0;
          stddev = 0.15;
        } else if (name.ends_with(".weight")) {
          stddev = (mod ? 1.25 : 1.0) / std::sqrt(static_cast<double>(t.dim(1)));
        }
        std::normal_distribution<float> dist(static_cast<float>(mean), static_cast<float>(stddev));
        for (auto& v : t.span()) v = dist(rng);
        if (adjust) adjust(name, t);
      },
      opt.storage);
  impl->load(params);
  return Hunyuan3DDiT(std::move(impl));
}

const DiTConfig& Hunyuan3DDiT::config() const {
  return impl_->cfg;
}
std::int64_t Hunyuan3DDiT::num_parameters() const {
  return impl_->params;
}
std::size_t Hunyuan3DDiT::weight_bytes() const {
  return impl_->bytes;
}
const std::vector<float>& Hunyuan3DDiT::time_freqs() const {
  return impl_->freqs;
}

Tensor Hunyuan3DDiT::timestep_embedding(const Tensor& t) const {
  if (t.rank() != 1) throw ModelError("timestep_embedding: t must be [B], got " + t.shape().str());
  return impl_->embed(t.data(), t.dim(0));
}

Tensor Hunyuan3DDiT::forward(const Tensor& x, const Tensor& t, const Tensor& context,
                             const Tensor* guidance, const TraceFn* trace) const {
  Pass pass(*impl_, x, t, context, guidance, trace, /*eager_context=*/true);
  pass.run_blocks(0, pass.num_blocks(), nullptr);
  return pass.output();
}

std::unique_ptr<DiTPass> Hunyuan3DDiT::begin_pass(const Tensor& x, const Tensor& t,
                                                  const Tensor& context,
                                                  const Tensor* guidance) const {
  return std::make_unique<Pass>(*impl_, x, t, context, guidance, nullptr, false);
}

}  // namespace gen3d::models
