#include "models/paint/realesrgan.h"

#include <spdlog/spdlog.h>

#include <algorithm>
#include <cmath>
#include <cstring>
#include <nlohmann/json.hpp>
#include <string>
#include <utility>

#include "models/core/error.h"
#include "models/core/safetensors.h"
#include "models/kernels/conv.h"
#include "models/kernels/elementwise.h"
#include "models/nn/config_reader.h"
#include "models/nn/init.h"
#include "models/nn/layers.h"
#include "models/nn/model_cache.h"
#include "models/nn/params.h"
#include "models/nn/weight_files.h"
#include "progress/progress.h"

namespace gen3d::models {

namespace {

using i64 = std::int64_t;
namespace K = kernels;
using kernels::parallel_chunks;
using nn::Conv2d;
using nn::ParamSource;

// nn.LeakyReLU(negative_slope=0.2) of rrdbnet_arch.py, and the residual scale 0.2 of
// ResidualDenseBlock / RRDB ("empirically, we use 0.2 to scale the residual").
constexpr float kSlope = 0.2f;
constexpr float kResidualScale = 0.2f;

inline float lrelu(float v) {
  return v >= 0.0f ? v : kSlope * v;
}

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

Map conv(const Conv2d& layer, const Map& x) {
  Map y = Map::make(x.h, x.w, layer.weight.cout);  // 3×3, padding 1: same size
  layer(y.data(), x.data(), 1, x.h, x.w);
  return y;
}

void lrelu_inplace(Map& x) {
  float* d = x.data();
  parallel_chunks(x.numel(), [&](i64 a, i64 e) {
    for (i64 i = a; i < e; ++i) d[i] = lrelu(d[i]);
  });
}

// y = x_scale · y + x (the blocks' scaled residual), in place on y.
void scaled_residual(Map& y, const Map& x, float scale) {
  float* d = y.data();
  const float* s = x.data();
  parallel_chunks(y.numel(), [&](i64 a, i64 e) {
    for (i64 i = a; i < e; ++i) d[i] = d[i] * scale + s[i];
  });
}

// cat[prefix, lrelu(growth)] along channels: dst (h, w, cp + cg) from prefix (h, w, cp) and the
// raw conv output growth (h, w, cg). The LeakyReLU after conv1..conv4 rides on the copy the
// concatenation needs anyway (the convolution kernel has no activation epilogue).
void cat_lrelu(float* dst, const float* prefix, i64 cp, const float* growth, i64 cg, i64 pixels) {
  const i64 cw = cp + cg;
  const i64 grain = std::max<i64>(1, (i64{1} << 15) / cw);
  parallel_chunks(
      pixels,
      [&](i64 a, i64 e) {
        for (i64 p = a; p < e; ++p) {
          float* o = dst + p * cw;
          std::memcpy(o, prefix + p * cp, static_cast<std::size_t>(cp) * sizeof(float));
          const float* g = growth + p * cg;
          for (i64 k = 0; k < cg; ++k) o[cp + k] = lrelu(g[k]);
        }
      },
      grain);
}

// F.interpolate(scale_factor=2, mode='nearest'), optionally of lrelu(x): y[r, c] = x[r/2, c/2].
Map upsample2x(const Map& x, bool with_lrelu) {
  Map y = Map::make(2 * x.h, 2 * x.w, x.c);
  if (!with_lrelu) {
    K::upsample_nearest2x(y.data(), x.data(), 1, x.h, x.w, x.c);
    return y;
  }
  const i64 c = x.c, ow = y.w;
  parallel_chunks(
      y.h,
      [&](i64 a, i64 e) {
        for (i64 r = a; r < e; ++r) {
          const float* src = x.data() + (r / 2) * x.w * c;
          float* dst = y.data() + r * ow * c;
          for (i64 q = 0; q < x.w; ++q)
            for (i64 k = 0; k < c; ++k)
              dst[2 * q * c + k] = dst[(2 * q + 1) * c + k] = lrelu(src[q * c + k]);
        }
      },
      1);
  return y;
}

struct ProbeSink {
  const RrdbProbe& probe;
  bool on() const { return static_cast<bool>(probe); }
  void put(const std::string& name, const Map& m) const {
    if (on()) probe(name, m.t);
  }
};

// Buffers a dense block reuses: two of the widest concatenation, used in turn, and the growth
// features, allocated once per forward (each is a few hundred MB for a whole 512² view).
struct Scratch {
  Tensor cat[2];
  Tensor growth;
  void reserve(i64 pixels, i64 widest, i64 ng) {
    if (growth.numel() >= pixels * ng && cat[0].numel() >= pixels * widest) return;
    for (auto& c : cat) c = Tensor(Shape{pixels * widest});
    growth = Tensor(Shape{pixels * ng});
  }
};

// basicsr/archs/rrdbnet_arch.py ResidualDenseBlock: five 3×3 convolutions over the growing
// concatenation [x, x1, .., x4], the first four followed by LeakyReLU.
struct ResidualDenseBlock {
  Conv2d conv[5];
  i64 nf = 0, ng = 0;
  void load(ParamSource& p, const std::string& name, i64 num_feat, i64 num_grow) {
    nf = num_feat;
    ng = num_grow;
    for (int k = 0; k < 4; ++k)
      conv[k].load_padded(p, name + ".conv" + std::to_string(k + 1), ng, nf + k * ng, 3);
    conv[4].load_padded(p, name + ".conv5", nf, nf + 4 * ng, 3);
  }
  // `trace`: the probe name of this block's growth features ("" for none).
  Map operator()(const Map& x, Scratch& scratch, const ProbeSink& sink,
                 const std::string& trace) const {
    const i64 P = x.pixels();
    scratch.reserve(P, nf + 4 * ng, ng);
    const float* cat = x.data();  // cat_0 = x: [h, w, nf]
    i64 width = nf;
    for (int k = 0; k < 4; ++k) {
      float* g = scratch.growth.data();
      conv[k](g, cat, 1, x.h, x.w);             // conv_k(cat_k): [h, w, ng]
      float* next = scratch.cat[k % 2].data();  // cat_{k+1}: [h, w, width + ng]
      cat_lrelu(next, cat, width, g, ng, P);
      if (!trace.empty() && sink.on()) {
        Map t = Map::make(x.h, x.w, ng);
        std::memcpy(t.data(), g, static_cast<std::size_t>(P * ng) * sizeof(float));
        lrelu_inplace(t);
        sink.put(trace + ".x" + std::to_string(k + 1), t);  // [1, h, w, ng]
      }
      cat = next;
      width += ng;
    }
    Map y = Map::make(x.h, x.w, nf);
    conv[4](y.data(), cat, 1, x.h, x.w);  // x5: [h, w, nf]
    if (!trace.empty()) sink.put(trace + ".x5", y);
    scaled_residual(y, x, kResidualScale);  // x5 · 0.2 + x: [h, w, nf]
    return y;
  }
};

// basicsr/archs/rrdbnet_arch.py RRDB: three dense blocks and a 0.2-scaled residual.
struct Rrdb {
  ResidualDenseBlock rdb[3];
  void load(ParamSource& p, const std::string& name, i64 nf, i64 ng) {
    for (int j = 0; j < 3; ++j) rdb[j].load(p, name + ".rdb" + std::to_string(j + 1), nf, ng);
  }
  Map operator()(const Map& x, Scratch& scratch, const ProbeSink& sink,
                 const std::string& name) const {
    const bool first = name == "body.0";  // the golden set traces the first block's insides
    Map h = rdb[0](x, scratch, sink, first ? "trace." + name + ".rdb1" : "");  // [h, w, nf]
    if (first) sink.put("act." + name + ".rdb1", h);
    h = rdb[1](h, scratch, sink, "");  // [h, w, nf]
    if (first) sink.put("act." + name + ".rdb2", h);
    h = rdb[2](h, scratch, sink, "");  // [h, w, nf]
    if (first) sink.put("act." + name + ".rdb3", h);
    scaled_residual(h, x, kResidualScale);  // [h, w, nf]
    return h;
  }
};

void check_positive(std::vector<std::string>& errs, const char* key, int v) {
  if (v < 1) errs.push_back(std::string("'") + key + "' must be >= 1, got " + std::to_string(v));
}

const TensorInfo* rank4(const WeightMap& w, const std::string& name) {
  const TensorInfo* t = w.info(name);
  return t && t->shape.size() == 4 ? t : nullptr;
}

}  // namespace

// ---------------------------------------------------------------------------------------------
// Config

void RrdbNetConfig::validate(const std::string& label) const {
  std::vector<std::string> errs;
  check_positive(errs, "num_in_ch", num_in_ch);
  check_positive(errs, "num_out_ch", num_out_ch);
  check_positive(errs, "num_feat", num_feat);
  check_positive(errs, "num_block", num_block);
  check_positive(errs, "num_grow_ch", num_grow_ch);
  if (scale != 4)
    errs.push_back("'scale' " + std::to_string(scale) +
                   " is not supported (4 only: scales 2 and 1 need RRDBNet's pixel_unshuffle)");
  if (errs.empty()) return;
  std::string msg = label + ": invalid RRDBNet config:";
  for (const auto& e : errs) msg += " " + e + ";";
  msg.pop_back();
  throw ModelError(msg);
}

RrdbNetConfig RrdbNetConfig::from_json(const nlohmann::json& params, const std::string& label) {
  RrdbNetConfig c;
  nn::ConfigReader r(params, label + ": RRDBNet");
  r.read("num_in_ch", c.num_in_ch);
  r.read("num_out_ch", c.num_out_ch);
  r.read("scale", c.scale);
  r.read("num_feat", c.num_feat);
  r.read("num_block", c.num_block);
  r.read("num_grow_ch", c.num_grow_ch);
  r.finish();
  c.validate(label);
  return c;
}

RrdbNetConfig RrdbNetConfig::infer(const WeightMap& weights, const std::string& label) {
  const TensorInfo* first = rank4(weights, "conv_first.weight");
  const TensorInfo* last = rank4(weights, "conv_last.weight");
  const TensorInfo* grow = rank4(weights, "body.0.rdb1.conv1.weight");
  if (!first || !last || !grow)
    throw ModelError(
        label +
        ": not an RRDBNet checkpoint (needs rank-4 conv_first.weight, "
        "conv_last.weight and body.0.rdb1.conv1.weight" +
        (weights.prefix().empty() ? std::string() : " under '" + weights.prefix() + "'") + ")");
  RrdbNetConfig c;
  c.num_feat = static_cast<int>(first->shape[0]);
  c.num_in_ch = static_cast<int>(first->shape[1]);
  c.num_out_ch = static_cast<int>(last->shape[0]);
  c.num_grow_ch = static_cast<int>(grow->shape[0]);
  c.num_block = 0;
  while (weights.contains("body." + std::to_string(c.num_block) + ".rdb1.conv1.weight"))
    ++c.num_block;
  // RRDBNet folds the scale into conv_first's input channels (pixel_unshuffle: ×4 for scale 2,
  // ×16 for scale 1); models in the wild have as many input as output channels.
  if (c.num_in_ch == 4 * c.num_out_ch || c.num_in_ch == 16 * c.num_out_ch) {
    c.scale = c.num_in_ch == 4 * c.num_out_ch ? 2 : 1;
    c.num_in_ch = c.num_out_ch;
  }
  c.validate(label);
  return c;
}

// ---------------------------------------------------------------------------------------------
// Network

struct RrdbNet::Impl {
  Conv2d conv_first;
  std::vector<Rrdb> body;
  Conv2d conv_body, conv_up1, conv_up2, conv_hr, conv_last;
  i64 params = 0;
};

namespace {

std::unique_ptr<RrdbNet::Impl> build(const RrdbNetConfig& c, ParamSource& p) {
  auto m = std::make_unique<RrdbNet::Impl>();
  const i64 nf = c.num_feat, ng = c.num_grow_ch;
  m->conv_first.load_padded(p, "conv_first", nf, c.num_in_ch, 3);
  m->body.resize(static_cast<std::size_t>(c.num_block));
  for (int i = 0; i < c.num_block; ++i)
    m->body[static_cast<std::size_t>(i)].load(p, "body." + std::to_string(i), nf, ng);
  m->conv_body.load_padded(p, "conv_body", nf, nf, 3);
  m->conv_up1.load_padded(p, "conv_up1", nf, nf, 3);
  m->conv_up2.load_padded(p, "conv_up2", nf, nf, 3);
  m->conv_hr.load_padded(p, "conv_hr", nf, nf, 3);
  m->conv_last.load_padded(p, "conv_last", c.num_out_ch, nf, 3);
  m->params = p.parameters();
  return m;
}

}  // namespace

RrdbNet::RrdbNet(RrdbNetConfig cfg, std::unique_ptr<Impl> impl)
    : cfg_(cfg), impl_(std::move(impl)) {}
RrdbNet::RrdbNet(RrdbNet&&) noexcept = default;
RrdbNet& RrdbNet::operator=(RrdbNet&&) noexcept = default;
RrdbNet::~RrdbNet() = default;

std::int64_t RrdbNet::num_parameters() const {
  return impl_->params;
}

bool RrdbNet::bf16() const {
  return impl_->conv_first.weight.bf16 != nullptr;
}

int RrdbNet::receptive_radius() const {
  // One pixel per 3×3 convolution at input resolution: conv_first, 15 per RRDB (3 blocks of 5),
  // conv_body; the upsampling tail (conv_up1 at ×2, conv_up2 / conv_hr / conv_last at ×4 behind
  // nearest ×2 steps) reaches 2 input pixels further.
  return 2 + 15 * cfg_.num_block + 2;
}

RrdbNet RrdbNet::load(const RrdbNetConfig& cfg, WeightMap& weights, WeightStorage storage) {
  cfg.validate();
  nn::CheckpointParams p(weights, storage);
  auto m = build(cfg, p);
  return RrdbNet(cfg, std::move(m));
}

RrdbNet RrdbNet::load_file(const std::string& path, WeightStorage storage,
                           const RrdbNetConfig* cfg) {
  auto file = SafetensorsFile::open(path);
  // realesrgan/utils.py RealESRGANer.__init__: `keyname = 'params_ema' if 'params_ema' in
  // loadnet else 'params'`. A nested torch dict reads as "<key>.<name>"; a file without either
  // level is a bare state_dict (for_submodel keeps its names unchanged).
  bool has_ema = false;
  for (const auto& t : file->tensors())
    if (t.name.rfind("params_ema.", 0) == 0) {
      has_ema = true;
      break;
    }
  WeightMap wm = WeightMap::for_submodel(file, has_ema ? "params_ema" : "params");
  const RrdbNetConfig c = cfg ? *cfg : RrdbNetConfig::infer(wm, path);
  RrdbNet net = load(c, wm, storage);
  wm.finish("RRDBNet (" + path + ")");
  spdlog::info("RRDBNet x{}: {} blocks, {} features, {} parameters from {} ({})", c.scale,
               c.num_block, c.num_feat, net.num_parameters(), path,
               storage == WeightStorage::kBF16 ? "bf16" : "fp32");
  return net;
}

RrdbNet RrdbNet::random(const RrdbNetConfig& cfg, std::uint64_t seed, WeightStorage storage,
                        float scale) {
  cfg.validate();
  nn::RandomParams p(nn::uniform_init(seed, scale), storage);
  auto m = build(cfg, p);
  return RrdbNet(cfg, std::move(m));
}

std::vector<std::pair<std::string, Shape>> RrdbNet::expected_tensors(const RrdbNetConfig& cfg) {
  cfg.validate();
  nn::ShapeRecorder p;
  build(cfg, p);
  return std::move(p.list);
}

Tensor RrdbNet::forward(const Tensor& x, const RrdbProbe& probe) const {
  if (x.rank() != 4 || x.dim(3) != cfg_.num_in_ch || x.numel() == 0)
    throw ModelError("RRDBNet: input has shape " + x.shape().str() + ", expected (B, H, W, " +
                     std::to_string(cfg_.num_in_ch) + ")");
  const Impl& m = *impl_;
  const ProbeSink sink{probe};
  const i64 B = x.dim(0), H = x.dim(1), W = x.dim(2), s = cfg_.scale;
  const i64 per_in = H * W * cfg_.num_in_ch, per_out = s * H * s * W * cfg_.num_out_ch;
  Tensor out(Shape{B, s * H, s * W, cfg_.num_out_ch});
  for (i64 b = 0; b < B; ++b) {
    Map in = Map::make(H, W, cfg_.num_in_ch);
    std::memcpy(in.data(), x.data() + b * per_in, static_cast<std::size_t>(per_in) * 4);
    const Map feat = conv(m.conv_first, in);  // [H, W, nf]
    in = Map{};
    sink.put("act.conv_first", feat);
    Map h = feat;
    {
      Scratch scratch;
      for (std::size_t i = 0; i < m.body.size(); ++i) {
        const std::string name = "body." + std::to_string(i);
        h = m.body[i](h, scratch, sink, name);  // [H, W, nf]
        sink.put("act." + name, h);
      }
    }
    Map trunk = conv(m.conv_body, h);  // [H, W, nf]
    h = Map{};
    sink.put("act.conv_body", trunk);
    K::add_inplace(trunk.data(), feat.data(), trunk.numel());  // feat + conv_body(..): [H, W, nf]
    sink.put("act.trunk", trunk);
    Map u = conv(m.conv_up1, upsample2x(trunk, false));  // [2H, 2W, nf], before lrelu
    trunk = Map{};
    if (sink.on()) {
      sink.put("act.conv_up1", u);
      Map a = u;
      lrelu_inplace(a);
      sink.put("act.up1", a);
    }
    // lrelu commutes with nearest upsampling: it is applied on the copy.
    u = conv(m.conv_up2, upsample2x(u, true));  // [4H, 4W, nf]
    lrelu_inplace(u);
    sink.put("act.up2", u);
    u = conv(m.conv_hr, u);  // [4H, 4W, nf]
    lrelu_inplace(u);
    sink.put("act.hr", u);
    const Map y = conv(m.conv_last, u);  // [4H, 4W, out_ch]
    sink.put("out", y);
    std::memcpy(out.data() + b * per_out, y.data(), static_cast<std::size_t>(per_out) * 4);
  }
  return out;
}

Tensor RrdbNet::forward_tiled(const Tensor& x, const TileOptions& tiles,
                              const TileObserver& on_tile) const {
  if (tiles.tile < 0 || tiles.tile_pad < 0)
    throw ModelError("RRDBNet tiling: tile " + std::to_string(tiles.tile) + " and tile_pad " +
                     std::to_string(tiles.tile_pad) + " must not be negative");
  if (tiles.tile == 0) {
    Tensor y = forward(x);
    if (on_tile) on_tile(1, 1);
    return y;
  }
  if (x.rank() != 4 || x.dim(3) != cfg_.num_in_ch || x.numel() == 0)
    throw ModelError("RRDBNet: input has shape " + x.shape().str() + ", expected (B, H, W, " +
                     std::to_string(cfg_.num_in_ch) + ")");
  // realesrgan/utils.py RealESRGANer.tile_process, per image of the batch.
  const i64 B = x.dim(0), H = x.dim(1), W = x.dim(2), C = cfg_.num_in_ch;
  const i64 s = cfg_.scale, OC = cfg_.num_out_ch, T = tiles.tile, pad = tiles.tile_pad;
  Tensor out(Shape{B, s * H, s * W, OC});
  const i64 tiles_x = (W + T - 1) / T, tiles_y = (H + T - 1) / T;
  progress::Steps steps("upscale tile", B * tiles_y * tiles_x);
  for (i64 b = 0; b < B; ++b) {
    const float* img = x.data() + b * H * W * C;
    float* dst = out.data() + b * s * H * s * W * OC;
    for (i64 ty = 0; ty < tiles_y; ++ty) {
      for (i64 tx = 0; tx < tiles_x; ++tx) {
        const i64 x0 = tx * T, x1 = std::min(x0 + T, W);  // the tile: [y0, y1) × [x0, x1)
        const i64 y0 = ty * T, y1 = std::min(y0 + T, H);
        const i64 px0 = std::max<i64>(x0 - pad, 0), px1 = std::min(x1 + pad, W);  // with context
        const i64 py0 = std::max<i64>(y0 - pad, 0), py1 = std::min(y1 + pad, H);
        Tensor crop(Shape{1, py1 - py0, px1 - px0, C});  // [1, th, tw, C]
        for (i64 r = py0; r < py1; ++r)
          std::memcpy(crop.data() + (r - py0) * (px1 - px0) * C, img + (r * W + px0) * C,
                      static_cast<std::size_t>((px1 - px0) * C) * sizeof(float));
        const Tensor o = forward(crop);  // [1, s·th, s·tw, OC]
        const i64 ow = s * (px1 - px0);
        // Keep the tile's own output: rows s·(y0 - py0) .. + s·(y1 - y0), likewise columns.
        const i64 oy = s * (y0 - py0), ox = s * (x0 - px0);
        for (i64 r = 0; r < s * (y1 - y0); ++r)
          std::memcpy(dst + ((s * y0 + r) * s * W + s * x0) * OC,
                      o.data() + ((oy + r) * ow + ox) * OC,
                      static_cast<std::size_t>(s * (x1 - x0) * OC) * sizeof(float));
        steps.next();
        if (on_tile)
          on_tile(static_cast<int>((b * tiles_y + ty) * tiles_x + tx + 1),
                  static_cast<int>(B * tiles_y * tiles_x));
      }
    }
  }
  return out;
}

// ---------------------------------------------------------------------------------------------
// RealESRGANer pre/post-processing

Tensor esrgan_input(const image::ImageU8& rgb) {
  if (rgb.channels != 3 || rgb.width <= 0 || rgb.height <= 0 ||
      rgb.pixels.size() != static_cast<std::size_t>(rgb.width) * rgb.height * 3)
    throw ModelError("RealESRGAN: expected an 8-bit RGB image, got " + std::to_string(rgb.width) +
                     "x" + std::to_string(rgb.height) + " with " + std::to_string(rgb.channels) +
                     " channels");
  const i64 P = static_cast<i64>(rgb.width) * rgb.height;
  Tensor x(Shape{1, rgb.height, rgb.width, 3});
  float* d = x.data();
  const std::uint8_t* s = rgb.pixels.data();
  // realesrgan/utils.py enhance: `img = img.astype(np.float32) / max_range` (255 for 8-bit), then
  // `cv2.cvtColor(img, cv2.COLOR_BGR2RGB)` on what is already RGB (Hunyuan3D-2.1 passes
  // np.array(PIL RGB image)): the network receives B, G, R. Reproduced as is.
  for (i64 p = 0; p < P; ++p)
    for (int k = 0; k < 3; ++k) d[p * 3 + k] = static_cast<float>(s[p * 3 + 2 - k]) / 255.0f;
  return x;
}

image::ImageU8 esrgan_output(const Tensor& out_bgr) {
  if (out_bgr.rank() != 4 || out_bgr.dim(0) != 1 || out_bgr.dim(3) != 3)
    throw ModelError("RealESRGAN: network output has shape " + out_bgr.shape().str() +
                     ", expected (1, H, W, 3)");
  image::ImageU8 img(static_cast<int>(out_bgr.dim(2)), static_cast<int>(out_bgr.dim(1)), 3);
  const float* s = out_bgr.data();
  std::uint8_t* d = img.pixels.data();
  // enhance: `output_img.data.squeeze().float().cpu().clamp_(0, 1)`, channels [2, 1, 0] back to
  // RGB, then `(output * 255.0).round().astype(np.uint8)`: a float32 product and numpy's
  // round-half-to-even (nearbyint in the default rounding mode).
  parallel_chunks(out_bgr.dim(1) * out_bgr.dim(2), [&](i64 a, i64 e) {
    for (i64 p = a; p < e; ++p)
      for (int k = 0; k < 3; ++k) {
        const float v = std::clamp(s[p * 3 + 2 - k], 0.0f, 1.0f) * 255.0f;
        d[p * 3 + k] = static_cast<std::uint8_t>(std::nearbyint(v));
      }
  });
  return img;
}

image::ImageU8 esrgan_enhance(const RrdbNet& net, const image::ImageU8& rgb,
                              const TileOptions& tiles, const TileObserver& on_tile) {
  if (net.config().num_in_ch != 3 || net.config().num_out_ch != 3)
    throw ModelError("RealESRGAN: enhance needs a 3-channel network, this one has " +
                     std::to_string(net.config().num_in_ch) + " in / " +
                     std::to_string(net.config().num_out_ch) + " out");
  // pre_pad 0 and scale 4: no reflect pad and no mod pad, so no crops after the network.
  return esrgan_output(net.forward_tiled(esrgan_input(rgb), tiles, on_tile));
}

std::shared_ptr<const RrdbNet> shared_rrdbnet(const std::string& path, WeightStorage storage) {
  return nn::shared_model<RrdbNet>(
      nn::canonical_path(path) + "|" + std::string(storage_name(storage)),
      [&] { return RrdbNet::load_file(path, storage); });
}

}  // namespace gen3d::models
