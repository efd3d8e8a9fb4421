#include "models/paint/pbr_unet.h"

#include <spdlog/spdlog.h>
#include <tbb/blocked_range.h>
#include <tbb/parallel_for.h>

#include <algorithm>
#include <cmath>
#include <cstring>
#include <filesystem>
#include <functional>
#include <set>

#include "models/core/error.h"
#include "models/core/safetensors.h"
#include "models/kernels/attention.h"
#include "models/nn/device_ops.h"
#include "models/nn/init.h"
#include "models/nn/params.h"
#include "models/nn/weight_files.h"

namespace gen3d::models {

namespace {

using i64 = std::int64_t;

constexpr float kLayerNormEps = 1e-5f;  // ImageProjModel's nn.LayerNorm default
constexpr float kRopeTheta = 10000.0f;
// modules.py init_attention: grids {s, s/2, s/4, s/8} with voxel resolutions {8s, 4s, 2s, s}.
constexpr int kPositionLevels = 4;

// Every official UNet2.5D block is wrapped (Basic2p5DTransformerBlock.transformer).
UNetLoadOptions wrapped(Device device) {
  UNetLoadOptions o;
  o.block_infix = "transformer.";
  o.device = device;
  return o;
}

UNetConfig main_config(const UNetConfig& base) {
  UNetConfig c = base;
  c.in_channels = 3 * base.in_channels;  // [noisy | normal | position]
  return c;
}

float round_half(float v) {
  return half_to_float(float_to_half(v));
}

// y[i] += s · a[i] over n values on the ops' device (s = 1: a plain add, as torch's 1.0 * a + y).
void add_scaled(const nn::DeviceOps& k, float* y, float s, const float* a, i64 n) {
  if (s == 1.0f)
    k.add(y, a, n);
  else
    k.add_scaled(y, a, s, n);
}

// Host probes: a device tensor is copied back first.
const Tensor& on_host(const Tensor& t, Tensor& keep) {
  if (t.device() == Device::kCpu) return t;
  keep = t.to(Device::kCpu);
  return keep;
}

// Official RotaryEmbedding.get_1d_rotary_pos_embed in float32: f_i = 1 / theta^(2i / dim)
// (pow and reciprocal in float32), angle = pos · f_i (float32); cos / sin evaluated in double and
// rounded (within 1 ulp of torch's). Returns (res, dim) tables with each f_i repeated for the pair.
void rope_1d(int dim, int res, std::vector<float>& cosv, std::vector<float>& sinv) {
  const int half = dim / 2;
  std::vector<float> f(static_cast<std::size_t>(half));
  for (int i = 0; i < half; ++i) {
    const float e = static_cast<float>(2 * i) / static_cast<float>(dim);
    f[static_cast<std::size_t>(i)] = 1.0f / std::pow(kRopeTheta, e);
  }
  cosv.assign(static_cast<std::size_t>(res) * dim, 0.0f);
  sinv.assign(static_cast<std::size_t>(res) * dim, 0.0f);
  for (int p = 0; p < res; ++p)
    for (int i = 0; i < half; ++i) {
      const float a = static_cast<float>(p) * f[static_cast<std::size_t>(i)];
      const float c = static_cast<float>(std::cos(static_cast<double>(a)));
      const float s = static_cast<float>(std::sin(static_cast<double>(a)));
      const std::size_t o = static_cast<std::size_t>(p) * dim + 2 * i;
      cosv[o] = cosv[o + 1] = c;
      sinv[o] = sinv[o + 1] = s;
    }
}

}  // namespace

// ---------------------------------------------------------------------------------------------
// Position encodings

namespace {

// One cell of modules.py compute_discrete_voxel_indice for one view: `base` is the view's
// (3, H, W) half map, the cell rows [y0, y0 + ch), columns [x0, x0 + cw).
void voxel_cell(std::int32_t out[3], const std::uint16_t* base, i64 H, i64 W, i64 y0, i64 x0,
                i64 ch, i64 cw, i64 thres, float scale) {
  // position.half(); valid = (position != 1).all(channels); invalid pixels -> 0; then
  // position.sum(dim=(-2, -1)) as torch's CPU reduction runs it for half: each contiguous cell
  // row is summed in a float32 accumulator and added into the half output (SumKernel.cpp
  // CastStoreAccumulate: out += Half(row_sum), so the row sum and the running sum are both
  // rounded to half at every row).
  float sum[3] = {0.0f, 0.0f, 0.0f};
  i64 count = 0;
  for (i64 y = y0; y < y0 + ch; ++y) {
    float row[3] = {0.0f, 0.0f, 0.0f};
    for (i64 x = x0; x < x0 + cw; ++x) {
      float v[3];
      bool valid = true;
      for (int c = 0; c < 3; ++c) {
        v[c] = half_to_float(base[(c * H + y) * W + x]);
        valid = valid && v[c] != 1.0f;
      }
      if (!valid) continue;
      ++count;
      for (int c = 0; c < 3; ++c) row[c] += v[c];
    }
    for (int c = 0; c < 3; ++c) sum[c] = round_half(sum[c] + round_half(row[c]));
  }
  // grid_position / count_masked.clamp(min=1): the int64 count is cast to half, the quotient
  // computed in float32 and rounded to half; cells below the threshold -> 0; clamp(0, 1); times
  // (voxel_resolution − 1) rounded to half; torch.round (half to even).
  const float cnt = round_half(static_cast<float>(std::max<i64>(count, 1)));
  for (int c = 0; c < 3; ++c) {
    float g = round_half(sum[c] / cnt);
    if (count < thres) g = 0.0f;
    g = std::clamp(g, 0.0f, 1.0f);
    const float v = round_half(g * scale);
    out[c] = static_cast<std::int32_t>(std::nearbyint(v));
  }
}

}  // namespace

std::vector<std::int32_t> pbr_voxel_indices(const HalfPositionMaps& m, int grid,
                                            int voxel_resolution) {
  const i64 B = m.batch, N = m.views, H = m.height, W = m.width;
  if (B <= 0 || N <= 0 || H <= 0 || W <= 0 || static_cast<i64>(m.data.size()) != B * N * 3 * H * W)
    throw ModelError("voxel indices: position maps must be (B, N, 3, H, W) = (" +
                     std::to_string(B) + ", " + std::to_string(N) + ", 3, " + std::to_string(H) +
                     ", " + std::to_string(W) + "), got " + std::to_string(m.data.size()) +
                     " values");
  if (grid <= 0 || H % grid != 0 || W % grid != 0)
    throw ModelError("voxel indices: grid " + std::to_string(grid) + " does not divide the " +
                     std::to_string(H) + "x" + std::to_string(W) + " position maps");
  if (voxel_resolution < 1)
    throw ModelError("voxel indices: voxel resolution must be >= 1, got " +
                     std::to_string(voxel_resolution));
  const i64 ch = H / grid, cw = W / grid;
  // compute_discrete_voxel_indice: voxel_mask_thres = (H // g) * (W // g) // (4 * 4).
  const i64 thres = ch * cw / 16;
  const float scale = static_cast<float>(voxel_resolution - 1);
  std::vector<std::int32_t> out(static_cast<std::size_t>(B * N * grid * grid * 3));
  // Rows (b·N + n, i) of cells; output row (n·g + i)·g + j of item b.
  tbb::parallel_for(
      tbb::blocked_range<i64>(0, B * N * grid), [&](const tbb::blocked_range<i64>& r) {
        for (i64 row = r.begin(); row < r.end(); ++row) {
          const i64 bn = row / grid, gi = row % grid;
          for (i64 gj = 0; gj < grid; ++gj)
            voxel_cell(out.data() + (row * grid + gj) * 3, m.data.data() + bn * 3 * H * W, H, W,
                       gi * ch, gj * cw, ch, cw, thres, scale);
        }
      });
  return out;
}

std::vector<VoxelLevel> pbr_multires_voxel_indices(const HalfPositionMaps& maps, i64 latent_size) {
  if (latent_size < 8)
    throw ModelError("voxel indices: latent size " + std::to_string(latent_size) +
                     " is below 8 (the grids go down to size/8)");
  std::vector<VoxelLevel> out;
  // The in-place write of compute_discrete_voxel_indice, position[~valid] = 0, made on a copy
  // once the first grid has read the maps (later grids find nothing more to zero).
  std::vector<std::uint16_t> zeroed;
  HalfPositionMaps cur = maps;
  for (int k = 0; k < kPositionLevels; ++k) {
    VoxelLevel lv;
    lv.grid = static_cast<int>(latent_size >> k);
    lv.voxel_resolution = static_cast<int>(latent_size * (8 >> k));
    lv.voxels = pbr_voxel_indices(cur, lv.grid, lv.voxel_resolution);  // (B, N·g², 3)
    out.push_back(std::move(lv));
    if (k == 0) {
      zeroed.assign(maps.data.begin(), maps.data.end());
      const i64 HW = maps.height * maps.width;
      for (i64 bn = 0; bn < maps.batch * maps.views; ++bn) {
        std::uint16_t* p = zeroed.data() + bn * 3 * HW;
        for (i64 i = 0; i < HW; ++i) {
          bool valid = true;
          for (int c = 0; c < 3; ++c) valid = valid && half_to_float(p[c * HW + i]) != 1.0f;
          if (!valid)
            for (int c = 0; c < 3; ++c) p[c * HW + i] = 0;
        }
      }
      cur.data = zeroed;
    }
  }
  return out;
}

RotaryTables RopeTables::view() const {
  RotaryTables t;
  t.cos = cos.data();
  t.sin = sin.data();
  t.batch = cos.dim(0);
  t.len = cos.dim(1);
  t.head_dim = cos.dim(2);
  return t;
}

RopeTables pbr_rope_tables(std::span<const std::int32_t> voxels, i64 batch, i64 len, i64 head_dim,
                           int voxel_resolution) {
  if (head_dim <= 0 || head_dim % 16 != 0)
    throw ModelError("RoPE: head_dim " + std::to_string(head_dim) +
                     " must be a multiple of 16 (x, y: 3·(D/8), z: 2·(D/8) even columns)");
  if (batch <= 0 || len <= 0 || static_cast<i64>(voxels.size()) != batch * len * 3)
    throw ModelError("RoPE: voxel indices must be (" + std::to_string(batch) + ", " +
                     std::to_string(len) + ", 3), got " + std::to_string(voxels.size()) +
                     " values");
  const int dxy = static_cast<int>(head_dim / 8 * 3), dz = static_cast<int>(head_dim / 8 * 2);
  std::vector<float> cxy, sxy, cz, sz;
  rope_1d(dxy, voxel_resolution, cxy, sxy);
  rope_1d(dz, voxel_resolution, cz, sz);
  RopeTables t{Tensor({batch, len, head_dim}), Tensor({batch, len, head_dim})};
  for (i64 r = 0; r < batch * len; ++r) {
    float* co = t.cos.data() + r * head_dim;
    float* so = t.sin.data() + r * head_dim;
    const int dims[3] = {dxy, dxy, dz};
    const std::vector<float>* ct[3] = {&cxy, &cxy, &cz};
    const std::vector<float>* st[3] = {&sxy, &sxy, &sz};
    for (int a = 0; a < 3; ++a) {
      const std::int32_t v = voxels[static_cast<std::size_t>(r * 3 + a)];
      if (v < 0 || v >= voxel_resolution)
        throw ModelError("RoPE: voxel index " + std::to_string(v) + " outside 0.." +
                         std::to_string(voxel_resolution - 1));
      const std::size_t off = static_cast<std::size_t>(v) * dims[a];
      std::memcpy(co, ct[a]->data() + off, sizeof(float) * dims[a]);
      std::memcpy(so, st[a]->data() + off, sizeof(float) * dims[a]);
      co += dims[a];
      so += dims[a];
    }
  }
  return t;
}

// ---------------------------------------------------------------------------------------------
// Per-site layers

namespace {

// attn_refview with RefAttnProcessor2_0 (attn_processor.py): q = to_q(albedo h), k = to_k(ref),
// value = cat([to_v(ref), processor.to_v_mr(ref)], -1) viewed as (heads, 2·head_dim), so head
// n's albedo value is columns [2nD, 2nD + D) of [v_albedo | v_mr] and its mr value
// [2nD + D, 2nD + 2D); the output splits each head's 2D columns into the albedo (to_out.0) and
// mr (processor.to_out_mr.0) results.
struct RefAttention {
  i64 dim = 0;
  int heads = 1;
  nn::Linear q;    // to_q (C -> C)
  nn::Linear kvv;  // [to_k; to_v; processor.to_v_mr] (C -> 3C)
  nn::Linear out[PbrUNet::kMaterials];

