// views_from_model: Hunyuan3D-Paint's multiview diffusion (UNet2.5D + SD VAE) paints every view
// from the normal and position maps and the reference image.

#include <cmath>
#include <filesystem>
#include <optional>

#include <fmt/format.h>
#include <spdlog/spdlog.h>
#include <tbb/parallel_for.h>

#include "image/resize.h"
#include "models/core/precision.h"
#include "models/paint/multiview_diffusion.h"
#include "models/paint/mvunet.h"
#include "render/view_images.h"
#include "stages/register.h"
#include "stages/shared.h"
#include "stages/types.h"

namespace gen3d::stages {
namespace {

namespace fs = std::filesystem;
using pipeline::Range;
using pipeline::StageContext;
using pipeline::StageContract;

// The paint pipeline's backgrounds: grey 127 behind the reference, white behind the maps.
constexpr float kReferenceBackground = 127.f / 255;
constexpr float kMapBackground = 1.0f;

class ViewsFromModel final : public pipeline::Stage {
 public:
  StageContract contract() const override {
    StageContract c =
        StageContract("views_from_model",
                      "Hunyuan3D-Paint's multiview diffusion (UNet2.5D + SD VAE) paints every "
                      "view from the normal and position maps and the reference image.")
            .model_class()
            .reads_files("model")
            .input<render::ViewSet>("views")
            .input<image::Image>("image", "the (delit) reference image")
            .input<ImageList>("normals", "the normal maps it is conditioned on, one per view")
            .input<ImageList>("positions", "the position maps, one per view")
            .output<ImageList>("images", "RGB, one per view")
            .param<int>("resolution", 2048, Range{16, 16384}, "view image size")
            .param<std::string>(
                "model", "",
                "the paint model folder (diffusers layout: unet/ with the UNet2.5D, "
                "vae/, scheduler/)")
            .param<bool>(
                "turbo", false,
                "LCM with the 10 official timesteps and no guidance (a turbo model folder)")
            .param<int>("steps", 30, Range{1, 1000}, "Euler-ancestral steps")
            .param<double>("guidance", 2.0, Range{0.0, 100.0},
                           "classifier-free guidance (<= 1: conditional pass only)")
            .param<int>("seed", 0, Range{0, 2147483647}, "noise seed")
            .param<int>(
                "cache_interval", 1, Range{1, 10},
                "DeepCache on the Euler steps: every N-th step runs the whole UNet, the steps "
                "between reuse its deep features (1: off, exact; an approximation above)")
            .choice(
                "precision", "auto", {"auto", "fp32", "bf16"},
                "network precision: bf16 (bf16 weights and GEMM / convolution operands, float32 "
                "accumulation, norms and state) or fp32; auto: bf16 where the CPU has AVX512-BF16 "
                "or AMX")
            .keys_by("precision", resolved_precision)
            .param<int>("view_size", 512, Range{16, 4096},
                        "the network's view size (multiple of 8; official 512)");
    add_device_param(c);
    return c;
  }
  void check(const pipeline::ParamMap& p, std::vector<std::string>& problems) const override {
    check_device(p, problems);
    const auto& dir = std::get<std::string>(p.at("model"));
    if (dir.empty())
      problems.push_back("views_from_model needs \"model\": the paint model folder");
    else if (!fs::is_directory(dir))
      problems.push_back("paint model folder not found: " + dir);
    if (std::get<bool>(p.at("turbo")) && std::get<int64_t>(p.at("cache_interval")) > 1)
      problems.push_back("cache_interval applies to the Euler steps, not to turbo");
    if (std::get<int64_t>(p.at("view_size")) % 8 != 0)
      problems.push_back("view_size must be a multiple of 8 (the VAE's downsampling)");
  }
  void run(StageContext& ctx) const override {
    auto views = ctx.in<render::ViewSet>("views");
    const models::Device device = node_device(ctx);
    std::shared_ptr<const models::PaintModel> model;
    {
      auto span = ctx.span("load model");
      model = models::shared_paint_model(
          ctx.param<std::string>("model"),
          models::storage_for(models::parse_precision(ctx.param<std::string>("precision"))),
          device);
    }
    const models::PaintInputs inputs = paint_inputs(ctx, *views);
    models::PaintOptions options;
    options.turbo = ctx.param<bool>("turbo");
    options.steps = ctx.param<int>("steps");
    options.guidance = ctx.param<float>("guidance");
    options.seed = static_cast<std::uint64_t>(ctx.param<int>("seed"));
    options.cache_interval = ctx.param<int>("cache_interval");
    const int total = options.turbo ? 10 : options.steps;
    // Spans: encode (VAE + reference UNet), one per step, decode.
    std::optional<pipeline::Profiler::Span> step_span = ctx.span("encode + step 0");
    std::optional<DeviceTrace> device_trace;  // the GPU's work, in a trace
    device_trace.emplace(ctx, device);
    const auto observer = [&](const models::PaintStep& s) {
      step_span->end();
      ctx.throw_if_cancelled();
      spdlog::info("{}: paint step {}/{} (t = {:g})", ctx.node_id(), s.index + 1, total,
                   s.timestep);
      step_span = ctx.span(s.index + 1 < total ? "step " + std::to_string(s.index + 1)
                                               : std::string("decode"));
    };
    const models::Tensor painted = models::paint_views(*model, inputs, options, nullptr, observer);
    device_trace.reset();
    step_span.reset();

    const int size = ctx.param<int>("resolution");
    const int vs = ctx.param<int>("view_size");
    const std::size_t per_view = static_cast<std::size_t>(vs) * vs * 3;
    auto images = std::make_shared<ImageList>(views->size());
    tbb::parallel_for(std::size_t{0}, views->size(), [&](std::size_t v) {
      image::Image img(vs, vs, 3);
      std::copy(painted.data() + v * per_view, painted.data() + (v + 1) * per_view,
                img.pixels.begin());
      (*images)[v] = size == vs ? std::move(img) : image::resize_image(img, size, size, "cubic");
    });
    ctx.gauge("multiview.model_steps", total);
    report_view_images(ctx, *images);
    ctx.out("images", std::move(images));
  }

