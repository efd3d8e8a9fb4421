// texture_psnr: how well the textured mesh reproduces given view images.

#include <algorithm>
#include <cmath>

#include <fmt/format.h>
#include <spdlog/spdlog.h>
#include <tbb/parallel_for.h>

#include "image/resize.h"
#include "render/maps.h"
#include "stages/register.h"
#include "stages/shared.h"
#include "stages/types.h"

namespace gen3d::stages {
namespace {

using pipeline::Range;
using pipeline::StageContext;
using pipeline::StageContract;

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
        .param<int>("resolution", 512, Range{16, 16384}, "render size of the comparison")
        .param<std::string>("metric", "psnr",
                            "metric name prefix: <metric>.view<N> and <metric>.mean_db");
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
      const image::Image got = render::albedo_map(*m, *raster);
      const image::Image want = image::resize_image((*images)[v], size, size, "area");
      for (size_t i = 0; i < raster->pixel_count(); ++i) {
        if (!raster->face_id[i]) continue;
        for (int c = 0; c < 3; ++c) {
          const int wc = want.channels >= 3 ? c : 0;  // a grey image is grey in every channel
          const double d = got.pixels[i * 3 + c] - want.pixels[i * want.channels + wc];
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
    const std::string metric = ctx.param<std::string>("metric");
    for (size_t v = 0; v < views->size(); ++v) {
      if (count[v] == 0) continue;
      ctx.gauge(fmt::format("{}.view{}", metric, v), psnr(sse[v], count[v]));
      line += fmt::format(" {}:{:.1f}", v, psnr(sse[v], count[v]));
      all_sse += sse[v];
      all_count += count[v];
    }
    if (all_count == 0) throw std::runtime_error("no view to compare with");
    ctx.gauge(metric + ".mean_db", psnr(all_sse, all_count));
    spdlog::info("{}: PSNR {:.2f} dB over all views (per view:{})", ctx.node_id(),
                 psnr(all_sse, all_count), line);
  }
};

}  // namespace

void register_texture_psnr(pipeline::Registry& registry) {
  registry.add<TexturePsnr>();
}

}  // namespace gen3d::stages
