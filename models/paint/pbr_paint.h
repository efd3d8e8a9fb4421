#pragma once
// Multiview PBR paint of Hunyuan3D-Paint-v2-1: the official HunyuanPaintPipeline.__call__ /
// denoise (hy3dpaint/hunyuanpaintpbr/pipeline.py) driven as multiviewDiffusionNet does it
// (hy3dpaint/utils/multiview_utils.py), on the native PbrUNet, SD VAE, UniPC and DINOv2.
//
// One generation: DINOv2-giant tokens of the reference image (AutoImageProcessor: shortest edge
// 256 bicubic, centre crop 224, ImageNet mean / std; all 257 tokens); the reference, normal and
// position images VAE-encoded with posterior samples × scaling_factor; latents (2·N, h, w, 4)
// (albedo views, then metallic-roughness views) from N(0, 1); UniPC with trailing spacing
// (15 steps); each step runs the three-row CFG batch [uncond: ref_scale 0, DINO zeros | ref:
// ref_scale 1, DINO zeros | full: ref_scale 1, DINO] and combines
//   eps = u + g·(r − u); eps += g·(f − r)          (g = 3.0; the view scale is 1, see below)
// then decodes both materials. Deliberate difference: the reference UNet runs once per texture
// (its features at t = 0 do not depend on the step), where the official forward caches it too;
// so do the key / value projections of its features, of the prompt and of the DINO tokens
// (PbrProjections), bit-identically.
//
// Tensors are NHWC; images in [0, 1].

#include <array>
#include <cstdint>
#include <functional>
#include <memory>
#include <string>

#include "image/image.h"
#include "models/core/device.h"
#include "models/core/dtype.h"
#include "models/core/tensor.h"
#include "models/paint/diffusion_scheduler.h"
#include "models/paint/pbr_unet.h"

namespace gen3d::models {

class SdVae;
class Dinov2Model;

// --- DINO preprocessing (transformers BitImageProcessor as facebook/dinov2-giant configures it:
// do_convert_rgb, resize shortest_edge 256 with PIL BICUBIC, center_crop 224, rescale 1/255,
// normalize with the ImageNet mean / std) ---

// PIL's Image.resize(..., BICUBIC) of an 8-bit image (Pillow's ImagingResample: a = −0.5 cubic
// stretched by the scale when shrinking, coefficients normalised per output pixel and rounded to
// 22-bit fixed point; horizontal pass, then vertical, each rounded to 8 bits).
image::ImageU8 resize_pil_bicubic(const image::ImageU8& image, int width, int height);

struct DinoPreprocess {
  int shortest_edge = 256;                                  // resize target of the shorter side
  int crop = 224;                                           // centre crop size
  std::array<float, 3> image_mean{0.485f, 0.456f, 0.406f};  // IMAGENET_DEFAULT_MEAN
  std::array<float, 3> image_std{0.229f, 0.224f, 0.225f};   // IMAGENET_DEFAULT_STD