  void load(nn::ParamSource& p, const std::string& pre, i64 c, int h) {
    dim = c;
    heads = h;
    q.load(p, pre + ".to_q", c, c, /*has_bias=*/false);
    const Tensor wk = p.take(pre + ".to_k.weight", {c, c});
    const Tensor wv = p.take(pre + ".to_v.weight", {c, c});
    const Tensor wm = p.take(pre + ".processor.to_v_mr.weight", {c, c});
    out[0].load(p, pre + ".to_out.0", c, c);
    out[1].load(p, pre + ".processor.to_out_mr.0", c, c);
    Tensor w;
    if (!wk.empty() && !wv.empty() && !wm.empty()) {
      w = Tensor({3 * c, c});
      const std::size_t n = static_cast<std::size_t>(c * c);
      std::memcpy(w.data(), wk.data(), sizeof(float) * n);
      std::memcpy(w.data() + n, wv.data(), sizeof(float) * n);
      std::memcpy(w.data() + 2 * n, wm.data(), sizeof(float) * n);
    }
    kvv.set(p, std::move(w), Tensor(), c, 3 * c);
  }

  // The keys and values of a context ref (kv_len, C): (kv_len, 3C) = [k | v_albedo | v_mr].
  // Pointers and the result on the ops' device, as in the calls below.
  Tensor project_kv(const nn::DeviceOps& k, const float* ref, i64 kv_len) const {
    Tensor kv({std::max<i64>(kv_len, 1), 3 * dim}, k.device());
    k.linear(kvv, kv.data(), 3 * dim, ref, dim, kv_len);  // [kv_len, k | v_albedo | v_mr]
    return kv;
  }

