#include "models/paint/sd_vae.h"

#include <spdlog/spdlog.h>
#include <tbb/blocked_range.h>
#include <tbb/parallel_for.h>

#include <algorithm>
#include <cmath>
#include <cstring>
#include <filesystem>
#include <map>
#include <nlohmann/json.hpp>
#include <utility>

#include "models/core/error.h"
#include "models/core/safetensors.h"
#include "models/kernels/attention.h"
#include "models/kernels/conv.h"
#include "models/kernels/elementwise.h"
#include "models/kernels/linear.h"
#include "models/nn/config_reader.h"
#include "models/nn/device_ops.h"
#include "models/nn/layers.h"
#include "models/nn/weight_files.h"

namespace gen3d::models {

namespace {

using i64 = std::int64_t;
using json = nlohmann::json;
namespace K = kernels;

constexpr float kEps = 1e-6f;  // every GroupNorm of the SD VAE

using kernels::parallel_chunks;
using Ops = nn::DeviceOps;

// A single-image feature map (1, h, w, c) on the device the network runs on.
struct Map {
  Tensor t;
  i64 h = 0, w = 0, c = 0;
  static Map make(i64 h, i64 w, i64 c, Device d = Device::kCpu) {
    return {Tensor(Shape{1, h, w, c}, d), h, w, c};
  }
  float* data() { return t.data(); }
  const float* data() const { return t.data(); }
  i64 pixels() const { return h * w; }
  i64 numel() const { return h * w * c; }
};

using nn::Conv2d;
using nn::GroupNorm;
using nn::Linear;
using nn::ParamSource;

// `m` on `d`: itself when it is there, else a copy.
Map to_device(Map m, Device d) {
  if (m.t.device() == d) return m;
  return {m.t.to(d), m.h, m.w, m.c};
}

// A convolution of one image's map.
Map apply(const Ops& k, const Conv2d& conv, const Map& x) {
  Map y = Map::make(conv.out_h(x.h), conv.out_w(x.w), conv.weight.cout, k.device());
  k.conv2d(conv, y.data(), x.data(), 1, x.h, x.w);  // [1, oh, ow, cout]
  return y;
}

struct Resnet {
  GroupNorm norm1, norm2;
  Conv2d conv1, conv2;
  bool has_shortcut = false;
  Conv2d shortcut;
  void load(ParamSource& p, const std::string& name, i64 cin, i64 cout, i64 groups) {
    norm1.load(p, name + ".norm1", cin, groups, kEps);
    conv1.load(p, name + ".conv1", cout, cin, 3, K::ConvGeometry::same(1));
    norm2.load(p, name + ".norm2", cout, groups, kEps);
    conv2.load(p, name + ".conv2", cout, cout, 3, K::ConvGeometry::same(1));
    has_shortcut = cin != cout;
    if (has_shortcut) shortcut.load(p, name + ".conv_shortcut", cout, cin, 1, {});
  }
  Map operator()(const Ops& k, const Map& x) const {
    Map h;
    {
      Map t = Map::make(x.h, x.w, x.c, k.device());
      k.group_norm(norm1, t.data(), x.data(), 1, x.pixels(), true);  // [1, h, w, cin]
      h = apply(k, conv1, t);                                        // [1, h, w, cout]
    }
    k.group_norm(norm2, h.data(), h.data(), 1, h.pixels(), true);
    Map y = apply(k, conv2, h);  // [1, h, w, cout]
    h = Map{};
    if (has_shortcut) {
      const Map s = apply(k, shortcut, x);  // [1, h, w, cout]
      k.add(y.data(), s.data(), y.numel());
    } else {
      k.add(y.data(), x.data(), y.numel());
    }
    return y;
  }
};

// Single-head self-attention over all pixels with its own GroupNorm and a residual.
struct Attention {
  GroupNorm norm;
  Linear qkv;  // [to_q; to_k; to_v] as one (C -> 3C) projection
  Linear out;
  i64 c = 0;
  void load(ParamSource& p, const std::string& name, i64 channels, i64 groups) {
    c = channels;
    norm.load(p, name + ".group_norm", c, groups, kEps);
    // diffusers renames the deprecated attention block's query/key/value/proj_attn on load.
    const bool old = !p.has(name + ".to_q.weight") && p.has(name + ".query.weight");
    const char* names[3] = {old ? ".query" : ".to_q", old ? ".key" : ".to_k",
                            old ? ".value" : ".to_v"};
    Tensor w({3 * c, c}), b({3 * c});
    for (int k = 0; k < 3; ++k) {
      const Tensor wk = p.take(name + names[k] + ".weight", Shape{c, c});
      const Tensor bk = p.take(name + names[k] + ".bias", Shape{c});
      if (wk.empty()) continue;  // a shape recorder
      std::copy(wk.data(), wk.data() + c * c, w.data() + k * c * c);
      std::copy(bk.data(), bk.data() + c, b.data() + k * c);
    }
    qkv.set(p, std::move(w), std::move(b), c, 3 * c);
    out.load(p, name + (old ? ".proj_attn" : ".to_out.0"), c, c);
  }
  void apply_inplace(const Ops& k, Map& x) const {
    const i64 L = x.pixels();
    const Device d = k.device();
    Tensor qkv_rows(Shape{L, 3 * c}, d);  // [L, 3C]: q | k | v
    {
      Tensor h(Shape{L, c}, d);
      k.group_norm(norm, h.data(), x.data(), 1, L, false);
      k.linear(qkv, qkv_rows.data(), 3 * c, h.data(), c, L);
    }
    Tensor o(Shape{L, c}, d);  // [L, C]
    K::AttentionShape s;
    s.batch = 1;
    s.heads = 1;
    s.q_len = L;
    s.kv_len = L;
    s.head_dim = c;
    s.bf16 = qkv.bf16();
    const i64 ts = 3 * c;
    k.attention(K::HeadsOut{o.data(), L * c, c, c}, K::HeadsView{qkv_rows.data(), L * ts, ts, c},
                K::HeadsView{qkv_rows.data() + c, L * ts, ts, c},
                K::HeadsView{qkv_rows.data() + 2 * c, L * ts, ts, c}, s);
    qkv_rows = Tensor();
    Tensor proj(Shape{L, c}, d);  // [L, C]
    k.linear(out, proj.data(), c, o.data(), c, L);
    k.add(x.data(), proj.data(), L * c);
  }
};

struct MidBlock {
  Resnet r0, r1;
  bool has_attn = false;
  Attention attn;
  void load(ParamSource& p, const std::string& name, i64 c, i64 groups, bool attention) {
    r0.load(p, name + ".resnets.0", c, c, groups);
    has_attn = attention;
    if (attention) attn.load(p, name + ".attentions.0", c, groups);
    r1.load(p, name + ".resnets.1", c, c, groups);
  }
  Map operator()(const Ops& k, const Map& x) const {
    Map h = r0(k, x);
    if (has_attn) attn.apply_inplace(k, h);
    return r1(k, h);
  }
};

struct Level {
  std::vector<Resnet> resnets;
  bool has_resample = false;
  Conv2d resample;  // encoder: stride-2 downsampler; decoder: conv after nearest ×2
};

// Collects one image's intermediates per name and hands them out as whole batches.
class ProbeSink {
 public:
  ProbeSink(const VaeProbe& probe, i64 batch) : probe_(probe), batch_(batch) {}
  bool on() const { return static_cast<bool>(probe_); }
  void put(const std::string& name, i64 image, const Map& dm) {
    if (!on()) return;
    const Map m = to_device(
        Map{Tensor::view(dm.data(), dm.t.shape(), dm.t.device()), dm.h, dm.w, dm.c}, Device::kCpu);
    auto it = maps_.find(name);
    if (it == maps_.end()) {
      order_.push_back(name);
      it = maps_.emplace(name, Tensor(Shape{batch_, m.h, m.w, m.c})).first;
    }
    std::memcpy(it->second.data() + image * m.numel(), m.data(),
                static_cast<std::size_t>(m.numel()) * sizeof(float));
  }
  void flush() {
    if (!on()) return;
    for (const auto& n : order_) probe_(n, maps_.at(n));
    maps_.clear();
    order_.clear();
  }

