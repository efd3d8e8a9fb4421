// Inpainting: the reference's vertex propagation and NS inpaint bit for bit (golden), and the fast
// chart-restricted method's guarantees.

#include <gtest/gtest.h>

#include <algorithm>
#include <cmath>

#include "golden_support.h"
#include "mesh/vertex_inpaint.h"
#include "render/rasterizer.h"
#include "render/surface_fill.h"
#include "render/texture_inpaint.h"

namespace gen3d::render {
namespace {

using testing::GoldenDir;

image::Image image_from(const gen3d::test::NpyArray& a) {
  image::Image img(static_cast<int>(a.shape[1]), static_cast<int>(a.shape[0]),
                   a.shape.size() > 2 ? static_cast<int>(a.shape[2]) : 1);
  img.pixels = a.as_float();
  return img;
}

std::vector<uint8_t> mask_from(const cv::Mat& png) {
  return std::vector<uint8_t>(png.data, png.data + png.total());
}

void expect_close(const image::Image& got, const image::Image& want, float tol, const char* what) {
  ASSERT_EQ(got.pixels.size(), want.pixels.size()) << what;
  size_t bad = 0;
  float worst = 0;
  for (size_t i = 0; i < got.pixels.size(); ++i) {
    const float d = std::fabs(got.pixels[i] - want.pixels[i]);
    worst = std::max(worst, d);
    bad += d > tol;
  }
  EXPECT_EQ(bad, 0u) << what << ": worst difference " << worst;
}

TEST(VertexInpaintGolden, UnitCaseWithRoundingTies) {
  GoldenDir g;
  if (!g.has("vinpaint_unit_vtx_uv.npy")) GTEST_SKIP() << "no vinpaint_unit files in " << g.dir();
  mesh::Mesh m;
  const auto pos = g.npy("vinpaint_unit_vtx_pos.npy").as_float();
  const auto uv = g.npy("vinpaint_unit_vtx_uv.npy").as_float();
  const auto faces = g.npy("vinpaint_unit_faces.npy").as_int();
  for (size_t i = 0; i + 2 < pos.size(); i += 3)
    m.positions.push_back({pos[i], pos[i + 1], pos[i + 2]});
  for (size_t i = 0; i + 1 < uv.size(); i += 2) m.uvs.push_back({uv[i], uv[i + 1]});
  for (size_t i = 0; i + 2 < faces.size(); i += 3)
    m.faces.push_back({uint32_t(faces[i]), uint32_t(faces[i + 1]), uint32_t(faces[i + 2])});
  m.uv_faces = m.faces;
  image::Image tex = image_from(g.npy("vinpaint_unit_in_texture.npy"));
  std::vector<uint8_t> mask = mask_from(g.png("vinpaint_unit_in_mask.png"));
  mesh::vertex_inpaint(m, tex, mask, /*v_flipped=*/false);
  EXPECT_EQ(mask, mask_from(g.png("vinpaint_unit_out_mask.png")));
  expect_close(tex, image_from(g.npy("vinpaint_unit_out_texture.npy")), 0.0f, "unit texture");
}

TEST(VertexInpaintGolden, BakedTextureThenReferenceInpaint) {
  GoldenDir g;
  if (!g.ok() || !g.has("bake_texture.npy") || !g.has("inpaint_vertex_texture.npy"))
    GTEST_SKIP() << "no inpaint files in " << g.dir();
  const mesh::Mesh m = g.mesh();
  const image::Image merged = image_from(g.npy("bake_texture.npy"));
  const std::vector<uint8_t> trust = mask_from(g.png("bake_trust_mask.png"));

  image::Image tex = merged;
  std::vector<uint8_t> mask = trust;
  mesh::vertex_inpaint(m, tex, mask, /*v_flipped=*/true);
  EXPECT_EQ(mask, mask_from(g.png("inpaint_vertex_mask.png")));
  // Bit for bit: a last-bit difference turns into a whole step where the 8-bit truncation before
  // cv::inpaint meets an integer, and the inpainting spreads it (seen at texture sizes 64 and 100).
  expect_close(tex, image_from(g.npy("inpaint_vertex_texture.npy")), 0.0f, "vertex texture");

  if (!g.has("inpaint_final.png")) return;
  InpaintOptions options;
  options.method = "reference";
  const image::Image final_tex = inpaint_texture(m, merged, trust, nullptr, options);
  const cv::Mat want = g.png("inpaint_final.png");
  const std::vector<uint8_t> got = [&] {
    std::vector<uint8_t> v(final_tex.pixels.size());
    for (size_t i = 0; i < v.size(); ++i)
      v[i] = static_cast<uint8_t>(std::lround(final_tex.pixels[i] * 255.0f));
    return v;
  }();
  ASSERT_EQ(got.size(), want.total() * want.channels());
  size_t diff = 0;
  for (size_t i = 0; i < got.size(); ++i) diff += got[i] != want.data[i];
  EXPECT_EQ(diff, 0u) << "texels differing from inpaint_final.png";
}

TEST(TextureInpaint, ChartMethodFillsEveryChartTexelFromPaintedNeighbours) {
  GoldenDir g;
  if (!g.ok() || !g.has("bake_texture.npy")) GTEST_SKIP() << "no bake files in " << g.dir();
  const mesh::Mesh m = g.mesh();
  const image::Image merged = image_from(g.npy("bake_texture.npy"));
  std::vector<uint8_t> trust = mask_from(g.png("bake_trust_mask.png"));
  const int t = merged.width;
  const Raster uv = rasterize_uv(m, t, t);
  std::vector<uint8_t> charts(uv.pixel_count());
  for (size_t i = 0; i < charts.size(); ++i) charts[i] = uv.face_id[i] != 0;

  InpaintReport report;
  const image::Image out = inpaint_texture(m, merged, trust, &uv, {}, &report);
  EXPECT_GT(report.view_texels, 0u);
  EXPECT_GT(report.chart_texels, 0u);
  // Painted texels are untouched; every texel gets a finite colour in [0, 1].
  for (size_t i = 0; i < trust.size(); ++i) {
    if (trust[i]) {
      for (int c = 0; c < 3; ++c) ASSERT_EQ(out.pixels[i * 3 + c], merged.pixels[i * 3 + c]);
    }
  }
  for (float v : out.pixels) ASSERT_TRUE(std::isfinite(v) && v >= 0.0f && v <= 1.0f);
  // Filled chart texels resemble the painted ones (the synthetic views are smooth ramps): the
  // median absolute difference to the reference's whole-image inpaint stays small. Not the mean:
  // small textures leave a dozen such texels, and one at a seam, where the reference's inpaint
  // mixes in a neighbouring chart, would decide it.
  InpaintOptions ref;
  ref.method = "reference";
  const image::Image want = inpaint_texture(m, merged, trust, nullptr, ref);
  std::vector<float> differences;
  for (size_t i = 0; i < charts.size(); ++i) {
    if (charts[i] && !trust[i]) {
      for (int c = 0; c < 3; ++c)
        differences.push_back(std::fabs(out.pixels[i * 3 + c] - want.pixels[i * 3 + c]));
    }
  }
  if (!differences.empty()) {
    auto middle = differences.begin() + differences.size() / 2;
    std::nth_element(differences.begin(), middle, differences.end());
    EXPECT_LT(*middle, 0.05) << "over " << differences.size() / 3 << " filled chart texels";
  }
}

TEST(TextureInpaint, NothingPaintedStillGivesAFullTexture) {
  GoldenDir g;
  if (!g.ok()) GTEST_SKIP();
  const mesh::Mesh m = g.mesh();
  const int t = 32;
  image::Image blank(t, t, 3);
  std::vector<uint8_t> trust(t * t, 0);
  const Raster uv = rasterize_uv(m, t, t);
  const image::Image out = inpaint_texture(m, blank, trust, &uv);
  for (float v : out.pixels) ASSERT_TRUE(std::isfinite(v));
}

}  // namespace
}  // namespace gen3d::render

