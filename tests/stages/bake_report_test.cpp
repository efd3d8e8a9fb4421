// The bake_report stage run alone through StageRunner on the merge and inpainting report of a
// small sphere built in code (bake_views, merge_views, inpaint_texture).

#include <map>
#include <memory>
#include <string>

#include <gtest/gtest.h>

#include "pipeline/stage_runner.h"
#include "stage_test_helpers.h"

namespace gen3d::test {
namespace {

constexpr int kSize = 64;

std::map<std::string, double> report(std::shared_ptr<const render::MergeResult> merged,
                                     std::shared_ptr<const render::InpaintReport> inpainted) {
  pipeline::StageRunner r = runner("bake_report");
  r.input<render::MergeResult>("merged", merged).input<render::InpaintReport>("report", inpainted);
  r.run();
  return r.profiler().counter_totals();
}

TEST(BakeReport, SharesAddUpToTheCharts) {
  const auto m =
      bake_and_merge(level_views({0, 180}), {solid(kSize, kRed), solid(kSize, kBlue)}, kSize)
          .merged;
  const Inpainted out = inpaint(m);
  const auto g = report(m, out.report);
  EXPECT_EQ(g.at("bake.chart_texels"), static_cast<double>(out.report->chart_texels));
  const double views = g.at("bake.share_views"), vertex = g.at("bake.share_vertex_inpaint"),
               image = g.at("bake.share_image_inpaint");
  EXPECT_NEAR(views + vertex + image, 1.0, 1e-12);
  EXPECT_NEAR(views * out.report->chart_texels, out.report->view_texels, 1e-6);
  EXPECT_NEAR(vertex * out.report->chart_texels, out.report->vertex_texels, 1e-6);
  EXPECT_GT(views, 0.3);
  EXPECT_LT(views, 1.0);
  EXPECT_EQ(g.at("bake.gutter_texels"), static_cast<double>(out.report->gutter_texels));
  for (size_t v = 0; v < 2; ++v) {
    EXPECT_GT(m->views[v].texels_with_weight, 0u);
    EXPECT_EQ(g.at("bake.view" + std::to_string(v) + ".texels"),
              static_cast<double>(m->views[v].texels_with_weight));
  }
  EXPECT_EQ(g.count("bake.view2.texels"), 0u);
}

// Without chart texels (the reference method counts none) shares are of the whole texture.
TEST(BakeReport, WholeTextureWithoutCharts) {
  const auto m = bake_and_merge(level_views({0}), {solid(kSize, kGreen)}, kSize).merged;
  const Inpainted ref = inpaint(m, {{"method", "reference"}});
  ASSERT_EQ(ref.report->chart_texels, 0u);
  const auto g = report(m, ref.report);
  EXPECT_EQ(g.at("bake.chart_texels"), kSize * kSize);
  EXPECT_NEAR(g.at("bake.share_views") * kSize * kSize, ref.report->view_texels, 1e-6);
}

TEST(BakeReport, NeedsBothInputs) {
  const auto m = bake_and_merge(level_views({0}), {solid(kSize, kGreen)}, kSize).merged;
  pipeline::StageRunner r = runner("bake_report");
  r.input<render::MergeResult>("merged", m);
  EXPECT_NE(error_of([&] { r.run(); }).find("input \"report\" is not connected"),
            std::string::npos);
  EXPECT_NE(error_of([&] { r.param("verbose", true); }).find("has no parameter \"verbose\""),
            std::string::npos);
}

}  // namespace
}  // namespace gen3d::test