 private:
  const VaeProbe& probe_;
  i64 batch_;
  std::map<std::string, Tensor> maps_;
  std::vector<std::string> order_;
};

Map image_slice(const Tensor& t, i64 b) {
  const i64 h = t.dim(1), w = t.dim(2), c = t.dim(3);
  Map m = Map::make(h, w, c);
  std::memcpy(m.data(), t.data() + b * h * w * c, static_cast<std::size_t>(h * w * c) * 4);
  return m;
}

void check_nhwc(const Tensor& t, i64 channels, const char* what) {
  if (t.rank() != 4 || t.dim(3) != channels || t.numel() == 0)
    throw ModelError(std::string("SD VAE ") + what + ": expected (B, H, W, " +
                     std::to_string(channels) + "), got " + t.shape().str());
}

}  // namespace

// ---------------------------------------------------------------------------------------------
// Config

void SdVaeConfig::validate(const std::string& label) const {
  std::vector<std::string> errs;
  auto bad = [&](const std::string& key, const std::string& what) {
    errs.push_back("'" + key + "' " + what);
  };
  if (in_channels < 1) bad("in_channels", "must be >= 1");
  if (out_channels < 1) bad("out_channels", "must be >= 1");
  if (latent_channels < 1) bad("latent_channels", "must be >= 1");
  if (layers_per_block < 1) bad("layers_per_block", "must be >= 1");
  if (norm_num_groups < 1) bad("norm_num_groups", "must be >= 1");
  if (!(scaling_factor > 0.0) || !std::isfinite(scaling_factor))
    bad("scaling_factor", "must be a positive number");
  if (block_out_channels.empty() || block_out_channels.size() > 8)
    bad("block_out_channels", "must list 1 to 8 levels");
  for (int c : block_out_channels) {
    if (c < 1 || (norm_num_groups >= 1 && c % norm_num_groups != 0)) {
      bad("block_out_channels", "entry " + std::to_string(c) +
                                    " is not a positive multiple of norm_num_groups " +
                                    std::to_string(norm_num_groups));
      break;
    }
  }
  if (down_block_types.size() != block_out_channels.size())
    bad("down_block_types", "must have one entry per block_out_channels level");
  if (up_block_types.size() != block_out_channels.size())
    bad("up_block_types", "must have one entry per block_out_channels level");
  for (const auto& t : down_block_types)
    if (t != "DownEncoderBlock2D")
      bad("down_block_types", "entry \"" + t + "\" is not supported (DownEncoderBlock2D only)");
  for (const auto& t : up_block_types)
    if (t != "UpDecoderBlock2D")
      bad("up_block_types", "entry \"" + t + "\" is not supported (UpDecoderBlock2D only)");
  if (errs.empty()) return;
  std::string msg = label + ": invalid AutoencoderKL config:";
  for (const auto& e : errs) msg += " " + e + ";";
  msg.pop_back();
  throw ModelError(msg);
}

SdVaeConfig SdVaeConfig::parse(const std::string& json_text, const std::string& label) {
  const json j = nn::parse_config(json_text, label);
  SdVaeConfig c;
  nn::ConfigReader r(j, label + ": AutoencoderKL config");
  r.read("in_channels", c.in_channels);
  r.read("out_channels", c.out_channels);
  r.read("latent_channels", c.latent_channels);
  r.read("layers_per_block", c.layers_per_block);
  r.read("norm_num_groups", c.norm_num_groups);
  r.read("mid_block_add_attention", c.mid_block_add_attention);
  r.read("use_quant_conv", c.use_quant_conv);
  r.read("use_post_quant_conv", c.use_post_quant_conv);
  r.read("block_out_channels", c.block_out_channels);
  r.read("down_block_types", c.down_block_types);
  r.read("up_block_types", c.up_block_types);
  r.read("scaling_factor", c.scaling_factor);
  r.require("act_fn", "silu", "only \"silu\"");
  r.require("shift_factor", 0.0, "only 0: SD3/Flux-style latents are not implemented");
  r.ignore({"sample_size", "force_upcast", "latents_mean", "latents_std", "_class_name",
            "_diffusers_version", "_name_or_path"});
  r.finish(nn::ConfigReader::Unknown::kWarn);
  c.validate(label);
  return c;
}

SdVaeConfig SdVaeConfig::read(const std::string& path) {
  return parse(nn::read_config_file(path).dump(), path);
}

// ---------------------------------------------------------------------------------------------
// Network

struct SdVae::Impl {
  WeightStorage storage = WeightStorage::kF32;
  // Encoder
  Conv2d enc_conv_in;
  std::vector<Level> down;
  MidBlock enc_mid;
  GroupNorm enc_norm_out;
  Conv2d enc_conv_out;
  bool has_quant = false;
  Conv2d quant_conv;
  // Decoder
  bool has_post_quant = false;
  Conv2d post_quant_conv;
  Conv2d dec_conv_in;
  MidBlock dec_mid;
  std::vector<Level> up;
  GroupNorm dec_norm_out;
  Conv2d dec_conv_out;
  i64 params = 0;
};

SdVae::SdVae(SdVaeConfig cfg, std::unique_ptr<Impl> impl)
    : cfg_(std::move(cfg)), impl_(std::move(impl)) {}
SdVae::~SdVae() = default;

std::int64_t SdVae::num_parameters() const {
  return impl_->params;
}

void SdVae::set_device(Device device) {
  if (device != Device::kCpu && impl_->storage != WeightStorage::kBF16)
    throw ModelError(std::string("SD VAE: storage ") + std::string(storage_name(impl_->storage)) +
                     " runs on the CPU only; device " + device_name(device) +
                     " needs storage bf16");
  device_ = device;
}

namespace {
std::unique_ptr<SdVae::Impl> build(const SdVaeConfig& cfg, ParamSource& p);
}  // namespace

std::unique_ptr<SdVae> SdVae::load(const SdVaeConfig& cfg, WeightMap& weights,
                                   WeightStorage storage) {
  cfg.validate();
  nn::CheckpointParams p(weights, storage);
  auto m = build(cfg, p);
  m->storage = storage;
  return std::unique_ptr<SdVae>(new SdVae(cfg, std::move(m)));
}

std::vector<std::pair<std::string, Shape>> SdVae::expected_tensors(const SdVaeConfig& cfg) {
  cfg.validate();
  nn::ShapeRecorder p;
  build(cfg, p);
  return std::move(p.list);
}

namespace {
std::unique_ptr<SdVae::Impl> build(const SdVaeConfig& cfg, ParamSource& p) {
  auto m = std::make_unique<SdVae::Impl>();
  const i64 G = cfg.norm_num_groups, L = cfg.latent_channels, levels = cfg.levels();
  const auto& boc = cfg.block_out_channels;
  const i64 top = boc.back();
  // Encoder.
  m->enc_conv_in.load(p, "encoder.conv_in", boc[0], cfg.in_channels, 3, K::ConvGeometry::same(1));
  i64 ch = boc[0];
  for (i64 i = 0; i < levels; ++i) {
    Level lv;
    const std::string name = "encoder.down_blocks." + std::to_string(i);
    const i64 out = boc[static_cast<std::size_t>(i)];
    for (int r = 0; r < cfg.layers_per_block; ++r) {
      Resnet rn;
      rn.load(p, name + ".resnets." + std::to_string(r), r == 0 ? ch : out, out, G);
      lv.resnets.push_back(std::move(rn));
    }
    lv.has_resample = i + 1 < levels;
    // Downsample2D with padding 0: zero pad right and bottom by one, 3×3 stride 2.
    if (lv.has_resample)
      lv.resample.load(p, name + ".downsamplers.0.conv", out, out, 3,
                       K::ConvGeometry{2, 0, 1, 0, 1});
    m->down.push_back(std::move(lv));
    ch = out;
  }
  m->enc_mid.load(p, "encoder.mid_block", top, G, cfg.mid_block_add_attention);
  m->enc_norm_out.load(p, "encoder.conv_norm_out", top, G, kEps);
  m->enc_conv_out.load(p, "encoder.conv_out", 2 * L, top, 3, K::ConvGeometry::same(1));
  m->has_quant = cfg.use_quant_conv;
  if (m->has_quant) m->quant_conv.load(p, "quant_conv", 2 * L, 2 * L, 1, {});
  // Decoder.
  m->has_post_quant = cfg.use_post_quant_conv;
  if (m->has_post_quant) m->post_quant_conv.load(p, "post_quant_conv", L, L, 1, {});
  m->dec_conv_in.load(p, "decoder.conv_in", top, L, 3, K::ConvGeometry::same(1));
  m->dec_mid.load(p, "decoder.mid_block", top, G, cfg.mid_block_add_attention);
  ch = top;
  for (i64 i = 0; i < levels; ++i) {
    Level lv;
    const std::string name = "decoder.up_blocks." + std::to_string(i);
    const i64 out = boc[static_cast<std::size_t>(levels - 1 - i)];
    for (int r = 0; r <= cfg.layers_per_block; ++r) {
      Resnet rn;
      rn.load(p, name + ".resnets." + std::to_string(r), r == 0 ? ch : out, out, G);
      lv.resnets.push_back(std::move(rn));
    }
    lv.has_resample = i + 1 < levels;
    if (lv.has_resample)
      lv.resample.load(p, name + ".upsamplers.0.conv", out, out, 3, K::ConvGeometry::same(1));
    m->up.push_back(std::move(lv));
    ch = out;
  }
  m->dec_norm_out.load(p, "decoder.conv_norm_out", boc[0], G, kEps);
  m->dec_conv_out.load(p, "decoder.conv_out", cfg.out_channels, boc[0], 3,
                       K::ConvGeometry::same(1));
  m->params = p.parameters();
  return m;
}
}  // namespace

std::unique_ptr<SdVae> SdVae::load_folder(const std::string& dir, WeightStorage storage) {
  namespace fs = std::filesystem;
  const fs::path root(dir);
  const SdVaeConfig cfg = SdVaeConfig::read((root / "config.json").string());
  const fs::path weights = nn::find_weights(dir, "diffusion_pytorch_model");
  WeightMap wm(SafetensorsFile::open(weights.string()), "");
  auto vae = load(cfg, wm, storage);
  wm.finish("SD VAE (" + weights.string() + ")");
  spdlog::info("AutoencoderKL: loaded {} parameters from {}", vae->num_parameters(),
               weights.string());
  return vae;
}

SdVae::Posterior SdVae::encode(const Tensor& image01, const VaeProbe& probe) const {
  check_nhwc(image01, cfg_.in_channels, "encode input");
  const Impl& m = *impl_;
  const Ops& k = nn::device_ops(device_);
  const i64 B = image01.dim(0), L = cfg_.latent_channels;
  ProbeSink sink(probe, B);
  Posterior post;
  for (i64 b = 0; b < B; ++b) {
    Map x = image_slice(image01, b);
    parallel_chunks(x.numel(), [&](i64 a, i64 e) {
      float* d = x.data();
      for (i64 i = a; i < e; ++i) d[i] = (d[i] - 0.5f) * 2.0f;
    });
    x = to_device(std::move(x), device_);
    Map h = apply(k, m.enc_conv_in, x);  // [1, H, W, C0]
    x = Map{};
    sink.put("enc.conv_in", b, h);
    for (std::size_t i = 0; i < m.down.size(); ++i) {
      const Level& lv = m.down[i];
      for (const Resnet& r : lv.resnets) h = r(k, h);
      if (lv.has_resample) h = apply(k, lv.resample, h);  // [1, ceil(h / 2), ceil(w / 2), C]
      sink.put("enc.down_blocks." + std::to_string(i), b, h);
    }
    h = m.enc_mid(k, h);
    sink.put("enc.mid_block", b, h);
    k.group_norm(m.enc_norm_out, h.data(), h.data(), 1, h.pixels(), true);
    h = apply(k, m.enc_conv_out, h);  // [1, h, w, 2L]
    sink.put("enc.conv_out", b, h);
    if (m.has_quant) {
      h = apply(k, m.quant_conv, h);
      sink.put("quant_conv", b, h);
    }
    h = to_device(std::move(h), Device::kCpu);
    if (b == 0) {
      post.mean = Tensor(Shape{B, h.h, h.w, L});
      post.std = Tensor(Shape{B, h.h, h.w, L});
    }
    float* mean = post.mean.data() + b * h.pixels() * L;
    float* sd = post.std.data() + b * h.pixels() * L;
    for (i64 q = 0; q < h.pixels(); ++q) {
      const float* mo = h.data() + q * 2 * L;
      for (i64 k = 0; k < L; ++k) {
        mean[q * L + k] = mo[k];
        const float logvar = std::clamp(mo[L + k], -30.0f, 20.0f);
        sd[q * L + k] = std::exp(0.5f * logvar);
      }
    }
  }
  sink.flush();
  return post;
}

Tensor SdVae::encode_scaled(const Tensor& image01, const Tensor* eps) const {
  Posterior p = encode(image01);
  if (eps && !(eps->shape() == p.mean.shape()))
    throw ModelError("SD VAE encode_scaled: noise shape " + eps->shape().str() +
                     " differs from the posterior's " + p.mean.shape().str());
  const float sf = static_cast<float>(cfg_.scaling_factor);
  float* z = p.mean.data();
  const float* sd = p.std.data();
  for (i64 i = 0; i < p.mean.numel(); ++i) {
    const float s = eps ? z[i] + sd[i] * eps->data()[i] : z[i];
    z[i] = s * sf;
  }
  return std::move(p.mean);
}

Tensor SdVae::decode(const Tensor& z, const VaeProbe& probe) const {
  check_nhwc(z, cfg_.latent_channels, "decode input");
  const Impl& m = *impl_;
  const Ops& k = nn::device_ops(device_);
  const i64 B = z.dim(0);
  ProbeSink sink(probe, B);
  Tensor out;
  for (i64 b = 0; b < B; ++b) {
    Map h = to_device(image_slice(z, b), device_);  // [1, h, w, L]
    if (m.has_post_quant) {
      h = apply(k, m.post_quant_conv, h);
      sink.put("post_quant_conv", b, h);
    }
    h = apply(k, m.dec_conv_in, h);  // [1, h, w, C_top]
    sink.put("dec.conv_in", b, h);
    h = m.dec_mid(k, h);
    sink.put("dec.mid_block", b, h);
    for (std::size_t i = 0; i < m.up.size(); ++i) {
      const Level& lv = m.up[i];
      for (const Resnet& r : lv.resnets) h = r(k, h);
      if (lv.has_resample) {
        Map u = Map::make(2 * h.h, 2 * h.w, h.c, device_);  // [1, 2h, 2w, C]
        k.upsample_nearest2x(u.data(), h.data(), 1, h.h, h.w, h.c);
        h = Map{};
        h = apply(k, lv.resample, u);
      }
      sink.put("dec.up_blocks." + std::to_string(i), b, h);
    }
    k.group_norm(m.dec_norm_out, h.data(), h.data(), 1, h.pixels(), true);
    h = apply(k, m.dec_conv_out, h);  // [1, H, W, out_channels]
    sink.put("dec.conv_out", b, h);
    h = to_device(std::move(h), Device::kCpu);
    if (b == 0) out = Tensor(Shape{B, h.h, h.w, h.c});
    std::memcpy(out.data() + b * h.numel(), h.data(), static_cast<std::size_t>(h.numel()) * 4);
  }
  sink.flush();
  return out;
}

Tensor SdVae::decode_to_image(const Tensor& latents_scaled) const {
  check_nhwc(latents_scaled, cfg_.latent_channels, "decode input");
  Tensor z(latents_scaled.shape());
  const float sf = static_cast<float>(cfg_.scaling_factor);
  for (i64 i = 0; i < z.numel(); ++i) z.data()[i] = latents_scaled.data()[i] / sf;
  Tensor img = decode(z);
  float* d = img.data();
  parallel_chunks(img.numel(), [&](i64 a, i64 e) {
    for (i64 i = a; i < e; ++i) d[i] = std::clamp(d[i] / 2.0f + 0.5f, 0.0f, 1.0f);
  });
  return img;
}

}  // namespace gen3d::models
