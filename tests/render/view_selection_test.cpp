#include "render/view_selection.h"

#include <gtest/gtest.h>

#include <string>
#include <vector>

#include "render/error.h"
#include "render/rasterizer.h"
#include "test_meshes.h"

namespace gen3d::render {
namespace {

using Faces = std::vector<std::vector<uint32_t>>;

TEST(ViewSelection, CandidatesAreTheSixViewsThenPlusMinus20PerAzimuth) {
  const ViewSet c = hunyuan21_candidates(2.0, 1.5);
  const ViewSet six = ViewSet::hunyuan6(2.0, 1.5);
  ASSERT_EQ(c.size(), 30u);
  for (size_t i = 0; i < 6; ++i) {
    EXPECT_EQ(c[i].camera.elev, six[i].camera.elev);
    EXPECT_EQ(c[i].camera.azim, six[i].camera.azim);
    EXPECT_EQ(c[i].weight, six[i].weight);
  }
  for (size_t i = 6; i < 30; ++i) {
    EXPECT_EQ(c[i].camera.azim, 30.0 * static_cast<double>((i - 6) / 2)) << i;
    EXPECT_EQ(c[i].camera.elev, i % 2 == 0 ? 20.0 : -20.0) << i;
    EXPECT_EQ(c[i].weight, 0.01) << i;
    EXPECT_EQ(c[i].camera.distance, 2.0);
    EXPECT_EQ(c[i].camera.ortho_scale, 1.5);
  }
}

TEST(ViewSelection, FaceAreas) {
  const std::vector<mesh::Vec3> p = {{0, 0, 0}, {2, 0, 0}, {0, 3, 0}, {4, 0, 0}};
  const std::vector<mesh::Tri> f = {{0, 1, 2}, {0, 2, 1}, {0, 1, 3}};
  const auto a = face_areas(p, f);
  ASSERT_EQ(a.size(), 3u);
  EXPECT_EQ(a[0], 3.0f);
  EXPECT_EQ(a[1], 3.0f);  // winding does not matter
  EXPECT_EQ(a[2], 0.0f);  // collinear
  const std::vector<mesh::Tri> bad = {{0, 1, 4}};
  EXPECT_THROW(face_areas(p, bad), RenderError);
}

TEST(ViewSelection, VisibleFacesAreSortedZeroBasedAndChecked) {
  const std::vector<int32_t> ids = {0, 3, 3, 1, 0, 5, 1};
  EXPECT_EQ(visible_faces(ids, 5), (std::vector<uint32_t>{0, 2, 4}));
  EXPECT_TRUE(visible_faces(std::vector<int32_t>(16, 0), 5).empty());
  EXPECT_THROW(visible_faces(ids, 4), RenderError);  // id 5 names face 4 of 4
  EXPECT_THROW(visible_faces(std::vector<int32_t>{0, -2}, 4), RenderError);
}

// Nine faces; candidates 0..5 see face 0 only, then 6.. see the rest in overlapping sets.
struct Case {
  std::vector<float> areas = {50, 20, 10, 7, 5, 4, 2, 1, 1};  // total 100
  Faces visible = {{0}, {0}, {0}, {0}, {0}, {0}, {1}, {2, 3}, {3, 4}, {1}, {5}, {6}, {7}, {8}};
};

TEST(ViewSelection, GreedyByNewlyCoveredArea) {
  Case k;
  ViewSelectionOptions o;
  o.max_views = 30;
  const ViewSelection s = select_views(k.areas, k.visible, o);
  // Shares 0.5, 0.2, 0.1, 0.07, 0.05, 0.04, 0.02, 0.01, 0.01. Step 0: 6 and 9 both add 0.20 (6,
  // the lower index, wins); 7 then adds 0.17, 8 only face 4 (0.05), 10 0.04, 11 0.02; 12 and 13
  // add 0.01, which is not more than the threshold.
  EXPECT_EQ(s.selected, (std::vector<size_t>{0, 1, 2, 3, 4, 5, 6, 7, 8, 10, 11}));
  ASSERT_EQ(s.gains.size(), 6u);  // five steps taken, the sixth stops
  EXPECT_DOUBLE_EQ(s.gains[0][6], 0.20);
  EXPECT_DOUBLE_EQ(s.gains[0][7], 0.17);
  EXPECT_DOUBLE_EQ(s.gains[0][8], 0.12);
  EXPECT_EQ(s.gains[0][0], -1.0);
  EXPECT_EQ(s.gains[1][6], -1.0);
  EXPECT_DOUBLE_EQ(s.gains[1][9], 0.0);  // face 1 already covered by 6
  EXPECT_DOUBLE_EQ(s.gains[2][8], 0.05);
  EXPECT_DOUBLE_EQ(s.gains[5][12], 0.01);  // equal to the threshold: not taken
  EXPECT_NEAR(s.covered, 0.98, 1e-12);
}

TEST(ViewSelection, TiesGoToTheLowerIndex) {
  const std::vector<float> areas = {10, 1, 1};
  const Faces visible = {{0}, {1}, {2}};
  ViewSelectionOptions o;
  o.fixed_views = 1;
  o.max_views = 2;
  EXPECT_EQ(select_views(areas, visible, o).selected, (std::vector<size_t>{0, 1}));
}

TEST(ViewSelection, MaxViewsCapsFixedAndGreedyViews) {
  Case k;
  ViewSelectionOptions o;
  o.max_views = 6;  // the official demo: no greedy step at all
  ViewSelection s = select_views(k.areas, k.visible, o);
  EXPECT_EQ(s.selected, (std::vector<size_t>{0, 1, 2, 3, 4, 5}));
  EXPECT_TRUE(s.gains.empty());
  o.max_views = 4;
  EXPECT_EQ(select_views(k.areas, k.visible, o).selected, (std::vector<size_t>{0, 1, 2, 3}));
  o.max_views = 8;
  s = select_views(k.areas, k.visible, o);
  EXPECT_EQ(s.selected, (std::vector<size_t>{0, 1, 2, 3, 4, 5, 6, 7}));
  EXPECT_EQ(s.gains.size(), 2u);
}

TEST(ViewSelection, ThresholdStopsTheSearch) {
  Case k;
  ViewSelectionOptions o;
  o.max_views = 30;
  o.threshold = 0.18;
  const ViewSelection s = select_views(k.areas, k.visible, o);
  EXPECT_EQ(s.selected, (std::vector<size_t>{0, 1, 2, 3, 4, 5, 6}));
  EXPECT_EQ(s.gains.size(), 2u);
}

TEST(ViewSelection, EverythingSelectedEndsTheSearch) {
  const std::vector<float> areas = {1, 1};
  const Faces visible = {{0}, {1}};
  ViewSelectionOptions o;
  o.fixed_views = 0;
  o.max_views = 9;
  o.threshold = 0;
  const ViewSelection s = select_views(areas, visible, o);
  EXPECT_EQ(s.selected, (std::vector<size_t>{0, 1}));
  EXPECT_EQ(s.gains.size(), 3u);
}

TEST(ViewSelection, BadInputsThrow) {
  Case k;
  ViewSelectionOptions o;
  Faces bad = k.visible;
  bad[7].push_back(9);
  EXPECT_THROW(select_views(k.areas, bad, o), RenderError);
  const std::vector<float> zero(9, 0.0f);
  EXPECT_THROW(select_views(zero, k.visible, o), RenderError);
  o.threshold = -0.5;
  EXPECT_THROW(select_views(k.areas, k.visible, o), RenderError);
}

TEST(ViewSelection, RenderedCandidatesGoThroughTheCacheOncePerPose) {
  const mesh::Mesh m = testing::bumpy_sphere(16, 24);
  const ViewSet candidates = hunyuan21_candidates();
  RasterCache cache;
  const uint64_t fp = m.fingerprint();
  const auto visible = candidate_visible_faces(m, fp, candidates, 96, cache, 6);
  ASSERT_EQ(visible.size(), candidates.size());
  EXPECT_EQ(cache.stats().rasterizations, candidates.size());
  for (size_t c = 0; c < candidates.size(); ++c) {
    const Raster r = rasterize(m, candidates[c].camera, 96, 96);
    EXPECT_EQ(visible[c], visible_faces(r.face_id, m.faces.size())) << "candidate " << c;
    EXPECT_FALSE(visible[c].empty());
  }
  // A later stage asking for a chosen pose at the same size finds it.
  (void)cache.get(fp, m, candidates[0].camera, 96, 96);
  (void)candidate_visible_faces(m, fp, candidates, 96, cache);
  EXPECT_EQ(cache.stats().rasterizations, candidates.size());

  const ViewSelection s = select_views(face_areas(m.positions, m.faces), visible);
  EXPECT_GE(s.selected.size(), 6u);
  EXPECT_LE(s.selected.size(), 8u);
  const ViewSet chosen = selected_views(candidates, s);
  ASSERT_EQ(chosen.size(), s.selected.size());
  for (size_t i = 0; i < chosen.size(); ++i) {
    EXPECT_EQ(chosen[i].camera.azim, candidates[s.selected[i]].camera.azim);
    EXPECT_EQ(chosen[i].weight, candidates[s.selected[i]].weight);
  }
}

}  // namespace
}  // namespace gen3d::render