  // dst[m] (q_len, C) += scale · output of material m, queries x (q_len, C), context ref
  // (kv_len, C).
  void forward_add(const nn::DeviceOps& k, float* const dst[PbrUNet::kMaterials], float scale,
                   const float* x, i64 q_len, const float* ref, i64 kv_len) const {
    const Tensor kv = project_kv(k, ref, kv_len);
    forward_add_kv(k, dst, scale, x, q_len, kv.data(), kv_len);
  }

  // forward_add with the context already projected (kv from project_kv, kv_len rows).
  void forward_add_kv(const nn::DeviceOps& k, float* const dst[PbrUNet::kMaterials], float scale,
                      const float* x, i64 q_len, const float* kv, i64 kv_len) const {
    const i64 C = dim, D = C / heads;
    Tensor qs({q_len, C}, k.device());
    k.linear(q, qs.data(), C, x, C, q_len);  // [q_len, C]
    kernels::AttentionShape s;
    s.batch = 1;
    s.heads = heads;
    s.q_len = q_len;
    s.kv_len = kv_len;
    s.head_dim = D;
    s.bf16 = q.bf16();
    Tensor o({q_len, C}, k.device()), y({q_len, C}, k.device());
    for (int m = 0; m < PbrUNet::kMaterials; ++m) {
      // Head n reads value columns C + 2nD + m·D of kv.
      k.attention({o.data(), 0, C, D}, {qs.data(), 0, C, D}, {kv, 0, 3 * C, D},
                  {kv + C + m * D, 0, 3 * C, 2 * D}, s);  // [q_len, C]
      k.linear(out[m], y.data(), C, o.data(), C, q_len);  // [q_len, C]
      add_scaled(k, dst[m], scale, y.data(), q_len * C);
    }
  }
};

}  // namespace

struct PbrUNet::Site {
  AttentionLayer attn1_mr;  // transformer.attn1.processor.to_{q,k,v}_mr, to_out_mr.0
  RefAttention attn_refview;
  AttentionLayer attn_multiview;
  AttentionLayer attn_dino;  // keys / values from the projected DINO tokens
};

// Builds the network from two parameter sources (main "unet.", reference "unet_dual.").
struct PbrUNet::Builder {
  static std::unique_ptr<PbrUNet> build(const UNetConfig& base, nn::ParamSource& main,
                                        nn::ParamSource& dual, i64 text_tokens, i64 dino_dim,
                                        Device device) {
    base.validate();
    UNet2DCondition m = UNet2DCondition::load(main_config(base), main, wrapped(device));
    UNet2DCondition d = UNet2DCondition::load(base, dual, wrapped(device));
    auto net = std::make_unique<PbrUNet>(base, std::move(m), std::move(d));
    const i64 D = base.cross_attention_dim;
    const i64 before = main.parameters();
    net->text_[0] = main.take("learned_text_clip_albedo", {text_tokens, D});
    net->text_[1] = main.take("learned_text_clip_mr", {text_tokens, D});
    net->text_ref_ = main.take("learned_text_clip_ref", {text_tokens, D});
    net->dino_proj_.load(main, "image_proj_model_dino.proj", dino_dim, kDinoTokens * D);
    net->dino_norm_.load(main, "image_proj_model_dino.norm", D, kLayerNormEps);
    for (const TransformerSite& s : net->main_.transformer_sites()) {
      Site site;
      site.attn1_mr = AttentionLayer::load(main, s.path + ".transformer.attn1.processor",
                                           s.channels, s.channels, s.heads, "_mr");
      site.attn_refview.load(main, s.path + ".attn_refview", s.channels, s.heads);
      site.attn_multiview =
          AttentionLayer::load(main, s.path + ".attn_multiview", s.channels, s.channels, s.heads);
      site.attn_dino = AttentionLayer::load(main, s.path + ".attn_dino", s.channels, D, s.heads);
      net->sites_.push_back(std::move(site));
    }
    net->extra_params_ = main.parameters() - before;
    return net;
  }
};

PbrUNet::PbrUNet(UNetConfig base, UNet2DCondition main, UNet2DCondition dual)
    : base_(std::move(base)), main_(std::move(main)), dual_(std::move(dual)) {}
PbrUNet::~PbrUNet() = default;

std::int64_t PbrUNet::num_parameters() const {
  return main_.num_parameters() + dual_.num_parameters() + extra_params_;
}

std::unique_ptr<PbrUNet> PbrUNet::load(const UNetConfig& base,
                                       std::shared_ptr<const SafetensorsFile> file,
                                       WeightStorage storage, Device device) {
  WeightMap wm(file, "unet.");
  WeightMap wd(file, "unet_dual.");
  // The learned prompts' token count and the DINO width are the checkpoint's (77 and 1536
  // officially); a missing tensor is reported by the strict check below.
  i64 tokens = 77, dino_dim = 1536;
  if (const TensorInfo* t = wm.info("learned_text_clip_albedo"); t && t->shape.size() == 2)
    tokens = t->shape[0];
  if (const TensorInfo* t = wm.info("image_proj_model_dino.proj.weight"); t && t->shape.size() == 2)
    dino_dim = t->shape[1];
  nn::CheckpointParams sm(wm, storage), sd(wd, storage);
  std::unique_ptr<PbrUNet> net = Builder::build(base, sm, sd, tokens, dino_dim, device);

  check_unet25d_weights(*file, wm, wd, "PBR UNet2.5D");
  spdlog::info("PBR UNet2.5D: loaded {} parameters from {} ({})", net->num_parameters(),
               file->path(), device_name(device));
  return net;
}

std::unique_ptr<PbrUNet> PbrUNet::load(const UNetConfig& base, const std::string& path,
                                       WeightStorage storage, Device device) {
  return load(base, SafetensorsFile::open(path), storage, device);
}

std::unique_ptr<PbrUNet> PbrUNet::load_folder(const std::string& dir, WeightStorage storage,
                                              Device device) {
  const UNetConfig base = UNetConfig::read((std::filesystem::path(dir) / "config.json").string());
  return load(base, nn::find_weights(dir, "diffusion_pytorch_model"), storage, device);
}

std::unique_ptr<PbrUNet> PbrUNet::random(const UNetConfig& base, std::uint64_t seed,
                                         i64 text_tokens, i64 dino_dim, WeightStorage storage,
                                         float scale, Device device) {
  nn::RandomParams main(nn::uniform_init(seed, scale), storage),
      dual(nn::uniform_init(seed ^ 0x5DEECE66Dull, scale), storage);
  return Builder::build(base, main, dual, text_tokens, dino_dim, device);
}

std::vector<std::pair<std::string, Shape>> PbrUNet::expected_tensors(const UNetConfig& base,
                                                                     i64 text_tokens,
                                                                     i64 dino_dim) {
  nn::ShapeRecorder rm("unet."), rd("unet_dual.");
  Builder::build(base, rm, rd, text_tokens, dino_dim, Device::kCpu);
  std::vector<std::pair<std::string, Shape>> all = std::move(rm.list);
  all.insert(all.end(), rd.list.begin(), rd.list.end());
  return all;
}

Tensor PbrUNet::learned_prompt() const {
  const i64 T = text_[0].dim(0), D = text_[0].dim(1);
  Tensor p({1, kMaterials, T, D});
  for (int m = 0; m < kMaterials; ++m)
    std::memcpy(p.data() + m * T * D, text_[m].data(), sizeof(float) * T * D);
  return p;
}

Tensor PbrUNet::project_dino(const Tensor& dino_hidden) const {
  const i64 din = dino_proj_.in, D = base_.cross_attention_dim;
  if (dino_hidden.rank() != 3 || dino_hidden.dim(2) != din || dino_hidden.dim(1) <= 0)
    throw ModelError("PBR UNet2.5D: DINO hidden states must be (B, T, " + std::to_string(din) +
                     "), got " + dino_hidden.shape().str());
  const i64 B = dino_hidden.dim(0), T = dino_hidden.dim(1);
  // modules.py ImageProjModel: proj per token -> reshape (B·T, 4, D) -> LayerNorm ->
  // "(b nt) n c -> b (nt n) c", which is the same memory.
  const nn::DeviceOps& k = nn::device_ops(device());
  const Tensor x = dino_hidden.on(k.device());
  Tensor y({B, T * kDinoTokens, D}, k.device());
  k.linear(dino_proj_, y.data(), kDinoTokens * D, x.data(), din, B * T);    // [B·T, 4D]
  k.layer_norm(dino_norm_, y.data(), D, y.data(), D, B * T * kDinoTokens);  // [B, 4T, D]
  return y;
}

RefFeatures PbrUNet::reference_features(const Tensor& ref_latents, int num_ref,
                                        const UNetProbe& probe) const {
  if (ref_latents.rank() != 4 || ref_latents.dim(3) != base_.in_channels || num_ref <= 0 ||
      ref_latents.dim(0) % num_ref != 0)
    throw ModelError("PBR UNet2.5D: reference latents must be (B·N_ref, h, w, " +
                     std::to_string(base_.in_channels) + ") with N_ref = " +
                     std::to_string(num_ref) + ", got " + ref_latents.shape().str());
  // modules.py Basic2p5DTransformerBlock mode "w": condition_embed_dict[layer] = norm1's output,
  // with learned_text_clip_ref for every row at timestep_ref = 0.
  const i64 T = text_ref_.dim(0), D = text_ref_.dim(1);
  Tensor text({1, T, D});
  std::memcpy(text.data(), text_ref_.data(), sizeof(float) * static_cast<std::size_t>(T * D));
  return record_reference_features(dual_, ref_latents, num_ref, text, probe);
}

void PbrUNet::prepare_positions(PbrCondition& cond, const HalfPositionMaps& maps,
                                i64 latent_size) const {
  if (maps.views <= 0) throw ModelError("PBR UNet2.5D: position maps have no views");
  cond.levels.clear();
  cond.position_batch = maps.batch;
  cond.num_views = static_cast<int>(maps.views);
  std::set<i64> head_dims;
  for (const TransformerSite& s : main_.transformer_sites()) head_dims.insert(s.channels / s.heads);
  for (VoxelLevel& v : pbr_multires_voxel_indices(maps, latent_size)) {
    PbrCondition::Level lv;
    const i64 len = maps.views * v.grid * v.grid;  // (B, N·g², 3)
    for (i64 hd : head_dims) {
      RopeTables t = pbr_rope_tables(v.voxels, maps.batch, len, hd, v.voxel_resolution);
      if (device() != Device::kCpu) {  // uploaded once per generation
        t.cos = t.cos.to(device());
        t.sin = t.sin.to(device());
      }
      lv.rope.emplace(hd, std::move(t));
    }
    lv.voxels = std::move(v);
    cond.levels.emplace(len, std::move(lv));
  }
}

PbrCondition PbrUNet::condition(const Tensor& ref_latents, int num_ref, const Tensor& dino_hidden,
                                const HalfPositionMaps& maps, i64 latent_size) const {
  PbrCondition c;
  c.ref = reference_features(ref_latents, num_ref);
  c.dino = project_dino(dino_hidden);
  prepare_positions(c, maps, latent_size);
  return c;
}

namespace {

// Projected DINO tokens for batch B: (B or 1, T, D).
void check_dino(const Tensor& dino, i64 B, i64 D) {
  const i64 Bd = dino.rank() == 3 ? dino.dim(0) : 0;
  if (Bd <= 0 || B % Bd != 0 || (Bd != 1 && Bd != B) || dino.dim(2) != D || dino.dim(1) <= 0)
    throw ModelError("PBR UNet2.5D: projected DINO tokens must be (" + std::to_string(B) +
                     " or 1, T, " + std::to_string(D) + "), got " + dino.shape().str());
}

// Projections made for this text and these ref_scale values, with a tensor of the right width
// for every site and every reference item a batch item reads.
void check_projections(const PbrProjections& p, const Tensor& text,
                       std::span<const float> ref_scale,
                       const std::vector<TransformerSite>& sites) {
  if (!(p.text.shape() == text.shape()) ||
      std::memcmp(p.text.data(), text.data(), sizeof(float) * text.numel()) != 0)
    throw ModelError("PBR UNet2.5D: the condition's keys / values were projected from another " +
                     std::string("prompt; project the condition again"));
  if (p.ref_scale.size() != ref_scale.size() ||
      !std::equal(p.ref_scale.begin(), p.ref_scale.end(), ref_scale.begin()))
    throw ModelError("PBR UNet2.5D: the condition's keys / values were projected for " +
                     std::string("other ref_scale values; project the condition again"));
  if (p.ref_kv.size() != sites.size() || p.text_kv.size() != sites.size() ||
      p.dino_kv.size() != sites.size())
    throw ModelError("PBR UNet2.5D: projected keys / values for " +
                     std::to_string(p.text_kv.size()) + " transformer blocks, the UNet has " +
                     std::to_string(sites.size()));
  const i64 B = static_cast<i64>(ref_scale.size());
  for (std::size_t s = 0; s < sites.size(); ++s) {
    const i64 C = sites[s].channels;
    const auto bad = [&](const std::string& what, const Tensor& t) {
      return ModelError("PBR UNet2.5D: projected " + what + " keys / values of " + sites[s].name +
                        " are " + t.shape().str());
    };
    if (p.text_kv[s].rank() != 2 || p.text_kv[s].dim(1) != 2 * C ||
        p.text_kv[s].dim(0) != B * PbrUNet::kMaterials * text.dim(2))
      throw bad("prompt", p.text_kv[s]);
    if (!(p.dino_kv[s].shape() == Shape{p.dino_batch * p.dino_len, 2 * C}))
      throw bad("DINO", p.dino_kv[s]);
    if (static_cast<i64>(p.ref_kv[s].size()) != p.ref_batch)
      throw ModelError("PBR UNet2.5D: projected reference keys / values of " + sites[s].name +
                       " for " + std::to_string(p.ref_kv[s].size()) + " items, expected " +
                       std::to_string(p.ref_batch));
    for (i64 b = 0; b < B; ++b) {
      if (ref_scale[static_cast<std::size_t>(b)] == 0.0f) continue;
      const Tensor& t = p.ref_kv[s][static_cast<std::size_t>(p.ref_batch == 1 ? 0 : b)];
      if (t.rank() != 2 || t.dim(1) != 3 * C) throw bad("reference", t);
    }
  }
}

}  // namespace

std::int64_t PbrProjections::bytes() const {
  i64 n = 0;
  for (const auto& items : ref_kv)
    for (const Tensor& t : items) n += t.numel();
  for (const Tensor& t : text_kv) n += t.numel();
  for (const Tensor& t : dino_kv) n += t.numel();
  return n * static_cast<i64>(sizeof(float));
}

Tensor PbrUNet::text_rows(const Tensor& text, i64 B) const {
  constexpr i64 M = kMaterials;
  const i64 D = base_.cross_attention_dim;
  if (text.rank() != 4 || (text.dim(0) != B && text.dim(0) != 1) || text.dim(1) != M ||
      text.dim(3) != D || text.dim(2) <= 0)
    throw ModelError("PBR UNet2.5D: text must be (" + std::to_string(B) + " or 1, 2, T, " +
                     std::to_string(D) + "), got " + text.shape().str());
  const i64 T = text.dim(2);
  Tensor rows({B * M, T, D});
  for (i64 b = 0; b < B; ++b) {
    const float* src = text.data() + (text.dim(0) == 1 ? 0 : b) * M * T * D;
    std::memcpy(rows.data() + b * M * T * D, src, sizeof(float) * M * T * D);
  }
  return rows;
}

std::vector<const Tensor*> PbrUNet::reference_layers(const PbrCondition& cond, i64 B,
                                                     bool uses_ref) const {
  const auto& sites = main_.transformer_sites();
  std::vector<const Tensor*> ref_of(sites.size(), nullptr);
  if (!uses_ref) return ref_of;
  if (cond.ref.batch != B && cond.ref.batch != 1)
    throw ModelError("PBR UNet2.5D: reference features are for batch " +
                     std::to_string(cond.ref.batch) + ", the latents for " + std::to_string(B));
  for (std::size_t s = 0; s < sites.size(); ++s) {
    auto it = cond.ref.layers.find(sites[s].name);
    if (it == cond.ref.layers.end())
      throw ModelError("PBR UNet2.5D: no reference features for layer " + sites[s].name);
    const Tensor& t = it->second;
    if (t.rank() != 3 || t.dim(0) != cond.ref.batch || t.dim(2) != sites[s].channels)
      throw ModelError("PBR UNet2.5D: reference features " + sites[s].name + " " + t.shape().str() +
                       " do not match (" + std::to_string(cond.ref.batch) + ", L, " +
                       std::to_string(sites[s].channels) + ")");
    ref_of[s] = &t;
  }
  return ref_of;
}

void PbrUNet::project(PbrCondition& cond, const Tensor& text,
                      std::span<const float> ref_scale) const {
  const i64 B = static_cast<i64>(ref_scale.size());
  if (B <= 0) throw ModelError("PBR UNet2.5D: projections need one ref_scale per batch item");
  if (text.device() != Device::kCpu) throw ModelError("PBR UNet2.5D: text must be a host tensor");
  check_dino(cond.dino, B, base_.cross_attention_dim);
  bool uses_ref = false;
  for (float s : ref_scale) uses_ref = uses_ref || s != 0.0f;
  const std::vector<const Tensor*> ref_of = reference_layers(cond, B, uses_ref);
  const auto& sites = main_.transformer_sites();

  PbrProjections p;
  p.text = text.clone();
  p.ref_scale.assign(ref_scale.begin(), ref_scale.end());
  p.ref_batch = uses_ref ? cond.ref.batch : 1;
  p.dino_batch = cond.dino.dim(0);
  p.dino_len = cond.dino.dim(1);
  // Each with the row count forward() projects it with, so the bits are the same: the prompt
  // rows of all B·2 items in one GEMM (attn2), every DINO row in one (attn_dino), and each
  // reference item alone (attn_refview).
  // All on the UNet's device (the prompt's rows are uploaded by text_kv).
  const nn::DeviceOps& k = nn::device_ops(device());
  p.text_kv = main_.text_kv(text_rows(text, B));
  p.ref_kv.resize(sites.size());
  p.dino_kv.resize(sites.size());
  const Tensor dino = cond.dino.on(k.device());
  for (std::size_t s = 0; s < sites.size(); ++s) {
    p.dino_kv[s] = sites_[s].attn_dino.project_kv(k, dino.data(), p.dino_batch * p.dino_len);
    p.ref_kv[s].resize(static_cast<std::size_t>(p.ref_batch));
    if (!ref_of[s]) continue;
    const Tensor rf = ref_of[s]->on(k.device());
    const i64 kv_len = rf.dim(1), C = rf.dim(2);
    for (i64 b = 0; b < B; ++b) {
      if (ref_scale[static_cast<std::size_t>(b)] == 0.0f) continue;
      const i64 rb = p.ref_batch == 1 ? 0 : b;
      Tensor& t = p.ref_kv[s][static_cast<std::size_t>(rb)];
      if (t.empty()) t = sites_[s].attn_refview.project_kv(k, rf.data() + rb * kv_len * C, kv_len);
    }
  }
  spdlog::debug(
      "PBR UNet2.5D: keys / values of the reference, prompt and DINO tokens projected "
      "once for {} batch items: {:.1f} MiB",
      B, static_cast<double>(p.bytes()) / (1024.0 * 1024.0));
  cond.projected = std::move(p);
}

Tensor PbrUNet::forward(const Tensor& sample, const Tensor& normals, const Tensor& positions,
                        float timestep, const Tensor& text, const PbrCondition& cond,
                        std::span<const float> ref_scale, float mva_scale,
                        const UNetProbe& probe) const {
  const i64 cin = base_.in_channels;
  constexpr i64 M = kMaterials;
  // The inputs are put together on the host (the UNet uploads the result).
  for (const Tensor* t : {&sample, &normals, &positions, &text})
    if (t->device() != Device::kCpu)
      throw ModelError("PBR UNet2.5D: sample, normals, positions and text must be host tensors");
  if (sample.rank() != 4 || sample.dim(3) != cin)
    throw ModelError("PBR UNet2.5D: sample must be (B·2·N, h, w, " + std::to_string(cin) +
                     "), got " + sample.shape().str());
  const i64 N = cond.num_views;
  const i64 rows = sample.dim(0), H = sample.dim(1), W = sample.dim(2);
  if (N <= 0 || rows % (M * N) != 0)
    throw ModelError("PBR UNet2.5D: " + std::to_string(rows) +
                     " sample rows are not 2 materials x " + std::to_string(N) +
                     " views (the condition's) per item");
  const i64 B = rows / (M * N);
  for (const Tensor* t : {&normals, &positions})
    if (t->rank() != 4 || (t->dim(0) != B * N && t->dim(0) != N) || t->dim(1) != H ||
        t->dim(2) != W || t->dim(3) != cin)
      throw ModelError("PBR UNet2.5D: normal / position latents must be (" + std::to_string(B * N) +
                       " or " + std::to_string(N) + ", " + std::to_string(H) + ", " +
                       std::to_string(W) + ", " + std::to_string(cin) + "), got " +
                       t->shape().str());
  if (static_cast<i64>(ref_scale.size()) != B)
    throw ModelError("PBR UNet2.5D: " + std::to_string(ref_scale.size()) +
                     " ref_scale values for " + std::to_string(B) + " batch items");
  const i64 D = base_.cross_attention_dim;
  if (text.rank() != 4 || (text.dim(0) != B && text.dim(0) != 1) || text.dim(1) != M ||
      text.dim(3) != D || text.dim(2) <= 0)
    throw ModelError("PBR UNet2.5D: text must be (" + std::to_string(B) + " or 1, 2, T, " +
                     std::to_string(D) + "), got " + text.shape().str());
  if (cond.projected.empty()) check_dino(cond.dino, B, D);
  if (cond.position_batch <= 0 || B % cond.position_batch != 0)
    throw ModelError("PBR UNet2.5D: position encodings for batch " +
                     std::to_string(cond.position_batch) + " do not divide the batch " +
                     std::to_string(B));

  const auto& sites = main_.transformer_sites();
  bool uses_ref = false;
  for (float s : ref_scale) uses_ref = uses_ref || s != 0.0f;
  // The keys / values projected once per generation, when the condition has them.
  const PbrProjections* kv = cond.projected.empty() ? nullptr : &cond.projected;
  if (kv) check_projections(*kv, text, ref_scale, sites);
  const std::vector<const Tensor*> ref_of = reference_layers(cond, B, uses_ref && !kv);
  const i64 ref_batch = kv ? kv->ref_batch : cond.ref.batch;
  const i64 Bd = kv ? kv->dino_batch : cond.dino.dim(0);
  const i64 dino_len = kv ? kv->dino_len : cond.dino.dim(1);

  // modules.py forward: [sample | embeds_normal | embeds_position] along channels, the maps
  // repeated for both materials; "(b n_pbr n) c h w" rows.
  Tensor x({rows, H, W, 3 * cin});
  {
    const i64 px = H * W;
    const i64 cond_rows = normals.dim(0);
    tbb::parallel_for(tbb::blocked_range<i64>(0, rows), [&](const tbb::blocked_range<i64>& r) {
      for (i64 row = r.begin(); row < r.end(); ++row) {
        const i64 b = row / (M * N), n = row % N;
        const i64 crow = cond_rows == N ? n : b * N + n;
        const float* src[3] = {sample.data() + row * px * cin, normals.data() + crow * px * cin,
                               positions.data() + crow * px * cin};
        float* dst = x.data() + row * px * 3 * cin;
        for (i64 i = 0; i < px; ++i)
          for (int k = 0; k < 3; ++k)
            std::memcpy(dst + i * 3 * cin + k * cin, src[k] + i * cin, sizeof(float) * cin);
      }
    });
  }

  // encoder_hidden_states per (b, material) item; the UNet's rows read item row / N.
  const i64 T = text.dim(2);
  const Tensor prompt = text_rows(text, B);  // [B·2, T, D]
  // What the blocks read, on the UNet's device (views where it is there already: the condition's
  // tensors come from this UNet).
  const Device dev = device();
  const Tensor prompt_d = kv ? Tensor() : prompt.on(dev);
  const Tensor dino_d = kv ? Tensor() : cond.dino.on(dev);
  auto host_probe = [&](const std::string& name, const Tensor& t) {
    Tensor keep;
    probe(name, on_host(t, keep));
  };

  // Basic2p5DTransformerBlock.forward (modules.py), mode "r". xs and every buffer here are on
  // the UNet's device.
  TransformerBlockFn block = [&](int site, const TransformerBlockLayers& l, Tensor& xs) {
    const std::size_t si = static_cast<std::size_t>(site);
    const Site& st = sites_[si];
    const std::string& path = sites[si].path;
    const nn::DeviceOps& k = nn::device_ops(xs.device());
    const i64 L = xs.dim(1), C = xs.dim(2);
    const i64 item = M * N * L * C;  // one batch item's values
    const i64 n_all = rows * L * C;
    // A branch adds its output with a per-item scale. With a probe it is computed into a zeroed
    // buffer first (the reference's module output, before the residual add).
    auto branch = [&](const std::string& name, const std::function<float(i64)>& scale,
                      const std::function<void(float*, const std::function<float(i64)>&)>& run) {
      if (!probe) {
        run(xs.data(), scale);
        return;
      }
      Tensor t({rows, L, C}, k.device());
      run(t.data(), [](i64) { return 1.0f; });
      host_probe(name, t);
      for (i64 b = 0; b < B; ++b)
        add_scaled(k, xs.data() + b * item, scale(b), t.data() + b * item, item);
    };
    const auto unit = [](i64) { return 1.0f; };

    Tensor h({rows, L, C}, k.device());
    k.layer_norm(l.norm1, h.data(), C, xs.data(), C, rows * L);  // [rows, L, C]
    if (probe) host_probe(path + ".transformer.norm1", h);

    // 1. MDA self-attention within each view, per material (SelfAttnProcessor2_0).
    branch(path + ".transformer.attn1", unit, [&](float* dst, const std::function<float(i64)>& s) {
      for (i64 b = 0; b < B; ++b)
        for (i64 m = 0; m < M; ++m) {
          const i64 off = (b * M + m) * N * L * C;
          const AttentionLayer& a = m == 0 ? l.attn1 : st.attn1_mr;
          a.forward_add(k, dst + off, s(b), h.data() + off, N, L, h.data() + off, N,
                        L);  // [N, L, C]
        }
    });

    // 2. Reference attention: queries = the albedo h of all N views of item b, "b (n l) c".
    if (uses_ref) {
      const auto rscale = [&](i64 b) { return ref_scale[static_cast<std::size_t>(b)]; };
      branch(path + ".attn_refview", rscale, [&](float* dst, const std::function<float(i64)>& s) {
        for (i64 b = 0; b < B; ++b) {
          if (ref_scale[static_cast<std::size_t>(b)] == 0.0f) continue;
          const i64 rb = ref_batch == 1 ? 0 : b;
          float* outs[M] = {dst + b * item, dst + b * item + N * L * C};
          if (kv) {
            const Tensor rkv = kv->ref_kv[si][static_cast<std::size_t>(rb)].on(k.device());
            st.attn_refview.forward_add_kv(k, outs, s(b), h.data() + b * item, N * L, rkv.data(),
                                           rkv.dim(0));  // [2, N·L, C]
          } else {
            const Tensor rf = ref_of[si]->on(k.device());
            const i64 kv_len = rf.dim(1);
            st.attn_refview.forward_add(k, outs, s(b), h.data() + b * item, N * L,
                                        rf.data() + rb * kv_len * C, kv_len);  // [2, N·L, C]
          }
        }
      });
    }

    // 3. Multiview attention: per (b, material) all views as one sequence "(b n_pbr) (n l) c",
    // RoPE from the voxel indices of the level with N·L cells (none when no level matches).
    if (N > 1) {
      const RotaryTables* rope = nullptr;
      RotaryTables rt;
      Tensor cos_d, sin_d;  // the tables on the device (views when prepare_positions put them)
      if (auto it = cond.levels.find(N * L); it != cond.levels.end()) {
        auto jt = it->second.rope.find(C / sites[si].heads);
        if (jt == it->second.rope.end())
          throw ModelError("PBR UNet2.5D: no RoPE tables for head_dim " +
                           std::to_string(C / sites[si].heads));
        cos_d = jt->second.cos.on(k.device());
        sin_d = jt->second.sin.on(k.device());
        rt = jt->second.view();
        rt.cos = cos_d.data();
        rt.sin = sin_d.data();
        rope = &rt;
      }
      branch(
          path + ".attn_multiview", [&](i64) { return mva_scale; },
          [&](float* dst, const std::function<float(i64)>& s) {
            // Every item has the same scale here.
            st.attn_multiview.forward_add(k, dst, s(0), h.data(), B * M, N * L, h.data(), B * M,
                                          N * L, rope);  // [B·2, N·L, C]
          });
    }

    // 4. Text cross-attention per material, then DINO cross-attention from the same norm2 output.
    k.layer_norm(l.norm2, h.data(), C, xs.data(), C, rows * L);  // [rows, L, C]
    branch(path + ".transformer.attn2", unit, [&](float* dst, const std::function<float(i64)>&) {
      // [rows, L, C] += attn2(h, the text of the row's (b, material) item)
      if (kv) {
        const Tensor tkv = kv->text_kv[si].on(k.device());
        l.attn2.forward_add_kv(k, dst, 1.0f, h.data(), rows, L, tkv.data(), B * M, T);
      } else {
        l.attn2.forward_add(k, dst, 1.0f, h.data(), rows, L, prompt_d.data(), B * M, T);
      }
    });
    branch(path + ".attn_dino", unit, [&](float* dst, const std::function<float(i64)>&) {
      // [rows, L, C] += attn_dino(h, DINO row b of the row's item, or the one shared row)
      if (kv) {
        const Tensor dkv = kv->dino_kv[si].on(k.device());
        st.attn_dino.forward_add_kv(k, dst, 1.0f, h.data(), rows, L, dkv.data(), Bd, dino_len);
      } else {
        st.attn_dino.forward_add(k, dst, 1.0f, h.data(), rows, L, dino_d.data(), Bd, dino_len);
      }
    });

    // 5. Feed-forward.
    k.layer_norm(l.norm3, h.data(), C, xs.data(), C, rows * L);  // [rows, L, C]
    if (probe) host_probe(path + ".transformer.norm3", h);
    l.feed_forward(k, h.data(), h.data(), rows * L);  // [rows, L, C]
    if (probe) host_probe(path + ".transformer.ff", h);
    k.add(xs.data(), h.data(), n_all);  // [rows, L, C]
    if (probe) host_probe(path, xs);
  };

  const std::vector<float> ts(static_cast<std::size_t>(rows), timestep);
  UNetCall call;
  call.block = &block;
  call.probe = probe;
  return main_.forward(x, ts, prompt, call);
}

}  // namespace gen3d::models
