#pragma once
// Hunyuan3D-Paint-v2-1 PBR UNet2.5D (official hy3dpaint/hunyuanpaintpbr/unet/modules.py,
// UNet2p5DConditionModel; attn_processor.py): a main SD2-style UNet with a 12-channel conv_in
// ([noisy | normal | position] latents) that denoises two materials (albedo, metallic-roughness)
// of N views at once, and a plain reference UNet ("unet_dual") whose post-norm1 block inputs are
// the reference features. No camera or class embedding. Every main transformer block
// (Basic2p5DTransformerBlock) runs, from h = norm1(x):
//   x += attn1 per material (albedo: attn1.to_*, mr: attn1.processor.to_*_mr) within each view;
//   x += ref_scale · reference attention (queries: the albedo h of all views; values per
//        material, interleaved per head);
//   x += mva_scale · multiview attention over all views of one material, 3-D RoPE on q and k
//        from the position maps' voxel indices;
//   h2 = norm2(x); x += attn2(h2, learned text of the material); x += attn_dino(h2, DINO tokens);
//   x += ff(norm3(x)).
// hunyuan3d-2.1/ARCHITECTURE.md §b and paint21/README.md are the recipe. Latents are NHWC; the
// batch is (B, 2 materials, N views) flattened, row = (b·2 + m)·N + n.
//
// The network runs on the device chosen at load (the CPU by default): on a device every layer
// runs there in bf16 (nn::DeviceOps), forward() takes and returns host tensors, and what a
// condition caches for a generation (reference features, projected DINO tokens, RoPE tables,
// projected keys / values) lives on that device, uploaded once.

#include <cstdint>
#include <map>
#include <memory>
#include <span>
#include <string>
#include <utility>
#include <vector>

#include "models/core/device.h"
#include "models/core/dtype.h"
#include "models/core/tensor.h"
#include "models/paint/mvunet.h"
#include "models/paint/unet.h"

namespace gen3d::models {

class SafetensorsFile;

// Position maps as the official pipeline passes them: IEEE half bits, (B, N, 3, H, W) NCHW per
// view, background white (1.0 in every channel).
struct HalfPositionMaps {
  std::span<const std::uint16_t> data;
  std::int64_t batch = 1, views = 1, height = 0, width = 0;
};

// Official compute_discrete_voxel_indice (modules.py) at one grid: per view, the grid·grid cells
// of the map; a pixel is valid when no channel equals 1.0; cell mean of the valid pixels, computed
// in half precision as the reference does on the CPU (each cell row summed in float32, rounded to
// half and accumulated into a half sum; half division by the half count), set to 0 when the cell
// has fewer than (cell pixels) / 16 valid pixels, clamped to [0, 1], times (voxel_resolution − 1)
// in half, rounded half-to-even. Returns (B, N·grid·grid, 3) int32, row
// (n·grid + i)·grid + j, columns x, y, z.
std::vector<std::int32_t> pbr_voxel_indices(const HalfPositionMaps& maps, int grid,
                                            int voxel_resolution);

// One level of the official calc_multires_voxel_idxs.
struct VoxelLevel {
  int grid = 0, voxel_resolution = 0;
  std::vector<std::int32_t> voxels;  // (B, N·grid², 3)
};

// Official calc_multires_voxel_idxs for latents of latent_size²: grids {s, s/2, s/4, s/8} with
// voxel resolutions {8s, 4s, 2s, s}, in that order. Reproduces a side effect of the reference:
// with half position maps (as the pipeline passes them) `position.half()` is the caller's tensor
// itself, and `position[valid_mask == False] = 0` zeroes its background in place, so from the
// second grid on every pixel is valid (background (0, 0, 0)) and the means are taken over whole
// cells.
std::vector<VoxelLevel> pbr_multires_voxel_indices(const HalfPositionMaps& maps,
                                                   std::int64_t latent_size);

// Official RotaryEmbedding.get_3d_rotary_pos_embed (attn_processor.py): for voxel indices
// (batch, len, 3), cos and sin (batch, len, head_dim) = [x: 3·(D/8) | y: 3·(D/8) | z: 2·(D/8)]
// columns of 1-D tables over 0..voxel_resolution−1, theta 10000, each frequency repeated for the
// pair (2i, 2i+1).
struct RopeTables {
  Tensor cos, sin;  // (batch, len, head_dim); on the UNet's device inside a PbrCondition
  RotaryTables view() const;
};
RopeTables pbr_rope_tables(std::span<const std::int32_t> voxels, std::int64_t batch,
                           std::int64_t len, std::int64_t head_dim, int voxel_resolution);

// The keys and values every denoising step of one generation shares, projected once by
// PbrUNet::project(): per main transformer site (site order), those of the reference features
// (attn_refview), of the prompt (attn2) and of the projected DINO tokens (attn_dino). forward()
// then projects only its queries and the tokens of the step. The projections are the GEMMs
// forward() would run, with the same row counts, so the results are bit-identical.
struct PbrProjections {
  Tensor text;                   // (B or 1, 2, T, D): the prompt they were projected from
  std::vector<float> ref_scale;  // (B): the reference scales they were projected for
  std::int64_t ref_batch = 0;    // reference items (1: shared by every batch item, or B)
  std::int64_t dino_batch = 0, dino_len = 0;  // DINO rows (1 or B) and tokens per row (4·T_dino)
  // The tensors below are on the UNet's device (text stays on the host).
  // [site][reference item] (N_ref·L, 3·C) = [k | v_albedo | v_mr] per token; empty where no
  // batch item reads it (ref_scale 0).
  std::vector<std::vector<Tensor>> ref_kv;
  std::vector<Tensor> text_kv;  // [site] (B·2·T, 2·C) = [k | v], the rows of (b, material) items
  std::vector<Tensor> dino_kv;  // [site] (dino_batch·dino_len, 2·C) = [k | v]

