// The mesh stages that change a mesh (normalize_mesh, clean_mesh, simplify_mesh, uv_unwrap), each
// run alone through StageRunner on meshes built in code.

#include <algorithm>
#include <cmath>
#include <memory>
#include <string>
#include <utility>

#include <gtest/gtest.h>

#include "mesh/test_meshes.h"
#include "mesh/uv_unwrap.h"
#include "pipeline/error.h"
#include "pipeline/stage_runner.h"
#include "stage_test_helpers.h"
#include "support/paths.h"

namespace gen3d::test {
namespace {

using MeshPtr = std::shared_ptr<const mesh::Mesh>;

bool contains(const std::string& text, const std::string& part) {
  return text.find(part) != std::string::npos;
}

MeshPtr cube() {
  return std::make_shared<const mesh::Mesh>(mesh::testing::textured_cube());
}

double length(const mesh::Vec3& p) {
  return std::sqrt(p[0] * p[0] + p[1] * p[1] + p[2] * p[2]);
}

TEST(MeshProcessingStages, NormalizePutsTheMeshOnTheScaleSphere) {
  pipeline::StageRunner r = runner("normalize_mesh");
  r.input<mesh::Mesh>("mesh", cube());
  r.run();
  auto m = r.output<mesh::Mesh>("mesh");
  auto t = r.output<mesh::NormalizeTransform>("transform");
  ASSERT_TRUE(m && t);
  // Centred on the box centre, every corner of a cube is at the largest distance: 1.15 / 2.
  for (const auto& p : m->positions) EXPECT_NEAR(length(p), 0.575, 1e-5);
  EXPECT_NEAR(t->multiplier, 1.15 / std::sqrt(3.0), 1e-5);
  EXPECT_EQ(m->positions.size(), 24u) << "split_seams: one UV per vertex, 3 charts per corner";
  EXPECT_EQ(m->uvs.size(), m->positions.size());
  EXPECT_EQ(m->faces, m->uv_faces);

  pipeline::StageRunner keep = runner("normalize_mesh");
  keep.input<mesh::Mesh>("mesh", cube()).param("split_seams", false).param("scale_factor", 2.0);
  keep.param("auto_center", false);
  keep.run();
  auto k = keep.output<mesh::Mesh>("mesh");
  ASSERT_EQ(k->positions.size(), 8u);
  double lo = 1e9, hi = 0;
  for (const auto& p : k->positions) lo = std::min(lo, length(p)), hi = std::max(hi, length(p));
  EXPECT_NEAR(hi, 1.0, 1e-5) << "scale_factor 2: the farthest vertex at 1";
  EXPECT_NEAR(lo, 0.0, 1e-6) << "not centred: the corner at the origin stays there";
  const mesh::Mesh src = mesh::testing::textured_cube();
  ASSERT_EQ(k->uvs.size(), src.uvs.size());
  for (size_t i = 0; i < src.uvs.size(); ++i) {
    EXPECT_FLOAT_EQ(k->uvs[i][0], src.uvs[i][0]);
    EXPECT_FLOAT_EQ(k->uvs[i][1], 1.0f - src.uvs[i][1]) << "v flipped";
  }
  EXPECT_TRUE(contains(error_of([&] { keep.param("scale_factor", 0.0); }), "/params/scale_factor"));
}

// normalize_mesh's transform lets save_mesh write the file back in the input's frame.
TEST(MeshProcessingStages, NormalizeTransformRestoresTheInputFrame) {
  pipeline::StageRunner norm = runner("normalize_mesh");
  norm.input<mesh::Mesh>("mesh", cube());
  norm.run();
  const std::string path = temp_dir("mesh_processing_stages") + "/cube.ply";
  pipeline::StageRunner save = runner("save_mesh");
  save.input<mesh::Mesh>("mesh", norm.output<mesh::Mesh>("mesh"));
  save.input<mesh::NormalizeTransform>("transform",
                                       norm.output<mesh::NormalizeTransform>("transform"));
  save.param("path", path);
  save.run();
  pipeline::StageRunner load = runner("load_mesh");
  load.param("path", path);
  load.run();
  auto back = load.output<mesh::Mesh>("mesh");
  ASSERT_TRUE(back);
  EXPECT_EQ(back->face_count(), 12u);
  for (const auto& p : back->positions)
    for (int k = 0; k < 3; ++k)
      EXPECT_TRUE(std::fabs(p[k]) < 1e-5 || std::fabs(p[k] - 1.0f) < 1e-5) << p[k];
}

// The cube's 8 corners and 12 faces, plus: a duplicate of face 0, a degenerate face, a copy of
// corner 0 used by face 1, and a far-away one-triangle floater.
mesh::Mesh dirty_cube() {
  const mesh::Mesh c = mesh::testing::textured_cube();
  mesh::Mesh m;
  m.positions = c.positions;
  m.faces = c.faces;
  m.positions.push_back(c.positions[0]);  // 8: corner 0 again
  for (auto& i : m.faces[1])
    if (i == 0) i = 8;
  m.faces.push_back(c.faces[0]);
  m.faces.push_back({1, 1, 2});
  m.positions.push_back({5, 5, 5});
  m.positions.push_back({5.1f, 5, 5});
  m.positions.push_back({5, 5.1f, 5});
  m.faces.push_back({9, 10, 11});
  return m;
}

TEST(MeshProcessingStages, CleanRemovesWhatItShould) {
  const auto in = std::make_shared<const mesh::Mesh>(dirty_cube());
  ASSERT_NE(std::find(in->faces[1].begin(), in->faces[1].end(), 8u), in->faces[1].end());

  pipeline::StageRunner r = runner("clean_mesh");
  r.input<mesh::Mesh>("mesh", in).param("merge_distance", 0.0).param("min_component_faces", 0.1);
  r.run();
  auto m = r.output<mesh::Mesh>("mesh");
  ASSERT_TRUE(m);
  EXPECT_EQ(m->face_count(), 12u);
  EXPECT_EQ(m->vertex_count(), 8u);
  const auto c = r.profiler().counter_totals();
  EXPECT_EQ(c.at("clean.degenerate_faces"), 1.0);
  EXPECT_EQ(c.at("clean.duplicate_faces"), 1.0);
  EXPECT_EQ(c.at("clean.removed_components"), 1.0);
  EXPECT_EQ(c.at("clean.merged_vertices"), 1.0);

  // The defaults merge nothing and keep small components.
  pipeline::StageRunner defaults = runner("clean_mesh");
  defaults.input<mesh::Mesh>("mesh", in);
  defaults.run();
  EXPECT_EQ(defaults.output<mesh::Mesh>("mesh")->face_count(), 13u);
  EXPECT_EQ(defaults.output<mesh::Mesh>("mesh")->vertex_count(), 12u);

  mesh::Mesh flat;
  flat.positions = {{0, 0, 0}, {1, 0, 0}, {2, 0, 0}};
  flat.faces = {{0, 1, 2}};
  pipeline::StageRunner none = runner("clean_mesh");
  none.input("mesh", flat);
  EXPECT_TRUE(contains(error_of([&] { none.run(); }), "every face is degenerate (zero surface area)"));
  EXPECT_TRUE(contains(error_of([&] { none.param("min_component_area", 1.5); }),
                       "/params/min_component_area"));
}

TEST(MeshProcessingStages, SimplifyMeetsTheFaceTarget) {
  const auto sphere = std::make_shared<const mesh::Mesh>(mesh::testing::uv_sphere(24, 48));
  const size_t faces = sphere->face_count();
  ASSERT_EQ(faces, 2208u);

  pipeline::StageRunner r = runner("simplify_mesh");
  r.input<mesh::Mesh>("mesh", sphere).param("faces", 500);
  r.run();
  auto m = r.output<mesh::Mesh>("mesh");
  ASSERT_TRUE(m);
  EXPECT_LE(m->face_count(), 500u);
  EXPECT_GT(m->face_count(), 300u);
  for (const auto& p : m->positions) ASSERT_NEAR(length(p), 1.0, 1e-5) << "vertices stay on it";
  const auto g = r.profiler().counter_totals();
  EXPECT_EQ(g.at("simplify.input_faces"), static_cast<double>(faces));
  EXPECT_EQ(g.at("simplify.output_faces"), static_cast<double>(m->face_count()));

  pipeline::StageRunner ratio = runner("simplify_mesh");
  ratio.input<mesh::Mesh>("mesh", sphere).param("ratio", 0.25);
  ratio.run();
  EXPECT_LE(ratio.output<mesh::Mesh>("mesh")->face_count(), faces / 4);
  EXPECT_GT(ratio.output<mesh::Mesh>("mesh")->face_count(), faces / 8);

  for (const auto& [name, value] : {std::pair{"faces", 0.0}, std::pair{"faces", 5000.0}}) {
    pipeline::StageRunner keep = runner("simplify_mesh");
    keep.input<mesh::Mesh>("mesh", sphere).param(name, static_cast<int>(value));
    keep.run();
    EXPECT_EQ(keep.output<mesh::Mesh>("mesh"), sphere) << "nothing to do: the same mesh on";
  }
  EXPECT_TRUE(contains(error_of([&] { r.param("ratio", 1.5); }), "/params/ratio"));
  EXPECT_TRUE(contains(error_of([&] { r.param("faces", -1); }), "/params/faces"));
}

TEST(MeshProcessingStages, UvUnwrapGivesAnAtlas) {
  const auto sphere = std::make_shared<const mesh::Mesh>(mesh::testing::uv_sphere(12, 24));
  pipeline::StageRunner r = runner("uv_unwrap");
  r.input<mesh::Mesh>("mesh", sphere).param("texture_size", 256).param("gutter", 2);
  r.run();
  auto m = r.output<mesh::Mesh>("mesh");
  ASSERT_TRUE(m && m->has_uvs());
  EXPECT_EQ(m->uv_faces.size(), m->faces.size());
  EXPECT_EQ(m->face_count(), sphere->face_count());
  const mesh::UvCheckResult check = mesh::check_uvs(*m, 256);
  EXPECT_EQ(check.out_of_range, 0u);
  EXPECT_EQ(check.overlapping_texels, 0u);
  EXPECT_GT(check.covered_texels, 256u * 256u / 5);
  const auto g = r.profiler().counter_totals();
  EXPECT_GE(g.at("uv.charts"), 1.0);
  EXPECT_GT(g.at("uv.utilization"), 0.2);
  EXPECT_LE(g.at("uv.utilization"), 1.0);

  // A mesh with UVs keeps them unless told otherwise.
  const MeshPtr textured = cube();
  pipeline::StageRunner keep = runner("uv_unwrap");
  keep.input<mesh::Mesh>("mesh", textured).param("texture_size", 64);
  keep.run();
  EXPECT_EQ(keep.output<mesh::Mesh>("mesh"), textured) << "the same mesh on";
  EXPECT_EQ(keep.profiler().counter_totals().at("uv.overlap_fraction"), 0.0);
  keep.param("keep_existing", false);
  keep.run();
  auto fresh = keep.output<mesh::Mesh>("mesh");
  ASSERT_NE(fresh, textured);
  EXPECT_TRUE(fresh->has_uvs());
  EXPECT_EQ(mesh::check_uvs(*fresh, 64).overlapping_texels, 0u);

  EXPECT_TRUE(contains(error_of([&] {
                         r.param("texture_size", 1000);
                         r.run();
                       }),
                       "texture_size 1000 is not a power of two"));
  EXPECT_TRUE(contains(error_of([&] { r.param("texture_size", 32); }), "/params/texture_size"));
}

}  // namespace
}  // namespace gen3d::test
