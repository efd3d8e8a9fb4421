#include "models/sd_vae.h"

#include <spdlog/spdlog.h>
#include <tbb/blocked_range.h>
#include <tbb/parallel_for.h>

#include <algorithm>
#include <cmath>
#include <cstring>
#include <filesystem>
#include <fstream>
#include <map>
#include <nlohmann/json.hpp>
#include <set>
#include <sstream>
#include <utility>

#include "models/error.h"
#include "models/kernels/attention.h"
#include "models/kernels/conv.h"
#include "models/kernels/elementwise.h"
#include "models/kernels/linear.h"
#include "models/safetensors.h"

namespace gen3d::models {

namespace {

using i64 = std::int64_t;
using json = nlohmann::json;
namespace K = kernels;

constexpr float kEps = 1e-6f;  // every GroupNorm of the SD VAE

using kernels::add_inplace;
using kernels::parallel_chunks;

// A single-image feature map (1, h, w, c).
struct Map {
  Tensor t;
  i64 h = 0, w = 0, c = 0;
  static Map make(i64 h, i64 w, i64 c) { return {Tensor(Shape{1, h, w, c}), h, w, c}; }
  float* data() { return t.data(); }
  const float* data() const { return t.data(); }
  i64 pixels() const { return h * w; }
  i64 numel() const { return h * w * c; }
};

// Parameters are claimed through this, so that load() records every problem before failing;
// without a weight map it records the expected names and shapes instead.
class Params {
 public:
  explicit Params(WeightMap* wm, std::vector<std::pair<std::string, Shape>>* record = nullptr)
      : wm_(wm), record_(record) {}
  Tensor take(const std::string& name, const Shape& s) {
    count_ += s.numel();
    if (!wm_) {
      record_->emplace_back(name, s);
      return Tensor(s);
    }
    return wm_->take(name, s);
  }
  bool has(const std::string& name) const { return wm_ && wm_->contains(name); }
  i64 count() const { return count_; }

