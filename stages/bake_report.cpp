// bake_report: where the texture's texels came from, as log lines and metrics.

#include <fmt/format.h>
#include <spdlog/spdlog.h>

#include "stages/register.h"
#include "stages/types.h"

namespace gen3d::stages {
namespace {

using pipeline::StageContext;
using pipeline::StageContract;

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
    if (r->view_texels == 0 && total > 0)
      spdlog::warn(
          "{}: no view image reached the surface, so the texture holds no colour of them: the "
          "mesh faces away from the cameras (a surface seen from behind, or inside out)",
          ctx.node_id());
  }
};

}  // namespace

void register_bake_report(pipeline::Registry& registry) {
  registry.add<BakeReport>();
}

}  // namespace gen3d::stages