namespace gen3d::render {
namespace {

// Two separate quads side by side in UV space; the views painted the left one red. The right one,
// which no view reached, takes the mean colour of the reached surface through the vertex colours,
// so nothing is left for image inpainting (which would smear unrelated atlas neighbours in).
TEST(TextureInpaint, PartsNoViewReachedTakeTheReachedMeanColour) {
  mesh::Mesh m;
  m.positions = {{0, 0, 0}, {1, 0, 0}, {1, 1, 0}, {0, 1, 0},
                 {3, 0, 0}, {4, 0, 0}, {4, 1, 0}, {3, 1, 0}};
  m.faces = {{0, 1, 2}, {0, 2, 3}, {4, 5, 6}, {4, 6, 7}};
  m.uvs = {{0.05f, 0.1f}, {0.45f, 0.1f}, {0.45f, 0.9f}, {0.05f, 0.9f},
           {0.55f, 0.1f}, {0.95f, 0.1f}, {0.95f, 0.9f}, {0.55f, 0.9f}};
  m.uv_faces = m.faces;
  const int t = 64;
  const Raster uv = rasterize_uv(m, t, t);
  image::Image tex(t, t, 3);
  std::vector<uint8_t> trust(t * t, 0);
  for (int y = 0; y < t; ++y)
    for (int x = 0; x < t / 2; ++x) {
      const size_t i = static_cast<size_t>(y) * t + x;
      if (!uv.face_id[i]) continue;
      tex.at(x, y)[0] = 1.0f;
      trust[i] = 1;
    }
  InpaintReport report;
  const image::Image out = inpaint_texture(m, tex, trust, &uv, {}, &report);
  EXPECT_EQ(report.vertices_unreached, 4u);
  EXPECT_EQ(report.image_texels, 0u);
  size_t right = 0;
  for (int y = 0; y < t; ++y)
    for (int x = t / 2; x < t; ++x) {
      if (!uv.face_id[static_cast<size_t>(y) * t + x]) continue;
      const float* p = out.at(x, y);
      EXPECT_NEAR(p[0], 1.0f, 1e-4f) << x << "," << y;
      EXPECT_NEAR(p[1], 0.0f, 1e-4f);
      ++right;
    }
  EXPECT_GT(right, 100u);
}

// Two quads of two materials read the same UV vertices, each in its own texture (a mesh's own
// UVs often share texture coordinates between parts). Their left halves were seen, red and blue:
// each right half takes its own part's colour, though the UV vertices are the same.
TEST(TextureInpaint, PropagationColoursPositionsNotSharedUvVertices) {
  mesh::Mesh m;
  m.positions = {{0, 0, 0}, {1, 0, 0}, {1, 1, 0}, {0, 1, 0},
                 {3, 0, 0}, {4, 0, 0}, {4, 1, 0}, {3, 1, 0}};
  m.faces = {{0, 1, 2}, {0, 2, 3}, {4, 5, 6}, {4, 6, 7}};
  m.uvs = {{0.1f, 0.1f}, {0.9f, 0.1f}, {0.9f, 0.9f}, {0.1f, 0.9f}};
  m.uv_faces = {{0, 1, 2}, {0, 2, 3}, {0, 1, 2}, {0, 2, 3}};
  m.materials.resize(2);
  m.face_materials = {0, 0, 1, 1};
  const int t = 32;
  const Raster uv = rasterize_uv(m, t, 2 * t);
  image::Image tex(t, 2 * t, 3);
  std::vector<uint8_t> trust(2 * t * t, 0);
  for (int y = 0; y < 2 * t; ++y)
    for (int x = 0; x < t / 2; ++x) {
      const size_t i = static_cast<size_t>(y) * t + x;
      if (!uv.face_id[i]) continue;
      tex.at(x, y)[y < t ? 0 : 2] = 1.0f;
      trust[i] = 1;
    }
  InpaintOptions options;
  options.fill = "propagate";
  const image::Image out = inpaint_texture(m, tex, trust, &uv, options);
  size_t right = 0;
  for (int y = 0; y < 2 * t; ++y)
    for (int x = t / 2 + 1; x < t; ++x) {
      if (!uv.face_id[static_cast<size_t>(y) * t + x]) continue;
      const float* p = out.at(x, y);
      EXPECT_NEAR(p[0], y < t ? 1.0f : 0.0f, 1e-4f) << x << "," << y;
      EXPECT_NEAR(p[2], y < t ? 0.0f : 1.0f, 1e-4f) << x << "," << y;
      ++right;
    }
  EXPECT_GT(right, 100u);
}

// A texture per material, stacked (render/texture_tiles.h): each tile is filled from its own
// charts. Tile 0 has a red chart along its bottom rows, tile 1 a blue one a few rows below its
// top: the gutter and background of tile 1 take blue, though its first row touches tile 0's red.
TEST(TextureInpaint, EachMaterialsTileIsFilledOnItsOwn) {
  const int w = 32;
  const size_t n = static_cast<size_t>(w) * w;
  image::Image tex(w, 2 * w, 3, 0.0f);
  std::vector<uint8_t> trust(2 * n, 0);
  SurfaceFillResult filled;
  filled.size = w;
  const auto chart = [&](size_t begin, size_t end, const mesh::Vec3& color) {
    filled.chart_runs.push_back(static_cast<uint32_t>(begin));
    filled.chart_runs.push_back(static_cast<uint32_t>(end));
    for (size_t i = begin; i < end; ++i) {
      trust[i] = 1;
      std::copy(color.begin(), color.end(), tex.pixels.begin() + i * 3);
    }
  };
  chart(24 * w, n, {1, 0, 0});              // tile 0, rows 24 .. 31
  chart(n + 4 * w, n + 12 * w, {0, 0, 1});  // tile 1, rows 4 .. 11
  InpaintReport report;
  const image::Image out = inpaint_texture(tex, trust, filled, {}, &report);
  ASSERT_EQ(out.height, 2 * w);
  for (int y = 0; y < 2 * w; ++y)
    for (int x = 0; x < w; ++x) {
      const float* c = out.at(x, y);
      if (y < w) {
        EXPECT_NEAR(c[0], 1.0f, 1e-6f) << x << "," << y;
        EXPECT_NEAR(c[2], 0.0f, 1e-6f) << x << "," << y;
      } else {
        EXPECT_NEAR(c[0], 0.0f, 1e-6f) << x << "," << y;
        EXPECT_NEAR(c[2], 1.0f, 1e-6f) << x << "," << y;
      }
    }
  EXPECT_EQ(report.chart_texels, 16u * w);
  EXPECT_EQ(report.view_texels, 16u * w);
  EXPECT_GT(report.gutter_texels, 0u);
  ASSERT_EQ(report.sources.size(), 2 * n);
  EXPECT_EQ(report.sources[n], static_cast<uint8_t>(TexelSource::gutter)) << "tile 1, row 0";
}

}  // namespace
}  // namespace gen3d::render
