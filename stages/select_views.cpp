// select_views: Hunyuan3D-2.1's bake views, chosen per mesh: the six official views, then greedily
// those of the 24 candidates at elevation +-20 that newly show the most surface area
// (render/view_selection.h; ViewProcessor.bake_view_selection in
// hy3dpaint/utils/pipeline_utils.py).

#include <algorithm>
#include <string>
#include <vector>

#include <fmt/format.h>
#include <spdlog/spdlog.h>

#include "render/view_selection.h"
#include "stages/register.h"
#include "stages/shared.h"
#include "stages/types.h"

namespace gen3d::stages {
namespace {

using pipeline::Range;
using pipeline::StageContext;
using pipeline::StageContract;

// The six official views come first among the candidates and are always taken.
constexpr size_t kFixedViews = 6;

class SelectViews final : public pipeline::Stage {
 public:
  StageContract contract() const override {
    return StageContract(
               "select_views",
               "Hunyuan3D-2.1's bake views for this mesh: the six official views, then, one at a "
               "time, the candidate at elevation +-20 (every 30 degrees of azimuth, weight 0.01) "
               "whose face-id render shows the largest share of surface area not yet seen, while "
               "that share exceeds `threshold` and fewer than `max_views` views are chosen.")
        .input<mesh::Mesh>("mesh", "normalized (normalize_mesh), as the maps render it")
        .output<render::ViewSet>("views", "the chosen views in the order taken, with merge weights")
        // 8, not the reference's function default: the official demo passes 6, which takes the six
        // fixed views only (the same views as camera_views' hunyuan6, nothing rendered), so a
        // user who adds this stage wants more; 8 is the official Gradio app's choice.
        .param<int>("max_views", 8, Range{6, 9},
                    "most views chosen, the six fixed ones included (6: the official six only, "
                    "nothing rendered)")
        .param<double>("threshold", 0.01, Range{0.0, 1.0},
                       "a view is added only if it newly shows more than this share of the total "
                       "face area")
        .param<int>("resolution", 1024, Range{16, 16384},
                    "square face-id render size in pixels (official 1024); later stages reuse "
                    "these rasters when they render a chosen pose at this size");
  }
  void run(StageContext& ctx) const override {
    auto m = ctx.in<mesh::Mesh>("mesh");
    const render::ViewSet candidates = render::hunyuan21_candidates();
    render::ViewSelectionOptions options;
    options.max_views = static_cast<size_t>(ctx.param<int>("max_views"));
    options.threshold = ctx.param<double>("threshold");
    options.fixed_views = kFixedViews;
    const int size = ctx.param<int>("resolution");

    render::ViewSelection selection;
    if (options.max_views <= options.fixed_views) {
      // No greedy step: the fixed views need no render (bake_view_selection renders them anyway).
      for (size_t c = 0; c < options.max_views; ++c) selection.selected.push_back(c);
    } else {
      std::vector<float> areas;
      std::vector<std::vector<uint32_t>> visible;
      {
        auto span = ctx.span("face-id renders");
        render::RasterCache& cache = raster_cache(ctx);
        visible = render::candidate_visible_faces(*m, m->fingerprint(), candidates, size, cache,
                                                  kFixedViews);
        report_cache(ctx, cache);
      }
      {
        auto span = ctx.span("greedy selection");
        areas = render::face_areas(m->positions, m->faces);
        selection = render::select_views(areas, visible, options);
      }
      for (size_t i = kFixedViews; i < selection.selected.size(); ++i) {
        const render::View& v = candidates[selection.selected[i]];
        spdlog::info("{}: view {} at azimuth {:g}, elevation {:+g} newly shows {:.2f}% of the area",
                     ctx.node_id(), i, v.camera.azim, v.camera.elev,
                     100.0 * selection.gains[i - kFixedViews][selection.selected[i]]);
      }
      if (selection.selected.size() < options.max_views && !selection.gains.empty()) {
        double best = 0;
        for (double g : selection.gains.back()) best = std::max(best, g);
        spdlog::info(
            "{}: stopped at {} views: the best candidate newly shows {:.2f}% (threshold "
            "{:.2f}%)",
            ctx.node_id(), selection.selected.size(), 100.0 * best, 100.0 * options.threshold);
      }
      ctx.gauge("select_views.covered", selection.covered);
    }
    ctx.gauge("select_views.views", static_cast<double>(selection.selected.size()));
    ctx.out("views",
            std::make_shared<render::ViewSet>(render::selected_views(candidates, selection)));
  }
};

}  // namespace

void register_select_views(pipeline::Registry& registry) {
  registry.add<SelectViews>();
}

}  // namespace gen3d::stages
