// Image-conditioner stages: `encode_image` turns a reference image into the DiT's condition tokens
// (Hunyuan3D-2's ImageProcessorV2 + DinoImageEncoder, models/shape/image_preprocess.h + dinov2.h);
// `encode_views` does it for named views (Hunyuan3D-2mv's MVImageProcessorV2 +
// DinoImageEncoderMV, models/shape/multiview.h).

#include <filesystem>
#include <string>
#include <vector>

#include <spdlog/spdlog.h>

#include "image/background.h"
#include "image/convert.h"
#include "models/core/error.h"
#include "models/core/precision.h"
#include "models/shape/checkpoints.h"
#include "models/shape/dinov2.h"
#include "models/shape/image_preprocess.h"
#include "models/shape/multiview.h"
#include "stages/register.h"
#include "stages/shared.h"
#include "stages/types.h"

namespace gen3d::stages {
namespace {

using models::Tensor;
using pipeline::ParamMap;
using pipeline::Range;
using pipeline::StageContext;
using pipeline::StageContract;

// The parameters the two conditioner stages share.
void add_conditioner_params(StageContract& c) {
  c.model_class()
      .reads_files("model", true)
      .reads_files("config")
      .required<std::string>("model",
                             "weights: standalone DINOv2 .safetensors, a combined pipeline "
                             "checkpoint (conditioner.main_image_encoder.model.*) or its "
                             "directory")
      .param<std::string>("config", "",
                          "config.yaml or JSON config (default: config.json, else config.yaml, "
                          "next to the weights)")
      .param<std::string>("config_section", "conditioner",
                          "'/'-separated path of the conditioner block in the config")
      .choice("weights", "f32", {"f32", "f16"}, "in-memory dtype of the matrices (fp32)")
      .choice("precision", "auto", {"auto", "fp32", "bf16", "int8"},
              "network precision: bf16 (bf16 weights and GEMM / convolution operands, float32 "
              "accumulation, norms and state) or fp32; int8: bf16 with the attention and MLP "
              "products in int8 (per-channel weight and per-token activation scales); auto: bf16 "
              "where the CPU has AVX512-BF16 or AMX")
      .keys_by("precision", resolved_precision)
      .param<int>("size", 512, Range{16, 4096}, "ImageProcessorV2 output size")
      .param<double>("border_ratio", 0.15, Range{0.0, 0.9}, "margin around the object")
      .choice("background", "threshold", {"threshold", "grabcut"},
              "classical background removal for images without alpha")
      .param<double>("background_threshold", 0.08, Range{0.0, 1.8},
                     "RGB distance from the border colour that counts as foreground");
  add_device_param(c);
}

void check_conditioner_params(const ParamMap& params, std::vector<std::string>& problems) {
  check_device(params, problems);
  const auto& model = std::get<std::string>(params.at("model"));
  if (!std::filesystem::exists(model)) problems.push_back("model weights not found: " + model);
  const auto& config = std::get<std::string>(params.at("config"));
  if (!config.empty() && !std::filesystem::is_regular_file(config))
    problems.push_back("model config not found: " + config);
}

// The conditioner the node's parameters name (loaded once per process), and where it came from.
std::shared_ptr<const models::DinoImageEncoder> load_conditioner(StageContext& ctx,
                                                                 std::string* weights) {
  // Weights + config (a directory resolves like the DiT's: model.fp16.safetensors, config.json).
  const models::CheckpointSource src =
      models::resolve_checkpoint(ctx.param<std::string>("model"), ctx.param<std::string>("config"));
  const auto storage =
      models::storage_for(models::parse_precision(ctx.param<std::string>("precision")),
                          ctx.param<std::string>("weights") == "f16" ? models::WeightStorage::kF16
                                                                     : models::WeightStorage::kF32);
  auto span = ctx.span("load model");
  *weights = src.weights;
  return models::shared_image_encoder(
      src.weights, src.config, ctx.param<std::string>("config_section"), storage, node_device(ctx));
}

// ImageProcessorV2 on one image: an image without alpha first gets one from the classical
// background removal; then recenter, composite on white, resize: [1, 3, size, size] in [-1, 1].
Tensor prepare_image(StageContext& ctx, const image::Image& image) {
  std::shared_ptr<const image::Image> rgba;
  if (image.channels != 4) {
    auto span = ctx.span("remove background");
    image::Image rgb = image;
    if (rgb.channels == 1) {  // grey -> RGB for the background estimate
      image::Image c3(rgb.width, rgb.height, 3);
      for (std::size_t i = 0; i < rgb.pixels.size(); ++i)
        for (int c = 0; c < 3; ++c) c3.pixels[i * 3 + c] = rgb.pixels[i];
      rgb = std::move(c3);
    }
    image::BackgroundOptions bg;
    bg.method = ctx.param<std::string>("background");
    bg.threshold = ctx.param<float>("background_threshold");
    rgba = std::make_shared<const image::Image>(image::remove_background(rgb, bg));
  }
  const image::Image& src = rgba ? *rgba : image;
  auto span = ctx.span("preprocess");
  const image::ImageU8 u8 = image::image_u8_from_unit(src.pixels.data(), src.width, src.height, 4);
  models::ImagePreprocessOptions opt;
  opt.size = ctx.param<int>("size");
  opt.border_ratio = ctx.param<double>("border_ratio");
  return models::preprocess_image(u8, opt).image;
}

class EncodeImage final : public pipeline::Stage {
 public:
  StageContract contract() const override {
    StageContract c(
        "encode_image",
        "Image condition for shape generation: recenter on the alpha box, composite on "
        "white, resize (OpenCV-exact ImageProcessorV2), then the DINOv2 encoder "
        "(DinoImageEncoder). An image without alpha first gets one from the classical "
        "remove_background (border-colour threshold / GrabCut, not the learned rembg).");
    c.input<image::Image>("image", "reference image (RGBA, or RGB / grey on a plain background)")
        .output<Tensor>("cond", "condition tokens [1, T, C] (T = (image_size/14)^2 + CLS)")
        .output<Tensor>("uncond", "unconditional tokens: zeros of the same shape (CFG)");
    add_conditioner_params(c);
    return c;
  }

