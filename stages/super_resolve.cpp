// super_resolve: Real-ESRGAN x4plus on every view image, as Hunyuan3D-2.1's paint pipeline
// upscales each generated view (hy3dpaint/textureGenPipeline.py, utils/image_super_utils.py)
// before baking, optionally resized to the render size afterwards.

#include <algorithm>
#include <cmath>
#include <filesystem>
#include <memory>

#include <fmt/format.h>
#include <spdlog/spdlog.h>

#include "image/resize.h"
#include "models/core/precision.h"
#include "models/paint/realesrgan.h"
#include "progress/progress.h"
#include "stages/register.h"
#include "stages/shared.h"
#include "stages/types.h"

namespace gen3d::stages {
namespace {

namespace fs = std::filesystem;
using pipeline::Range;
using pipeline::StageContext;
using pipeline::StageContract;

// The reference upscales 8-bit PIL views, made by diffusers' numpy_to_pil
// (`(images * 255).round().astype("uint8")`, numpy's round half to even): a view is quantized the
// same way, and the result comes back as value / 255.
image::ImageU8 to_rgb8(const image::Image& img) {
  image::ImageU8 out(img.width, img.height, 3);
  const std::size_t n = static_cast<std::size_t>(img.width) * img.height;
  for (std::size_t p = 0; p < n; ++p)
    for (int k = 0; k < 3; ++k) {
      const float v = std::clamp(img.pixels[p * img.channels + k], 0.0f, 1.0f);
      out.pixels[p * 3 + k] = static_cast<std::uint8_t>(std::nearbyint(v * 255.0f));
    }
  return out;
}

class SuperResolve final : public pipeline::Stage {
 public:
  StageContract contract() const override {
    return StageContract("super_resolve",
                         "Real-ESRGAN x4plus (RRDBNet) on every view image, as Hunyuan3D-2.1 "
                         "upscales its generated views; optionally resized afterwards.")
        .model_class()
        .reads_files("model")
        .input<ImageList>("images", "RGB(A) view images; an empty image passes through")
        .output<ImageList>("images", "the upscaled views (alpha, if any, resized linearly)")
        .param<std::string>("model", "",
                            "RRDBNet weights: the official RealESRGAN_x4plus.pth "
                            "({'params_ema': ...}) or a safetensors state_dict")
        .choice("precision", "auto", {"auto", "fp32", "bf16"},
                "network precision: bf16 (bf16 weights and convolution operands, float32 "
                "accumulation) or fp32; auto: bf16 where the CPU has AVX512-BF16 or AMX")
        .keys_by("precision", resolved_precision)
        .param<int>("tile", 256, Range{0, 16384},
                    "input tile size (RealESRGANer's tile): memory grows with the tile, not the "
                    "view; 0 = the whole view at once, as Hunyuan3D-2.1 runs it on a GPU")
        .param<int>("tile_pad", 10, Range{0, 1024},
                    "input pixels of context around each tile (RealESRGANer's tile_pad)")
        .param<int>("resolution", 0, Range{0, 16384},
                    "output size (square, bicubic); 0 = 4 × the input size")
        .param<bool>("enabled", true,
                     "false: no network; the views pass through, resized to `resolution` when it "
                     "is set (so a config bakes at the same size with super-resolution off)");
  }
  void check(const pipeline::ParamMap& p, std::vector<std::string>& problems) const override {
    if (!std::get<bool>(p.at("enabled"))) return;
    const auto& path = std::get<std::string>(p.at("model"));
    if (path.empty())
      problems.push_back(
          "super_resolve needs \"model\": the RealESRGAN_x4plus weights (or enabled: false)");
    else if (!fs::is_regular_file(path))
      problems.push_back("RealESRGAN weights not found: " + path);
  }
  void run(StageContext& ctx) const override {
    auto in = ctx.in<ImageList>("images");
    if (!ctx.param<bool>("enabled")) {
      const int size = ctx.param<int>("resolution");
      const bool resize = size > 0 && std::any_of(in->begin(), in->end(), [&](const auto& i) {
                            return !i.empty() && (i.width != size || i.height != size);
                          });
      if (!resize) {
        ctx.out("images", std::move(in));
        return;
      }
      auto out = std::make_shared<ImageList>(in->size());
      for (std::size_t v = 0; v < in->size(); ++v)
        if (!(*in)[v].empty()) (*out)[v] = image::resize_image((*in)[v], size, size, "cubic");
      ctx.out("images", std::move(out));
      return;
    }
    std::shared_ptr<const models::RrdbNet> net;
    {
      auto span = ctx.span("load model");
      net = models::shared_rrdbnet(
          ctx.param<std::string>("model"),
          models::storage_for(models::parse_precision(ctx.param<std::string>("precision"))));
    }
    const models::TileOptions tiles{ctx.param<int>("tile"), ctx.param<int>("tile_pad")};
    const int size = ctx.param<int>("resolution");
    const int scale = net->config().scale;
    auto out = std::make_shared<ImageList>(in->size());
    progress::Steps steps(
        "upscale view",
        std::count_if(in->begin(), in->end(), [](const image::Image& i) { return !i.empty(); }));
    // One view at a time: each convolution already spreads over every core.
    for (std::size_t v = 0; v < in->size(); ++v) {
      const image::Image& img = (*in)[v];
      if (img.empty()) continue;
      if (img.channels != 3 && img.channels != 4)
        throw std::runtime_error(fmt::format(
            "view {} has {} channels; super_resolve takes RGB or RGBA", v, img.channels));
      auto span = ctx.span(fmt::format("view {}", v));
      const image::ImageU8 up = models::esrgan_enhance(*net, to_rgb8(img), tiles,
                                                       [&](int, int) { ctx.throw_if_cancelled(); });
      image::Image res(up.width, up.height, img.channels);
      const std::size_t n = static_cast<std::size_t>(up.width) * up.height;
      for (std::size_t p = 0; p < n; ++p)
        for (int k = 0; k < 3; ++k)
          res.pixels[p * img.channels + k] = up.pixels[p * 3 + k] / 255.0f;
      if (img.channels == 4) {
        // RealESRGANer would run alpha through the network a second time; a linear resize keeps
        // masks crisp enough for baking and costs nothing.
        image::Image alpha(img.width, img.height, 1);
        for (std::size_t p = 0; p < static_cast<std::size_t>(img.width) * img.height; ++p)
          alpha.pixels[p] = img.pixels[p * 4 + 3];
        const image::Image a =
            image::resize_image(alpha, scale * img.width, scale * img.height, "linear");
        for (std::size_t p = 0; p < n; ++p) res.pixels[p * 4 + 3] = a.pixels[p];
      }
      (*out)[v] = size > 0 && (size != res.width || size != res.height)
                      ? image::resize_image(res, size, size, "cubic")
                      : std::move(res);
      steps.next();
    }
    spdlog::info("{}: {} views upscaled x{} ({})", ctx.node_id(),
                 std::count_if(out->begin(), out->end(), [](const auto& i) { return !i.empty(); }),
                 scale, net->bf16() ? "bf16" : "fp32");
    ctx.out("images", std::move(out));
  }
};

}  // namespace

void register_super_resolve(pipeline::Registry& registry) {
  registry.add<SuperResolve>();
}

}  // namespace gen3d::stages
