// views_from_pbr_model: Hunyuan3D-Paint-v2-1's PBR multiview diffusion (PBR UNet2.5D + SD VAE +
// DINOv2) paints an albedo and a metallic-roughness image of every view from the normal and
// position maps and the reference image.

#include <filesystem>
#include <optional>

#include <fmt/format.h>
#include <spdlog/spdlog.h>
#include <tbb/parallel_for.h>

#include "image/resize.h"
#include "models/core/precision.h"
#include "models/paint/pbr_paint.h"
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

// White behind the reference (textureGenPipeline.py composites the RGBA prompt on white) and
// behind the maps (the position maps' 1.0 marks the background for the voxel indices).
constexpr float kBackground = 1.0f;

class ViewsFromPbrModel final : public pipeline::Stage {
 public:
  StageContract contract() const override {
    StageContract c("views_from_pbr_model",
                    "Hunyuan3D-Paint-v2-1's PBR multiview diffusion (PBR UNet2.5D + SD VAE + "
                    "DINOv2) paints an albedo and a metallic-roughness image of every view.");
    c.model_class()
        .reads_files("model")
        .reads_files("dino_model")
        .input<render::ViewSet>("views")
        .input<image::Image>("image", "the reference image")
        .input<ImageList>("normals", "the normal maps it is conditioned on, one per view")
        .input<ImageList>("positions", "the position maps, one per view")
        .output<ImageList>("albedo", "RGB albedo, one per view")
        .output<ImageList>("mr", "metallic-roughness, one per view: R metallic, G roughness")
        .param<int>("resolution", 2048, Range{16, 16384}, "view image size")
        .param<std::string>("model", "",
                            "the PBR paint model folder (hunyuan3d-paintpbr-v2-1: unet/, vae/, "
                            "scheduler/)")
        .param<std::string>("dino_model", "",
                            "the DINOv2 folder (transformers layout: config.json + "
                            "model.safetensors or pytorch_model.bin; facebook/dinov2-giant)")
        .param<int>("steps", 15, Range{1, 1000}, "UniPC steps")
        .param<double>("guidance", 3.0, Range{0.0, 100.0},
                       "classifier-free guidance (<= 1: the fully conditioned pass only)")
        .param<int>("cfg_rows", 3, Range{2, 3},
                    "CFG rows per step: 3 is the official [uncond | reference | full]; 2 runs "
                    "[uncond | full], the same guided prediction up to float rounding (the "
                    "reference row cancels from the official combination) at 2/3 of the cost")
        .param<int>("seed", 0, Range{0, 2147483647}, "noise seed")
        .choice(
            "precision", "auto", {"auto", "fp32", "bf16"},
            "network precision: bf16 (bf16 weights and GEMM / convolution operands, float32 "
            "accumulation, norms and state) or fp32; auto: bf16 where the CPU has AVX512-BF16 or "
            "AMX")
        .keys_by("precision", resolved_precision)
        .param<int>("view_size", 512, Range{64, 4096},
                    "the network's view size (multiple of 64; official 512)");
    add_device_param(c);  // the UNet, VAE and DINOv2; the sampler stays on the host
    return c;
  }
  void check(const pipeline::ParamMap& p, std::vector<std::string>& problems) const override {
    check_device(p, problems);
    const auto folder = [&](const char* key, const char* what) {
      const auto& dir = std::get<std::string>(p.at(key));
      if (dir.empty())
        problems.push_back(fmt::format("views_from_pbr_model needs \"{}\": {}", key, what));
      else if (!fs::is_directory(dir))
        problems.push_back(fmt::format("{} not found: {}", what, dir));
    };
    folder("model", "the PBR paint model folder");
    folder("dino_model", "the DINOv2 folder");
    // The VAE halves three times and the multiview grids three more (latent / 8 must be whole).
    if (std::get<int64_t>(p.at("view_size")) % 64 != 0)
      problems.push_back("view_size must be a multiple of 64 (VAE and multiview grids)");
  }
  void run(StageContext& ctx) const override {
    auto views = ctx.in<render::ViewSet>("views");
    const models::Device device = node_device(ctx);
    std::shared_ptr<const models::PbrPaintModel> model;
    {
      auto span = ctx.span("load model");
      model = models::shared_pbr_paint_model(
          ctx.param<std::string>("model"), ctx.param<std::string>("dino_model"),
          models::storage_for(models::parse_precision(ctx.param<std::string>("precision"))),
          device);
    }
    const models::PbrPaintInputs inputs = paint_inputs(ctx, views->size());
    models::PbrPaintOptions options;
    options.steps = ctx.param<int>("steps");
    options.guidance = ctx.param<float>("guidance");
    options.seed = static_cast<std::uint64_t>(ctx.param<int>("seed"));
    options.cfg_rows = ctx.param<int>("cfg_rows");
    // Spans: encode (DINO, VAE, reference UNet) with step 0, one per step, decode.
    std::optional<pipeline::Profiler::Span> step_span = ctx.span("encode + step 0");
    const auto observer = [&](const models::PbrPaintStep& s) {
      step_span->end();
      ctx.throw_if_cancelled();
      spdlog::info("{}: PBR paint step {}/{} (t = {:g})", ctx.node_id(), s.index + 1, s.total,
                   s.timestep);
      step_span = ctx.span(s.index + 1 < s.total ? "step " + std::to_string(s.index + 1)
                                                 : std::string("decode"));
    };
    std::optional<DeviceTrace> device_trace(std::in_place, ctx, device);  // the GPU's work
    const models::PbrPaintResult painted =
        models::paint_pbr_views(*model, inputs, options, observer);
    step_span.reset();
    device_trace.reset();

    ctx.gauge("multiview.model_steps", options.steps);
    auto albedo = to_images(ctx, painted.albedo, views->size());
    auto mr = to_images(ctx, painted.mr, views->size());
    report_view_images(ctx, *albedo);
    ctx.out("albedo", std::move(albedo));
    ctx.out("mr", std::move(mr));
  }

