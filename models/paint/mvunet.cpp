#include "models/paint/mvunet.h"

#include <spdlog/spdlog.h>
#include <tbb/blocked_range.h>
#include <tbb/parallel_for.h>

#include <cstring>
#include <filesystem>

#include "models/core/error.h"
#include "models/core/safetensors.h"
#include "models/nn/device_ops.h"
#include "models/nn/init.h"
#include "models/nn/weight_files.h"

namespace gen3d::models {

namespace {

using i64 = std::int64_t;

// Every official UNet2.5D block is wrapped (Basic2p5DTransformerBlock.transformer). `storage`
// is the parameter sources' (the UNet refuses int8 on a device by it).
UNetLoadOptions wrapped(WeightStorage storage, Device device) {
  UNetLoadOptions o;
  o.block_infix = "transformer.";
  o.storage = storage;
  o.device = device;
  return o;
}

UNetConfig main_config(const UNetConfig& base) {
  UNetConfig c = base;
  c.in_channels = 3 * base.in_channels;  // [noisy | normal | position]
  return c;
}

}  // namespace

// Builds the network from two parameter sources (main "unet.", reference "unet_dual.").
struct MultiviewUNet::Builder {
  static std::unique_ptr<MultiviewUNet> build(const UNetConfig& base, nn::ParamSource& main,
                                              nn::ParamSource& dual, i64 text_tokens,
                                              WeightStorage storage, Device device) {
    base.validate();
    const UNetLoadOptions opt = wrapped(storage, device);
    UNet2DCondition m = UNet2DCondition::load(main_config(base), main, opt);
    UNet2DCondition d = UNet2DCondition::load(base, dual, opt);
    std::unique_ptr<MultiviewUNet> net(new MultiviewUNet(base, std::move(m), std::move(d)));
    const i64 E = base.time_embed_dim();
    const i64 D = base.cross_attention_dim;
    const i64 before = main.parameters();
    net->class_emb_ = main.take("class_embedding.weight", {kCameraEmbeddings, E});
    net->text_gen_ = main.take("learned_text_clip_gen", {1, text_tokens, D});
    net->text_ref_ = main.take("learned_text_clip_ref", {1, text_tokens, D});
    for (const TransformerSite& s : net->main_.transformer_sites()) {
      net->attn_multiview_.push_back(
          AttentionLayer::load(main, s.path + ".attn_multiview", s.channels, s.channels, s.heads));
      net->attn_refview_.push_back(
          AttentionLayer::load(main, s.path + ".attn_refview", s.channels, s.channels, s.heads));
    }
    net->extra_params_ = main.parameters() - before;
    return net;
  }
};

void check_unet25d_weights(const SafetensorsFile& file, const WeightMap& main,
                           const WeightMap& dual, const std::string& what) {
  std::vector<std::string> problems;
  for (const WeightMap* w : {&main, &dual}) {
    problems.insert(problems.end(), w->problems().begin(), w->problems().end());
    for (const std::string& u : w->unclaimed()) problems.push_back("unexpected " + u);
  }
  for (const TensorInfo& t : file.tensors())
    if (t.name.rfind("unet.", 0) != 0 && t.name.rfind("unet_dual.", 0) != 0)
      problems.push_back("unexpected " + t.name + " (neither unet. nor unet_dual.)");
  if (problems.empty()) return;
  std::string msg = file.path() + ": " + what + " weights do not match the config (" +
                    std::to_string(problems.size()) + " problem" +
                    (problems.size() > 1 ? "s" : "") + "):";
  for (const auto& p : problems) msg += "\n  " + p;
  throw ModelError(msg);
}

RefFeatures record_reference_features(const UNet2DCondition& dual, const Tensor& ref_latents,
                                      int num_ref, const Tensor& text, const UNetProbe& probe) {
  const i64 rows = ref_latents.dim(0);
  RefFeatures out;
  out.batch = rows / num_ref;
  out.num_ref = num_ref;
  const auto& sites = dual.transformer_sites();
  // h is on the UNet's device; the copy stays there.
  TransformerHook hook = [&](int site, const Tensor& h, Tensor&) {
    const i64 L = h.dim(1), C = h.dim(2);
    out.layers[sites[static_cast<std::size_t>(site)].name] =
        Tensor::view(h.data(), {out.batch, num_ref * L, C}, h.device()).clone();
  };
  const std::vector<float> t0(static_cast<std::size_t>(rows), 0.0f);
  UNetCall call;
  call.hook = &hook;
  call.skip_output = !probe;
  call.probe = probe;
  const Tensor y = dual.forward(ref_latents, t0, text, call);
  if (probe) probe("conv_out", y);
  return out;
}

MultiviewUNet::MultiviewUNet(UNetConfig base, UNet2DCondition main, UNet2DCondition dual)
    : base_(std::move(base)), main_(std::move(main)), dual_(std::move(dual)) {}

std::int64_t MultiviewUNet::num_parameters() const {
  return main_.num_parameters() + dual_.num_parameters() + extra_params_;
}

std::unique_ptr<MultiviewUNet> MultiviewUNet::load(const UNetConfig& base,
                                                   std::shared_ptr<const SafetensorsFile> file,
                                                   WeightStorage storage, Device device) {
  WeightMap wm(file, "unet.");
  WeightMap wd(file, "unet_dual.");
  // The learned prompts' token count is the checkpoint's (77 officially).
  i64 tokens = 77;
  if (const TensorInfo* t = wm.info("learned_text_clip_gen"); t && t->shape.size() == 3)
    tokens = t->shape[1];
  nn::CheckpointParams sm(wm, storage), sd(wd, storage);
  std::unique_ptr<MultiviewUNet> net = Builder::build(base, sm, sd, tokens, storage, device);

  check_unet25d_weights(*file, wm, wd, "UNet2.5D");
  spdlog::info("UNet2.5D: loaded {} parameters from {} (runs on {})", net->num_parameters(),
               file->path(), device_name(device));
  return net;
}

std::unique_ptr<MultiviewUNet> MultiviewUNet::random(const UNetConfig& base, std::uint64_t seed,
                                                     std::int64_t text_tokens,
                                                     WeightStorage storage, Device device) {
  nn::RandomParams main(nn::uniform_init(seed), storage),
      dual(nn::uniform_init(seed ^ 0x5DEECE66Dull), storage);
  return Builder::build(base, main, dual, text_tokens, storage, device);
}

std::unique_ptr<MultiviewUNet> MultiviewUNet::load(const UNetConfig& base, const std::string& path,
                                                   WeightStorage storage, Device device) {
  return load(base, SafetensorsFile::open(path), storage, device);
}

std::unique_ptr<MultiviewUNet> MultiviewUNet::load_folder(const std::string& dir,
                                                          WeightStorage storage, Device device) {
  namespace fs = std::filesystem;
  const fs::path root(dir);
  const UNetConfig base = UNetConfig::read((root / "config.json").string());
  return load(base, nn::find_weights(dir, "diffusion_pytorch_model"), storage, device);
}

std::vector<std::pair<std::string, Shape>> MultiviewUNet::expected_tensors(const UNetConfig& base,
                                                                           i64 text_tokens) {
  nn::ShapeRecorder rm("unet."), rd("unet_dual.");
  Builder::build(base, rm, rd, text_tokens, WeightStorage::kF32, Device::kCpu);
  std::vector<std::pair<std::string, Shape>> all = std::move(rm.list);
  all.insert(all.end(), rd.list.begin(), rd.list.end());
  return all;
}

RefFeatures MultiviewUNet::reference_features(const Tensor& ref_latents, int num_ref,
                                              const Tensor& text) const {
  if (ref_latents.rank() != 4 || num_ref <= 0 || ref_latents.dim(0) % num_ref != 0)
    throw ModelError("UNet2.5D: reference latents must be (B·N_ref, h, w, C) with N_ref = " +
                     std::to_string(num_ref) + ", got " + ref_latents.shape().str());
  const i64 rows = ref_latents.dim(0);
  const i64 B = rows / num_ref;
  if (text.rank() != 3 || (text.dim(0) != B && text.dim(0) != 1))
    throw ModelError("UNet2.5D: reference text must be (" + std::to_string(B) +
                     " or 1, T, D), got " + text.shape().str());
  return record_reference_features(dual_, ref_latents, num_ref, text);
}

std::int64_t MultiviewUNet::prepare(const Tensor& latents, const Tensor& normals,
                                    const Tensor& positions, const Tensor& text,
                                    std::span<const int> camera_ids, std::size_t ref_scales,
                                    int num_views, Tensor& x, Tensor& class_emb) const {
  const i64 cin = base_.in_channels;
  if (latents.rank() != 4 || latents.dim(3) != cin)
    throw ModelError("UNet2.5D: latents must be (B·N, h, w, " + std::to_string(cin) + "), got " +
                     latents.shape().str());
  if (!(normals.shape() == latents.shape()) || !(positions.shape() == latents.shape()))
    throw ModelError("UNet2.5D: normal " + normals.shape().str() + " and position " +
                     positions.shape().str() + " latents must match the latents " +
                     latents.shape().str());
  const i64 rows = latents.dim(0), H = latents.dim(1), W = latents.dim(2);
  if (num_views <= 0 || rows % num_views != 0)
    throw ModelError("UNet2.5D: " + std::to_string(rows) + " latent rows are not a multiple of " +
                     std::to_string(num_views) + " views");
  const i64 N = num_views, B = rows / N;
  if (static_cast<i64>(camera_ids.size()) != rows)
    throw ModelError("UNet2.5D: " + std::to_string(camera_ids.size()) + " camera ids for " +
                     std::to_string(rows) + " views");
  if (static_cast<i64>(ref_scales) != B)
    throw ModelError("UNet2.5D: " + std::to_string(ref_scales) + " ref_scale values for " +
                     std::to_string(B) + " batch items");
  if (text.rank() != 3 || (text.dim(0) != B && text.dim(0) != 1))
    throw ModelError("UNet2.5D: text must be (" + std::to_string(B) + " or 1, T, D), got " +
                     text.shape().str());

  // [noisy | normal | position] along channels.
  x = Tensor({rows, H, W, 3 * cin});
  {
    const i64 px = rows * H * W;
    const float* src[3] = {latents.data(), normals.data(), positions.data()};
    float* dst = x.data();
    tbb::parallel_for(tbb::blocked_range<i64>(0, px, 4096), [&](const tbb::blocked_range<i64>& r) {
      for (i64 i = r.begin(); i < r.end(); ++i)
        for (int k = 0; k < 3; ++k)
          std::memcpy(dst + i * 3 * cin + k * cin, src[k] + i * cin, sizeof(float) * cin);
    });
  }

  const i64 E = base_.time_embed_dim();
  class_emb = Tensor({rows, E});
  for (i64 r = 0; r < rows; ++r) {
    const int id = camera_ids[static_cast<std::size_t>(r)] + kMaxNumRefImage;
    if (id < 0 || id >= kCameraEmbeddings)
      throw ModelError("UNet2.5D: camera id " +
                       std::to_string(camera_ids[static_cast<std::size_t>(r)]) +
                       " is outside the camera embedding (0.." +
                       std::to_string(kCameraEmbeddings - kMaxNumRefImage - 1) + ")");
    std::memcpy(class_emb.data() + r * E, class_emb_.data() + id * E, sizeof(float) * E);
  }
  return B;
}

std::vector<Tensor> MultiviewUNet::reference_layers(const RefFeatures& ref, i64 B,
                                                    bool uses_ref) const {
  const auto& sites = main_.transformer_sites();
  std::vector<Tensor> ref_of(sites.size());
  if (!uses_ref) return ref_of;
  if (ref.batch != B)
    throw ModelError("UNet2.5D: reference features are for batch " + std::to_string(ref.batch) +
                     ", the latents for " + std::to_string(B));
  for (std::size_t s = 0; s < sites.size(); ++s) {
    auto it = ref.layers.find(sites[s].name);
    if (it == ref.layers.end())
      throw ModelError("UNet2.5D: no reference features for layer " + sites[s].name);
    const Tensor& t = it->second;
    if (t.rank() != 3 || t.dim(0) != B || t.dim(2) != sites[s].channels)
      throw ModelError("UNet2.5D: reference features " + sites[s].name + " " + t.shape().str() +
                       " do not match (" + std::to_string(B) + ", L, " +
                       std::to_string(sites[s].channels) + ")");
    ref_of[s] = t.on(main_.device());  // a view where the reference UNet shares the device
  }
  return ref_of;
}

Tensor MultiviewUNet::forward(const Tensor& latents, const Tensor& normals, const Tensor& positions,
                              float timestep, const Tensor& text, std::span<const int> camera_ids,
                              const RefFeatures& ref, std::span<const float> ref_scale,
                              int num_views, const UNetProbe& probe) const {
  Tensor x, class_emb;
  const i64 B = prepare(latents, normals, positions, text, camera_ids, ref_scale.size(), num_views,
                        x, class_emb);
  const i64 N = num_views;
  bool uses_ref = false;
  for (float s : ref_scale) uses_ref = uses_ref || s != 0.0f;
  const std::vector<Tensor> ref_of = reference_layers(ref, B, uses_ref);

  // After attn1's residual: x += ref_scale[b] · attn_refview(h, ref tokens of item b) for each of
  // its N views, then x += attn_multiview(h of all N views as one sequence) — both from the same
  // h = norm1(x). Rows b·N + n are contiguous per item, so the regrouping is free. h and xs are
  // on the UNet's device, and so are the reference features.
  TransformerHook hook = [&](int site, const Tensor& h, Tensor& xs) {
    const nn::DeviceOps& k = nn::device_ops(xs.device());
    const std::size_t s = static_cast<std::size_t>(site);
    const i64 L = h.dim(1), C = h.dim(2);
    if (uses_ref) {
      const Tensor& rf = ref_of[s];
      const i64 kv = rf.dim(1);
      for (i64 b = 0; b < B; ++b) {
        const float scale = ref_scale[static_cast<std::size_t>(b)];
        if (scale == 0.0f) continue;
        attn_refview_[s].forward_add(k, xs.data() + b * N * L * C, scale, h.data() + b * N * L * C,
                                     N, L, rf.data() + b * kv * C, 1, kv);
      }
    }
    if (N > 1)
      attn_multiview_[s].forward_add(k, xs.data(), 1.0f, h.data(), B, N * L, h.data(), B, N * L);
  };

  const std::vector<float> ts(static_cast<std::size_t>(x.dim(0)), timestep);
  UNetCall call;
  call.class_emb = &class_emb;
  call.hook = &hook;
  call.probe = probe;
  return main_.forward(x, ts, text, call);
}

MultiviewConditions MultiviewUNet::conditions(const Tensor& text, const RefFeatures& ref,
                                              std::span<const float> ref_scale) const {
  const i64 B = static_cast<i64>(ref_scale.size());
  if (B <= 0) throw ModelError("UNet2.5D: conditions need one ref_scale per batch item");
  if (text.rank() != 3 || (text.dim(0) != B && text.dim(0) != 1))
    throw ModelError("UNet2.5D: text must be (" + std::to_string(B) + " or 1, T, D), got " +
                     text.shape().str());
  bool uses_ref = false;
  for (float s : ref_scale) uses_ref = uses_ref || s != 0.0f;
  const std::vector<Tensor> ref_of = reference_layers(ref, B, uses_ref);
  const nn::DeviceOps& k = nn::device_ops(main_.device());
  MultiviewConditions c;
  c.text = text.clone();
  c.ref_scale.assign(ref_scale.begin(), ref_scale.end());
  c.text_kv = main_.text_kv(text);
  c.ref_kv.resize(ref_of.size());
  for (std::size_t s = 0; s < ref_of.size(); ++s) {
    c.ref_kv[s].resize(static_cast<std::size_t>(B));
    if (ref_of[s].empty()) continue;
    // Item by item, as forward() projects them: the same GEMM row counts, the same bits.
    const Tensor& rf = ref_of[s];
    const i64 kv = rf.dim(1), C = rf.dim(2);
    for (i64 b = 0; b < B; ++b)
      if (ref_scale[static_cast<std::size_t>(b)] != 0.0f)
        c.ref_kv[s][static_cast<std::size_t>(b)] =
            attn_refview_[s].project_kv(k, rf.data() + b * kv * C, kv);
  }
  return c;
}

Tensor MultiviewUNet::forward(const Tensor& latents, const Tensor& normals, const Tensor& positions,
                              float timestep, std::span<const int> camera_ids,
                              const MultiviewConditions& cond, int num_views,
                              UNetFeatureCache* cache, bool reuse_deep) const {
  Tensor x, class_emb;
  const i64 B = prepare(latents, normals, positions, cond.text, camera_ids, cond.ref_scale.size(),
                        num_views, x, class_emb);
  const i64 N = num_views;
  const auto& sites = main_.transformer_sites();
  if (cond.ref_kv.size() != sites.size())
    throw ModelError("UNet2.5D: conditions for " + std::to_string(cond.ref_kv.size()) +
                     " transformer blocks, the UNet has " + std::to_string(sites.size()));
  for (std::size_t s = 0; s < sites.size(); ++s)
    for (i64 b = 0; b < B; ++b) {
      const Tensor& kv = cond.ref_kv[s][static_cast<std::size_t>(b)];
      if (cond.ref_scale[static_cast<std::size_t>(b)] != 0.0f &&
          (kv.rank() != 2 || kv.dim(1) != 2 * sites[s].channels))
        throw ModelError("UNet2.5D: reference keys/values of " + sites[s].name + " item " +
                         std::to_string(b) + " are " + kv.shape().str());
    }

  // The projected reference keys / values on the UNet's device (views when conditions() made
  // them there).
  std::vector<std::vector<Tensor>> ref_kv(sites.size());
  for (std::size_t s = 0; s < sites.size(); ++s)
    for (i64 b = 0; b < B; ++b)
      ref_kv[s].push_back(cond.ref_scale[static_cast<std::size_t>(b)] != 0.0f
                              ? cond.ref_kv[s][static_cast<std::size_t>(b)].on(main_.device())
                              : Tensor());

  // As forward() above, with the reference tokens' keys and values already projected.
  TransformerHook hook = [&](int site, const Tensor& h, Tensor& xs) {
    const nn::DeviceOps& k = nn::device_ops(xs.device());
    const std::size_t s = static_cast<std::size_t>(site);
    const i64 L = h.dim(1), C = h.dim(2);
    for (i64 b = 0; b < B; ++b) {
      const float scale = cond.ref_scale[static_cast<std::size_t>(b)];
      if (scale == 0.0f) continue;
      const Tensor& kv = ref_kv[s][static_cast<std::size_t>(b)];
      attn_refview_[s].forward_add_kv(k, xs.data() + b * N * L * C, scale, h.data() + b * N * L * C,
                                      N, L, kv.data(), 1, kv.dim(0));
    }
    if (N > 1)
      attn_multiview_[s].forward_add(k, xs.data(), 1.0f, h.data(), B, N * L, h.data(), B, N * L);
  };

  const std::vector<float> ts(static_cast<std::size_t>(x.dim(0)), timestep);
  UNetCall call;
  call.class_emb = &class_emb;
  call.hook = &hook;
  call.text_kv = &cond.text_kv;
  call.cache = cache;
  call.reuse_deep = reuse_deep;
  return main_.forward(x, ts, cond.text, call);
}

int MultiviewUNet::camera_id(int azim, int elev) {
  int d = 1, o = 0;
  switch (elev) {
    case -20:
      d = 1, o = 0;
      break;
    case 0:
      d = 1, o = 12;
      break;
    case 20:
      d = 1, o = 24;
      break;
    case -90:
      d = 3, o = 36;
      break;
    case 90:
      d = 3, o = 40;
      break;
    default:
      throw ModelError("camera_id: elevation " + std::to_string(elev) +
                       " is not one of -20, 0, 20, -90, 90");
  }
  // Python floor division and modulo.
  const int q = azim >= 0 ? azim / 30 : -((-azim + 29) / 30);
  const int m = ((q + 9) % 12 + 12) % 12;
  return m / d + o;
}

}  // namespace gen3d::models
