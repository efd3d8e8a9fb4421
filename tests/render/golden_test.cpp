// Golden tests against the reference texgen data (shared/golden/texgen/README.md). Data-driven:
// sizes and views come from the directory's manifest.json; a file is skipped only if absent.

#include <gtest/gtest.h>

#include <cmath>
#include <cstring>

#include "golden_support.h"
#include "mesh/normals.h"
#include "render/back_project.h"
#include "render/camera.h"
#include "render/maps.h"
#include "render/merge.h"
#include "render/rasterizer.h"

namespace gen3d::render {
namespace {

using testing::GoldenDir;

// Builds names by appending (GCC 12 warns falsely, -Wrestrict, on "literal" + std::string).
template <class... Parts>
std::string cat(const Parts&... parts) {
  std::string s;
  (s.append(parts), ...);
  return s;
}

std::string vname(int k, const std::string& suffix) {
  return cat("v", std::to_string(k), "_", suffix);
}

TEST(GoldenTexgen, ProjectionMatrix) {
  GoldenDir g;
  GEN3D_REQUIRE_GOLDEN(g);
  GEN3D_REQUIRE_FILE(g, "proj.npy");
  const auto want = g.npy("proj.npy").as_float();
  const Mat4 got = g.base_camera().projection();
  ASSERT_EQ(want.size(), 16u);
  for (int i = 0; i < 16; ++i) EXPECT_EQ(got[i], want[i]) << "element " << i;
}

TEST(GoldenTexgen, ModelViewMatrices) {
  GoldenDir g;
  GEN3D_REQUIRE_GOLDEN(g);
  int compared = 0;
  for (const auto& v : g.views()) {
    if (!g.has(vname(v.index, "mv.npy"))) continue;
    const auto want = g.npy(vname(v.index, "mv.npy")).as_float();
    const Mat4 got = v.camera.model_view();
    ASSERT_EQ(want.size(), 16u);
    for (int i = 0; i < 16; ++i)
      EXPECT_NEAR(got[i], want[i], 1e-6f) << "view " << v.index << " element " << i;
    int exact = 0;
    for (int i = 0; i < 16; ++i) exact += got[i] == want[i];
    EXPECT_EQ(exact, 16) << "view " << v.index << ": model-view not bit-exact";
    ++compared;
  }
  if (compared == 0) GTEST_SKIP() << "no vK_mv.npy files";
}

TEST(GoldenTexgen, ClipCoordinates) {
  GoldenDir g;
  GEN3D_REQUIRE_GOLDEN(g);
  GEN3D_REQUIRE_MESH(g);
  const mesh::Mesh m = g.mesh();
  int compared = 0;
  for (const auto& v : g.views()) {
    if (!g.has(vname(v.index, "clip.npy"))) continue;
    const auto want = g.npy(vname(v.index, "clip.npy")).as_float();
    const auto got = clip_positions(m.positions, v.camera);
    ASSERT_EQ(want.size(), got.size() * 4);
    size_t exact = 0;
    float max_diff = 0;
    for (size_t i = 0; i < got.size(); ++i) {
      for (int c = 0; c < 4; ++c) {
        max_diff = std::max(max_diff, std::abs(got[i][c] - want[i * 4 + c]));
        exact += got[i][c] == want[i * 4 + c];
      }
    }
    EXPECT_LE(max_diff, 1e-6f) << "view " << v.index;
    EXPECT_EQ(exact, want.size()) << "view " << v.index << ": clip coordinates not bit-exact";
    ++compared;
  }
  if (compared == 0) GTEST_SKIP() << "no vK_clip.npy files";
}

TEST(GoldenTexgen, FaceIdsAndBarycentrics) {
  GoldenDir g;
  GEN3D_REQUIRE_GOLDEN(g);
  GEN3D_REQUIRE_MESH(g);
  const mesh::Mesh m = g.mesh();
  const int size = g.render_size();
  int compared = 0;
  for (const auto& v : g.views()) {
    const Raster r = rasterize(m, v.camera, size, size);
    if (g.has(vname(v.index, "findices.npy"))) {
      const auto want = g.npy(vname(v.index, "findices.npy"));
      ASSERT_EQ(want.shape, (std::vector<int64_t>{size, size}));
      const auto ids = want.as_int();
      size_t diff = 0;
      for (size_t p = 0; p < ids.size(); ++p) diff += ids[p] != r.face_id[p];
      EXPECT_EQ(diff, 0u) << "view " << v.index << ": face ids differ";
      ++compared;
    }
    if (g.has(vname(v.index, "bary.npy"))) {
      const auto want = g.npy(vname(v.index, "bary.npy")).as_float();
      ASSERT_EQ(want.size(), r.bary.size());
      float max_diff = 0;
      size_t exact = 0;
      for (size_t i = 0; i < want.size(); ++i) {
        max_diff = std::max(max_diff, std::abs(want[i] - r.bary[i]));
        exact += want[i] == r.bary[i];
      }
      EXPECT_LE(max_diff, 1e-5f) << "view " << v.index;
      RecordProperty(cat("bary_exact_v", std::to_string(v.index)),
                     std::to_string(exact) + "/" + std::to_string(want.size()));
      EXPECT_EQ(exact, want.size()) << "view " << v.index << " barycentrics not bit-exact";
      ++compared;
    }
  }
  if (compared == 0) GTEST_SKIP() << "no vK_findices/vK_bary files";
}

void compare_u8(const GoldenDir& g, const std::string& name, const std::vector<uint8_t>& got,
                int& compared);

// Compares a float map with a float .npy (<= tol) and with the 8-bit PNG (exact).
void compare_map(const GoldenDir& g, const image::Image& got, const std::string& stem, float tol,
                 int& compared) {
  if (g.has(stem + ".npy")) {
    const auto want = g.npy(stem + ".npy").as_float();
    ASSERT_EQ(want.size(), got.pixels.size()) << stem;
    float max_diff = 0;
    for (size_t i = 0; i < want.size(); ++i)
      max_diff = std::max(max_diff, std::abs(want[i] - got.pixels[i]));
    EXPECT_LE(max_diff, tol) << stem << ".npy";
    ++compared;
  }
  if (g.has(stem + ".png")) {
    const cv::Mat png = g.png(stem + ".png");
    ASSERT_EQ(png.total() * png.channels(), got.pixels.size()) << stem;
    const std::vector<uint8_t> u8 = to_u8(got);
    size_t diff = 0;
    for (size_t i = 0; i < u8.size(); ++i) diff += u8[i] != png.data[i];
    EXPECT_EQ(diff, 0u) << stem << ".png: 8-bit values differ";
    ++compared;
  }
}

TEST(GoldenTexgen, VertexNormals) {
  GoldenDir g;
  GEN3D_REQUIRE_GOLDEN(g);
  GEN3D_REQUIRE_MESH(g);
  GEN3D_REQUIRE_FILE(g, "vertex_normals_world.npy");
  const mesh::Mesh m = g.mesh();
  const auto want = g.npy("vertex_normals_world.npy").as_float();
  const auto got = mesh::vertex_normals_face_mean(m);
  ASSERT_EQ(want.size(), got.size() * 3);
  size_t exact = 0;
  float max_diff = 0;
  for (size_t i = 0; i < got.size(); ++i) {
    for (int c = 0; c < 3; ++c) {
      max_diff = std::max(max_diff, std::abs(got[i][c] - want[i * 3 + c]));
      exact += got[i][c] == want[i * 3 + c];
    }
  }
  EXPECT_LE(max_diff, 1e-6f);
  EXPECT_EQ(exact, want.size()) << "vertex normals not bit-exact";
}

TEST(GoldenTexgen, NormalAndPositionMaps) {
  GoldenDir g;
  GEN3D_REQUIRE_GOLDEN(g);
  GEN3D_REQUIRE_MESH(g);
  const mesh::Mesh m = g.mesh();
  const int size = g.render_size();
  const float scale = g.manifest().value("scale_factor", 1.15f);
  int compared = 0;
  for (const auto& v : g.views()) {
    const Raster r = rasterize(m, v.camera, size, size);
    compare_map(g, normal_map(m, r), vname(v.index, "normal"), 1e-5f, compared);
    compare_map(g, position_map(m, r, scale), vname(v.index, "position"), 1e-5f, compared);
    compare_u8(g, vname(v.index, "normal.png"), normal_map_u8(m, r), compared);
    compare_u8(g, vname(v.index, "position.png"), position_map_u8(m, r, scale), compared);
  }
  if (compared == 0) GTEST_SKIP() << "no normal/position map files";
}

// The synthetic "generated view" as the reference reads it: uint8 / 255.0 (float64) -> float32.
image::Image load_view(const GoldenDir& g, const std::string& name) {
  const cv::Mat png = g.png(name);
  image::Image img(png.cols, png.rows, png.channels());
  for (size_t i = 0; i < img.pixels.size(); ++i) {
    img.pixels[i] = static_cast<float>(png.data[i] / 255.0);
  }
  return img;
}

struct FloatDiff {
  float max_abs = 0;
  size_t support_mismatch = 0;  // texels with weight in one and not the other
};

FloatDiff compare_floats(const std::vector<float>& want, const std::vector<float>& got) {
  FloatDiff d;
  for (size_t i = 0; i < want.size(); ++i) {
    d.max_abs = std::max(d.max_abs, std::abs(want[i] - got[i]));
    d.support_mismatch += (want[i] != 0.0f) != (got[i] != 0.0f);
  }
  return d;
}

void compare_u8(const GoldenDir& g, const std::string& name, const std::vector<uint8_t>& got,
                int& compared) {
  if (!g.has(name)) return;
  const cv::Mat want = g.png(name);
  ASSERT_EQ(want.total() * want.channels(), got.size()) << name;
  size_t diff = 0;
  for (size_t i = 0; i < got.size(); ++i) diff += got[i] != want.data[i];
  EXPECT_EQ(diff, 0u) << name << ": " << diff << " of " << got.size() << " pixels differ";
  ++compared;
}

// Back-projects one golden case (prefix "" or "r512_") and compares every file present.
void check_back_projection(const GoldenDir& g, const mesh::Mesh& m, const std::string& prefix,
                           const testing::GoldenView& v, int render_size, int texture_size,
                           int& compared, BackProjection* result = nullptr) {
  const std::string stem = prefix + vname(v.index, "");
  if (!g.has(stem + "view_input.png")) return;
  const image::Image view = load_view(g, stem + "view_input.png");
  const Raster r = rasterize(m, v.camera, view.width, view.height);
  BakeOptions o;
  o.render_size = render_size;
  o.texture_size = texture_size;
  o.boundary_map = true;
  BackProjectDebug dbg;
  BackProjection bp = back_project(m, r, v.camera, view, o, &dbg);
  const std::string tag = stem + ": ";
  if (g.has(stem + "bp_texture.npy")) {
    const FloatDiff d =
        compare_floats(g.npy(stem + "bp_texture.npy").as_float(), bp.texture.pixels);
    EXPECT_LE(d.max_abs, 1e-5f) << tag << "texture";
    EXPECT_EQ(d.support_mismatch, 0u) << tag << "texture support";
    ++compared;
  }
  if (g.has(stem + "bp_cos.npy")) {
    const FloatDiff d = compare_floats(g.npy(stem + "bp_cos.npy").as_float(), bp.cos.pixels);
    EXPECT_LE(d.max_abs, 1e-5f) << tag << "cos";
    ++compared;
  }
  if (g.has(stem + "bpdbg_cos_view.npy")) {
    const FloatDiff d = compare_floats(g.npy(stem + "bpdbg_cos_view.npy").as_float(), dbg.cos_view);
    EXPECT_LE(d.max_abs, 1e-6f) << tag << "cos_view";
    ++compared;
  }
  if (g.has(stem + "bp_boundary.png")) {
    std::vector<uint8_t> b(bp.boundary.pixels.size());
    for (size_t i = 0; i < b.size(); ++i)
      b[i] = static_cast<uint8_t>(bp.boundary.pixels[i] * 255.0f);
    compare_u8(g, stem + "bp_boundary.png", b, compared);
  }
  compare_u8(g, stem + "bpdbg_canny_input.png", dbg.canny_input, compared);
  compare_u8(g, stem + "bpdbg_canny_edges.png", dbg.canny_edges, compared);
  compare_u8(g, stem + "bpdbg_mask_eroded.png", dbg.mask_eroded, compared);
  compare_u8(g, stem + "bpdbg_edges_dilated.png", dbg.edges_dilated, compared);
  compare_u8(g, stem + "bpdbg_splat_mask.png", dbg.splat_mask, compared);
  if (result) *result = std::move(bp);
}

TEST(GoldenTexgen, KernelSizeFromConfiguredRenderSize) {
  GoldenDir g;
  GEN3D_REQUIRE_GOLDEN(g);
  if (g.manifest().contains("bake_unreliable_kernel_size")) {
    EXPECT_EQ(bake_kernel_half_size(g.render_size()),
              g.manifest()["bake_unreliable_kernel_size"].get<int>());
  }
  if (g.manifest().contains("bp_extra")) {
    const auto& e = g.manifest()["bp_extra"];
    EXPECT_EQ(bake_kernel_half_size(e.at("render_size").get<int>()),
              e.at("bake_unreliable_kernel_size").get<int>());
  }
  EXPECT_EQ(bake_kernel_half_size(2048), 8);
  EXPECT_EQ(bake_kernel_half_size(255), 0);
}

TEST(GoldenTexgen, BackProjection) {
  GoldenDir g;
  GEN3D_REQUIRE_GOLDEN(g);
  GEN3D_REQUIRE_MESH(g);
  const mesh::Mesh m = g.mesh();
  int compared = 0;
  for (const auto& v : g.views()) {
    check_back_projection(g, m, "", v, g.render_size(), g.texture_size(), compared);
  }
  if (compared == 0) GTEST_SKIP() << "no back-projection files";
}

TEST(GoldenTexgen, BackProjectionFromLargerView) {
  GoldenDir g;
  GEN3D_REQUIRE_GOLDEN(g);
  GEN3D_REQUIRE_MESH(g);
  if (!g.manifest().contains("bp_extra")) GTEST_SKIP() << "manifest has no bp_extra";
  const auto& e = g.manifest()["bp_extra"];
  const mesh::Mesh m = g.mesh();
  const auto views = g.views();
  int compared = 0;
  for (int k : e.at("views")) {
    for (const auto& v : views) {
      if (v.index != k) continue;
      check_back_projection(g, m, cat("r", std::to_string(e.at("render_size").get<int>()), "_"), v,
                            e.at("render_size").get<int>(), e.at("texture_size").get<int>(),
                            compared);
    }
  }
  if (compared == 0) GTEST_SKIP() << "no r<size>_ back-projection files";
}

TEST(GoldenTexgen, FastMergeUnit) {
  GoldenDir g;
  GEN3D_REQUIRE_GOLDEN(g);
  std::vector<image::Image> tex, w;
  for (int k = 0; g.has(cat("fastbake_unit_tex", std::to_string(k), ".npy")); ++k) {
    const auto t = g.npy(cat("fastbake_unit_tex", std::to_string(k), ".npy"));
    const auto c = g.npy(cat("fastbake_unit_w", std::to_string(k), ".npy"));
    image::Image ti(t.shape[1], t.shape[0], t.shape[2]);
    ti.pixels = t.as_float();
    image::Image wi(c.shape[1], c.shape[0], 1);
    wi.pixels = c.as_float();
    tex.push_back(std::move(ti));
    w.push_back(std::move(wi));
  }
  if (tex.empty()) GTEST_SKIP() << "no fastbake_unit files";
  const MergeResult r = merge_fast(tex, w);
  if (g.manifest().contains("fastbake_unit")) {
    std::vector<int> skipped;
    for (size_t v = 0; v < r.views.size(); ++v) {
      if (r.views[v].skipped) skipped.push_back(static_cast<int>(v));
    }
    EXPECT_EQ(skipped,
              g.manifest()["fastbake_unit"].at("expected_skipped_views").get<std::vector<int>>());
  }
  if (g.has("fastbake_unit_out_texture.npy")) {
    const auto want = g.npy("fastbake_unit_out_texture.npy").as_float();
    ASSERT_EQ(want.size(), r.texture.pixels.size());
    size_t diff = 0;
    for (size_t i = 0; i < want.size(); ++i) diff += want[i] != r.texture.pixels[i];
    EXPECT_EQ(diff, 0u) << "merged texture not bit-exact";
  }
  int compared = 0;
  compare_u8(g, "fastbake_unit_out_mask.png", r.trust_mask, compared);
}

// All views back-projected and merged: the pipeline's bake step end to end.
TEST(GoldenTexgen, BakeAllViews) {
  GoldenDir g;
  GEN3D_REQUIRE_GOLDEN(g);
  GEN3D_REQUIRE_MESH(g);
  GEN3D_REQUIRE_FILE(g, "bake_texture.npy");
  const mesh::Mesh m = g.mesh();
  std::vector<image::Image> tex, w;
  std::vector<BackProjection> bps;
  std::vector<double> weights;
  std::vector<int> indices;
  int compared = 0;
  for (const auto& v : g.views()) {
    BackProjection bp;
    check_back_projection(g, m, "", v, g.render_size(), g.texture_size(), compared, &bp);
    if (bp.texture.empty()) GTEST_SKIP() << "view input " << v.index << " absent";
    w.push_back(bake_weight(bp.cos, v.weight, g.manifest().value("bake_exp", 4.0f)));
    tex.push_back(bp.texture);
    bps.push_back(std::move(bp));
    weights.push_back(v.weight);
    indices.push_back(v.index);
  }
  const MergeResult r = merge_fast(tex, w);
  // The overload that weighs back-projections on the fly gives the same bits, and so does the
  // sparse path.
  const float bake_exp = g.manifest().value("bake_exp", 4.0f);
  const MergeResult r2 = merge_fast(bps, weights, bake_exp);
  EXPECT_EQ(r2.texture.pixels, r.texture.pixels);
  EXPECT_EQ(r2.trust_mask, r.trust_mask);
  {
    std::vector<SparseBackProjection> sparse;
    for (const auto& v : g.views()) {
      const image::Image view = load_view(g, vname(v.index, "view_input.png"));
      BakeOptions o;
      o.render_size = g.render_size();
      o.texture_size = g.texture_size();
      sparse.push_back(back_project_sparse(m, rasterize(m, v.camera, view.width, view.height),
                                           v.camera, view, o));
    }
    const MergeResult r3 = merge_fast(sparse, weights, bake_exp);
    EXPECT_EQ(r3.texture.pixels, r.texture.pixels);
    EXPECT_EQ(r3.weight.pixels, r.weight.pixels);
    EXPECT_EQ(r3.trust_mask, r.trust_mask);
  }
  if (g.manifest().contains("fast_bake_views")) {
    for (const auto& s : g.manifest()["fast_bake_views"]) {
      const int k = s.at("view").get<int>();
      for (size_t i = 0; i < indices.size(); ++i) {
        if (indices[i] != k) continue;
        EXPECT_EQ(r.views[i].texels_with_weight, s.at("texels_with_weight").get<uint64_t>())
            << "view " << k;
        EXPECT_EQ(r.views[i].already_painted, s.at("already_painted").get<uint64_t>())
            << "view " << k;
        EXPECT_EQ(r.views[i].skipped, s.at("skipped").get<bool>()) << "view " << k;
      }
    }
  }
  const auto want_tex = g.npy("bake_texture.npy").as_float();
  const FloatDiff d = compare_floats(want_tex, r.texture.pixels);
  EXPECT_LE(d.max_abs, 1e-5f);
  EXPECT_EQ(d.support_mismatch, 0u);
  // Not bit-exact by design: the reference's cos^4 goes through Sleef's vectorized powf (1 ulp).
  compare_u8(g, "bake_trust_mask.png", r.trust_mask, compared);
  if (g.has("bake_texture.png")) {
    const cv::Mat want = g.png("bake_texture.png");
    const std::vector<uint8_t> got = to_u8(r.texture);
    ASSERT_EQ(want.total() * want.channels(), got.size());
    size_t diff = 0, big = 0;
    for (size_t i = 0; i < got.size(); ++i) {
      diff += got[i] != want.data[i];
      big += std::abs(int(got[i]) - int(want.data[i])) > 1;
    }
    // Truncation turns last-bit noise (see above) into rare +-1 steps.
    EXPECT_EQ(big, 0u) << "bake_texture.png differs by more than 1";
    EXPECT_LE(diff, got.size() / 1000) << "bake_texture.png: too many +-1 differences";
  }
}

}  // namespace
}  // namespace gen3d::render