 private:
  // (N, vs, vs, 3) -> N images at the render resolution.
  static std::shared_ptr<ImageList> to_images(const StageContext& ctx, const models::Tensor& t,
                                              std::size_t n) {
    const int size = ctx.param<int>("resolution");
    const int vs = ctx.param<int>("view_size");
    const std::size_t per_view = static_cast<std::size_t>(vs) * vs * 3;
    auto images = std::make_shared<ImageList>(n);
    tbb::parallel_for(std::size_t{0}, n, [&](std::size_t v) {
      image::Image img(vs, vs, 3);
      std::copy(t.data() + v * per_view, t.data() + (v + 1) * per_view, img.pixels.begin());
      (*images)[v] = size == vs ? std::move(img) : image::resize_image(img, size, size, "cubic");
    });
    return images;
  }

  // The network's inputs: the reference and every view's maps at view_size.
  static models::PbrPaintInputs paint_inputs(const StageContext& ctx, std::size_t views) {
    const auto normals = ctx.in<ImageList>("normals");
    const auto positions = ctx.in<ImageList>("positions");
    const std::int64_t n = static_cast<std::int64_t>(views);
    if (static_cast<std::int64_t>(normals->size()) != n ||
        static_cast<std::int64_t>(positions->size()) != n)
      throw std::runtime_error(fmt::format("{} views but {} normal and {} position maps", n,
                                           normals->size(), positions->size()));
    const int vs = ctx.param<int>("view_size");
    models::PbrPaintInputs in;
    in.reference = models::Tensor(models::Shape{1, vs, vs, 3});
    in.normals = models::Tensor(models::Shape{n, vs, vs, 3});
    in.positions = models::Tensor(models::Shape{n, vs, vs, 3});
    const std::size_t per_view = static_cast<std::size_t>(vs) * vs * 3;
    render::paint_input_rgb(*ctx.in<image::Image>("image"), vs, kBackground, in.reference.data());
    tbb::parallel_for(std::int64_t{0}, n, [&](std::int64_t v) {
      const auto& normal = (*normals)[static_cast<std::size_t>(v)];
      const auto& position = (*positions)[static_cast<std::size_t>(v)];
      if (normal.empty() || position.empty())
        throw std::runtime_error(fmt::format("view {} has no normal or position map", v));
      render::paint_input_rgb(normal, vs, kBackground, in.normals.data() + v * per_view);
      render::paint_input_rgb(position, vs, kBackground, in.positions.data() + v * per_view);
    });
    return in;
  }
};

}  // namespace

void register_views_from_pbr_model(pipeline::Registry& registry) {
  registry.add<ViewsFromPbrModel>();
}

}  // namespace gen3d::stages
