// views_from_reference: the (delit) reference image fitted onto the silhouette of the view it
// shows, optionally mirrored onto the opposite view, plus more reference images on other views.

#include <filesystem>

#include <fmt/format.h>
#include <spdlog/spdlog.h>

#include "image/io.h"
#include "image/recenter.h"
#include "mesh/io.h"
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

// The image with the raster's silhouette outline (silhouette pixels with a background neighbour)
// drawn in magenta.
image::Image silhouette_outline(const image::Image& placed, const render::Raster& raster) {
  image::Image out = placed;
  const int w = raster.width, h = raster.height;
  const auto inside = [&](int x, int y) {
    return x >= 0 && y >= 0 && x < w && y < h && raster.face_id[static_cast<size_t>(y) * w + x];
  };
  for (int y = 0; y < h; ++y)
    for (int x = 0; x < w; ++x)
      if (inside(x, y) &&
          (!inside(x - 1, y) || !inside(x + 1, y) || !inside(x, y - 1) || !inside(x, y + 1))) {
        float* p = out.at(x, y);
        p[0] = 1.0f, p[1] = 0.0f, p[2] = 1.0f;
      }
  return out;
}

class ViewsFromReference final : public pipeline::Stage {
 public:
  StageContract contract() const override {
    return StageContract("views_from_reference",
                         "The reference image on the view it shows, fitted onto the normalized "
                         "mesh's silhouette there; views without a reference get no image.")
        .semantics_version(3)  // 2: the overlay output; 3: the fit output
        .input<render::ViewSet>("views")
        .input<mesh::Mesh>("mesh", "normalized target mesh (its silhouettes)")
        .input<image::Image>("image", "the (delit) reference image")
        .output<ImageList>("images", "RGB, one per view (empty: nothing for that view)")
        .output<ImageList>("overlay",
                           "the placed images with the silhouette's outline in magenta: how the "
                           "reference fits the mesh")
        .output<ReferenceFit>("fit",
                              "the lowest silhouette IoU of the placed references (0 with the "
                              "bbox fit): how exactly they landed, for the bake's edge window")
        .param<int>("resolution", 2048, Range{16, 16384}, "view image size")
        .param<int>("reference_view", 0, Range{0, 1023}, "the view the reference image shows")
        .param<bool>("mirror_back", false, "also use it, mirrored, for the opposite view")
        .choice("fit", "bbox", {"bbox", "silhouette"},
                "bbox: object box onto silhouette box; silhouette: the similarity transform of "
                "best silhouette agreement (IoU), sub-pixel, reported as multiview.fit_*")
        .param<double>("max_rotation", 10.0, Range{0.0, 45.0},
                       "silhouette fit: largest rotation tried (degrees)")
        .param<std::vector<std::string>>("extra_images", std::vector<std::string>{},
                                         "more reference images (recentred) ...")
        .param<std::vector<int>>("extra_views", std::vector<int>{}, "... and the view of each")
        .reads_files("extra_images");
  }
  void check(const pipeline::ParamMap& p, std::vector<std::string>& problems) const override {
    const auto& extra = std::get<std::vector<std::string>>(p.at("extra_images"));
    if (extra.size() != std::get<std::vector<int64_t>>(p.at("extra_views")).size())
      problems.push_back("extra_images and extra_views must have the same length");
    for (const auto& f : extra)
      if (!fs::is_regular_file(f)) problems.push_back("reference image not found: " + f);
  }
  void run(StageContext& ctx) const override {
    auto views = ctx.in<render::ViewSet>("views");
    auto target = ctx.in<mesh::Mesh>("mesh");
    const int size = ctx.param<int>("resolution");
    render::RasterCache& cache = raster_cache(ctx);
    const uint64_t fingerprint = target->fingerprint();
    auto images = std::make_shared<ImageList>(views->size());
    auto overlay = std::make_shared<ImageList>(views->size());
    const bool silhouette = ctx.param<std::string>("fit") == "silhouette";
    render::SilhouetteFitOptions fit_options;
    fit_options.max_rotation_deg = ctx.param<double>("max_rotation");
    auto quality = std::make_shared<ReferenceFit>();
    bool first_fit = true;
    const auto place = [&](const image::Image& reference, size_t view, bool mirror) {
      if (view >= views->size())
        throw std::runtime_error(
            fmt::format("view {} does not exist ({} views)", view, views->size()));
      auto raster = cache.get(fingerprint, *target, (*views)[view].camera, size, size);
      const auto outline = [&] { (*overlay)[view] = silhouette_outline((*images)[view], *raster); };
      if (!silhouette) {
        (*images)[view] = render::fit_into_silhouette(reference, *raster, mirror);
        outline();
        return;
      }
      render::SilhouetteFit fit;
      (*images)[view] =
          render::register_to_silhouette(reference, *raster, mirror, fit_options, &fit);
      outline();
      quality->iou = first_fit ? fit.iou : std::min(quality->iou, fit.iou);
      first_fit = false;
      const std::string key = fmt::format("multiview.fit_view{}", view);
      ctx.gauge(key + ".iou", fit.iou);
      ctx.gauge(key + ".bbox_iou", fit.bbox_iou);
      ctx.gauge(key + ".scale", fit.scale);
      ctx.gauge(key + ".rotation_deg", fit.rotation_deg);
      ctx.gauge(key + ".offset_x", fit.offset_x);
      ctx.gauge(key + ".offset_y", fit.offset_y);
      spdlog::info(
          "{}: reference on view {}: silhouette IoU {:.4f} (bounding-box fit {:.4f}), scale "
          "{:.4f}, rotation {:.2f} deg, centroid moved ({:.2f}, {:.2f}) px from the box fit",
          ctx.node_id(), view, fit.iou, fit.bbox_iou, fit.scale, fit.rotation_deg, fit.offset_x,
          fit.offset_y);
      // A reference of this mesh lands at 0.9 or more; far below, the texture will be misplaced.
      constexpr double kPoorFit = 0.8;
      if (fit.iou < kPoorFit)
        spdlog::warn(
            "{}: the reference agrees poorly with the mesh's silhouette on view {} (IoU {:.2f}): "
            "check that it shows the mesh from that side and that background removal kept all of "
            "the object (a white object on a white background loses its white parts); the "
            "report's overlay shows the fit",
            ctx.node_id(), view, fit.iou);
    };

    const size_t front = static_cast<size_t>(ctx.param<int>("reference_view"));
    const image::Image& reference = *ctx.in<image::Image>("image");
    place(reference, front, false);
    if (ctx.param<bool>("mirror_back"))
      for (size_t v : render::opposite_views(*views, front)) place(reference, v, true);
    const auto extra = ctx.param<std::vector<std::string>>("extra_images");
    const auto extra_views = ctx.param<std::vector<int>>("extra_views");
    for (size_t i = 0; i < extra.size(); ++i)
      place(image::recenter(image::load_image(extra[i])), static_cast<size_t>(extra_views[i]),
            false);
    report_cache(ctx, cache);
    report_view_images(ctx, *images);
    ctx.out("images", std::move(images));
    ctx.out("overlay", std::move(overlay));
    if (silhouette) ctx.gauge("multiview.fit_iou", quality->iou);
    ctx.out("fit", std::move(quality));
  }
};

}  // namespace

void register_views_from_reference(pipeline::Registry& registry) {
  registry.add<ViewsFromReference>();
}

}  // namespace gen3d::stages
