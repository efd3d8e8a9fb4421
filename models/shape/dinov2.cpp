#include "models/shape/dinov2.h"

#include <spdlog/spdlog.h>
#include <tbb/blocked_range.h>
#include <tbb/parallel_for.h>
#include <nlohmann/json.hpp>

#include <algorithm>
#include <cmath>
#include <filesystem>
#include <vector>

#include "models/core/dtype.h"
#include "models/core/error.h"
#include "models/core/safetensors.h"
#include "models/kernels/activations.h"
#include "models/kernels/attention.h"
#include "models/kernels/fused.h"
#include "models/kernels/linear.h"
#include "models/kernels/norms.h"
#include "models/nn/config_reader.h"
#include "models/nn/device_ops.h"
#include "models/nn/init.h"
#include "models/nn/layers.h"
#include "models/nn/model_cache.h"
#include "models/nn/weight_files.h"
#include "models/shape/checkpoints.h"
#include "models/shape/image_preprocess.h"
#include "models/shape/multiview.h"

namespace gen3d::models {

namespace {

using json = nlohmann::json;
using kernels::Act;
using i64 = std::int64_t;

using nn::LayerNorm;
using nn::Linear;
using nn::ParamSource;
using nn::Quantize;

// In int8 mode the layers' query / key / value projection, attention output and MLP (or SwiGLU)
// run W8A8; the patch embedding (the first layer) stays bf16, as do the attention products, and
// the norms, layer scales and residual stream float32. The network ends in a LayerNorm.

// Dinov2SelfAttention + Dinov2SelfOutput. query / key / value are loaded separately (their own
// names) and packed into one [3C, C] projection whose output columns are (3, heads, D).
struct Attention {
  Linear qkv;    // attention.attention.{query,key,value}
  Linear dense;  // attention.output.dense
  void load(ParamSource& c, const std::string& name, i64 C, bool qkv_bias) {
    const std::string a = name + ".attention.";
    // Fused [q; k; v]; a shape recorder hands out empty tensors, and then so does this.
    Tensor w, b;
    const char* parts[3] = {"query", "key", "value"};
    for (int p = 0; p < 3; ++p) {
      Tensor wp = c.take(a + parts[p] + ".weight", {C, C});
      if (!wp.empty()) {
        if (w.empty()) w = Tensor({3 * C, C});
        std::copy_n(wp.data(), C * C, w.data() + p * C * C);
      }
      if (qkv_bias) {
        Tensor bp = c.take(a + parts[p] + ".bias", {C});
        if (!bp.empty()) {
          if (b.empty()) b = Tensor({3 * C});
          std::copy_n(bp.data(), C, b.data() + p * C);
        }
      }
    }
    qkv.set(c, std::move(w), qkv_bias ? std::move(b) : Tensor(), C, 3 * C, Quantize::kInt8);
    dense.load(c, name + ".output.dense", C, C, true, Quantize::kInt8);
  }
};

// Dinov2MLP (fc1 -> act -> fc2) or Dinov2SwiGLUFFN (weights_in -> silu(x1) * x2 -> weights_out).
struct Ffn {
  bool swiglu = false;
  i64 hidden = 0;                  // 4C (MLP) or hf (SwiGLU)
  Linear fc1, fc2;                 // MLP
  Linear weights_in, weights_out;  // SwiGLU
  void load(ParamSource& c, const std::string& name, const Dinov2Config& cfg) {
    const i64 C = cfg.hidden_size;
    swiglu = cfg.use_swiglu_ffn;
    if (swiglu) {
      hidden = cfg.swiglu_hidden();
      weights_in.load(c, name + ".weights_in", C, 2 * hidden, true, Quantize::kInt8);
      weights_out.load(c, name + ".weights_out", hidden, C, true, Quantize::kInt8);
    } else {
      hidden = cfg.mlp_hidden();
      fc1.load(c, name + ".fc1", C, hidden, true, Quantize::kInt8);
      fc2.load(c, name + ".fc2", hidden, C, true, Quantize::kInt8);
    }
  }
};

struct Layer {
  LayerNorm norm1, norm2;
  Attention attention;
  Tensor lambda1, lambda2;  // layer_scale{1,2}.lambda1 [C]
  nn::DeviceCopy lambda1_copy, lambda2_copy;
  Ffn mlp;
  void load(ParamSource& c, const std::string& name, const Dinov2Config& cfg) {
    const i64 C = cfg.hidden_size;
    const auto eps = static_cast<float>(cfg.layer_norm_eps);
    norm1.load(c, name + ".norm1", C, eps);
    attention.load(c, name + ".attention", C, cfg.qkv_bias);
    lambda1 = c.take(name + ".layer_scale1.lambda1", {C});
    norm2.load(c, name + ".norm2", C, eps);
    mlp.load(c, name + ".mlp", cfg);
    lambda2 = c.take(name + ".layer_scale2.lambda1", {C});
  }
};

Act parse_act(const std::string& name) {
  if (name == "gelu") return Act::kGeluErf;
  if (name == "gelu_new" || name == "gelu_pytorch_tanh" || name == "gelu_fast")
    return Act::kGeluTanh;
  if (name == "silu" || name == "swish") return Act::kSilu;
  throw ModelError("Dinov2Config: unsupported hidden_act \"" + name +
                   "\" (gelu, gelu_new, gelu_pytorch_tanh, silu)");
}

// Keys cubic convolution weights (A = -0.75) for fractional offset t in [0, 1).
void keys_weights(double t, double w[4]) {
  const double A = -0.75;
  auto k1 = [&](double x) { return ((A + 2) * x - (A + 3)) * x * x + 1; };
  auto k2 = [&](double x) { return ((A * x - 5 * A) * x + 8 * A) * x - 4 * A; };
  w[0] = k2(t + 1);
  w[1] = k1(t);
  w[2] = k1(1 - t);
  w[3] = k2(2 - t);
}

// Copies rows of a [rows, ld] buffer's columns [c0, c0 + w) into a [B, T, w] tensor.
Tensor columns(const float* base, i64 B, i64 T, i64 ld, i64 c0, i64 w) {
  Tensor out({B, T, w});
  for (i64 r = 0; r < B * T; ++r) std::copy_n(base + r * ld + c0, w, out.data() + r * w);
  return out;
}

// x[r, c] += lambda[c] * y[r, c] over rows x C (layer scale + residual).
void scaled_residual(const nn::DeviceOps& k, float* x, const float* y, const float* lambda,
                     i64 rows, i64 C) {
  k.gated_residual(x, rows * C, y, rows * C, 1, rows, C, lambda, 0);
}

}  // namespace

// ---- configs ----------------------------------------------------------------------------------

int Dinov2Config::swiglu_hidden() const {
  const int h = mlp_hidden();
  return (static_cast<int>(h * 2.0 / 3.0) + 7) / 8 * 8;
}

void Dinov2Config::validate() const {
  std::vector<std::string> p;
  if (hidden_size <= 0) p.push_back("hidden_size must be positive");
  if (num_hidden_layers < 0) p.push_back("num_hidden_layers must be >= 0");
  if (num_attention_heads <= 0 || (hidden_size > 0 && hidden_size % num_attention_heads != 0))
    p.push_back("hidden_size " + std::to_string(hidden_size) +
                " is not divisible by num_attention_heads " + std::to_string(num_attention_heads));
  if (patch_size <= 0) p.push_back("patch_size must be positive");
  if (num_channels <= 0) p.push_back("num_channels must be positive");
  if (patch_size > 0 && image_size < patch_size)
    p.push_back("image_size " + std::to_string(image_size) + " is smaller than patch_size");
  if (!(mlp_ratio > 0)) p.push_back("mlp_ratio must be positive");
  if (!(layer_norm_eps > 0)) p.push_back("layer_norm_eps must be positive");
  try {
    parse_act(hidden_act);
  } catch (const ModelError& e) {
    p.push_back(e.what());
  }
  if (p.empty()) return;
  std::string msg = "invalid Dinov2Config:";
  for (const auto& s : p) msg += "\n  " + s;
  throw ModelError(msg);
}

Dinov2Config Dinov2Config::from_json(std::string_view json_text) {
  const json j = nn::parse_config(json_text, "Dinov2Config");
  Dinov2Config c;
  nn::ConfigReader r(j, "Dinov2Config");
  r.read("hidden_size", c.hidden_size);
  r.read("num_hidden_layers", c.num_hidden_layers);
  r.read("num_attention_heads", c.num_attention_heads);
  r.read("patch_size", c.patch_size);
  r.read("num_channels", c.num_channels);
  r.read("image_size", c.image_size);
  r.read("mlp_ratio", c.mlp_ratio);
  r.read("layer_norm_eps", c.layer_norm_eps);
  r.read("qkv_bias", c.qkv_bias);
  r.read("use_swiglu_ffn", c.use_swiglu_ffn);
  r.read("hidden_act", c.hidden_act);
  r.read("layerscale_value", c.layerscale_value);
  r.require("model_type", "dinov2", "only \"dinov2\"");
  r.finish(nn::ConfigReader::Unknown::kAccept);  // Hugging Face configs carry training keys
  c.validate();
  return c;
}

int ImageEncoderConfig::tokens() const {
  const int g = image_size / model.patch_size;
  return g * g + (use_cls_token ? 1 : 0);
}

void ImageEncoderConfig::validate() const {
  model.validate();
  if (image_size < model.patch_size)
    throw ModelError("ImageEncoderConfig: image_size " + std::to_string(image_size) +
                     " is smaller than the patch size " + std::to_string(model.patch_size));
  if (!multiview) return;
  if (view_num < 1)
    throw ModelError("DinoImageEncoderMV: view_num " + std::to_string(view_num) +
                     " must be positive");
  if (model.hidden_size % 2 != 0)
    throw ModelError("DinoImageEncoderMV: the sinusoidal view embedding needs an even width, not " +
                     std::to_string(model.hidden_size));
  // DinoImageEncoderMV.forward keeps every token of last_hidden_state but sizes its view
  // embedding without the CLS row when use_cls_token is false: the reference cannot run that.
  if (!use_cls_token)
    throw ModelError(
        "DinoImageEncoderMV with use_cls_token false is not supported (the "
        "reference's view embedding would not match its tokens)");
}

ImageEncoderConfig ImageEncoderConfig::from_json(std::string_view json_text) {
  json j = nn::parse_config(json_text, "image encoder config");
  if (j.contains("params") && j["params"].is_object()) j = j["params"];
  if (j.contains("main_image_encoder")) j = j["main_image_encoder"];
  ImageEncoderConfig c;
  if (j.contains("type")) {
    const std::string type = j["type"].is_string() ? j["type"].get<std::string>() : "";
    if (type != "DinoImageEncoder" && type != "DinoImageEncoderMV")
      throw ModelError("image encoder type \"" + type +
                       "\" is not supported (DinoImageEncoder, DinoImageEncoderMV)");
    c.multiview = type == "DinoImageEncoderMV";
  }
  if (j.contains("kwargs")) j = j["kwargs"];
  try {
    if (j.contains("config")) {
      c.model = Dinov2Config::from_json(j["config"].dump());
      c.image_size = j.value("image_size", 224);  // DinoImageEncoder's default
      c.use_cls_token = j.value("use_cls_token", true);
      if (c.multiview) c.view_num = j.value("view_num", 4);  // DinoImageEncoderMV's default
    } else {
      c.model = Dinov2Config::from_json(j.dump());
      c.image_size = c.model.image_size;
    }
  } catch (const json::exception& e) {
    throw ModelError(std::string("image encoder config: ") + e.what());
  }
  c.validate();
  return c;
}

ImageEncoderConfig ImageEncoderConfig::from_file(const std::string& path,
                                                 std::string_view section) {
  const json j = nn::read_config_file(path, section);
  try {
    return from_json(j.dump());
  } catch (const ModelError& e) {
    throw ModelError(path + " [" + std::string(section) + "]: " + e.what());
  }
}

// ---- model ------------------------------------------------------------------------------------

namespace {

// The device backends run bf16 layers: int8 weights are a CPU form.
void check_options(const Dinov2Options& opt) {
  if (opt.device != Device::kCpu && opt.storage == WeightStorage::kInt8)
    throw ModelError(std::string("Dinov2Model: int8 runs on the CPU only, not on ") +
                     device_name(opt.device));
}

}  // namespace

struct Dinov2Model::Impl {
  Dinov2Config cfg;
  Device device = Device::kCpu;
  Act act = Act::kGeluErf;
  i64 params = 0;
  std::size_t bytes = 0;

