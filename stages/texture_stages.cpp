// Texture stages: the view images to bake (multiview), hole filling, and the reports on the result.

#include <algorithm>
#include <cmath>
#include <filesystem>
#include <optional>

#include <fmt/format.h>
#include <spdlog/spdlog.h>
#include <tbb/parallel_for.h>

#include "mesh/io.h"
#include "models/multiview_diffusion.h"
#include "models/mvunet.h"
#include "render/image_ops.h"
#include "render/maps.h"
#include "stages/register.h"
#include "stages/shared.h"
#include "stages/types.h"

namespace gen3d::stages {
namespace {

namespace fs = std::filesystem;
using pipeline::Range;
using pipeline::StageContext;
using pipeline::StageContract;

// Bounding box of the non-zero entries of a mask, as {x0, y0, x1, y1} inclusive; false if empty.
bool mask_box(const std::vector<uint8_t>& mask, int w, int h, int box[4]) {
  box[0] = w, box[1] = h, box[2] = -1, box[3] = -1;
  for (int y = 0; y < h; ++y)
    for (int x = 0; x < w; ++x)
      if (mask[static_cast<size_t>(y) * w + x]) {
        box[0] = std::min(box[0], x), box[1] = std::min(box[1], y);
        box[2] = std::max(box[2], x), box[3] = std::max(box[3], y);
      }
  return box[2] >= 0;
}

// Maps the reference image's object (alpha > 0.5, or everything for RGB) onto the silhouette box of
// a view, bilinearly, on a white RGB canvas of the view's size. `mirror` flips it left-right.
mesh::Image fit_into_silhouette(const mesh::Image& ref, const render::Raster& raster, bool mirror) {
  const int w = raster.width, h = raster.height;
  std::vector<uint8_t> silhouette(raster.pixel_count());
  for (size_t i = 0; i < silhouette.size(); ++i) silhouette[i] = raster.face_id[i] != 0;
  std::vector<uint8_t> object(static_cast<size_t>(ref.width) * ref.height, 1);
  if (ref.channels == 4)
    for (size_t i = 0; i < object.size(); ++i) object[i] = ref.pixels[i * 4 + 3] > 0.5f;
  int dst[4], src[4];
  if (!mask_box(silhouette, w, h, dst))
    throw std::runtime_error("the mesh is not visible from the reference view");
  if (!mask_box(object, ref.width, ref.height, src))
    throw std::runtime_error("the reference image has no opaque pixels");
  const mesh::Image rgb = render::composite_over(ref);
  mesh::Image out(w, h, 3, 1.0f);
  const double sx = double(src[2] - src[0] + 1) / (dst[2] - dst[0] + 1);
  const double sy = double(src[3] - src[1] + 1) / (dst[3] - dst[1] + 1);
  for (int y = dst[1]; y <= dst[3]; ++y)
    for (int x = dst[0]; x <= dst[2]; ++x) {
      const int col = mirror ? dst[2] - (x - dst[0]) : x;
      const float fx = static_cast<float>(src[0] + (col - dst[0] + 0.5) * sx - 0.5);
      const float fy = static_cast<float>(src[1] + (y - dst[1] + 0.5) * sy - 0.5);
      render::sample_bilinear(rgb, fx, fy, out.at(x, y));
    }
  return out;
}

std::vector<std::string> image_files(const std::string& dir) {
  std::vector<std::string> files;
  for (const auto& e : fs::directory_iterator(dir)) {
    std::string ext = e.path().extension().string();
    std::transform(ext.begin(), ext.end(), ext.begin(), ::tolower);
    if (ext == ".png" || ext == ".jpg" || ext == ".jpeg" || ext == ".webp")
      files.push_back(e.path().string());
  }
  std::sort(files.begin(), files.end());
  return files;
}

class Multiview final : public pipeline::Stage {
 public:
  StageContract contract() const override {
    return StageContract("multiview",
                         "The image of every view that will be baked into the texture. "
                         "source=model runs Hunyuan3D-Paint's multiview diffusion (UNet2.5D + "
                         "SD VAE) on the normal and position maps and the reference image.")
        .model_class()
        .input<render::ViewSet>("views")
        .input<mesh::Mesh>("mesh", "normalized target mesh (silhouettes for source=reference)")
        .optional_input<mesh::Image>("image", "source=reference: the (delit) reference image")
        .optional_input<mesh::Mesh>("source_mesh", "source=render: textured mesh, input frame")
        .optional_input<mesh::NormalizeTransform>(
            "transform", "source=render: the target's normalization, applied to source_mesh")
        .optional_input<ImageList>("normals", "source=model: the normal maps it is conditioned on")
        .optional_input<ImageList>("positions", "source=model: the position maps")
        .output<ImageList>("images", "RGB, one per view (empty: nothing for that view)")
        .choice("source", "reference", {"files", "reference", "render", "model"},
                "files: images on disk; reference: the reference image on the front view; render: "
                "albedo views of source_mesh; model: the multiview diffusion model")
        .param<int>("resolution", 2048, Range{16, 16384}, "view image size")
        .param<std::vector<std::string>>("files", std::vector<std::string>{},
                                         "source=files: one image per view, in view order")
        .param<std::string>("dir", "", "source=files: a directory of images, sorted by name")
        .param<int>("reference_view", 0, Range{0, 1023}, "source=reference: the view it shows")
        .param<bool>("mirror_back", false,
                     "source=reference: also use it, mirrored, for the opposite view")
        .param<std::vector<std::string>>("extra_images", std::vector<std::string>{},
                                         "source=reference: more reference images ...")
        .param<std::vector<int>>("extra_views", std::vector<int>{}, "... and the view of each")
        .param<std::string>("model", "",
                            "source=model: the paint model folder (diffusers layout: unet/ with "
                            "the UNet2.5D, vae/, scheduler/)")
        .param<bool>("turbo", false,
                     "source=model: LCM with the 10 official timesteps and no guidance (a turbo "
                     "model folder)")
        .param<int>("steps", 30, Range{1, 1000}, "source=model: Euler-ancestral steps")
        .param<double>("guidance", 2.0, Range{0.0, 100.0},
                       "source=model: classifier-free guidance (<= 1: conditional pass only)")
        .param<int>("seed", 0, Range{0, 2147483647}, "source=model: noise seed")
        .param<int>("view_size", 512, Range{16, 4096},
                    "source=model: the network's view size (multiple of 8; official 512)");
  }
  void check(const pipeline::ParamMap& p, std::vector<std::string>& problems) const override {
    const auto& source = std::get<std::string>(p.at("source"));
    if (source == "model") {
      const auto& dir = std::get<std::string>(p.at("model"));
      if (dir.empty())
        problems.push_back("source 'model' needs \"model\": the paint model folder");
      else if (!fs::is_directory(dir))
        problems.push_back("paint model folder not found: " + dir);
      if (std::get<int64_t>(p.at("view_size")) % 8 != 0)
        problems.push_back("view_size must be a multiple of 8 (the VAE's downsampling)");
    } else if (source == "files") {
      const auto& files = std::get<std::vector<std::string>>(p.at("files"));
      const auto& dir = std::get<std::string>(p.at("dir"));
      if (files.empty() == dir.empty())
        problems.push_back("source=files needs exactly one of \"files\" and \"dir\"");
      for (const auto& f : files)
        if (!fs::is_regular_file(f)) problems.push_back("view image not found: " + f);
      if (!dir.empty() && !fs::is_directory(dir))
        problems.push_back("views directory not found: " + dir);
      else if (!dir.empty() && image_files(dir).empty())
        problems.push_back("views directory has no images: " + dir);
    }
    const auto& extra = std::get<std::vector<std::string>>(p.at("extra_images"));
    if (extra.size() != std::get<std::vector<int64_t>>(p.at("extra_views")).size())
      problems.push_back("extra_images and extra_views must have the same length");
    for (const auto& f : extra)
      if (!fs::is_regular_file(f)) problems.push_back("reference image not found: " + f);
  }
  void run(StageContext& ctx) const override {
    auto views = ctx.in<render::ViewSet>("views");
    const int size = ctx.param<int>("resolution");
    const std::string source = ctx.param<std::string>("source");
    auto out = std::make_shared<ImageList>(views->size());
    if (source == "files")
      run_files(ctx, *views, size, *out);
    else if (source == "render")
      run_render(ctx, *views, size, *out);
    else if (source == "model")
      run_model(ctx, *views, size, *out);
    else
      run_reference(ctx, *views, size, *out);
    size_t used = 0;
    for (const auto& img : *out) used += !img.empty();
    ctx.gauge("multiview.views_with_images", static_cast<double>(used));
    ctx.out("images", std::move(out));
  }

