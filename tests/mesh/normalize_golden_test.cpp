// Golden test of the texgen loading step (README §1): mesh.obj loaded through assimp, normalised,
// compared bit for bit with the reference's vtx_pos_normalized / vtx_uv_loaded.
//
// Vertex order: load_mesh numbers positions in order of first use by the faces (assimp's OBJ
// importer does not keep the file's `v` order), and welds seam-split duplicates. So the comparison
// goes through the faces: corner k of face f must hold exactly the golden values of the golden
// vertex faces.npy[f][k]; and after split_uv_seams, our vertices map one-to-one onto the golden
// ones.
#include <gtest/gtest.h>

#include <cstring>
#include <filesystem>
#include <fstream>
#include <map>
#include <set>

#include <nlohmann/json.hpp>

#include "mesh/io.h"
#include "mesh/normalize.h"
#include "mesh/seams.h"
#include "support/npy.h"
#include "support/paths.h"

namespace gen3d::mesh {
namespace {

std::string golden_dir() {
  return test::env_or("GEN3D_TEXGEN_GOLDEN_DIR", test::data_dir() + "/golden/texgen");
}

bool same_bits(float a, float b) {
  return std::memcmp(&a, &b, sizeof a) == 0;
}

class TexgenNormalizeGolden : public ::testing::Test {
 protected:
  void SetUp() override {
    dir_ = golden_dir();
    if (!std::filesystem::exists(dir_ + "/manifest.json")) {
      GTEST_SKIP() << "texgen golden data not found in " << dir_
                   << " (set GEN3D_TEXGEN_GOLDEN_DIR, e.g. to /work/shared/golden/texgen)";
    }
    std::ifstream(dir_ + "/manifest.json") >> manifest_;
    // The input mesh: from the golden directory when it is there, else our copy of it.
    mesh_path_ = dir_ + "/" + manifest_["mesh"]["file"].get<std::string>();
    if (!std::filesystem::exists(mesh_path_)) {
      mesh_path_ = test::data_dir() + "/mesh/texgen/mesh.obj";
    }
    mesh_ = load_mesh(mesh_path_);
    transform_ = normalize_mesh(mesh_);
    pos_ = test::read_npy(dir_ + "/vtx_pos_normalized.npy").as_float();
    uv_ = test::read_npy(dir_ + "/vtx_uv_loaded.npy").as_float();
    faces_ = test::read_npy(dir_ + "/faces.npy").as_int();
  }
  std::string dir_, mesh_path_;
  nlohmann::json manifest_;
  Mesh mesh_;
  NormalizeTransform transform_;
  std::vector<float> pos_, uv_;
  std::vector<int32_t> faces_;
};

TEST_F(TexgenNormalizeGolden, TransformMatchesManifest) {
  const auto& n = manifest_["normalize"];
  for (int i = 0; i < 3; ++i) {
    EXPECT_TRUE(
        same_bits(transform_.center[i], float(n["center_after_axis_swap"][i].get<double>())))
        << "centre[" << i << "] " << transform_.center[i];
  }
  EXPECT_TRUE(same_bits(transform_.scale, float(n["scale"].get<double>()))) << transform_.scale;
  EXPECT_EQ(transform_.multiplier_f64, n["multiplier"].get<double>());
}

TEST_F(TexgenNormalizeGolden, EveryCornerIsBitIdentical) {
  ASSERT_EQ(faces_.size(), mesh_.faces.size() * 3);
  ASSERT_TRUE(mesh_.has_uvs());
  size_t pos_diff = 0, uv_diff = 0;
  for (size_t f = 0; f < mesh_.faces.size(); ++f) {
    for (int k = 0; k < 3; ++k) {
      const size_t g = size_t(faces_[3 * f + k]);
      ASSERT_LT(3 * g + 2, pos_.size());
      const Vec3& p = mesh_.positions[mesh_.faces[f][k]];
      const Vec2& t = mesh_.uvs[mesh_.uv_faces[f][k]];
      for (int i = 0; i < 3; ++i) pos_diff += !same_bits(p[i], pos_[3 * g + i]);
      for (int i = 0; i < 2; ++i) uv_diff += !same_bits(t[i], uv_[2 * g + i]);
    }
  }
  EXPECT_EQ(pos_diff, 0u);
  EXPECT_EQ(uv_diff, 0u);
}

TEST_F(TexgenNormalizeGolden, SeamSplitVerticesMapOneToOne) {
  const Mesh split = split_uv_seams(mesh_);
  ASSERT_EQ(split.positions.size() * 3, pos_.size());
  std::map<uint32_t, int32_t> ours_to_golden;
  for (size_t f = 0; f < split.faces.size(); ++f) {
    for (int k = 0; k < 3; ++k) {
      auto [it, inserted] = ours_to_golden.try_emplace(split.faces[f][k], faces_[3 * f + k]);
      EXPECT_EQ(it->second, faces_[3 * f + k]) << "face " << f;
    }
  }
  std::set<int32_t> golden_used;
  for (const auto& [ours, golden] : ours_to_golden) golden_used.insert(golden);
  EXPECT_EQ(golden_used.size(), ours_to_golden.size());
  EXPECT_EQ(golden_used.size(), split.positions.size());
}

TEST_F(TexgenNormalizeGolden, InverseRestoresTheFileWithinRounding) {
  const Mesh original = load_mesh(mesh_path_);
  Mesh restored = mesh_;
  invert_normalization(restored, transform_);
  ASSERT_EQ(restored.positions.size(), original.positions.size());
  for (size_t v = 0; v < original.positions.size(); ++v)
    for (int i = 0; i < 3; ++i)
      EXPECT_NEAR(restored.positions[v][i], original.positions[v][i], 1e-6f);
  // 1 - (1 - v) is v up to one float32 rounding at 1.0 (6e-8).
  ASSERT_EQ(restored.uvs.size(), original.uvs.size());
  for (size_t t = 0; t < original.uvs.size(); ++t)
    for (int i = 0; i < 2; ++i) EXPECT_NEAR(restored.uvs[t][i], original.uvs[t][i], 6e-8f);
}

}  // namespace
}  // namespace gen3d::mesh
