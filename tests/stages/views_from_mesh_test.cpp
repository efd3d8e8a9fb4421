// views_from_mesh run alone through StageRunner: albedo renders of a red sphere, normalized on its
// own or placed by another mesh's normalization.

#include <gtest/gtest.h>

#include "mesh/normalize.h"
#include "stage_test_helpers.h"

namespace gen3d::test {
namespace {

constexpr int kSize = 32;

std::shared_ptr<const mesh::Mesh> red_sphere() {
  mesh::Mesh m = *smooth_sphere();
  m.texture = std::make_shared<const Image>(solid(4, kRed));
  return std::make_shared<const mesh::Mesh>(std::move(m));
}

// Pixels of an albedo view that show the red texture (the background is white).
size_t red_pixels(const Image& img) {
  size_t n = 0;
  for (int y = 0; y < img.height; ++y)
    for (int x = 0; x < img.width; ++x) n += img.at(x, y)[1] < 0.5f;
  return n;
}

stages::ImageList render_views(std::shared_ptr<const mesh::Mesh> source,
                               const mesh::NormalizeTransform* transform = nullptr) {
  pipeline::StageRunner r = runner("views_from_mesh");
  r.input<render::ViewSet>("views", level_views({0, 90, 180}));
  r.input<mesh::Mesh>("mesh", std::move(source)).param("resolution", kSize);
  if (transform) r.input<mesh::NormalizeTransform>("transform", *transform);
  r.run();
  EXPECT_EQ(r.profiler().counter_totals().at("multiview.views_with_images"), 3.0);
  return *r.output<stages::ImageList>("images");
}

TEST(ViewsFromMesh, RendersTheSourceAlbedoFromEveryView) {
  const stages::ImageList own = render_views(red_sphere());
  ASSERT_EQ(own.size(), 3u);
  for (const auto& img : own) {
    ASSERT_EQ(img.width, kSize);
    ASSERT_EQ(img.channels, 3);
    EXPECT_GT(red_pixels(img), kSize * kSize / 2) << "normalized on its own, it fills the view";
    EXPECT_EQ(img.at(0, 0)[1], 1.0f) << "white background";
  }

  // Placed by the normalization of a mesh twice its size, it shows at half the size.
  mesh::Mesh twice = *smooth_sphere();
  for (auto& p : twice.positions)
    for (int k = 0; k < 3; ++k) p[k] *= 2.0f;
  const mesh::NormalizeTransform t = mesh::fit_normalization(twice);
  const stages::ImageList placed = render_views(red_sphere(), &t);
  for (size_t v = 0; v < placed.size(); ++v) {
    EXPECT_GT(red_pixels(placed[v]), 0u);
    EXPECT_LT(red_pixels(placed[v]), red_pixels(own[v]) / 3);
  }
}

// The fit: how exactly the source's renders cover the target's silhouettes (the bake narrows
// its edge window when they land exactly).
double fit_onto(std::shared_ptr<const mesh::Mesh> source, const mesh::Mesh* target,
                const mesh::NormalizeTransform& transform) {
  pipeline::StageRunner r = runner("views_from_mesh");
  r.input<render::ViewSet>("views", level_views({0, 90, 180}));
  r.input<mesh::Mesh>("mesh", std::move(source)).param("resolution", kSize);
  r.input<mesh::NormalizeTransform>("transform", transform);
  if (target) r.input<mesh::Mesh>("target", *target);
  r.run();
  return r.output<stages::ReferenceFit>("fit")->iou;
}

TEST(ViewsFromMesh, FitMeasuresHowTheRendersCoverTheTarget) {
  // Re-baking: the source is the target itself, placed by its own normalization.
  mesh::Mesh target = *red_sphere();
  const mesh::NormalizeTransform t = mesh::normalize_mesh(target);
  EXPECT_DOUBLE_EQ(fit_onto(red_sphere(), &target, t), 1.0);
  // A source shifted by a tenth of its size lands off the target's silhouette.
  mesh::Mesh shifted = *red_sphere();
  for (auto& p : shifted.positions) p[0] += 0.2f;
  const double off = fit_onto(std::make_shared<const mesh::Mesh>(std::move(shifted)), &target, t);
  EXPECT_GT(off, 0.5);
  EXPECT_LT(off, 0.97);
  // Without a target nothing is measured.
  EXPECT_EQ(fit_onto(red_sphere(), nullptr, t), 0.0);
}

TEST(ViewsFromMesh, AnUntexturedSourceIsAnError) {
  pipeline::StageRunner r = runner("views_from_mesh");
  r.input<render::ViewSet>("views", level_views({0}));
  mesh::Mesh bare = *smooth_sphere();
  bare.uvs.clear();
  bare.uv_faces.clear();
  r.input<mesh::Mesh>("mesh", std::move(bare)).param("resolution", kSize);
  EXPECT_FALSE(error_of([&] { r.run(); }).empty());
}

}  // namespace
}  // namespace gen3d::test