 private:
  static void run_files(StageContext& ctx, const render::ViewSet& views, int size, ImageList& out) {
    auto files = ctx.param<std::vector<std::string>>("files");
    if (files.empty()) files = image_files(ctx.param<std::string>("dir"));
    if (files.size() != views.size())
      throw std::runtime_error(
          fmt::format("{} view images for {} views", files.size(), views.size()));
    tbb::parallel_for(size_t{0}, files.size(), [&](size_t v) {
      // RGB on white, at the render size (area filter when shrinking).
      const mesh::Image img = render::composite_over(mesh::load_image(files[v]));
      const mesh::Image sized =
          render::resize_image(img, size, size, img.width > size ? "area" : "linear");
      if (sized.channels == 3) {
        out[v] = sized;
        return;
      }
      out[v] = mesh::Image(size, size, 3);
      for (size_t i = 0; i < sized.pixels.size(); ++i)
        for (int c = 0; c < 3; ++c) out[v].pixels[i * 3 + c] = sized.pixels[i];
    });
  }

  // Image (RGB / RGBA / grey) -> (S, S, 3) floats; RGBA composited over `bg` (the paint
  // pipeline: grey 127 behind the reference, white behind the maps).
  static void to_view_rgb(const mesh::Image& image, int size, float bg, float* dst) {
    mesh::Image rgb = image.channels == 4 ? render::composite_over(image, bg, bg, bg) : image;
    if (rgb.width != size || rgb.height != size)
      rgb = render::resize_image(rgb, size, size, rgb.width > size ? "area" : "cubic");
    const std::size_t n = static_cast<std::size_t>(size) * size;
    for (std::size_t i = 0; i < n; ++i)
      for (int c = 0; c < 3; ++c)
        dst[i * 3 + c] = rgb.pixels[i * rgb.channels + (rgb.channels == 1 ? 0 : c)];
  }