 private:
  // The network's inputs: the reference and every view's maps at view_size, and the camera ids.
  static models::PaintInputs paint_inputs(const StageContext& ctx, const render::ViewSet& views) {
    const auto normals = ctx.in<ImageList>("normals");
    const auto positions = ctx.in<ImageList>("positions");
    const std::int64_t n = static_cast<std::int64_t>(views.size());
    if (static_cast<std::int64_t>(normals->size()) != n ||
        static_cast<std::int64_t>(positions->size()) != n)
      throw std::runtime_error(fmt::format("{} views but {} normal and {} position maps", n,
                                           normals->size(), positions->size()));
    const int vs = ctx.param<int>("view_size");
    models::PaintInputs in;
    in.reference = models::Tensor(models::Shape{1, vs, vs, 3});
    in.normals = models::Tensor(models::Shape{n, vs, vs, 3});
    in.positions = models::Tensor(models::Shape{n, vs, vs, 3});
    const std::size_t per_view = static_cast<std::size_t>(vs) * vs * 3;
    render::paint_input_rgb(*ctx.in<image::Image>("image"), vs, kReferenceBackground,
                            in.reference.data());
    tbb::parallel_for(std::int64_t{0}, n, [&](std::int64_t v) {
      const auto& normal = (*normals)[static_cast<std::size_t>(v)];
      const auto& position = (*positions)[static_cast<std::size_t>(v)];
      if (normal.empty() || position.empty())
        throw std::runtime_error(fmt::format("view {} has no normal or position map", v));
      render::paint_input_rgb(normal, vs, kMapBackground, in.normals.data() + v * per_view);
      render::paint_input_rgb(position, vs, kMapBackground, in.positions.data() + v * per_view);
    });
    for (const auto& view : views.views)
      in.cameras.push_back(
          models::MultiviewUNet::camera_id(static_cast<int>(std::lround(view.camera.azim)),
                                           static_cast<int>(std::lround(view.camera.elev))));
    return in;
  }
};

}  // namespace

void register_views_from_model(pipeline::Registry& registry) {
  registry.add<ViewsFromModel>();
}

}  // namespace gen3d::stages
