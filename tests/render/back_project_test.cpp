#include "render/back_project.h"

#include <gtest/gtest.h>
#include <oneapi/tbb/task_arena.h>

#include <cmath>
#include <limits>

#include "render/error.h"
#include "render/merge.h"
#include "test_meshes.h"

namespace gen3d::render {
namespace {

// A smooth synthetic "generated view": R = column ramp, G = row ramp, B = constant.
image::Image ramp_view(int w, int h) {
  image::Image img(w, h, 3);
  for (int y = 0; y < h; ++y) {
    for (int x = 0; x < w; ++x) {
      float* p = img.at(x, y);
      p[0] = x / float(w - 1);
      p[1] = y / float(h - 1);
      p[2] = 0.25f;
    }
  }
  return img;
}

TEST(BackProject, KernelHalfSize) {
  EXPECT_EQ(bake_kernel_half_size(2048), 8);
  EXPECT_EQ(bake_kernel_half_size(512), 2);
  EXPECT_EQ(bake_kernel_half_size(256), 1);
  EXPECT_EQ(bake_kernel_half_size(255), 0);
  EXPECT_EQ(bake_kernel_half_size(128), 0);
}

TEST(BackProject, DeterministicAcrossThreadCounts) {
  const mesh::Mesh m = testing::as_loaded(testing::bumpy_sphere(30, 40));
  const Camera cam{.elev = 10.0, .azim = 60.0};
  const Raster r = rasterize(m, cam, 256, 256);
  const image::Image view = ramp_view(256, 256);
  BakeOptions o;
  o.texture_size = 128;
  o.render_size = 512;
  const BackProjection a = back_project(m, r, cam, view, o);
  BackProjection b;
  tbb::task_arena one(1);
  one.execute([&] { b = back_project(m, r, cam, view, o); });
  EXPECT_EQ(a.texture.pixels, b.texture.pixels);
  EXPECT_EQ(a.cos.pixels, b.cos.pixels);
  size_t painted = 0;
  for (float c : a.cos.pixels) painted += c > 0.0f;
  EXPECT_GT(painted, 500u);
  for (float c : a.cos.pixels) {
    EXPECT_GE(c, 0.0f);
    EXPECT_LE(c, 1.0f);
  }
}

TEST(BackProject, ConstantViewGivesConstantTexture) {
  const mesh::Mesh m = testing::as_loaded(testing::bumpy_sphere(30, 40));
  const Camera cam;
  const Raster r = rasterize(m, cam, 200, 200);
  image::Image view(200, 200, 3, 0.0f);
  for (size_t i = 0; i < view.pixels.size(); i += 3) {
    view.pixels[i] = 0.2f;
    view.pixels[i + 1] = 0.4f;
    view.pixels[i + 2] = 0.6f;
  }
  BakeOptions o;
  o.texture_size = 64;
  const BackProjection bp = back_project(m, r, cam, view, o);
  size_t painted = 0;
  for (size_t t = 0; t < 64 * 64; ++t) {
    const float* p = &bp.texture.pixels[t * 3];
    if (p[0] == 0.0f && p[1] == 0.0f && p[2] == 0.0f) continue;
    ++painted;
    EXPECT_NEAR(p[0], 0.2f, 1e-5f);
    EXPECT_NEAR(p[1], 0.4f, 1e-5f);
    EXPECT_NEAR(p[2], 0.6f, 1e-5f);
  }
  EXPECT_GT(painted, 200u);
}

// A texture per material: the left half of the UV square is material 0, the right half material
// 1, each with a tile of its own (texture_tiles.h). Every pixel lands in its face's tile, where
// the same mesh as one material puts it in its one texture.
TEST(BackProject, EachMaterialHasItsTile) {
  mesh::Mesh one = testing::as_loaded(testing::bumpy_sphere(30, 40));
  mesh::Mesh two = one;
  two.materials.resize(2);
  for (const mesh::Tri& t : two.uv_faces) {
    const float u = (two.uvs[t[0]][0] + two.uvs[t[1]][0] + two.uvs[t[2]][0]) / 3;
    two.face_materials.push_back(u < 0.5f ? 0 : 1);
  }
  const Camera cam{.elev = 10.0, .azim = 60.0};
  const Raster r = rasterize(one, cam, 256, 256);
  const image::Image view = ramp_view(256, 256);
  BakeOptions o;
  o.texture_size = 64;
  const BackProjection a = back_project(one, r, cam, view, o);
  const BackProjection b = back_project(two, r, cam, view, o);
  ASSERT_EQ(b.texture.width, 64);
  ASSERT_EQ(b.texture.height, 128);
  ASSERT_EQ(b.cos.height, 128);
  const size_t n = 64 * 64;
  size_t painted[2] = {0, 0};
  for (size_t t = 0; t < n; ++t) {
    const bool in0 = b.cos.pixels[t] > 0, in1 = b.cos.pixels[n + t] > 0;
    if (in0) ++painted[0];
    if (in1) ++painted[1];
    if (in0 || in1) {
      EXPECT_GT(a.cos.pixels[t], 0.0f) << t;
    }
    if (in0 == in1) continue;  // both: a texel where the halves meet, their splats shared
    const size_t k = in0 ? t : n + t;
    for (int c = 0; c < 3; ++c)
      EXPECT_NEAR(b.texture.pixels[k * 3 + c], a.texture.pixels[t * 3 + c], 1e-5f) << t;
  }
  EXPECT_GT(painted[0], 100u);
  EXPECT_GT(painted[1], 100u);
}

// UVs repeat: moved by whole repeats, they splat into the same texels.
TEST(BackProject, UvsMovedByWholeRepeatsSplatAlike) {
  const mesh::Mesh m = testing::as_loaded(testing::bumpy_sphere(30, 40));
  mesh::Mesh moved = m;
  for (mesh::Vec2& uv : moved.uvs) uv = {uv[0] + 2.0f, uv[1] - 3.0f};
  const Camera cam{.elev = 10.0, .azim = 60.0};
  const Raster r = rasterize(m, cam, 256, 256);
  const image::Image view = ramp_view(256, 256);
  BakeOptions o;
  o.texture_size = 64;
  const BackProjection a = back_project(m, r, cam, view, o);
  const BackProjection b = back_project(moved, r, cam, view, o);
  ASSERT_EQ(a.texture.pixels.size(), b.texture.pixels.size());
  size_t painted = 0;
  for (size_t t = 0; t < a.cos.pixels.size(); ++t) {
    painted += a.cos.pixels[t] > 0;
    EXPECT_NEAR(b.cos.pixels[t], a.cos.pixels[t], 1e-3f) << t;
    for (int c = 0; c < 3; ++c)
      EXPECT_NEAR(b.texture.pixels[t * 3 + c], a.texture.pixels[t * 3 + c], 1e-3f) << t;
  }
  EXPECT_GT(painted, 500u);
}

// gather and back_project sample the same smooth image at the same surface points, so where
// both paint a texel with a trusted cosine, the colours agree closely.
TEST(BackProject, GatherAgreesWithSplatOnSmoothImage) {
  const mesh::Mesh m = testing::as_loaded(testing::bumpy_sphere(40, 60));
  const Camera cam{.elev = 0.0, .azim = 20.0};
  const int size = 256, tex = 64;
  const Raster r = rasterize(m, cam, size, size);
  const Raster uv = rasterize_uv(m, tex, tex);
  const image::Image view = ramp_view(size, size);
  BakeOptions bo;
  bo.texture_size = tex;
  bo.render_size = size;
  GatherOptions go;
  go.render_size = size;
  const BackProjection splat = back_project(m, r, cam, view, bo);
  const BackProjection gath = gather(m, uv, r, cam, view, go);
  size_t both = 0;
  double max_diff = 0;
  for (size_t t = 0; t < size_t(tex) * tex; ++t) {
    if (!(splat.cos.pixels[t] > 0.5f && gath.cos.pixels[t] > 0.5f)) continue;
    ++both;
    for (int c = 0; c < 2; ++c) {
      max_diff = std::max(max_diff, double(std::abs(splat.texture.pixels[t * 3 + c] -
                                                    gath.texture.pixels[t * 3 + c])));
    }
  }
  EXPECT_GT(both, 200u);
  EXPECT_LT(max_diff, 0.02);  // a few view pixels of the ramp
  // gather paints only texels whose surface is visible: the back of the sphere stays empty.
  size_t painted = 0;
  for (float c : gath.cos.pixels) painted += c > 0.0f;
  EXPECT_LT(painted, size_t(tex) * tex * 6 / 10);
}

TEST(BackProject, SparseEqualsDense) {
  const mesh::Mesh m = testing::as_loaded(testing::bumpy_sphere(30, 40));
  const ViewSet views = ViewSet::hunyuan6();
  BakeOptions o;
  o.texture_size = 96;
  o.render_size = 300;
  std::vector<BackProjection> dense;
  std::vector<SparseBackProjection> sparse;
  std::vector<double> weights;
  for (const View& v : views.views) {
    const Raster r = rasterize(m, v.camera, 300, 300);
    const image::Image view = ramp_view(300, 300);
    dense.push_back(back_project(m, r, v.camera, view, o));
    sparse.push_back(back_project_sparse(m, r, v.camera, view, o));
    weights.push_back(v.weight);
    // Expanding the sparse result gives the dense maps back.
    const SparseBackProjection& sp = sparse.back();
    std::vector<float> tex(dense.back().texture.pixels.size(), 0.0f), cos(96 * 96, 0.0f);
    for (size_t i = 0; i < sp.texel.size(); ++i) {
      for (int c = 0; c < 3; ++c) tex[sp.texel[i] * 3 + c] = sp.texture[i * 3 + c];
      cos[sp.texel[i]] = sp.cos[i];
    }
    EXPECT_EQ(tex, dense.back().texture.pixels);
    EXPECT_EQ(cos, dense.back().cos.pixels);
  }
  const MergeResult a = merge_fast(dense, weights);
  const MergeResult b = merge_fast(sparse, weights);
  EXPECT_EQ(a.texture.pixels, b.texture.pixels);
  EXPECT_EQ(a.trust_mask, b.trust_mask);
  ASSERT_EQ(a.views.size(), b.views.size());
  for (size_t v = 0; v < a.views.size(); ++v) {
    EXPECT_EQ(a.views[v].texels_with_weight, b.views[v].texels_with_weight);
    EXPECT_EQ(a.views[v].skipped, b.views[v].skipped);
  }
}

TEST(BackProject, BadInputsThrow) {
  const mesh::Mesh m = testing::bumpy_sphere(8, 12);
  const Raster r = rasterize(m, Camera{}, 32, 32);
  EXPECT_THROW(back_project(m, r, Camera{}, ramp_view(31, 32)), RenderError);
  BakeOptions o;
  o.texture_size = 1;
  EXPECT_THROW(back_project(m, r, Camera{}, ramp_view(32, 32), o), RenderError);
  mesh::Mesh no_uv = m;
  no_uv.uvs.clear();
  no_uv.uv_faces.clear();
  EXPECT_THROW(back_project(no_uv, r, Camera{}, ramp_view(32, 32)), RenderError);
}

TEST(Merge, SkipRuleAndNormalization) {
  const int T = 10;
  auto img = [&](int c, float v) { return image::Image(T, T, c, v); };
  std::vector<image::Image> tex = {img(3, 0.5f), img(3, 0.9f), img(3, 0.1f), img(3, 0.3f)};
  std::vector<image::Image> w = {img(1, 0.0f), img(1, 0.0f), img(1, 0.0f), img(1, 0.0f)};
  for (int t = 0; t < 50; ++t) w[0].pixels[t] = 1.0f;   // view 0 paints texels 0..49
  for (int t = 0; t < 100; ++t) w[1].pixels[t] = 1.0f;  // view 1: 50% new -> kept
  for (int t = 0; t < 100; ++t) w[2].pixels[t] = 0.5f;  // view 2: 100% painted -> skipped
  // view 3: no weighted texel at all -> ratio NaN -> kept (no effect)
  const MergeResult r = merge_fast(tex, w);
  ASSERT_EQ(r.views.size(), 4u);
  EXPECT_FALSE(r.views[0].skipped);
  EXPECT_FALSE(r.views[1].skipped);
  EXPECT_FLOAT_EQ(r.views[1].ratio, 0.5f);
  EXPECT_TRUE(r.views[2].skipped);
  EXPECT_FALSE(r.views[3].skipped);
  EXPECT_TRUE(std::isnan(r.views[3].ratio));
  EXPECT_FLOAT_EQ(r.texture.pixels[0], (0.5f + 0.9f) / 2.0f);
  EXPECT_FLOAT_EQ(r.texture.pixels[60 * 3], 0.9f);
  EXPECT_EQ(r.trust_mask[0], 255);
  EXPECT_EQ(r.trust_mask[99], 255);
  EXPECT_THROW(
      merge_fast(std::vector<image::Image>{img(3, 0)}, std::vector<image::Image>{img(3, 0)}),
      RenderError);
  EXPECT_THROW(merge_fast(std::vector<image::Image>{}, std::vector<image::Image>{}), RenderError);
}

TEST(Merge, BakeWeightIsWeightTimesCosToTheFourth) {
  image::Image cos(3, 1, 1);
  cos.pixels = {0.0f, 0.5f, 1.0f};
  const image::Image w = bake_weight(cos, 0.5);
  EXPECT_EQ(w.pixels[0], 0.0f);
  EXPECT_FLOAT_EQ(w.pixels[1], 0.5f * 0.0625f);
  EXPECT_FLOAT_EQ(w.pixels[2], 0.5f);
}

}  // namespace
}  // namespace gen3d::render