  static void run_model(StageContext& ctx, const render::ViewSet& views, int size, ImageList& out) {
    for (const char* port : {"image", "normals", "positions"})
      if (!ctx.has_input(port))
        throw std::runtime_error(std::string("source=model needs the ") + port + " input");
    std::shared_ptr<const models::PaintModel> model;
    {
      auto span = ctx.span("load model");
      model = models::shared_paint_model(ctx.param<std::string>("model"));
    }
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
    const std::size_t per = static_cast<std::size_t>(vs) * vs * 3;
    to_view_rgb(*ctx.in<mesh::Image>("image"), vs, 127.f / 255, in.reference.data());
    tbb::parallel_for(std::int64_t{0}, n, [&](std::int64_t v) {
      const auto& nm = (*normals)[static_cast<std::size_t>(v)];
      const auto& pm = (*positions)[static_cast<std::size_t>(v)];
      if (nm.empty() || pm.empty())
        throw std::runtime_error(fmt::format("view {} has no normal or position map", v));
      to_view_rgb(nm, vs, 1.0f, in.normals.data() + v * per);
      to_view_rgb(pm, vs, 1.0f, in.positions.data() + v * per);
    });
    for (const auto& view : views.views)
      in.cameras.push_back(
          models::MultiviewUNet::camera_id(static_cast<int>(std::lround(view.camera.azim)),
                                           static_cast<int>(std::lround(view.camera.elev))));

    models::PaintOptions opt;
    opt.turbo = ctx.param<bool>("turbo");
    opt.steps = ctx.param<int>("steps");
    opt.guidance = ctx.param<float>("guidance");
    opt.seed = static_cast<std::uint64_t>(ctx.param<int>("seed"));
    const int total = opt.turbo ? 10 : opt.steps;
    // Spans: encode (VAE + reference UNet), one per step, decode.
    std::optional<pipeline::Profiler::Span> step_span = ctx.span("encode + step 0");
    const auto observer = [&](const models::PaintStep& s) {
      step_span->end();
      ctx.throw_if_cancelled();
      spdlog::info("{}: paint step {}/{} (t = {:g})", ctx.node_id(), s.index + 1, total,
                   s.timestep);
      step_span = ctx.span(s.index + 1 < total ? "step " + std::to_string(s.index + 1)
                                               : std::string("decode"));
    };
    const models::Tensor images = models::paint_views(*model, in, opt, nullptr, observer);
    step_span.reset();

    tbb::parallel_for(std::int64_t{0}, n, [&](std::int64_t v) {
      mesh::Image img(vs, vs, 3);
      std::copy(images.data() + v * per, images.data() + (v + 1) * per, img.pixels.begin());
      out[static_cast<std::size_t>(v)] =
          size == vs ? std::move(img) : render::resize_image(img, size, size, "cubic");
    });
    ctx.gauge("multiview.model_steps", opt.turbo ? 10 : opt.steps);
  }