  bool empty() const { return text_kv.empty(); }
  std::int64_t bytes() const;  // the projected tensors' float32 bytes
};

// What the official forward caches in cached_condition["cache"] for a whole generation: the
// reference features, the projected DINO tokens and the position encodings. Built by
// PbrUNet::condition(); the caller keeps it across denoising steps. PbrUNet::project() adds the
// keys / values of the reference features, the prompt and the DINO tokens; once they are there
// forward() reads them instead of `ref` and `dino` (which the caller may then release).
struct PbrCondition {
  // Built by PbrUNet on its device; host tensors set by a caller are copied there at each use.
  RefFeatures ref;  // reference UNet features, batch 1 (shared) or B
  Tensor dino;      // (1 or B, 4·T_dino, cross_attention_dim) projected DINO tokens
  struct Level {
    VoxelLevel voxels;                        // (position batch, N·grid², 3)
    std::map<std::int64_t, RopeTables> rope;  // by head_dim, on the UNet's device
  };
  std::map<std::int64_t, Level> levels;  // by multiview sequence length N·grid²
  std::int64_t position_batch = 0;
  int num_views = 0;
  PbrProjections projected;  // empty until PbrUNet::project()
};

class PbrUNet {
 public:
  static constexpr int kMaterials = 2;   // pbr_setting ["albedo", "mr"]
  static constexpr int kDinoTokens = 4;  // ImageProjModel clip_extra_context_tokens

  // The UNet2p5DConditionModel state_dict: "unet." (main UNet, 12-channel conv_in, blocks wrapped
  // as "...transformer_blocks.k.transformer.*" with attn1.processor.to_{q,k,v}_mr /
  // to_out_mr.0, next to "...attn_refview.*" (+ processor.to_v_mr, processor.to_out_mr.0),
  // "...attn_multiview.*" and "...attn_dino.*"; learned_text_clip_{albedo,mr,ref} (T, D);
  // image_proj_model_dino.{proj,norm}) and "unet_dual." (reference UNet, same wrapping). `base`
  // is the diffusers unet/config.json (the reference UNet's in_channels; the main UNet reads
  // 3 · in_channels). T and the DINO width come from the checkpoint. Strict: every missing,
  // mis-shaped or unexpected tensor is listed in one ModelError.
  // `device`: where forward passes run (UNetLoadOptions::device of both UNets).
  static std::unique_ptr<PbrUNet> load(const UNetConfig& base,
                                       std::shared_ptr<const SafetensorsFile> file,
                                       WeightStorage storage = WeightStorage::kF32,
                                       Device device = Device::kCpu);
  static std::unique_ptr<PbrUNet> load(const UNetConfig& base, const std::string& path,
                                       WeightStorage storage = WeightStorage::kF32,
                                       Device device = Device::kCpu);
  // A diffusers-style folder (hunyuan3d-paintpbr-v2-1/unet): dir/config.json and the state_dict
  // in diffusion_pytorch_model.safetensors, .fp16.safetensors or .bin (the official folder ships
  // a torch.save .bin, read natively).
  static std::unique_ptr<PbrUNet> load_folder(const std::string& dir,
                                              WeightStorage storage = WeightStorage::kF32,
                                              Device device = Device::kCpu);
  // Random weights of the right shapes (benchmarks, tests): uniform in ±scale (norm scales 1,
  // biases 0).
  static std::unique_ptr<PbrUNet> random(const UNetConfig& base, std::uint64_t seed,
                                         std::int64_t text_tokens = 77,
                                         std::int64_t dino_dim = 1536,
                                         WeightStorage storage = WeightStorage::kF32,
                                         float scale = 0.02f, Device device = Device::kCpu);
  // The tensors load() expects ("unet." / "unet_dual." prefixed), with shapes.
  static std::vector<std::pair<std::string, Shape>> expected_tensors(const UNetConfig& base,
                                                                     std::int64_t text_tokens = 77,
                                                                     std::int64_t dino_dim = 1536);

