// The render stages (camera_views, render_normals, render_positions, bake_views, merge_views), each
// run alone through StageRunner on a small sphere built in code and constant-colour view images.

#include <array>
#include <cmath>
#include <memory>
#include <optional>
#include <string>
#include <vector>

#include <gtest/gtest.h>

#include "pipeline/error.h"
#include "pipeline/stage_runner.h"
#include "render/maps.h"
#include "render/rasterizer.h"
#include "stage_test_helpers.h"

namespace gen3d::test {
namespace {

using Vec = std::array<double, 3>;

std::shared_ptr<const stages::ImageList> render_maps(const char* stage,
                                                     std::shared_ptr<const render::ViewSet> views,
                                                     int resolution) {
  pipeline::StageRunner r = runner(stage);
  r.input<mesh::Mesh>("mesh", smooth_sphere()).input<render::ViewSet>("views", views);
  r.param("resolution", resolution);
  r.run();
  return r.output<stages::ImageList>("maps");
}

Vec at(const Image& img, int x, int y) {
  const float* p = img.at(x, y);
  return {p[0], p[1], p[2]};
}
double dot(const Vec& a, const Vec& b) {
  return a[0] * b[0] + a[1] * b[1] + a[2] * b[2];
}
double norm(const Vec& a) {
  return std::sqrt(dot(a, a));
}
bool is_white(const float* p) {
  return p[0] == 1.0f && p[1] == 1.0f && p[2] == 1.0f;
}

double coverage(const Image& map) {
  size_t n = 0;
  for (int y = 0; y < map.height; ++y)
    for (int x = 0; x < map.width; ++x) n += !is_white(map.at(x, y));
  return static_cast<double>(n) / (static_cast<double>(map.width) * map.height);
}

TEST(RenderStages, CameraViewsPresetAndCustom) {
  pipeline::StageRunner preset = runner("camera_views");
  preset.param("distance", 2.0).param("ortho_scale", 1.5);
  preset.run();
  auto six = preset.output<render::ViewSet>("views");
  ASSERT_TRUE(six);
  ASSERT_EQ(six->size(), 6u);
  const double azim[6] = {0, 90, 180, 270, 0, 180}, elev[6] = {0, 0, 0, 0, 90, -90};
  const double weight[6] = {1, 0.1, 0.5, 0.1, 0.05, 0.05};
  for (size_t v = 0; v < 6; ++v) {
    EXPECT_EQ((*six)[v].camera.azim, azim[v]) << v;
    EXPECT_EQ((*six)[v].camera.elev, elev[v]) << v;
    EXPECT_DOUBLE_EQ((*six)[v].weight, weight[v]) << v;
    EXPECT_EQ((*six)[v].camera.distance, 2.0);
    EXPECT_EQ((*six)[v].camera.ortho_scale, 1.5);
  }

  auto two = custom_views({10, -20}, {30, 200});
  ASSERT_EQ(two->size(), 2u);
  EXPECT_EQ((*two)[1].camera.elev, -20.0);
  EXPECT_EQ((*two)[1].camera.azim, 200.0);
  EXPECT_EQ((*two)[0].weight, 1.0) << "no weights: all 1";
  EXPECT_EQ((*two)[1].camera.distance, 1.45) << "default distance";
  EXPECT_EQ(custom_views({0, 0}, {0, 90}, {0.5, 2})->views[1].weight, 2.0);
}

TEST(RenderStages, CameraViewsRefuseBadParameters) {
  const auto custom = [](std::vector<double> e, std::vector<double> a, std::vector<double> w) {
    return error_of([&] { custom_views(e, a, w); });
  };
  EXPECT_NE(custom({0, 0}, {0}, {}).find("as many elevations as azimuths"), std::string::npos);
  EXPECT_NE(custom({}, {}, {}).find("at least one"), std::string::npos);
  EXPECT_NE(custom({0, 0}, {0, 90}, {1}).find("weights"), std::string::npos);
  // A negative merge weight would subtract one view's colour from the others'.
  EXPECT_NE(custom({0, 0}, {0, 40}, {1, -1}).find("weights must be finite and >= 0"),
            std::string::npos);
  EXPECT_THROW(custom_views({0}, {0, 1}), pipeline::ConfigError);

  pipeline::StageRunner r = runner("camera_views");
  EXPECT_NE(error_of([&] { r.param("distance", 0.0); }).find("/params/distance"),
            std::string::npos);
  EXPECT_THROW(r.param("preset", "hunyuan7"), pipeline::ConfigError);
  EXPECT_THROW(r.param("ortho_scale", "wide"), pipeline::ConfigError);
}

// The normal and position maps of a sphere: size, white background, the silhouette's area, unit
// normals parallel to the surface position, and opposite views seeing opposite points.
TEST(RenderStages, NormalAndPositionMapsOfASphere) {
  auto views = custom_views({0, 0}, {0, 180});
  auto normals = render_maps("render_normals", views, 64);
  auto positions = render_maps("render_positions", views, 64);
  ASSERT_TRUE(normals && positions);
  ASSERT_EQ(normals->size(), 2u);
  ASSERT_EQ(positions->size(), 2u);
  Vec n[2], p[2];
  for (size_t v = 0; v < 2; ++v) {
    for (const Image* map : {&(*normals)[v], &(*positions)[v]}) {
      EXPECT_EQ(map->width, 64);
      EXPECT_EQ(map->height, 64);
      ASSERT_EQ(map->channels, 3);
      for (float x : map->pixels) ASSERT_TRUE(x >= 0.0f && x <= 1.0f) << x;
      EXPECT_TRUE(is_white(map->at(0, 0)) && is_white(map->at(63, 63))) << "white background";
      // A disc of radius 0.5 in a 1.2-wide orthographic view.
      EXPECT_NEAR(coverage(*map), M_PI * 0.25 / 1.44, 0.03);
    }
    const Vec nc = at((*normals)[v], 32, 32), pc = at((*positions)[v], 32, 32);
    n[v] = {2 * nc[0] - 1, 2 * nc[1] - 1, 2 * nc[2] - 1};                       // (n + 1) / 2
    p[v] = {(0.5 - pc[0]) * 1.15, (0.5 - pc[1]) * 1.15, (0.5 - pc[2]) * 1.15};  // 0.5 - p / 1.15
    EXPECT_NEAR(norm(n[v]), 1.0, 0.02);
    EXPECT_NEAR(norm(p[v]), 0.5, 0.01);
    EXPECT_GT(std::fabs(dot(n[v], p[v])) / (norm(n[v]) * norm(p[v])), 0.99)
        << "a sphere's normal is along its position";
  }
  EXPECT_LT(dot(p[0], p[1]) / (norm(p[0]) * norm(p[1])), -0.99) << "opposite views";
  EXPECT_LT(dot(n[0], n[1]) / (norm(n[0]) * norm(n[1])), -0.99) << "opposite views";
}

TEST(RenderStages, OrthoScaleAndRasterCache) {
  pipeline::StageRunner preset = runner("camera_views");
  preset.param("ortho_scale", 2.4);
  preset.run();
  auto six = preset.output<render::ViewSet>("views");

  pipeline::StageRunner r = runner("render_normals");
  r.input<mesh::Mesh>("mesh", smooth_sphere())
      .input<render::ViewSet>("views", six)
      .param("resolution", 48);
  r.run();
  auto maps = r.output<stages::ImageList>("maps");
  ASSERT_EQ(maps->size(), 6u);
  for (const Image& m : *maps) EXPECT_NEAR(coverage(m), M_PI * 0.25 / (2.4 * 2.4), 0.03);
  EXPECT_EQ(r.profiler().counter_totals().at("raster_cache.rasterizations"), 6.0);

  // Within one run (one shared state) a pose is rasterized once.
  pipeline::StageRunner again = runner("render_positions");
  again.input<mesh::Mesh>("mesh", smooth_sphere()).input<render::ViewSet>("views", six);
  again.param("resolution", 48);
  again.run();
  EXPECT_EQ(again.profiler().counter_totals().at("raster_cache.hits"), 0.0);
  again.run();
  EXPECT_EQ(again.profiler().counter_totals().at("raster_cache.rasterizations"), 6.0)
      << "the second run (same shared state) rasterizes nothing";
  EXPECT_EQ(again.profiler().counter_totals().at("raster_cache.hits"), 6.0);
}

TEST(RenderStages, MapStagesRefuseBadInputs) {
  pipeline::StageRunner r = runner("render_normals");
  EXPECT_NE(error_of([&] { r.param("resolution", 8); }).find("/params/resolution"),
            std::string::npos);
  r.input<mesh::Mesh>("mesh", smooth_sphere()).param("resolution", 32);
  EXPECT_NE(error_of([&] { r.run(); }).find("input \"views\" is not connected"), std::string::npos);
}

// Texel-space positions of the sphere, and which texels its UV charts cover.
struct Texels {
  Image positions;
  std::vector<uint8_t> chart;
};
Texels texels(int size) {
  const render::Raster uv = render::rasterize_uv(*smooth_sphere(), size, size);
  Texels t{render::texel_position_map(*smooth_sphere(), uv),
           std::vector<uint8_t>(uv.pixel_count())};
  for (size_t i = 0; i < t.chart.size(); ++i) t.chart[i] = uv.face_id[i] != 0;
  return t;
}

// A red front view and a blue back view come back as red and blue texels on opposite sides of the
// sphere, never mixed (a 75-degree threshold leaves opposite views no common texel).
TEST(RenderStages, BakeAndMergeProjectKnownColours) {
  const Texels t = texels(64);
  for (const char* method : {"gather", "reference"}) {
    SCOPED_TRACE(method);
    const Baked b = bake_and_merge(custom_views({0, 0}, {0, 180}),
                                   {solid(64, kRed), solid(64, kBlue)}, 64, method);
    ASSERT_TRUE(b.bakes && b.merged);
    ASSERT_EQ(b.bakes->size(), 2u);
    for (const auto& bake : *b.bakes) {
      EXPECT_EQ(bake.texture.width, 64);
      EXPECT_EQ(bake.cos.channels, 1);
      for (float c : bake.cos.pixels) ASSERT_TRUE(c >= 0.0f && c <= 1.0f) << c;
    }
    const render::MergeResult& m = *b.merged;
    ASSERT_EQ(m.texture.width, 64);
    ASSERT_EQ(m.texture.channels, 3);
    ASSERT_EQ(m.trust_mask.size(), 64u * 64u);
    EXPECT_EQ(b.views_skipped, 0.0);
    size_t red = 0, blue = 0, charts = 0, other = 0;
    Vec red_at{}, blue_at{};
    for (size_t i = 0; i < m.trust_mask.size(); ++i) {
      charts += t.chart[i];
      if (!m.trust_mask[i]) continue;
      const float* c = &m.texture.pixels[i * 3];
      const float* p = &t.positions.pixels[i * 3];
      Vec* sum = nullptr;
      if (near_rgb(c, kRed)) {
        ++red, sum = &red_at;
      } else if (near_rgb(c, kBlue)) {
        ++blue, sum = &blue_at;
      } else {
        ++other;
      }
      if (sum)
        for (int k = 0; k < 3; ++k) (*sum)[k] += p[k];
    }
    EXPECT_EQ(other, 0u) << "every painted texel is one view's colour";
    EXPECT_GT(red, charts / 5);
    EXPECT_GT(blue, charts / 5);
    EXPECT_LT(red + blue, charts) << "the poles are seen by neither view";
    EXPECT_LT(dot(red_at, blue_at) / (norm(red_at) * norm(blue_at)), -0.9)
        << "red and blue on opposite sides";
    EXPECT_EQ(m.views[0].texels_with_weight, red);
    EXPECT_EQ(m.views[1].texels_with_weight, blue);
  }
}

// With bake_exp 0 a texel's weight is its view's weight alone: where a red view (weight 1) and a
// blue one (weight 3) overlap, the merge is exactly 1/4 red + 3/4 blue.
TEST(RenderStages, MergeWeighsViews) {
  const Baked b = bake_and_merge(custom_views({0, 0}, {0, 40}, {1, 3}),
                                 {solid(64, kRed), solid(64, kBlue)}, 64, "gather", 0.0);
  ASSERT_TRUE(b.merged);
  size_t red = 0, blue = 0, mixed = 0, other = 0;
  for (size_t i = 0; i < b.merged->trust_mask.size(); ++i) {
    if (!b.merged->trust_mask[i]) continue;
    const float* c = &b.merged->texture.pixels[i * 3];
    const bool in0 = (*b.bakes)[0].cos.pixels[i] > 0, in1 = (*b.bakes)[1].cos.pixels[i] > 0;
    if (in0 && in1)
      mixed += near_rgb(c, {0.25f, 0, 0.75f}), other += !near_rgb(c, {0.25f, 0, 0.75f});
    else if (in0)
      red += near_rgb(c, kRed), other += !near_rgb(c, kRed);
    else
      blue += near_rgb(c, kBlue), other += !near_rgb(c, kBlue);
    EXPECT_NEAR(b.merged->weight.pixels[i], in0 * 1.0 + in1 * 3.0, 1e-5);
  }
  EXPECT_EQ(other, 0u);
  EXPECT_GT(mixed, 100u);
  EXPECT_GT(red, 20u);
  EXPECT_GT(blue, 20u);
}

// A view adding nothing new (the same pose twice) is skipped, as the reference's fast merge does.
TEST(RenderStages, MergeSkipsARepeatedView) {
  const Baked b =
      bake_and_merge(custom_views({0, 0}, {0, 0}), {solid(64, kRed), solid(64, kGreen)}, 64);
  ASSERT_TRUE(b.merged);
  EXPECT_EQ(b.views_skipped, 1.0);
  ASSERT_EQ(b.merged->views.size(), 2u);
  EXPECT_FALSE(b.merged->views[0].skipped);
  EXPECT_TRUE(b.merged->views[1].skipped);
  size_t painted = 0;
  for (size_t i = 0; i < b.merged->trust_mask.size(); ++i) {
    if (!b.merged->trust_mask[i]) continue;
    ++painted;
    ASSERT_TRUE(near_rgb(&b.merged->texture.pixels[i * 3], kRed)) << "no green from view 1";
  }
  EXPECT_GT(painted, 500u);
}

// An empty image contributes nothing: its bake stays empty and the merge ignores it.
TEST(RenderStages, EmptyViewImageContributesNothing) {
  const Baked b = bake_and_merge(custom_views({0, 0}, {0, 180}), {solid(64, kGreen), Image{}}, 64);
  ASSERT_TRUE(b.merged);
  EXPECT_TRUE((*b.bakes)[1].texture.empty());
  ASSERT_EQ(b.merged->views.size(), 1u) << "only the view with a bake is merged";
  for (size_t i = 0; i < b.merged->trust_mask.size(); ++i)
    if (b.merged->trust_mask[i]) {
      ASSERT_TRUE(near_rgb(&b.merged->texture.pixels[i * 3], kGreen));
    }
}

TEST(RenderStages, BakeAndMergeRefuseBadInputs) {
  auto views = custom_views({0, 0}, {0, 180});
  const auto bake_error = [&](std::shared_ptr<const mesh::Mesh> m, stages::ImageList images) {
    pipeline::StageRunner bake = runner("bake_views");
    bake.input<mesh::Mesh>("mesh", m).input<render::ViewSet>("views", views);
    bake.input<stages::ImageList>("images", std::move(images)).param("texture_size", 32);
    return error_of([&] { bake.run(); });
  };
  EXPECT_NE(bake_error(smooth_sphere(), {solid(32, kWhite)}).find("got 1 images for 2 views"),
            std::string::npos);
  mesh::Mesh bare = *smooth_sphere();
  bare.uvs.clear();
  bare.uv_faces.clear();
  EXPECT_NE(bake_error(std::make_shared<const mesh::Mesh>(bare), {Image{}, Image{}}).find("no UVs"),
            std::string::npos);

  pipeline::StageRunner bake = runner("bake_views");
  EXPECT_NE(error_of([&] { bake.param("angle_threshold", 91.0); }).find("/params/angle_threshold"),
            std::string::npos);
  EXPECT_NE(error_of([&] { bake.param("method", "splat"); }).find("/params/method"),
            std::string::npos);
  bake.input<mesh::Mesh>("mesh", smooth_sphere()).input<render::ViewSet>("views", views);
  EXPECT_NE(error_of([&] { bake.run(); }).find("input \"images\" is not connected"),
            std::string::npos);

  pipeline::StageRunner merge = runner("merge_views");
  merge.input<stages::BakeList>("bakes", stages::BakeList(2))
      .input<render::ViewSet>("views", views);
  EXPECT_NE(error_of([&] { merge.run(); }).find("nothing to merge"), std::string::npos);
  EXPECT_NE(error_of([&] { merge.param("bake_exp", -1.0); }).find("/params/bake_exp"),
            std::string::npos);
}

}  // namespace
}  // namespace gen3d::test

