// Image-conditioner stage: `encode_image` turns a reference image into the DiT's condition tokens
// (Hunyuan3D-2's ImageProcessorV2 + DinoImageEncoder, models/shape/image_preprocess.h + dinov2.h).

#include <filesystem>
#include <string>

#include <spdlog/spdlog.h>

#include "image/background.h"
#include "image/convert.h"
#include "models/core/error.h"
#include "models/core/precision.h"
#include "models/shape/checkpoints.h"
#include "models/shape/dinov2.h"
#include "models/shape/image_preprocess.h"
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

class EncodeImage final : public pipeline::Stage {
 public:
  StageContract contract() const override {
    StageContract c(
        "encode_image",
        "Image condition for shape generation: recenter on the alpha box, composite on "
        "white, resize (OpenCV-exact ImageProcessorV2), then the DINOv2 encoder "
        "(DinoImageEncoder). An image without alpha first gets one from the classical "
        "remove_background (border-colour threshold / GrabCut, not the learned rembg).");
    c.model_class()
        .reads_files("model", true)
        .reads_files("config")
        .input<image::Image>("image", "reference image (RGBA, or RGB / grey on a plain background)")
        .output<Tensor>("cond", "condition tokens [1, T, C] (T = (image_size/14)^2 + CLS)")
        .output<Tensor>("uncond", "unconditional tokens: zeros of the same shape (CFG)")
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
                "accumulation, norms and state) or fp32; int8 runs DINOv2 in bf16 (the DiT's "
                "setting); auto: bf16 where the CPU has AVX512-BF16 or AMX")
        .keys_by("precision", resolved_precision)
        .param<int>("size", 512, Range{16, 4096}, "ImageProcessorV2 output size")
        .param<double>("border_ratio", 0.15, Range{0.0, 0.9}, "margin around the object")
        .choice("background", "threshold", {"threshold", "grabcut"},
                "classical background removal for images without alpha")
        .param<double>("background_threshold", 0.08, Range{0.0, 1.8},
                       "RGB distance from the border colour that counts as foreground");
    add_device_param(c);
    return c;
  }

  void check(const ParamMap& params, std::vector<std::string>& problems) const override {
    check_device(params, problems);
    const auto& model = std::get<std::string>(params.at("model"));
    if (!std::filesystem::exists(model)) problems.push_back("model weights not found: " + model);
    const auto& config = std::get<std::string>(params.at("config"));
    if (!config.empty() && !std::filesystem::is_regular_file(config))
      problems.push_back("model config not found: " + config);
  }

  void run(StageContext& ctx) const override {
    // Weights + config (a directory resolves like the DiT's: model.fp16.safetensors, config.json).
    const models::CheckpointSource src = models::resolve_checkpoint(
        ctx.param<std::string>("model"), ctx.param<std::string>("config"));
    const auto storage = models::storage_for(
        models::parse_precision(ctx.param<std::string>("precision")),
        ctx.param<std::string>("weights") == "f16" ? models::WeightStorage::kF16
                                                   : models::WeightStorage::kF32);
    std::shared_ptr<const models::DinoImageEncoder> encoder;
    {
      auto span = ctx.span("load model");
      encoder = models::shared_image_encoder(src.weights, src.config,
                                             ctx.param<std::string>("config_section"), storage,
                                             node_device(ctx));
    }

    auto image = ctx.in<image::Image>("image");
    std::shared_ptr<const image::Image> rgba = image;
    if (image->channels != 4) {
      auto span = ctx.span("remove background");
      image::Image rgb = *image;
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

    models::PreprocessedImage pre;
    {
      auto span = ctx.span("preprocess");
      const image::ImageU8 u8 =
          image::image_u8_from_unit(rgba->pixels.data(), rgba->width, rgba->height, 4);
      models::ImagePreprocessOptions opt;
      opt.size = ctx.param<int>("size");
      opt.border_ratio = ctx.param<double>("border_ratio");
      pre = models::preprocess_image(u8, opt);
    }
    ctx.throw_if_cancelled();
    Tensor cond;
    {
      auto span = ctx.span("dinov2");
      cond = encoder->encode(pre.image);  // [1, T, C]
    }
    auto uncond = std::make_shared<Tensor>(encoder->unconditional(cond.dim(0)));  // zeros
    spdlog::info("{}: {}x{}x{} image -> condition {} ({} {})", ctx.node_id(), image->width,
                 image->height, image->channels, cond.shape().str(), src.weights,
                 ctx.param<std::string>("weights"));
    ctx.out("cond", std::make_shared<Tensor>(std::move(cond)));
    ctx.out("uncond", std::move(uncond));
  }
};

}  // namespace

void register_conditioner_stages(pipeline::Registry& registry) {
  registry.add<EncodeImage>();
}

}  // namespace gen3d::stages