  void check(const ParamMap& params, std::vector<std::string>& problems) const override {
    check_conditioner_params(params, problems);
  }

  void run(StageContext& ctx) const override {
    std::string weights;
    const auto encoder = load_conditioner(ctx, &weights);
    if (encoder->config().multiview)
      throw models::ModelError(
          weights +
          " is a multiview conditioner (DinoImageEncoderMV, Hunyuan3D-2mv): give it named views "
          "(encode_views; gen3d shape --image front=A.png --image left=B.png ...)");
    auto image = ctx.in<image::Image>("image");
    const Tensor pre = prepare_image(ctx, *image);
    ctx.throw_if_cancelled();
    Tensor cond;
    {
      const DeviceTrace device_trace(ctx, node_device(ctx));  // the GPU's work, in a trace
      auto span = ctx.span("dinov2");
      cond = encoder->encode(pre);  // [1, T, C]
    }
    auto uncond = std::make_shared<Tensor>(encoder->unconditional(cond.dim(0)));  // zeros
    spdlog::info("{}: {}x{}x{} image -> condition {} ({} {})", ctx.node_id(), image->width,
                 image->height, image->channels, cond.shape().str(), weights,
                 ctx.param<std::string>("weights"));
    ctx.out("cond", std::make_shared<Tensor>(std::move(cond)));
    ctx.out("uncond", std::move(uncond));
  }
};

class EncodeViews final : public pipeline::Stage {
 public:
  StageContract contract() const override {
    StageContract c(
        "encode_views",
        "Multiview image condition for Hunyuan3D-2mv: each view given (front, left, back, right; "
        "any subset) is prepared like encode_image's image (MVImageProcessorV2), the views are "
        "encoded by DINOv2 in view order, each gets its fixed sinusoidal view embedding "
        "(DinoImageEncoderMV) and they are concatenated into one condition.");
    for (const std::string_view view : models::kMultiviewNames)
      c.optional_input<image::Image>(std::string(view), "the " + std::string(view) +
                                                            " view (RGBA, or RGB / grey on "
                                                            "a plain background)");
    c.output<Tensor>("cond", "condition tokens [1, V T, C] (V views given, in view order)")
        .output<Tensor>("uncond", "unconditional tokens: zeros of the same shape (CFG)");
    add_conditioner_params(c);
    return c;
  }

  void check(const ParamMap& params, std::vector<std::string>& problems) const override {
    check_conditioner_params(params, problems);
  }

  void run(StageContext& ctx) const override {
    // MVImageProcessorV2 sorts the views by index; so does this loop.
    std::vector<int> view_idxs;
    std::vector<std::shared_ptr<const image::Image>> images;
    for (std::size_t v = 0; v < models::kMultiviewNames.size(); ++v) {
      const std::string_view name = models::kMultiviewNames[v];
      if (!ctx.has_input(name)) continue;
      view_idxs.push_back(static_cast<int>(v));
      images.push_back(ctx.in<image::Image>(name));
    }
    if (images.empty())
      throw std::runtime_error("encode_views needs at least one view (front, left, back, right)");
    std::string weights;
    const auto encoder = load_conditioner(ctx, &weights);
    if (!encoder->config().multiview)
      throw models::ModelError(
          weights +
          " is a single-image conditioner (DinoImageEncoder): named views need a multiview model "
          "(Hunyuan3D-2mv: mv, mv-fast, mv-turbo)");
    const int size = ctx.param<int>("size");
    Tensor views({static_cast<std::int64_t>(images.size()), 3, size, size});  // [V, 3, S, S]
    for (std::size_t i = 0; i < images.size(); ++i) {
      auto span = ctx.span(std::string(models::kMultiviewNames[view_idxs[i]]));
      const Tensor pre = prepare_image(ctx, *images[i]);  // [1, 3, S, S]
      std::copy_n(pre.data(), pre.numel(), views.data() + i * pre.numel());
    }
    ctx.throw_if_cancelled();
    Tensor cond;
    {
      const DeviceTrace device_trace(ctx, node_device(ctx));  // the GPU's work, in a trace
      auto span = ctx.span("dinov2");
      cond = encoder->encode_views(views, view_idxs);  // [1, V T, C]
    }
    auto uncond = std::make_shared<Tensor>(cond.shape());  // zeros (unconditional_embedding)
    std::string names;
    for (int v : view_idxs)
      names += (names.empty() ? "" : ", ") + std::string(models::kMultiviewNames[v]);
    spdlog::info("{}: views {} -> condition {} ({} {})", ctx.node_id(), names, cond.shape().str(),
                 weights, ctx.param<std::string>("weights"));
    ctx.gauge("multiview.condition_views", static_cast<double>(view_idxs.size()));
    ctx.out("cond", std::make_shared<Tensor>(std::move(cond)));
    ctx.out("uncond", std::move(uncond));
  }
};

}  // namespace

void register_conditioner_stages(pipeline::Registry& registry) {
  registry.add<EncodeImage>();
  registry.add<EncodeViews>();
}

}  // namespace gen3d::stages