namespace gen3d::test {
namespace {

// The result preview: a red-textured sphere renders red inside its silhouette, white outside.
TEST(RenderStages, RenderAlbedoShowsTheTexturedResult) {
  mesh::Mesh m = *smooth_sphere();
  m.texture = std::make_shared<const Image>(solid(8, kRed));
  pipeline::StageRunner r = runner("render_albedo");
  r.input<mesh::Mesh>("mesh", std::make_shared<const mesh::Mesh>(std::move(m)));
  r.input<render::ViewSet>("views", level_views({0, 45})).param("resolution", 64);
  r.run();
  const auto maps = r.output<stages::ImageList>("maps");
  ASSERT_EQ(maps->size(), 2u);
  for (const Image& img : *maps) {
    EXPECT_TRUE(near_rgb(img.at(32, 32), kRed)) << "centre";
    EXPECT_TRUE(near_rgb(img.at(1, 1), kWhite)) << "corner";
  }
}

}  // namespace
}  // namespace gen3d::test

namespace gen3d::test {
namespace {

// With the fit input, an exactly registered reference bakes with the narrow edge window and a
// loose one with the reference's; without it the window is the reference's (render_size 1024:
// half-size 4). An exact fit keeps texels the wide window throws away.
TEST(RenderStages, AnExactlyRegisteredReferenceBakesWithTheNarrowEdgeWindow) {
  auto views = custom_views({0, 0}, {0, 180});
  const auto bake = [&](std::optional<double> iou) {
    pipeline::StageRunner r = runner("bake_views");
    r.input<mesh::Mesh>("mesh", smooth_sphere()).input<render::ViewSet>("views", views);
    r.input<stages::ImageList>("images", stages::ImageList{solid(128, kRed), Image{}});
    r.param("texture_size", 128).param("render_size", 1024);
    if (iou) r.input<stages::ReferenceFit>("fit", stages::ReferenceFit{*iou});
    r.run();
    size_t texels = 0;
    const auto& bp = (*r.output<stages::BakeList>("bakes"))[0];
    for (float c : bp.cos.pixels) texels += c > 0;
    return std::pair{r.profiler().counter_totals().at("bake.edge_window"), texels};
  };
  const auto [none, none_texels] = bake(std::nullopt);
  const auto [loose, loose_texels] = bake(0.9);
  const auto [exact, exact_texels] = bake(0.99);
  EXPECT_EQ(none, 4.0);
  EXPECT_EQ(loose, 4.0);
  EXPECT_EQ(exact, 1.0);
  EXPECT_EQ(loose_texels, none_texels);
  EXPECT_GT(exact_texels, none_texels);
}

}  // namespace
}  // namespace gen3d::test
