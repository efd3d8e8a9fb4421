// Image stages: the reference image's path to a delit, centred RGBA picture.

#include <filesystem>
#include <optional>

#include <fmt/format.h>
#include <spdlog/spdlog.h>

#include "image/background.h"
#include "image/composite.h"
#include "image/delight.h"
#include "image/io.h"
#include "image/recenter.h"
#include "image/resize.h"
#include "mesh/io.h"
#include "models/core/precision.h"
#include "models/core/tensor.h"
#include "models/paint/delight_model.h"
#include "stages/register.h"
#include "stages/shared.h"
#include "stages/types.h"

namespace gen3d::stages {
namespace {

using pipeline::Range;
using pipeline::StageContext;
using pipeline::StageContract;

class LoadImage final : public pipeline::Stage {
 public:
  StageContract contract() const override {
    return StageContract(
               "load_image",
               "Read a PNG, JPEG or WebP image (libpng, TurboJPEG, libwebp); alpha is kept.")
        .output<image::Image>("image", "float RGB(A) in [0, 1]")
        .required<std::string>("path", "image file")
        .cache_policy(pipeline::CachePolicy::Never)
        .reads_files("path");
  }
  void check(const pipeline::ParamMap& params, std::vector<std::string>& problems) const override {
    const auto& path = std::get<std::string>(params.at("path"));
    if (!std::filesystem::is_regular_file(path))
      problems.push_back("image file not found: " + path);
  }
  void run(StageContext& ctx) const override {
    const auto path = ctx.param<std::string>("path");
    auto image = std::make_shared<image::Image>(image::load_image(path));
    if (image->channels == 4) {
      bool any = false;
      for (size_t i = 3; i < image->pixels.size() && !any; i += 4) any = image->pixels[i] > 0.0f;
      if (!any) throw std::runtime_error(path + ": the image is fully transparent");
    }
    spdlog::info("{}: {} ({}x{}, {} channels)", ctx.node_id(), path, image->width, image->height,
                 image->channels);
    ctx.out("image", std::move(image));
  }
};

class RecenterImage final : public pipeline::Stage {
 public:
  StageContract contract() const override {
    return StageContract("recenter_image",
                         "Crop to the alpha bounding box, add a border, centre in a square "
                         "(the reference's recenter); RGB passes through.")
        .cache_policy(pipeline::CachePolicy::Never)
        .input<image::Image>("image")
        .output<image::Image>("image")
        .param<double>("border_ratio", 0.2, Range{0.0, 2.0}, "border, as a fraction of the crop");
  }
  void run(StageContext& ctx) const override {
    auto in = ctx.in<image::Image>("image");
    ctx.out("image", std::make_shared<image::Image>(
                         image::recenter(*in, {.border_ratio = ctx.param<float>("border_ratio")})));
  }
};

class RemoveBackground final : public pipeline::Stage {
 public:
  StageContract contract() const override {
    return StageContract("remove_background",
                         "Give an RGB image an alpha mask by a classical method (border-colour "
                         "threshold, optionally refined by GrabCut); not the learned rembg. RGBA "
                         "passes through.")
        .cache_policy(pipeline::CachePolicy::Never)
        .input<image::Image>("image")
        .output<image::Image>("image", "RGBA")
        .choice("method", "threshold", {"threshold", "grabcut"}, "segmentation method")
        .param<double>("threshold", 0.08, Range{0.0, 1.8},
                       "RGB distance from the background colour")
        .param<bool>("keep_largest", true,
                     "keep only the largest foreground region (false: every region, for objects "
                     "of several parts)");
  }
  void run(StageContext& ctx) const override {
    image::BackgroundOptions options;
    options.method = ctx.param<std::string>("method");
    options.threshold = ctx.param<float>("threshold");
    options.keep_largest = ctx.param<bool>("keep_largest");
    ctx.out("image", std::make_shared<image::Image>(
                         image::remove_background(*ctx.in<image::Image>("image"), options)));
  }
};

class Delight final : public pipeline::Stage {
 public:
  StageContract contract() const override {
    StageContract c =
        StageContract(
            "delight",
            "Remove shading and highlights from the reference image. method model: the "
            "learned delighter (hunyuan3d-delight-v2-0: InstructPix2Pix UNet, Euler-ancestral, "
            "then the reference's colour re-matching), RGB on white at `size`. method "
            "classical: shading estimate + highlight inpainting + the same colour re-matching "
            "(OpenCV; an approximation, not the learned delighter).")
            .model_class()
            .reads_files("model")
            .input<image::Image>("image")
            .output<image::Image>("image")
            .choice("method", "classical", {"classical", "none", "model"},
                    "classical (OpenCV), none (pass through) or model (the learned network)")
            .param<double>("strength", 0.8, Range{0.0, 1.0},
                           "classical: how much of the shading to divide out")
            .param<std::string>("model", "",
                                "model: the delight model folder (diffusers layout: unet/, vae/, "
                                "scheduler/, text_encoder/, tokenizer/)")
            .param<int>("steps", 50, Range{1, 1000}, "model: Euler-ancestral steps")
            .param<double>(
                "guidance", 1.0, Range{0.0, 100.0},
                "model: text guidance (the official 1.0 means no guidance: one UNet pass "
                "per step)")
            .param<double>("image_guidance", 1.5, Range{0.0, 100.0},
                           "model: image guidance (only used when guidance > 1)")
            .param<int>("seed", 42, Range{0, 2147483647}, "model: noise seed")
            .choice(
                "precision", "auto", {"auto", "fp32", "bf16"},
                "model: network precision: bf16 (bf16 weights and GEMM / convolution operands, "
                "float32 accumulation) or fp32; auto: bf16 where the CPU has AVX512-BF16 or AMX")
            .keys_by("precision", resolved_precision)
            .param<int>("size", 512, Range{16, 4096},
                        "model: working size (multiple of 8; the official 512)");
    add_device_param(c);  // model: where the UNet and the VAE run
    return c;
  }
  void check(const pipeline::ParamMap& params, std::vector<std::string>& problems) const override {
    if (std::get<std::string>(params.at("method")) != "model") return;
    check_device(params, problems);
    const auto& dir = std::get<std::string>(params.at("model"));
    if (dir.empty())
      problems.push_back("method 'model' needs \"model\": the delight model folder");
    else if (!std::filesystem::is_directory(dir))
      problems.push_back("delight model folder not found: " + dir);
    if (std::get<int64_t>(params.at("size")) % 8 != 0)
      problems.push_back("size must be a multiple of 8 (the VAE's downsampling)");
  }
  void run(StageContext& ctx) const override {
    auto in = ctx.in<image::Image>("image");
    const std::string method = ctx.param<std::string>("method");
    if (method == "none") {
      ctx.out("image", in);
      return;
    }
    if (method == "model") {
      ctx.out("image", std::make_shared<image::Image>(run_model(ctx, *in)));
      return;
    }
    image::DelightOptions options;
    options.strength = ctx.param<float>("strength");
    image::DelightStats stats;
    auto out = std::make_shared<image::Image>(image::delight_classical(*in, options, &stats));
    ctx.gauge("delight.highlight_fraction", stats.highlight_fraction);
    ctx.out("image", std::move(out));
  }