  const UNetConfig& config() const { return base_; }
  Device device() const { return main_.device(); }  // where forward passes run
  std::int64_t num_parameters() const;
  const UNet2DCondition& main_unet() const { return main_; }
  const UNet2DCondition& reference_unet() const { return dual_; }
  // (T, D) learned prompts: material 0 albedo, 1 mr; and the reference prompt.
  const Tensor& learned_text(int material) const { return text_[material]; }
  const Tensor& learned_text_ref() const { return text_ref_; }
  // The DINO token width image_proj_model_dino takes (dino_dim).
  std::int64_t dino_dim() const { return dino_proj_.in; }
  // (1, 2, T, D): stack(albedo, mr), the official pipeline's prompt.
  Tensor learned_prompt() const;

  // image_proj_model_dino: (B, T_dino, dino_dim) -> (B, 4·T_dino, D) (Linear to 4 tokens per
  // input token, LayerNorm). The input on the host or the device; the result on the device.
  Tensor project_dino(const Tensor& dino_hidden) const;

  // Runs the reference UNet at timestep 0 on ref_latents (B·N_ref, h, w, in_channels) with
  // learned_text_ref() and records every block's post-norm1 states (B, N_ref·L, C), kept on the
  // device.
  RefFeatures reference_features(const Tensor& ref_latents, int num_ref,
                                 const UNetProbe& probe = {}) const;

  // Voxel indices and RoPE tables of the position maps for latents of latent_size² and
  // `num_views` views (grids {s, s/2, s/4, s/8}, voxel resolutions {8s, 4s, 2s, s}, official
  // UNet2p5DConditionModel.forward), one table per head dim of the main UNet's blocks, built on
  // the host and uploaded to the device once.
  void prepare_positions(PbrCondition& cond, const HalfPositionMaps& maps,
                         std::int64_t latent_size) const;

  // The whole cache: reference features (ref_latents (B_ref·N_ref, h, w, C)), projected DINO
  // tokens (dino_hidden (B or 1, T_dino, dino_dim)) and position encodings.
  PbrCondition condition(const Tensor& ref_latents, int num_ref, const Tensor& dino_hidden,
                         const HalfPositionMaps& maps, std::int64_t latent_size) const;

  // Projects what every step of a generation with this prompt (B or 1, 2, T, D) and these
  // ref_scale values (B) shares (PbrProjections) into cond.projected, from cond.ref and
  // cond.dino, on the device. `text` is a host tensor. forward() with the same text and ref_scale
  // then reuses them; with another text or ref_scale it throws ModelError.
  void project(PbrCondition& cond, const Tensor& text, std::span<const float> ref_scale) const;

  // sample (B·2·N, h, w, in_channels), row (b·2 + m)·N + n; normals / positions latents
  // (B·N or N, h, w, in_channels) shared by both materials; text (B or 1, 2, T, D) per material
  // (all host tensors; so is the result);
  // ref_scale (B) (0 skips the reference branch of that item) -> noise prediction
  // (B·2·N, h, w, out_channels). The probe also sees every transformer block's output (named by
  // its state_dict path) and its branch outputs before their residual adds ("<path>.transformer.
  // {norm1,attn1,attn2,norm3,ff}", "<path>.attn_refview", "<path>.attn_multiview",
  // "<path>.attn_dino"), all as (rows, L, C) token matrices. With cond.projected the keys and
  // values of the reference features, the prompt and the DINO tokens come from there
  // (bit-identical); otherwise this call projects them.
  Tensor forward(const Tensor& sample, const Tensor& normals, const Tensor& positions,
                 float timestep, const Tensor& text, const PbrCondition& cond,
                 std::span<const float> ref_scale, float mva_scale = 1.0f,
                 const UNetProbe& probe = {}) const;

  // Defined in pbr_unet.cpp (the per-site layers beside the wrapped block).
  struct Site;

  PbrUNet(UNetConfig base, UNet2DCondition main, UNet2DCondition dual);
  ~PbrUNet();

 private:
  struct Builder;

  // The (B·2, T, D) prompt rows of the (b, material) items of text (B or 1, 2, T, D).
  Tensor text_rows(const Tensor& text, std::int64_t B) const;
  // The reference features of every site for batch B, checked (null where unused).
  std::vector<const Tensor*> reference_layers(const PbrCondition& cond, std::int64_t B,
                                              bool uses_ref) const;

  UNetConfig base_;
  UNet2DCondition main_;
  UNet2DCondition dual_;
  Tensor text_[kMaterials], text_ref_;
  nn::Linear dino_proj_;
  nn::LayerNorm dino_norm_;
  std::vector<Site> sites_;  // per main transformer site
  std::int64_t extra_params_ = 0;
};

}  // namespace gen3d::models