  // A transformers preprocessor_config.json (BitImageProcessor): size.shortest_edge, crop_size,
  // image_mean / image_std read; resize, centre crop, rescale by 1/255, normalisation and RGB
  // conversion must be on and resample BICUBIC (3); anything else is a ModelError naming `label`.
  static DinoPreprocess parse(const std::string& json_text, const std::string& label);
};

// rgb (H, W, 3) u8 -> pixel_values (1, 3, crop, crop): shorter side to shortest_edge (the longer
// int(edge · long / short), transformers' get_resize_output_image_size), crop at
// ((h − crop) / 2, (w − crop) / 2) (floor), (u8 / 255 − image_mean) / image_std in float32.
Tensor dino_pixel_values(const image::ImageU8& rgb, const DinoPreprocess& opt = {});

// The official hunyuan3d-paintpbr-v2-1/ diffusers folder (unet/ with config.json and
// diffusion_pytorch_model.bin holding unet.* / unet_dual.*; vae/; scheduler/
// scheduler_config.json) and a DINOv2 folder in the transformers layout (config.json +
// model.safetensors or pytorch_model.bin).
struct PbrPaintModel {
  std::string dir, dino_dir;
  std::shared_ptr<const PbrUNet> unet;
  std::shared_ptr<const SdVae> vae;
  std::shared_ptr<const Dinov2Model> dino;
  DinoPreprocess dino_preprocess;  // the folder's preprocessor_config.json, else the defaults
  SchedulerConfig scheduler;
  Device device = Device::kCpu;  // where the three networks run
};

// Strict: a missing file or a missing / mis-shaped / unexpected tensor is a ModelError naming it.
// `storage`: in-memory dtype of every network's weights (kBF16: the bf16 precision mode).
// `device`: where the UNet, the VAE and DINOv2 run; a device runs them in bf16, so their weights
// are kept in bf16 there whatever `storage` says (int8 is refused). The sampler stays on the host.
std::shared_ptr<const PbrPaintModel> load_pbr_paint_model(
    const std::string& dir, const std::string& dino_dir,
    WeightStorage storage = WeightStorage::kF32, Device device = Device::kCpu);
// The same, shared per process (a folder pair loads once per storage and device).
std::shared_ptr<const PbrPaintModel> shared_pbr_paint_model(
    const std::string& dir, const std::string& dino_dir,
    WeightStorage storage = WeightStorage::kF32, Device device = Device::kCpu);

// The DINOv2 weights file of a transformers folder: model.safetensors, else pytorch_model.bin.
std::string find_dino_weights(const std::string& dir);

// --- the sampler ---

struct PbrPaintOptions {
  int steps = 15;         // UniPC steps (multiviewDiffusionNet's infer_steps_dict)
  float guidance = 3.0f;  // CFG scale (<= 1: the full row alone)
  // CFG rows with guidance > 1: 3 is the official batch [uncond | ref | full]; 2 runs [uncond |
  // full] and combines u + g·(f − u), equal in exact arithmetic (the ref row cancels from
  // u + g·(r − u) + g·(f − r)) and a third cheaper; the two differ by float rounding only.
  int cfg_rows = 3;
  std::uint64_t seed = 0;  // all noise (VAE posteriors, initial latents)
};

struct PbrPaintInputs {
  Tensor reference;  // (1, S, S, 3): the reference view (RGB, composited)
  Tensor normals;    // (N, S, S, 3): normal maps of the N views, background white
  Tensor positions;  // (N, S, S, 3): position maps, background white (1.0 marks it)
};

// What one step saw; valid during the observer call only.
struct PbrPaintStep {
  int index = 0, total = 0;
  float timestep = 0.0f;
  const Tensor* noise_pred_raw = nullptr;  // (B·2·N, h, w, 4), B = the CFG rows
  const Tensor* noise_pred = nullptr;      // (2·N, h, w, 4) after CFG
  const Tensor* latents = nullptr;         // (2·N, h, w, 4) after the scheduler step
};
using PbrPaintObserver = std::function<void(const PbrPaintStep&)>;

struct PbrPaintResult {
  Tensor albedo;  // (N, S, S, 3) in [0, 1]
  Tensor mr;      // (N, S, S, 3) in [0, 1]: R metallic, G roughness
};

// The official CFG combination of the three rows of `raw` ((3·rows, ...), rows each) into out
// (rows, ...): out = u + g·(r − u), then out += g·(f − r), float32 in that order. The official
// view scale cam_mapping(azim) is 1 here: multiviewDiffusionNet never passes camera_azims, so
// the pipeline uses azimuth 0 for every view (pipeline.py, denoise).
void pbr_cfg_combine(const Tensor& raw, float guidance, Tensor& out);

// --- the pieces of one generation (the runner below; exposed for the golden tests) ---

// The scheduler as multiviewDiffusionNet builds it: UniPCMultistepScheduler.from_config(folder
// config, timestep_spacing="trailing"), set to `steps`.
UniPCScheduler pbr_paint_scheduler(const SchedulerConfig& folder_config, int steps);

// The CFG rows a generation runs: 1 when guidance <= 1, else options.cfg_rows (2 or 3; anything
// else is a ModelError).
int pbr_cfg_rows(const PbrPaintOptions& options);

// The generation's cached condition for `rows` CFG rows: reference features of ref_latents
// (1, h, w, 4) (one row: the official repeats it per CFG row, all equal), DINO rows
// [0, .., 0, dino_tokens] (pipeline.py __call__: [0, 0, dino]; the zero rows still pass the image
// projection) and the position encodings of `maps` for latents of latent_size². The keys /
// values of the reference features, the learned prompt and the DINO tokens are projected once
// here for the rows' ref_scale (PbrUNet::project; the features are then released), so every step
// of pbr_guided_prediction reuses them, bit-identically.
PbrCondition pbr_paint_condition(const PbrUNet& unet, const Tensor& ref_latents,
                                 const Tensor& dino_tokens, const HalfPositionMaps& maps,
                                 std::int64_t latent_size, int rows);

// One step's guided prediction: latents (2·N, h, w, 4) repeated per CFG row (UniPC's model input
// is unscaled), the PbrUNet on the learned prompt with ref_scale [0, 1, 1] ([0, 1] with two
// rows, [1] with one), then pbr_cfg_combine (two rows: u + g·(f − u)). normals / positions: the
// (N, h, w, 4) condition latents; `cond` built for the same rows. `raw` (optional) receives the
// network output (rows · 2·N, h, w, 4).
Tensor pbr_guided_prediction(const PbrUNet& unet, const PbrCondition& cond, const Tensor& latents,
                             const Tensor& normals, const Tensor& positions, float timestep,
                             float guidance, int rows, Tensor* raw = nullptr);

// Runs the sampler and decodes both materials.
PbrPaintResult paint_pbr_views(const PbrPaintModel& model, const PbrPaintInputs& inputs,
                               const PbrPaintOptions& options,
                               const PbrPaintObserver& observer = {});

}  // namespace gen3d::models