 private:
  WeightMap* wm_;
  std::vector<std::pair<std::string, Shape>>* record_;
  i64 count_ = 0;
};

struct GroupNorm {
  std::vector<float> gamma, beta;
  i64 c = 0, groups = 0;
  void load(Params& p, const std::string& name, i64 channels, i64 g) {
    c = channels;
    groups = g;
    const Tensor w = p.take(name + ".weight", Shape{c});
    const Tensor b = p.take(name + ".bias", Shape{c});
    gamma.assign(w.data(), w.data() + c);
    beta.assign(b.data(), b.data() + c);
  }
  void apply(float* y, const float* x, i64 pixels, bool silu) const {
    K::group_norm(y, x, 1, pixels, c, groups, kEps, gamma.data(), beta.data(), silu);
  }
};

struct Conv {
  K::ConvWeight w;
  K::ConvGeometry g;
  void load(Params& p, const std::string& name, i64 cout, i64 cin, i64 k, K::ConvGeometry geo) {
    const Tensor wt = p.take(name + ".weight", Shape{cout, cin, k, k});
    const Tensor b = p.take(name + ".bias", Shape{cout});
    w = K::pack_conv_weight(wt.data(), b.data(), cout, cin, k, k);
    g = geo;
  }
  Map operator()(const Map& x) const {
    Map y = Map::make(g.out_h(x.h, w.kh), g.out_w(x.w, w.kw), w.cout);
    K::conv2d(y.data(), x.data(), 1, x.h, x.w, w, g);
    return y;
  }
};

struct Resnet {
  GroupNorm norm1, norm2;
  Conv conv1, conv2;
  bool has_shortcut = false;
  Conv shortcut;
  void load(Params& p, const std::string& name, i64 cin, i64 cout, i64 groups) {
    norm1.load(p, name + ".norm1", cin, groups);
    conv1.load(p, name + ".conv1", cout, cin, 3, K::ConvGeometry::same(1));
    norm2.load(p, name + ".norm2", cout, groups);
    conv2.load(p, name + ".conv2", cout, cout, 3, K::ConvGeometry::same(1));
    has_shortcut = cin != cout;
    if (has_shortcut) shortcut.load(p, name + ".conv_shortcut", cout, cin, 1, {});
  }
  Map operator()(const Map& x) const {
    Map h;
    {
      Map t = Map::make(x.h, x.w, x.c);
      norm1.apply(t.data(), x.data(), x.pixels(), true);
      h = conv1(t);
    }
    norm2.apply(h.data(), h.data(), h.pixels(), true);
    Map y = conv2(h);
    h = Map{};
    if (has_shortcut) {
      const Map s = shortcut(x);
      add_inplace(y.data(), s.data(), y.numel());
    } else {
      add_inplace(y.data(), x.data(), y.numel());
    }
    return y;
  }
};

// Single-head self-attention over all pixels with its own GroupNorm and a residual.
struct Attention {
  GroupNorm norm;
  std::vector<float> wqkv, bqkv;  // (3C, C) = [to_q; to_k; to_v], (3C)
  Tensor wo, bo;
  i64 c = 0;
  void load(Params& p, const std::string& name, i64 channels, i64 groups) {
    c = channels;
    norm.load(p, name + ".group_norm", c, groups);
    // diffusers renames the deprecated attention block's query/key/value/proj_attn on load.
    const bool old = !p.has(name + ".to_q.weight") && p.has(name + ".query.weight");
    const char* names[3] = {old ? ".query" : ".to_q", old ? ".key" : ".to_k",
                            old ? ".value" : ".to_v"};
    wqkv.resize(static_cast<std::size_t>(3 * c * c));
    bqkv.resize(static_cast<std::size_t>(3 * c));
    for (int k = 0; k < 3; ++k) {
      const Tensor w = p.take(name + names[k] + ".weight", Shape{c, c});
      const Tensor b = p.take(name + names[k] + ".bias", Shape{c});
      std::copy(w.data(), w.data() + c * c, wqkv.begin() + k * c * c);
      std::copy(b.data(), b.data() + c, bqkv.begin() + k * c);
    }
    const std::string out = name + (old ? ".proj_attn" : ".to_out.0");
    wo = p.take(out + ".weight", Shape{c, c});
    bo = p.take(out + ".bias", Shape{c});
  }
  void apply_inplace(Map& x) const {
    const i64 L = x.pixels();
    std::vector<float> qkv(static_cast<std::size_t>(L * 3 * c));
    {
      std::vector<float> h(static_cast<std::size_t>(L * c));
      norm.apply(h.data(), x.data(), L, false);
      K::linear(qkv.data(), 3 * c, h.data(), c, wqkv.data(), bqkv.data(), L, c, 3 * c);
    }
    std::vector<float> o(static_cast<std::size_t>(L * c));
    K::AttentionShape s;
    s.batch = 1;
    s.heads = 1;
    s.q_len = L;
    s.kv_len = L;
    s.head_dim = c;
    const i64 ts = 3 * c;
    K::attention(K::HeadsOut{o.data(), L * c, c, c}, K::HeadsView{qkv.data(), L * ts, ts, c},
                 K::HeadsView{qkv.data() + c, L * ts, ts, c},
                 K::HeadsView{qkv.data() + 2 * c, L * ts, ts, c}, s);
    qkv = {};
    std::vector<float> proj(static_cast<std::size_t>(L * c));
    K::linear(proj.data(), c, o.data(), c, wo.data(), bo.data(), L, c, c);
    add_inplace(x.data(), proj.data(), L * c);
  }
};

struct MidBlock {
  Resnet r0, r1;
  bool has_attn = false;
  Attention attn;
  void load(Params& p, const std::string& name, i64 c, i64 groups, bool attention) {
    r0.load(p, name + ".resnets.0", c, c, groups);
    has_attn = attention;
    if (attention) attn.load(p, name + ".attentions.0", c, groups);
    r1.load(p, name + ".resnets.1", c, c, groups);
  }
  Map operator()(const Map& x) const {
    Map h = r0(x);
    if (has_attn) attn.apply_inplace(h);
    return r1(h);
  }
};

struct Level {
  std::vector<Resnet> resnets;
  bool has_resample = false;
  Conv resample;  // encoder: stride-2 downsampler; decoder: conv after nearest ×2
};

// Collects one image's intermediates per name and hands them out as whole batches.
class ProbeSink {
 public:
  ProbeSink(const VaeProbe& probe, i64 batch) : probe_(probe), batch_(batch) {}
  bool on() const { return static_cast<bool>(probe_); }
  void put(const std::string& name, i64 image, const Map& m) {
    if (!on()) return;
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
  const json j = json::parse(json_text, nullptr, false);
  if (j.is_discarded() || !j.is_object())
    throw ModelError(label + ": AutoencoderKL config is not a JSON object");
  SdVaeConfig c;
  auto key_error = [&](const std::string& key, const std::string& what) {
    throw ModelError(label + ": AutoencoderKL config key '" + key + "' " + what);
  };
  auto get_int = [&](const char* key, int* out) {
    auto it = j.find(key);
    if (it == j.end()) return;
    if (!it->is_number_integer()) key_error(key, "must be an integer");
    *out = it->get<int>();
  };
  auto get_bool = [&](const char* key, bool* out) {
    auto it = j.find(key);
    if (it == j.end() || it->is_null()) return;
    if (!it->is_boolean()) key_error(key, "must be true or false");
    *out = it->get<bool>();
  };
  auto get_strings = [&](const char* key, std::vector<std::string>* out) {
    auto it = j.find(key);
    if (it == j.end()) return;
    if (!it->is_array()) key_error(key, "must be a list of strings");
    out->clear();
    for (const auto& v : *it) {
      if (!v.is_string()) key_error(key, "must be a list of strings");
      out->push_back(v.get<std::string>());
    }
  };
  get_int("in_channels", &c.in_channels);
  get_int("out_channels", &c.out_channels);
  get_int("latent_channels", &c.latent_channels);
  get_int("layers_per_block", &c.layers_per_block);
  get_int("norm_num_groups", &c.norm_num_groups);
  get_bool("mid_block_add_attention", &c.mid_block_add_attention);
  get_bool("use_quant_conv", &c.use_quant_conv);
  get_bool("use_post_quant_conv", &c.use_post_quant_conv);
  if (auto it = j.find("block_out_channels"); it != j.end()) {
    if (!it->is_array()) key_error("block_out_channels", "must be a list of integers");
    c.block_out_channels.clear();
    for (const auto& v : *it) {
      if (!v.is_number_integer()) key_error("block_out_channels", "must be a list of integers");
      c.block_out_channels.push_back(v.get<int>());
    }
  }
  get_strings("down_block_types", &c.down_block_types);
  get_strings("up_block_types", &c.up_block_types);
  if (auto it = j.find("scaling_factor"); it != j.end() && !it->is_null()) {
    if (!it->is_number()) key_error("scaling_factor", "must be a number");
    c.scaling_factor = it->get<double>();
  }
  if (auto it = j.find("act_fn"); it != j.end()) {
    if (!it->is_string() || it->get<std::string>() != "silu")
      key_error("act_fn", "must be \"silu\" (the only activation implemented)");
  }
  if (auto it = j.find("shift_factor"); it != j.end() && !it->is_null()) {
    if (!it->is_number() || it->get<double>() != 0.0)
      key_error("shift_factor", "is not supported (SD3/Flux-style latents)");
  }
  static const std::set<std::string> known = {
      "in_channels",      "out_channels",        "latent_channels",
      "layers_per_block", "norm_num_groups",     "block_out_channels",
      "down_block_types", "up_block_types",      "scaling_factor",
      "act_fn",           "shift_factor",        "mid_block_add_attention",
      "use_quant_conv",   "use_post_quant_conv", "sample_size",
      "force_upcast",     "latents_mean",        "latents_std",
      "_class_name",      "_diffusers_version",  "_name_or_path"};
  for (auto it = j.begin(); it != j.end(); ++it)
    if (!known.count(it.key()))
      spdlog::warn("{}: AutoencoderKL config key '{}' is not used", label, it.key());
  c.validate(label);
  return c;
}

SdVaeConfig SdVaeConfig::read(const std::string& path) {
  std::ifstream in(path);
  if (!in) throw ModelError(path + ": cannot open AutoencoderKL config");
  std::stringstream ss;
  ss << in.rdbuf();
  return parse(ss.str(), path);
}

// ---------------------------------------------------------------------------------------------
// Network

struct SdVae::Impl {
  // Encoder
  Conv enc_conv_in;
  std::vector<Level> down;
  MidBlock enc_mid;
  GroupNorm enc_norm_out;
  Conv enc_conv_out;
  bool has_quant = false;
  Conv quant_conv;
  // Decoder
  bool has_post_quant = false;
  Conv post_quant_conv;
  Conv dec_conv_in;
  MidBlock dec_mid;
  std::vector<Level> up;
  GroupNorm dec_norm_out;
  Conv dec_conv_out;
  i64 params = 0;
};

SdVae::SdVae(SdVaeConfig cfg, std::unique_ptr<Impl> impl)
    : cfg_(std::move(cfg)), impl_(std::move(impl)) {}
SdVae::~SdVae() = default;

std::int64_t SdVae::num_parameters() const {
  return impl_->params;
}

namespace {
std::unique_ptr<SdVae::Impl> build(const SdVaeConfig& cfg, Params& p);
}  // namespace

std::unique_ptr<SdVae> SdVae::load(const SdVaeConfig& cfg, WeightMap& weights) {
  cfg.validate();
  Params p(&weights);
  auto m = build(cfg, p);
  return std::unique_ptr<SdVae>(new SdVae(cfg, std::move(m)));
}

std::vector<std::pair<std::string, Shape>> SdVae::expected_tensors(const SdVaeConfig& cfg) {
  cfg.validate();
  std::vector<std::pair<std::string, Shape>> out;
  Params p(nullptr, &out);
  build(cfg, p);
  return out;
}

namespace {
std::unique_ptr<SdVae::Impl> build(const SdVaeConfig& cfg, Params& p) {
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
  m->enc_norm_out.load(p, "encoder.conv_norm_out", top, G);
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
  m->dec_norm_out.load(p, "decoder.conv_norm_out", boc[0], G);
  m->dec_conv_out.load(p, "decoder.conv_out", cfg.out_channels, boc[0], 3,
                       K::ConvGeometry::same(1));
  m->params = p.count();
  return m;
}
}  // namespace

std::unique_ptr<SdVae> SdVae::load_folder(const std::string& dir) {
  namespace fs = std::filesystem;
  const fs::path root(dir);
  const SdVaeConfig cfg = SdVaeConfig::read((root / "config.json").string());
  const fs::path weights = diffusers_weights_path(dir);
  WeightMap wm(SafetensorsFile::open(weights.string()), "");
  auto vae = load(cfg, wm);
  wm.finish("SD VAE (" + weights.string() + ")");
  spdlog::info("AutoencoderKL: loaded {} parameters from {}", vae->num_parameters(),
               weights.string());
  return vae;
}

SdVae::Posterior SdVae::encode(const Tensor& image01, const VaeProbe& probe) const {
  check_nhwc(image01, cfg_.in_channels, "encode input");
  const Impl& m = *impl_;
  const i64 B = image01.dim(0), L = cfg_.latent_channels;
  ProbeSink sink(probe, B);
  Posterior post;
  for (i64 b = 0; b < B; ++b) {
    Map x = image_slice(image01, b);
    parallel_chunks(x.numel(), [&](i64 a, i64 e) {
      float* d = x.data();
      for (i64 i = a; i < e; ++i) d[i] = (d[i] - 0.5f) * 2.0f;
    });
    Map h = m.enc_conv_in(x);
    x = Map{};
    sink.put("enc.conv_in", b, h);
    for (std::size_t i = 0; i < m.down.size(); ++i) {
      const Level& lv = m.down[i];
      for (const Resnet& r : lv.resnets) h = r(h);
      if (lv.has_resample) h = lv.resample(h);
      sink.put("enc.down_blocks." + std::to_string(i), b, h);
    }
    h = m.enc_mid(h);
    sink.put("enc.mid_block", b, h);
    m.enc_norm_out.apply(h.data(), h.data(), h.pixels(), true);
    h = m.enc_conv_out(h);
    sink.put("enc.conv_out", b, h);
    if (m.has_quant) {
      h = m.quant_conv(h);
      sink.put("quant_conv", b, h);
    }
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
  const i64 B = z.dim(0);
  ProbeSink sink(probe, B);
  Tensor out;
  for (i64 b = 0; b < B; ++b) {
    Map h = image_slice(z, b);
    if (m.has_post_quant) {
      h = m.post_quant_conv(h);
      sink.put("post_quant_conv", b, h);
    }
    h = m.dec_conv_in(h);
    sink.put("dec.conv_in", b, h);
    h = m.dec_mid(h);
    sink.put("dec.mid_block", b, h);
    for (std::size_t i = 0; i < m.up.size(); ++i) {
      const Level& lv = m.up[i];
      for (const Resnet& r : lv.resnets) h = r(h);
      if (lv.has_resample) {
        Map u = Map::make(2 * h.h, 2 * h.w, h.c);
        K::upsample_nearest2x(u.data(), h.data(), 1, h.h, h.w, h.c);
        h = Map{};
        h = lv.resample(u);
      }
      sink.put("dec.up_blocks." + std::to_string(i), b, h);
    }
    m.dec_norm_out.apply(h.data(), h.data(), h.pixels(), true);
    h = m.dec_conv_out(h);
    sink.put("dec.conv_out", b, h);
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