 private:
  static image::Image run_model(StageContext& ctx, const image::Image& image) {
    const models::Device device = node_device(ctx);
    std::shared_ptr<const models::DelightModel> model;
    {
      auto span = ctx.span("load model");
      model = models::shared_delight_model(
          ctx.param<std::string>("model"),
          models::storage_for(models::parse_precision(ctx.param<std::string>("precision"))),
          device);
    }
    const int size = ctx.param<int>("size");
    const image::Image input =
        image::delight_model_input(image::resize_image(image, size, size, "cubic"));
    const image::Image rgb = image::composite_over(input);  // already white where alpha is 0
    models::Tensor x(models::Shape{1, size, size, 3});
    std::copy(rgb.pixels.begin(), rgb.pixels.end(), x.data());

    models::DelightModelOptions opt;
    opt.steps = ctx.param<int>("steps");
    opt.guidance = ctx.param<float>("guidance");
    opt.image_guidance = ctx.param<float>("image_guidance");
    opt.seed = static_cast<std::uint64_t>(ctx.param<int>("seed"));
    // Spans: encode (VAE) + step 0, one per step, decode.
    std::optional<pipeline::Profiler::Span> step_span = ctx.span("encode + step 0");
    std::optional<DeviceTrace> device_trace;  // the GPU's work, in a trace
    device_trace.emplace(ctx, device);
    const auto observer = [&](int i, int n) {
      step_span->end();
      ctx.throw_if_cancelled();
      spdlog::debug("{}: delight step {}/{}", ctx.node_id(), i + 1, n);
      step_span = ctx.span(i + 1 < n ? "step " + std::to_string(i + 1) : std::string("decode"));
    };
    const models::Tensor out = models::delight_network(*model, x, opt, observer);
    device_trace.reset();
    step_span.reset();

    image::Image net(size, size, 3);
    std::copy(out.data(), out.data() + out.numel(), net.pixels.begin());
    bool matched = false;
    image::Image result = image::delight_model_output(net, input, 0.95f, &matched);
    ctx.gauge("delight.colors_rematched", matched ? 1.0 : 0.0);
    spdlog::info("{}: learned delighting, {} steps at {}x{} ({})", ctx.node_id(), opt.steps, size,
                 size, matched ? "colours re-matched" : "network colours kept");
    return result;
  }
};

// Writes images to disk (views, maps) for inspection or as inputs of a later `views_from_files`
// run.
class SaveImages final : public pipeline::Stage {
 public:
  StageContract contract() const override {
    return StageContract("save_images",
                         "Write one PNG per view image as <dir>/<prefix><index>.png (atomically).")
        .input<ImageList>("images")
        .required<std::string>("dir", "output directory; created when missing")
        .param<std::string>("prefix", "view_", "file name prefix");
  }
  void check(const pipeline::ParamMap& p, std::vector<std::string>& problems) const override {
    // Refused before the run, not after the expensive stages that feed it.
    if (const auto it = p.find("dir"); it != p.end())
      check_output_path(std::get<std::string>(it->second) + "/view.png", problems);
  }
  void run(StageContext& ctx) const override {
    auto images = ctx.in<ImageList>("images");
    const auto dir = ctx.param<std::string>("dir");
    std::filesystem::create_directories(dir);
    for (size_t v = 0; v < images->size(); ++v)
      if (!(*images)[v].empty())
        image::save_image((*images)[v], dir + "/" + ctx.param<std::string>("prefix") +
                                            std::to_string(v) + ".png");
  }
};

// One image of a list, e.g. one rendered view as the reference of a single-image benchmark.
class SelectImage final : public pipeline::Stage {
 public:
  StageContract contract() const override {
    return StageContract("select_image", "One image of a list of view images, by index.")
        .input<ImageList>("images")
        .output<image::Image>("image")
        .param<int>("index", 0, Range{0, 1023}, "which image");
  }
  void run(StageContext& ctx) const override {
    auto images = ctx.in<ImageList>("images");
    const auto index = static_cast<size_t>(ctx.param<int>("index"));
    if (index >= images->size() || (*images)[index].empty())
      throw std::runtime_error(
          fmt::format("there is no image {} ({} images)", index, images->size()));
    ctx.out("image", std::make_shared<image::Image>((*images)[index]));
  }
};

}  // namespace

void register_image_stages(pipeline::Registry& registry) {
  registry.add<SaveImages>();
  registry.add<SelectImage>();
  registry.add<LoadImage>();
  registry.add<RecenterImage>();
  registry.add<RemoveBackground>();
  registry.add<Delight>();
}

}  // namespace gen3d::stages
