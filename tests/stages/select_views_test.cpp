// select_views run alone through StageRunner: the chosen views against the library's rule, the
// six-view shortcut, and the rasters it leaves in the run's cache for the later stages.

#include <memory>
#include <string>
#include <vector>

#include <gtest/gtest.h>

#include "pipeline/error.h"
#include "pipeline/stage_runner.h"
#include "render/view_selection.h"
#include "stage_test_helpers.h"

namespace gen3d::test {
namespace {

// A louvre: eight horizontal plates stacked close together (z up in the renderer's frame). The
// six official views see the top of the highest plate, the underside of the lowest and the rest
// edge-on; the views at elevation +-20 look into the gaps, so the greedy steps have work to do.
std::shared_ptr<const mesh::Mesh> louvre() {
  static const auto m = [] {
    mesh::Mesh s;
    constexpr int kPlates = 8, kGrid = 12;
    for (int p = 0; p < kPlates; ++p) {
      const float z = -0.2f + 0.05f * static_cast<float>(p);
      const auto base = static_cast<uint32_t>(s.positions.size());
      for (int j = 0; j <= kGrid; ++j)
        for (int i = 0; i <= kGrid; ++i)
          s.positions.push_back({-0.3f + 0.6f * static_cast<float>(i) / kGrid,
                                 -0.3f + 0.6f * static_cast<float>(j) / kGrid, z});
      const auto id = [&](int i, int j) {
        return base + static_cast<uint32_t>(j * (kGrid + 1) + i);
      };
      for (int j = 0; j < kGrid; ++j)
        for (int i = 0; i < kGrid; ++i) {
          s.faces.push_back({id(i, j), id(i + 1, j), id(i + 1, j + 1)});
          s.faces.push_back({id(i, j), id(i + 1, j + 1), id(i, j + 1)});
        }
    }
    return std::make_shared<const mesh::Mesh>(std::move(s));
  }();
  return m;
}

render::RasterCache& runner_cache(pipeline::StageRunner& r) {
  return *r.shared().get_or_create<render::RasterCache>("raster_cache",
                                                        [] { return new render::RasterCache(); });
}

void expect_same_views(const render::ViewSet& got, const render::ViewSet& want) {
  ASSERT_EQ(got.size(), want.size());
  for (size_t i = 0; i < got.size(); ++i) {
    EXPECT_EQ(got[i].camera.elev, want[i].camera.elev) << "view " << i;
    EXPECT_EQ(got[i].camera.azim, want[i].camera.azim) << "view " << i;
    EXPECT_EQ(got[i].camera.distance, want[i].camera.distance) << "view " << i;
    EXPECT_EQ(got[i].camera.ortho_scale, want[i].camera.ortho_scale) << "view " << i;
    EXPECT_EQ(got[i].weight, want[i].weight) << "view " << i;
  }
}

TEST(SelectViews, ChoosesWhatTheGreedyRuleChooses) {
  pipeline::StageRunner r = runner("select_views");
  r.input<mesh::Mesh>("mesh", louvre());
  r.param("max_views", 9).param("resolution", 128);
  r.run();
  auto views = r.output<render::ViewSet>("views");
  ASSERT_TRUE(views);

  const mesh::Mesh& m = *louvre();
  const render::ViewSet candidates = render::hunyuan21_candidates();
  render::RasterCache cache;
  const auto visible = render::candidate_visible_faces(m, m.fingerprint(), candidates, 128, cache);
  render::ViewSelectionOptions o;
  o.max_views = 9;
  const render::ViewSelection want =
      render::select_views(render::face_areas(m.positions, m.faces), visible, o);
  ASSERT_GT(want.selected.size(), 6u) << "the test mesh should need more than the six views";
  expect_same_views(*views, render::selected_views(candidates, want));

  const auto metrics = r.profiler().counter_totals();
  EXPECT_EQ(metrics.at("select_views.views"), static_cast<double>(want.selected.size()));
  EXPECT_NEAR(metrics.at("select_views.covered"), want.covered, 1e-12);
  EXPECT_EQ(metrics.at("raster_cache.rasterizations"), 30.0);
}

TEST(SelectViews, TheFirstSixAreTheOfficialViews) {
  pipeline::StageRunner r = runner("select_views");
  r.input<mesh::Mesh>("mesh", louvre()).param("resolution", 64);
  r.run();
  auto views = r.output<render::ViewSet>("views");
  ASSERT_TRUE(views);
  EXPECT_GE(views->size(), 6u);
  EXPECT_LE(views->size(), 8u) << "default max_views";
  render::ViewSet first_six;
  first_six.views.assign(views->views.begin(), views->views.begin() + 6);
  expect_same_views(first_six, render::ViewSet::hunyuan6());
}

TEST(SelectViews, SixViewsAreTheOfficialSixWithoutRendering) {
  pipeline::StageRunner r = runner("select_views");
  r.input<mesh::Mesh>("mesh", louvre()).param("max_views", 6);
  r.run();
  expect_same_views(*r.output<render::ViewSet>("views"), render::ViewSet::hunyuan6());
  EXPECT_EQ(runner_cache(r).stats().rasterizations, 0u);
}

TEST(SelectViews, ThresholdOneKeepsTheSix) {
  pipeline::StageRunner r = runner("select_views");
  r.input<mesh::Mesh>("mesh", louvre());
  r.param("max_views", 9).param("threshold", 1.0).param("resolution", 64);
  r.run();
  expect_same_views(*r.output<render::ViewSet>("views"), render::ViewSet::hunyuan6());
}

// The face-id rasters stay in the run's cache: a map stage rendering the chosen views at the same
// size rasterizes nothing more.
TEST(SelectViews, LaterStagesReuseTheRasters) {
  pipeline::StageRunner r = runner("select_views");
  r.input<mesh::Mesh>("mesh", louvre());
  r.param("max_views", 9).param("resolution", 96);
  r.run();
  auto views = r.output<render::ViewSet>("views");
  render::RasterCache& cache = runner_cache(r);
  EXPECT_EQ(cache.stats().rasterizations, 30u);
  const uint64_t fp = louvre()->fingerprint();
  for (const render::View& v : views->views) (void)cache.get(fp, *louvre(), v.camera, 96, 96);
  EXPECT_EQ(cache.stats().rasterizations, 30u);
  EXPECT_GE(cache.stats().hits, views->size());
}

TEST(SelectViews, ParametersOutOfRangeAreRefused) {
  pipeline::StageRunner r = runner("select_views");
  EXPECT_THROW(r.param("max_views", 5), pipeline::ConfigError);
  EXPECT_THROW(r.param("max_views", 10), pipeline::ConfigError);
  EXPECT_THROW(r.param("threshold", -0.1), pipeline::ConfigError);
  EXPECT_THROW(r.param("resolution", 8), pipeline::ConfigError);
}

}  // namespace
}  // namespace gen3d::test
