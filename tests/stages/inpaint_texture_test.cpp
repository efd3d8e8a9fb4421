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
  const auto sources = r.output<Image>("sources");
  ASSERT_TRUE(tex && report && sources);
  expect_red_blue_blends(*tex, chart_mask(), 0.02f);
  ASSERT_EQ(sources->width, kSize);
  ASSERT_EQ(report->sources.size(), static_cast<size_t>(kSize) * kSize);
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