  Tensor cls_token;            // [1, 1, C]
  Tensor position_embeddings;  // [1, M^2 + 1, C]
  Linear patch;                // projection as [C, ch P P]
  std::vector<Layer> layers;
  LayerNorm layernorm;

  void load(ParamSource& c) {
    const i64 C = cfg.hidden_size, P = cfg.patch_size, ch = cfg.num_channels;
    const i64 M = cfg.position_grid();
    act = parse_act(cfg.hidden_act);
    cls_token = c.take("embeddings.cls_token", {1, 1, C});
    c.take("embeddings.mask_token", {1, C});  // masked pre-training only: claimed, not kept
    c.kept_as(C, 0);
    position_embeddings = c.take("embeddings.position_embeddings", {1, M * M + 1, C});
    {
      const std::string pn = "embeddings.patch_embeddings.projection";
      Tensor w = c.take(pn + ".weight", {C, ch, P, P});
      Tensor b = c.take(pn + ".bias", {C});
      patch.set(c, std::move(w), std::move(b), ch * P * P, C);
    }
    layers.resize(static_cast<std::size_t>(cfg.num_hidden_layers));
    for (int i = 0; i < cfg.num_hidden_layers; ++i)
      layers[static_cast<std::size_t>(i)].load(c, "encoder.layer." + std::to_string(i), cfg);
    layernorm.load(c, "layernorm", C, static_cast<float>(cfg.layer_norm_eps));
    params = c.parameters();
    bytes = c.bytes();
  }
};

Dinov2Model::Dinov2Model(std::unique_ptr<Impl> impl) : impl_(std::move(impl)) {}
Dinov2Model::Dinov2Model(Dinov2Model&&) noexcept = default;
Dinov2Model& Dinov2Model::operator=(Dinov2Model&&) noexcept = default;
Dinov2Model::~Dinov2Model() = default;

const Dinov2Config& Dinov2Model::config() const {
  return impl_->cfg;
}
std::int64_t Dinov2Model::num_parameters() const {
  return impl_->params;
}
std::size_t Dinov2Model::weight_bytes() const {
  return impl_->bytes;
}

Dinov2Model Dinov2Model::load(const Dinov2Config& config, const std::string& path, Options opt) {
  return load(config, SafetensorsFile::open(path), opt);
}

Dinov2Model Dinov2Model::load(const Dinov2Config& config,
                              std::shared_ptr<const SafetensorsFile> file, Options opt) {
  WeightMap w = WeightMap::for_submodel(std::move(file), kImageEncoderPrefix);
  return load(config, w, opt);
}

Dinov2Model Dinov2Model::load(const Dinov2Config& config, WeightMap& weights, Options opt) {
  config.validate();
  check_options(opt);
  auto impl = std::make_unique<Impl>();
  impl->cfg = config;
  impl->device = opt.device;
  nn::CheckpointParams params(weights, opt.storage);
  impl->load(params);
  weights.finish("Dinov2Model");
  spdlog::info("Dinov2Model: loaded {} parameters from {} ({} MiB in memory)", impl->params,
               weights.file().path(), impl->bytes >> 20);
  return Dinov2Model(std::move(impl));
}

std::vector<std::pair<std::string, Shape>> Dinov2Model::expected_tensors(
    const Dinov2Config& config) {
  config.validate();
  Impl impl;
  impl.cfg = config;
  nn::ShapeRecorder recorder;
  impl.load(recorder);
  return std::move(recorder.list);
}

Dinov2Model Dinov2Model::random(const Dinov2Config& config, std::uint64_t seed, Options opt) {
  config.validate();
  check_options(opt);
  auto impl = std::make_unique<Impl>();
  impl->cfg = config;
  impl->device = opt.device;
  // Uniform weights with PyTorch's default bound sqrt(3 / fan_in); norm weights 1 ± 0.1,
  // layer scales in [0.1, 1), tokens and position embeddings ± 0.5, biases ± 0.02.
  nn::SplitMix rng(seed * nn::kGoldenGamma + 0x632BE59BD9F9776Bull);
  nn::RandomParams params(
      [&](const std::string& name, Tensor& t) {
        const bool norm = name.find("norm") != std::string::npos;
        float center = 0.0f, half = 0.02f;  // biases, tokens
        if (name.ends_with("lambda1")) {
          center = 0.55f;
          half = 0.45f;
        } else if (norm && name.ends_with(".weight")) {
          center = 1.0f;
          half = 0.1f;
        } else if (name.ends_with(".weight")) {
          half = std::sqrt(3.0f / static_cast<float>(t.numel() / t.dim(0)));
        } else if (name.ends_with("position_embeddings") || name.ends_with("cls_token")) {
          half = 0.5f;
        }
        for (auto& v : t.span()) v = center + half * rng.symmetric();
      },
      opt.storage);
  impl->load(params);
  return Dinov2Model(std::move(impl));
}

Tensor Dinov2Model::position_embeddings(int gh, int gw, bool square_input) const {
  const Impl& m = *impl_;
  const i64 C = m.cfg.hidden_size;
  const i64 M = m.cfg.position_grid();
  if (gh <= 0 || gw <= 0)
    throw ModelError("Dinov2Model: empty patch grid " + std::to_string(gh) + "x" +
                     std::to_string(gw));
  if (static_cast<i64>(gh) * gw == M * M && square_input) return m.position_embeddings.clone();
  Tensor out({1, 1 + static_cast<i64>(gh) * gw, C});  // [1, 1 + gh gw, C]
  const float* table = m.position_embeddings.data();
  std::copy_n(table, C, out.data());  // CLS row
  const float* grid = table + C;      // [M, M, C] row-major
  struct Taps {
    i64 idx[4];
    double w[4];
  };
  auto axis = [M](int g) {
    std::vector<Taps> taps(static_cast<std::size_t>(g));
    const double scale = static_cast<double>(M) / g;
    for (int i = 0; i < g; ++i) {
      const double src = scale * (i + 0.5) - 0.5;
      const double f = std::floor(src);
      Taps& t = taps[static_cast<std::size_t>(i)];
      keys_weights(src - f, t.w);
      for (int k = 0; k < 4; ++k) t.idx[k] = std::clamp<i64>(static_cast<i64>(f) - 1 + k, 0, M - 1);
    }
    return taps;
  };
  const std::vector<Taps> ty = axis(gh), tx = axis(gw);
  std::vector<double> row(static_cast<std::size_t>(C));
  for (int y = 0; y < gh; ++y)
    for (int x = 0; x < gw; ++x) {
      std::fill(row.begin(), row.end(), 0.0);
      const Taps& a = ty[static_cast<std::size_t>(y)];
      const Taps& b = tx[static_cast<std::size_t>(x)];
      for (int ky = 0; ky < 4; ++ky)
        for (int kx = 0; kx < 4; ++kx) {
          const double w = a.w[ky] * b.w[kx];
          const float* src = grid + (a.idx[ky] * M + b.idx[kx]) * C;
          for (i64 c = 0; c < C; ++c) row[static_cast<std::size_t>(c)] += w * src[c];
        }
      float* dst = out.data() + (1 + static_cast<i64>(y) * gw + x) * C;
      for (i64 c = 0; c < C; ++c) dst[c] = static_cast<float>(row[static_cast<std::size_t>(c)]);
    }
  return out;
}

Tensor Dinov2Model::forward(const Tensor& pixel_values, const TraceFn* trace) const {
  const Impl& m = *impl_;
  const Dinov2Config& cfg = m.cfg;
  const i64 ch = cfg.num_channels, P = cfg.patch_size, C = cfg.hidden_size;
  if (pixel_values.rank() != 4 || pixel_values.empty() || pixel_values.dim(1) != ch)
    throw ModelError("Dinov2Model::forward: pixel_values has shape " + pixel_values.shape().str() +
                     ", expected [B, " + std::to_string(ch) + ", H, W]");
  if (pixel_values.device() != Device::kCpu)
    throw ModelError("Dinov2Model::forward: pixel_values must be on the CPU");
  if (trace && m.device != Device::kCpu)
    throw ModelError("Dinov2Model::forward: per-layer traces are taken on the CPU only");
  const i64 B = pixel_values.dim(0), H = pixel_values.dim(2), W = pixel_values.dim(3);
  const i64 gh = H / P, gw = W / P;
  if (gh == 0 || gw == 0)
    throw ModelError("Dinov2Model::forward: image " + std::to_string(H) + "x" + std::to_string(W) +
                     " is smaller than one patch (" + std::to_string(P) + ")");
  const i64 N = gh * gw, T = N + 1, rows = B * T;
  const i64 nh = cfg.num_attention_heads, D = cfg.head_dim();
  const nn::DeviceOps& k = nn::device_ops(m.device);
  const Device dev = m.device;
  auto tr = [trace](const std::string& name, const Tensor& v) {
    if (trace) (*trace)(name, v);
  };
  // A host tensor where the pass runs: itself on the CPU, a copy on a device.
  auto on_device = [dev](const Tensor& t) { return t.on(dev); };

  // Patch embedding: im2col rows [B, N, ch P P] (column order ch, ky, kx like the conv weight).
  const i64 K = ch * P * P;
  Tensor cols({B * N, K});  // [B N, ch P P]
  tbb::parallel_for(i64{0}, B * N, [&](i64 r) {
    const i64 b = r / N, n = r % N, py = n / gw, px = n % gw;
    float* dst = cols.data() + r * K;
    for (i64 c = 0; c < ch; ++c)
      for (i64 ky = 0; ky < P; ++ky)
        std::copy_n(pixel_values.data() + ((b * ch + c) * H + py * P + ky) * W + px * P, P,
                    dst + (c * P + ky) * P);
  });
  Tensor X0({B, T, C});  // [B, T, C] CLS rows; the patch rows are written on the device
  for (i64 b = 0; b < B; ++b) std::copy_n(m.cls_token.data(), C, X0.data() + b * T * C);
  Tensor X = dev == Device::kCpu ? std::move(X0) : X0.to(dev);  // [B, T, C] residual stream
  {
    const Tensor cols_d = on_device(cols);
    for (i64 b = 0; b < B; ++b)
      k.linear(m.patch, X.data() + (b * T + 1) * C, C, cols_d.data() + b * N * K, K, N);  // [N, C]
  }
  if (trace) {
    Tensor patches({B, N, C});  // [B, N, C] rows 1.. of each item
    for (i64 b = 0; b < B; ++b)
      std::copy_n(X.data() + (b * T + 1) * C, N * C, patches.data() + b * N * C);
    tr("emb.patch", patches);
  }
  const Tensor pos = position_embeddings(static_cast<int>(gh), static_cast<int>(gw), H == W);
  tr("emb.pos", pos);  // [1, T, C]
  {
    const Tensor pos_d = on_device(pos);
    for (i64 b = 0; b < B; ++b) k.add(X.data() + b * T * C, pos_d.data(), T * C);  // [T, C]
  }
  tr("hidden_states.0", X);

  Tensor A({B, T, C}, dev);        // [B, T, C] normed input / attention context
  Tensor QKV({B, T, 3 * C}, dev);  // [B, T, 3C] columns (3, heads, D)
  Tensor Pout({B, T, C}, dev);     // [B, T, C] branch outputs
  i64 max_hidden = 0;
  for (const Layer& l : m.layers)
    max_hidden = std::max(max_hidden, l.mlp.swiglu ? 3 * l.mlp.hidden : l.mlp.hidden);
  Tensor HID({rows * std::max<i64>(max_hidden, 1)}, dev);  // [rows, 2hf + hf] or [rows, 4C]

  for (std::size_t li = 0; li < m.layers.size(); ++li) {
    const Layer& L = m.layers[li];
    const std::string pre = "layer." + std::to_string(li) + ".";
    k.layer_norm(L.norm1, A.data(), C, X.data(), C, rows);  // [B, T, C]
    if (trace) tr(pre + "norm1", A);
    k.linear(L.attention.qkv, QKV.data(), 3 * C, A.data(), C, rows);  // [B, T, 3C]
    if (trace) {
      tr(pre + "q", columns(QKV.data(), B, T, 3 * C, 0, C));
      tr(pre + "k", columns(QKV.data(), B, T, 3 * C, C, C));
      tr(pre + "v", columns(QKV.data(), B, T, 3 * C, 2 * C, C));
      // Explicit softmax(q k^T / sqrt(D)) for the trace only: [B, heads, T, T].
      Tensor probs({B, nh, T, T});
      const float scale = 1.0f / std::sqrt(static_cast<float>(D));
      std::vector<float> kq(static_cast<std::size_t>(T * D)), qq(static_cast<std::size_t>(T * D));
      for (i64 b = 0; b < B; ++b)
        for (i64 h = 0; h < nh; ++h) {
          for (i64 t = 0; t < T; ++t) {
            const float* row = QKV.data() + (b * T + t) * 3 * C + h * D;
            std::copy_n(row, D, qq.data() + t * D);
            std::copy_n(row + C, D, kq.data() + t * D);
          }
          float* pr = probs.data() + (b * nh + h) * T * T;
          kernels::ref::linear(pr, T, qq.data(), D, kq.data(), nullptr, T, D, T);  // [T, T]
          for (i64 i = 0; i < T * T; ++i) pr[i] *= scale;
          kernels::ref::softmax_rows(pr, T, T, T);
        }
      tr(pre + "attn_probs", probs);
    }
    k.attention({A.data(), T * C, C, D}, {QKV.data(), T * 3 * C, 3 * C, D},
                {QKV.data() + C, T * 3 * C, 3 * C, D}, {QKV.data() + 2 * C, T * 3 * C, 3 * C, D},
                {B, nh, T, T, D, 0.0f, L.attention.qkv.bf16()});  // A = context [B, T, C]
    if (trace) tr(pre + "attn_context", A);
    k.linear(L.attention.dense, Pout.data(), C, A.data(), C, rows);  // [B, T, C]
    if (trace) {
      tr(pre + "attn_out", Pout);
      Tensor ls({B, T, C});
      for (i64 i = 0; i < rows * C; ++i) ls.data()[i] = L.lambda1.data()[i % C] * Pout.data()[i];
      tr(pre + "ls1", ls);
    }
    scaled_residual(k, X.data(), Pout.data(), k.parameter(L.lambda1, L.lambda1_copy), rows,
                    C);  // [B, T, C]
    if (trace) tr(pre + "resid1", X);
    k.layer_norm(L.norm2, A.data(), C, X.data(), C, rows);  // [B, T, C]
    if (trace) tr(pre + "norm2", A);
    const i64 hf = L.mlp.hidden;
    if (L.mlp.swiglu) {
      float* Z = HID.data();                                     // [rows, 2hf] = [x1 | x2]
      float* G = HID.data() + rows * 2 * hf;                     // [rows, hf]
      k.linear(L.mlp.weights_in, Z, 2 * hf, A.data(), C, rows);  // [rows, 2hf]
      if (trace) tr(pre + "mlp_up", Tensor::view(Z, {B, T, 2 * hf}));
      k.swiglu(G, hf, Z, 2 * hf, rows, hf);  // silu(x1) * x2
      if (trace) tr(pre + "mlp_hidden", Tensor::view(G, {B, T, hf}));
      k.linear(L.mlp.weights_out, Pout.data(), C, G, hf, rows);  // [rows, C]
    } else {
      float* Hd = HID.data();  // [rows, 4C]
      if (trace) {
        k.linear(L.mlp.fc1, Hd, hf, A.data(), C, rows);  // [rows, 4C] before the activation
        tr(pre + "mlp_up", Tensor::view(Hd, {B, T, hf}));
        k.act_inplace(m.act, Hd, rows * hf);
        tr(pre + "mlp_hidden", Tensor::view(Hd, {B, T, hf}));
      } else {
        k.linear(L.mlp.fc1, Hd, hf, A.data(), C, rows, m.act);  // [rows, 4C] fused activation
      }
      k.linear(L.mlp.fc2, Pout.data(), C, Hd, hf, rows);  // [rows, C]
    }
    if (trace) {
      tr(pre + "mlp_out", Pout);
      Tensor ls({B, T, C});
      for (i64 i = 0; i < rows * C; ++i) ls.data()[i] = L.lambda2.data()[i % C] * Pout.data()[i];
      tr(pre + "ls2", ls);
    }
    scaled_residual(k, X.data(), Pout.data(), k.parameter(L.lambda2, L.lambda2_copy), rows,
                    C);  // [B, T, C]
    if (trace) tr("hidden_states." + std::to_string(li + 1), X);
  }
  Tensor out({B, T, C}, dev);                                   // [B, T, C]
  k.layer_norm(m.layernorm, out.data(), C, X.data(), C, rows);  // last_hidden_state
  if (dev != Device::kCpu) out = out.to(Device::kCpu);
  tr("last_hidden_state", out);
  return out;
}

// ---- conditioner ------------------------------------------------------------------------------

DinoImageEncoder::DinoImageEncoder(ImageEncoderConfig config,
                                   std::shared_ptr<const Dinov2Model> model)
    : config_(std::move(config)), model_(std::move(model)) {
  if (!model_) throw ModelError("DinoImageEncoder: no model");
  config_.validate();
  if (config_.multiview) view_embed_ = multiview_embedding(config_.width(), config_.view_num);
}

DinoImageEncoder DinoImageEncoder::load(const ImageEncoderConfig& config, const std::string& path,
                                        Dinov2Options opt) {
  return DinoImageEncoder(
      config, std::make_shared<const Dinov2Model>(Dinov2Model::load(config.model, path, opt)));
}

Tensor DinoImageEncoder::encode(const Tensor& images, const Dinov2Model::TraceFn* trace) const {
  if (config_.multiview)
    throw ModelError(
        "this conditioner is a multiview one (DinoImageEncoderMV): it takes named "
        "views (front, left, back, right), not a single image");
  if (images.rank() != 4 || images.empty() || images.dim(1) != 3)
    throw ModelError("DinoImageEncoder::encode: images have shape " + images.shape().str() +
                     ", expected [B, 3, H, W] in [-1, 1]");
  EncoderTransformTrace tt;
  const Tensor pixels = encoder_transform(images, config_.image_size, trace ? &tt : nullptr);
  if (trace) {
    (*trace)("tf.resized", tt.resized);
    (*trace)("tf.pixel_values", pixels);
  }
  Tensor h = model_->forward(pixels, trace);  // [B, T, C]
  if (config_.use_cls_token) return h;
  const i64 B = h.dim(0), T = h.dim(1), C = h.dim(2);
  Tensor out({B, T - 1, C});  // [B, N, C] CLS dropped
  for (i64 b = 0; b < B; ++b)
    std::copy_n(h.data() + (b * T + 1) * C, (T - 1) * C, out.data() + b * (T - 1) * C);
  return out;
}

Tensor DinoImageEncoder::encode_views(const Tensor& views, std::span<const int> view_idxs,
                                      Tensor* hidden) const {
  if (!config_.multiview)
    throw ModelError(
        "this conditioner encodes a single image (DinoImageEncoder): named views "
        "need a multiview model (DinoImageEncoderMV, Hunyuan3D-2mv)");
  if (views.rank() != 4 || views.empty() || views.dim(1) != 3 ||
      views.dim(0) != static_cast<i64>(view_idxs.size()))
    throw ModelError("DinoImageEncoderMV: views have shape " + views.shape().str() + " for " +
                     std::to_string(view_idxs.size()) + " view indices, expected [V, 3, H, W]");
  // conditioner.py DinoImageEncoderMV.forward: the views go through the transform and the encoder
  // as one batch (bs * num_views), then each gets view_embed[view_idx] and they are concatenated.
  const Tensor pixels = encoder_transform(views, config_.image_size);
  Tensor h = model_->forward(pixels);                               // [V, T, C]
  Tensor out = add_multiview_embedding(h, view_idxs, view_embed_);  // [1, V T, C]
  if (hidden) *hidden = std::move(h);
  return out;
}

Tensor DinoImageEncoder::unconditional(std::int64_t batch) const {
  if (batch <= 0) throw ModelError("DinoImageEncoder::unconditional: batch must be positive");
  return Tensor({batch, config_.tokens(), config_.width()});  // zeros [B, tokens, C]
}

std::shared_ptr<const DinoImageEncoder> shared_image_encoder(const std::string& weights,
                                                             const std::string& config,
                                                             const std::string& section,
                                                             WeightStorage storage, Device device) {
  const std::string key = nn::canonical_path(weights) + "|" + nn::canonical_path(config) + "|" +
                          section + "|" + std::string(storage_name(storage)) + "|" +
                          device_name(device);
  return nn::shared_model<DinoImageEncoder>(key, [&] {
    const ImageEncoderConfig cfg = ImageEncoderConfig::from_file(config, section);
    return DinoImageEncoder::load(cfg, weights, Dinov2Options{storage, device});
  });
}

}  // namespace gen3d::models