  static void run_render(StageContext& ctx, const render::ViewSet& views, int size,
                         ImageList& out) {
    if (!ctx.has_input("source_mesh"))
      throw std::runtime_error("source=render needs the source_mesh input");
    mesh::Mesh src = *ctx.in<mesh::Mesh>("source_mesh");
    if (ctx.has_input("transform"))
      mesh::apply_normalization(src, *ctx.in<mesh::NormalizeTransform>("transform"));
    else
      mesh::normalize_mesh(src);
    render::RasterCache& cache = raster_cache(ctx);
    const uint64_t fingerprint = src.fingerprint();
    tbb::parallel_for(size_t{0}, views.size(), [&](size_t v) {
      auto span = ctx.span("view " + std::to_string(v));
      auto raster = cache.get(fingerprint, src, views[v].camera, size, size);
      out[v] = render::albedo_map(src, *raster);
    });
    report_cache(ctx, cache);
  }

  static void run_reference(StageContext& ctx, const render::ViewSet& views, int size,
                            ImageList& out) {
    if (!ctx.has_input("image")) throw std::runtime_error("source=reference needs the image input");
    auto target = ctx.in<mesh::Mesh>("mesh");
    render::RasterCache& cache = raster_cache(ctx);
    const uint64_t fingerprint = target->fingerprint();
    const auto place = [&](const mesh::Image& ref, size_t view, bool mirror) {
      if (view >= views.size())
        throw std::runtime_error(
            fmt::format("view {} does not exist ({} views)", view, views.size()));
      auto raster = cache.get(fingerprint, *target, views[view].camera, size, size);
      out[view] = fit_into_silhouette(ref, *raster, mirror);
    };
    const size_t front = static_cast<size_t>(ctx.param<int>("reference_view"));
    const mesh::Image& ref = *ctx.in<mesh::Image>("image");
    place(ref, front, false);
    if (ctx.param<bool>("mirror_back")) {
      // The opposite view: same elevation, azimuth + 180.
      const render::Camera& c = views[front].camera;
      for (size_t v = 0; v < views.size(); ++v) {
        const double d = std::fmod(std::fabs(views[v].camera.azim - c.azim - 180.0), 360.0);
        if (v != front && views[v].camera.elev == c.elev && d < 1e-6) place(ref, v, true);
      }
    }
    const auto extra = ctx.param<std::vector<std::string>>("extra_images");
    const auto extra_views = ctx.param<std::vector<int>>("extra_views");
    for (size_t i = 0; i < extra.size(); ++i)
      place(render::recenter_image(mesh::load_image(extra[i])), static_cast<size_t>(extra_views[i]),
            false);
    report_cache(ctx, cache);
  }
};

class InpaintTexture final : public pipeline::Stage {
 public:
  StageContract contract() const override {
    return StageContract("inpaint_texture",
                         "Fill unpainted texels: vertex propagation, then image inpainting inside "
                         "the charts, gutter dilation and a background fill.")
        .input<mesh::Mesh>("mesh", "normalized, with UVs")
        .input<render::MergeResult>("merged")
        .output<mesh::Mesh>("mesh", "the mesh with its new base-colour texture")
        .output<mesh::Image>("texture")
        .output<render::InpaintReport>("report")
        .choice("method", "charts", {"charts", "reference"},
                "charts: only inside the charts (fast); reference: whole image, as the reference")
        .choice("algorithm", "ns", {"ns", "telea"}, "OpenCV inpainting algorithm")
        .param<double>("radius", 3.0, Range{1.0, 64.0}, "OpenCV inpainting radius (texels)")
        .param<int>("gutter", 4, Range{0, 64}, "texels dilated around the charts")
        .param<bool>("vertex_inpaint", true, "propagate colours over the mesh first");
  }
  void run(StageContext& ctx) const override {
    auto m = ctx.in<mesh::Mesh>("mesh");
    auto merged = ctx.in<render::MergeResult>("merged");
    const int size = merged->texture.width;
    render::InpaintOptions options;
    options.method = ctx.param<std::string>("method");
    options.algorithm = ctx.param<std::string>("algorithm");
    options.radius = ctx.param<double>("radius");
    options.gutter = ctx.param<int>("gutter");
    options.vertex_inpaint = ctx.param<bool>("vertex_inpaint");
    std::shared_ptr<const render::Raster> uv;
    if (options.method == "charts") uv = raster_cache(ctx).get_uv(*m, size, size);
    auto report = std::make_shared<render::InpaintReport>();
    mesh::Image rgb = merged->texture;
    if (rgb.channels != 3) rgb = render::composite_over(rgb, 0, 0, 0);
    auto texture = std::make_shared<mesh::Image>(
        render::inpaint_texture(*m, rgb, merged->trust_mask, uv.get(), options, report.get()));
    auto textured = std::make_shared<mesh::Mesh>(*m);
    textured->texture = texture;
    textured->colors.clear();
    ctx.out("mesh", std::move(textured));
    ctx.out("texture", std::move(texture));
    ctx.out("report", std::move(report));
  }
};

class BakeReport final : public pipeline::Stage {
 public:
  StageContract contract() const override {
    return StageContract("bake_report",
                         "Report texel coverage by source (views, vertex propagation, inpainting) "
                         "and each view's contribution, as log lines and metrics counters.")
        .input<render::MergeResult>("merged")
        .input<render::InpaintReport>("report");
  }
  void run(StageContext& ctx) const override {
    auto merged = ctx.in<render::MergeResult>("merged");
    auto r = ctx.in<render::InpaintReport>("report");
    const double total = static_cast<double>(
        r->chart_texels ? r->chart_texels
                        : static_cast<size_t>(merged->texture.width) * merged->texture.height);
    const auto share = [&](size_t n) { return total > 0 ? n / total : 0.0; };
    ctx.gauge("bake.chart_texels", total);
    ctx.gauge("bake.share_views", share(r->view_texels));
    ctx.gauge("bake.share_vertex_inpaint", share(r->vertex_texels));
    ctx.gauge("bake.share_image_inpaint", share(r->image_texels));
    ctx.gauge("bake.gutter_texels", static_cast<double>(r->gutter_texels));
    std::string per_view;
    for (size_t v = 0; v < merged->views.size(); ++v) {
      const auto& s = merged->views[v];
      ctx.gauge(fmt::format("bake.view{}.texels", v), static_cast<double>(s.texels_with_weight));
      per_view += fmt::format(" {}:{}{}", v, s.texels_with_weight, s.skipped ? "(skipped)" : "");
    }
    spdlog::info(
        "{}: of {:.0f} chart texels: {:.1f}% painted by views, {:.1f}% by vertex "
        "propagation, {:.1f}% by image inpainting; {} gutter texels; texels per view:{}",
        ctx.node_id(), total, 100 * share(r->view_texels), 100 * share(r->vertex_texels),
        100 * share(r->image_texels), r->gutter_texels, per_view);
  }
};

// PSNR of the textured mesh's albedo views against reference view images (e.g. the source views
// of a re-bake), over the pixels the mesh covers.
class TexturePsnr final : public pipeline::Stage {
 public:
  StageContract contract() const override {
    return StageContract("texture_psnr",
                         "Render the textured mesh's albedo from every view and compare it with "
                         "the given view images (PSNR over covered pixels).")
        .input<mesh::Mesh>("mesh", "normalized, textured")
        .input<render::ViewSet>("views")
        .input<ImageList>("images", "the images to compare with, one per view")
        .param<int>("resolution", 512, Range{16, 16384}, "render size of the comparison");
  }
  void run(StageContext& ctx) const override {
    auto m = ctx.in<mesh::Mesh>("mesh");
    auto views = ctx.in<render::ViewSet>("views");
    auto images = ctx.in<ImageList>("images");
    const int size = ctx.param<int>("resolution");
    render::RasterCache& cache = raster_cache(ctx);
    const uint64_t fingerprint = m->fingerprint();
    std::vector<double> sse(views->size(), 0.0), count(views->size(), 0.0);
    tbb::parallel_for(size_t{0}, views->size(), [&](size_t v) {
      if (v >= images->size() || (*images)[v].empty()) return;
      auto raster = cache.get(fingerprint, *m, (*views)[v].camera, size, size);
      const mesh::Image got = render::albedo_map(*m, *raster);
      const mesh::Image want = render::resize_image((*images)[v], size, size, "area");
      for (size_t i = 0; i < raster->pixel_count(); ++i) {
        if (!raster->face_id[i]) continue;
        for (int c = 0; c < 3; ++c) {
          const double d = got.pixels[i * 3 + c] - want.pixels[i * want.channels + c];
          sse[v] += d * d;
        }
        count[v] += 3;
      }
    });
    double all_sse = 0, all_count = 0;
    std::string line;
    const auto psnr = [](double e, double n) {
      return n > 0 ? 10.0 * std::log10(n / std::max(e, 1e-12)) : 0.0;
    };
    for (size_t v = 0; v < views->size(); ++v) {
      if (count[v] == 0) continue;
      ctx.gauge(fmt::format("psnr.view{}", v), psnr(sse[v], count[v]));
      line += fmt::format(" {}:{:.1f}", v, psnr(sse[v], count[v]));
      all_sse += sse[v];
      all_count += count[v];
    }
    if (all_count == 0) throw std::runtime_error("no view to compare with");
    ctx.gauge("psnr.mean_db", psnr(all_sse, all_count));
    spdlog::info("{}: PSNR {:.2f} dB over all views (per view:{})", ctx.node_id(),
                 psnr(all_sse, all_count), line);
  }
};

}  // namespace

void register_texture_stages(pipeline::Registry& registry) {
  registry.add<Multiview>();
  registry.add<InpaintTexture>();
  registry.add<BakeReport>();
  registry.add<TexturePsnr>();
}

}  // namespace gen3d::stages
