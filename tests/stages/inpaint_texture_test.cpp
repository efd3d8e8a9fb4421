// The inpaint_texture stage run alone through StageRunner on a small sphere built in code, its
// merged bake made by bake_views and merge_views from a red front view and a blue back view.

#include <cmath>
#include <memory>
#include <string>
#include <vector>

#include <gtest/gtest.h>

#include "pipeline/error.h"
#include "pipeline/stage_runner.h"
#include "render/rasterizer.h"
#include "render/surface_fill.h"
#include "stage_test_helpers.h"

namespace gen3d::test {
namespace {

constexpr int kSize = 64;  // view images and texture

std::shared_ptr<const render::MergeResult> red_front_blue_back() {
  static const auto m =
      bake_and_merge(level_views({0, 180}), {solid(kSize, kRed), solid(kSize, kBlue)}, kSize)
          .merged;
  return m;
}

std::vector<uint8_t> chart_mask() {
  const render::Raster uv = render::rasterize_uv(*smooth_sphere(), kSize, kSize);
  std::vector<uint8_t> chart(uv.pixel_count());
  for (size_t i = 0; i < chart.size(); ++i) chart[i] = uv.face_id[i] != 0;
  return chart;
}

size_t count(const std::vector<uint8_t>& mask) {
  size_t n = 0;
  for (uint8_t m : mask) n += m != 0;
  return n;
}

// Filled from red and blue only, every texel is a red-blue blend: no black bleeds in anywhere.
void expect_red_blue_blends(const Image& tex, const std::vector<uint8_t>& where, float tol) {
  size_t bad = 0;
  for (size_t i = 0; i < where.size(); ++i) {
    if (!where[i]) continue;
    const float* p = &tex.pixels[i * 3];
    bad += !(p[1] <= tol && std::fabs(p[0] + p[2] - 1.0f) <= tol);
  }
  EXPECT_EQ(bad, 0u) << "texels that are not a red/blue blend";
}

TEST(InpaintTexture, HarmonicFillBlendsTheSeenColoursAndMapsTheSources) {
  pipeline::StageRunner r = runner("inpaint_texture");
  r.input<mesh::Mesh>("mesh", smooth_sphere())
      .input<render::MergeResult>("merged", red_front_blue_back());
  r.param("fill", "harmonic");
  r.run();
  const auto tex = r.output<Image>("texture");
  const auto report = r.output<render::InpaintReport>("report");
  ASSERT_TRUE(tex && report);
  expect_red_blue_blends(*tex, chart_mask(), 0.02f);
  ASSERT_EQ(report->sources.size(), static_cast<size_t>(kSize) * kSize);
  const Image sources = render::source_colors(report->sources, kSize);
  ASSERT_EQ(sources.width, kSize);
  for (size_t i = 0; i < report->sources.size(); ++i)  // seen texels are green, others not
    EXPECT_EQ(sources.pixels[i * 3 + 1] == 0.75f, report->sources[i] == 1) << i;
  size_t view = 0;
  for (uint8_t s : report->sources) view += s == 1;
  EXPECT_EQ(view, report->view_texels);
  const auto counters = r.profiler().counter_totals();
  EXPECT_EQ(counters.count("inpaint.mirrored_texels"), 1u);
  pipeline::StageRunner bad = runner("inpaint_texture");
  bad.input<mesh::Mesh>("mesh", smooth_sphere())
      .input<render::MergeResult>("merged", red_front_blue_back());
  EXPECT_NE(error_of([&] { bad.param("fill", "nearest").run(); }).find("fill"), std::string::npos);
}

TEST(InpaintTexture, FillsTheChartsFromThePaintedTexels) {
  const auto m = red_front_blue_back();
  const Inpainted out = inpaint(m);
  ASSERT_TRUE(out.mesh && out.texture && out.report);
  EXPECT_EQ(out.mesh->texture, out.texture) << "the mesh carries the new texture";
  EXPECT_TRUE(out.mesh->colors.empty());
  EXPECT_EQ(out.mesh->faces, smooth_sphere()->faces);
  ASSERT_EQ(out.texture->width, kSize);
  ASSERT_EQ(out.texture->height, kSize);
  ASSERT_EQ(out.texture->channels, 3);

  const std::vector<uint8_t> chart = chart_mask();
  const render::InpaintReport& r = *out.report;
  EXPECT_EQ(r.chart_texels, count(chart));
  EXPECT_EQ(r.view_texels, count(m->trust_mask));
  EXPECT_LT(r.view_texels, r.chart_texels) << "the views leave holes to fill";
  EXPECT_GT(r.vertex_texels, 0u);
  EXPECT_EQ(r.view_texels + r.vertex_texels + r.image_texels, r.chart_texels);

  for (size_t i = 0; i < m->trust_mask.size(); ++i) {
    if (!m->trust_mask[i]) continue;
    for (int c = 0; c < 3; ++c)
      ASSERT_EQ(out.texture->pixels[i * 3 + c], m->texture.pixels[i * 3 + c]) << "kept " << i;
  }
  // Every texel, charts, gutter and background, holds a blend of what the views painted.
  expect_red_blue_blends(*out.texture, std::vector<uint8_t>(chart.size(), 1), 0.02f);
}

TEST(InpaintTexture, OptionsChangeWhatFillsTheHoles) {
  const auto m = red_front_blue_back();
  const Inpainted no_vertex = inpaint(m, {{"vertex_inpaint", false}, {"algorithm", "telea"}});
  EXPECT_EQ(no_vertex.report->vertex_texels, 0u);
  EXPECT_EQ(no_vertex.report->view_texels + no_vertex.report->image_texels,
            no_vertex.report->chart_texels)
      << "image inpainting fills what vertex propagation would have";
  expect_red_blue_blends(*no_vertex.texture, chart_mask(), 0.02f);

  EXPECT_EQ(inpaint(m, {{"gutter", 0}}).report->gutter_texels, 0u);
  EXPECT_GT(inpaint(m, {{"gutter", 4}}).report->gutter_texels, 0u);

  // The reference's order: 8-bit truncation, then inpainting of the whole image.
  const Inpainted ref = inpaint(m, {{"method", "reference"}});
  EXPECT_EQ(ref.report->view_texels, count(m->trust_mask));
  EXPECT_GT(ref.report->image_texels, 0u);
  ASSERT_EQ(ref.texture->width, kSize);
  expect_red_blue_blends(*ref.texture, chart_mask(), 2.0f / 255);
}

// inpaint_texture alone against fill_surface feeding inpaint_texture, with the same parameters.
struct SplitRun {
  Inpainted single, split;
};

SplitRun single_and_split(std::shared_ptr<const render::MergeResult> merged,
                          const std::string& fill, const std::string& algorithm) {
  SplitRun out;
  pipeline::StageRunner one = runner("inpaint_texture");
  one.input<mesh::Mesh>("mesh", smooth_sphere()).input<render::MergeResult>("merged", merged);
  one.param("fill", fill).param("algorithm", algorithm);
  one.run();
  out.single = {one.output<mesh::Mesh>("mesh"), one.output<Image>("texture"),
                one.output<render::InpaintReport>("report")};

  pipeline::StageRunner fill_node = runner("fill_surface");
  fill_node.input<mesh::Mesh>("mesh", smooth_sphere()).input<render::MergeResult>("merged", merged);
  fill_node.param("method", fill);
  fill_node.run();
  const auto filled = fill_node.output<render::SurfaceFillResult>("filled");
  EXPECT_TRUE(filled);
  pipeline::StageRunner finish = runner("inpaint_texture");
  finish.input<mesh::Mesh>("mesh", smooth_sphere())
      .input<render::MergeResult>("merged", merged)
      .input<render::SurfaceFillResult>("filled", filled);
  finish.param("fill", "none").param("algorithm", algorithm);
  finish.run();
  out.split = {finish.output<mesh::Mesh>("mesh"), finish.output<Image>("texture"),
               finish.output<render::InpaintReport>("report")};
  return out;
}

TEST(InpaintTexture, AFillNodeUpstreamGivesTheSameTextureAsOneNode) {
  // Red from the front and blue from the right: most of the sphere is left to fill.
  const auto merged =
      bake_and_merge(level_views({0, 90}), {solid(kSize, kRed), solid(kSize, kBlue)}, kSize).merged;
  for (const std::string fill : {"harmonic", "propagate"})
    for (const std::string algorithm : {"ns", "telea"}) {
      SCOPED_TRACE(fill + " " + algorithm);
      const SplitRun run = single_and_split(merged, fill, algorithm);
      ASSERT_TRUE(run.single.texture && run.split.texture);
      EXPECT_EQ(run.single.texture->pixels, run.split.texture->pixels);
      const render::InpaintReport &a = *run.single.report, &b = *run.split.report;
      EXPECT_GT(a.vertex_texels, 0u);
      EXPECT_EQ(a.sources, b.sources);
      EXPECT_EQ(a.chart_texels, b.chart_texels);
      EXPECT_EQ(a.view_texels, b.view_texels);
      EXPECT_EQ(a.vertex_texels, b.vertex_texels);
      EXPECT_EQ(a.image_texels, b.image_texels);
      EXPECT_EQ(a.gutter_texels, b.gutter_texels);
      EXPECT_EQ(a.vertices_unreached, b.vertices_unreached);
      EXPECT_EQ(a.mirrored_texels, b.mirrored_texels);
      EXPECT_EQ(a.symmetry_found, b.symmetry_found);
      EXPECT_EQ(a.fill_iterations, b.fill_iterations);
    }
}

TEST(FillSurface, TheMeshsOwnUvsAreUsedOnlyWhenTheirFacesMatch) {
  // Red from the front, blue from the right; as authored, the sphere's UVs fold its atlas in two
  // (u and u + 0.5 share a texel), so much of the unseen half takes what its twin showed.
  const auto merged =
      bake_and_merge(level_views({0, 90}), {solid(kSize, kRed), solid(kSize, kBlue)}, kSize).merged;
  const auto fill = [&](std::shared_ptr<const mesh::Mesh> authored,
                        const std::string& method = "harmonic") {
    pipeline::StageRunner r = runner("fill_surface");
    r.input<mesh::Mesh>("mesh", smooth_sphere()).input<render::MergeResult>("merged", merged);
    if (authored) r.input<mesh::Mesh>("authored", authored);
    r.param("method", method);
    r.run();
    return std::pair{r.output<render::SurfaceFillResult>("filled"),
                     r.profiler().counter_totals().at("inpaint.shared_texels")};
  };
  mesh::Mesh folded = *smooth_sphere();
  for (auto& t : folded.uvs) t[0] = std::fmod(2.0f * t[0], 1.0f);
  const auto [plain, none] = fill(nullptr);
  const auto [shared, some] = fill(std::make_shared<const mesh::Mesh>(folded));
  EXPECT_EQ(none, 0.0);
  EXPECT_GT(some, 0.0);
  EXPECT_NE(plain->colors, shared->colors);
  // Whichever the fill: it is evidence, not a guess.
  EXPECT_EQ(fill(std::make_shared<const mesh::Mesh>(folded), "propagate").second, some);
  // Other faces (the last two swapped): the authored UVs are not used, with a warning.
  mesh::Mesh other = folded;
  std::swap(other.faces.front(), other.faces.back());
  const auto [ignored, zero] = fill(std::make_shared<const mesh::Mesh>(other));
  EXPECT_EQ(zero, 0.0);
  EXPECT_EQ(ignored->colors, plain->colors);
}

TEST(InpaintTexture, FillParametersMovedUpstreamAreRefusedByName) {
  const auto merged = red_front_blue_back();
  pipeline::StageRunner fill_node = runner("fill_surface");
  fill_node.input<mesh::Mesh>("mesh", smooth_sphere()).input<render::MergeResult>("merged", merged);
  fill_node.run();
  const auto filled = fill_node.output<render::SurfaceFillResult>("filled");
  const auto finish = [&](const char* param, const nlohmann::json& value) {
    pipeline::StageRunner r = runner("inpaint_texture");
    r.input<mesh::Mesh>("mesh", smooth_sphere())
        .input<render::MergeResult>("merged", merged)
        .input<render::SurfaceFillResult>("filled", filled);
    r.param("fill", "none").param(param, value);
    return error_of([&] { r.run(); });
  };
  EXPECT_NE(finish("fill", "propagate").find("fill.method=propagate"), std::string::npos);
  EXPECT_NE(finish("symmetry", false).find("fill.symmetry=false"), std::string::npos);
  EXPECT_NE(finish("max_iterations", 5).find("fill.max_iterations=5"), std::string::npos);
  EXPECT_NE(finish("vertex_inpaint", false).find("fill.method=none"), std::string::npos);
  EXPECT_NE(finish("method", "reference").find("charts"), std::string::npos);
  EXPECT_EQ(finish("algorithm", "telea"), "");
  // A fill made for another texture size is refused, not misread.
  render::SurfaceFillResult other = *filled;
  other.size = kSize * 2;
  pipeline::StageRunner r = runner("inpaint_texture");
  r.input<mesh::Mesh>("mesh", smooth_sphere())
      .input<render::MergeResult>("merged", merged)
      .input<render::SurfaceFillResult>(
          "filled", std::make_shared<const render::SurfaceFillResult>(std::move(other)));
  r.param("fill", "none");
  EXPECT_NE(error_of([&] { r.run(); }).find("128 x 128"), std::string::npos);
}

TEST(InpaintTexture, RefusesBadInputs) {
  pipeline::StageRunner r = runner("inpaint_texture");
  EXPECT_NE(error_of([&] { r.param("radius", 0.5); }).find("/params/radius"), std::string::npos);
  EXPECT_NE(error_of([&] { r.param("gutter", 65); }).find("/params/gutter"), std::string::npos);
  EXPECT_NE(error_of([&] { r.param("algorithm", "fast"); }).find("/params/algorithm"),
            std::string::npos);
  EXPECT_THROW(r.param("vertex_inpaint", "yes"), pipeline::ConfigError);
  r.input<mesh::Mesh>("mesh", smooth_sphere());
  EXPECT_NE(error_of([&] { r.run(); }).find("input \"merged\" is not connected"),
            std::string::npos);
}

}  // namespace
}  // namespace gen3d::test
