// The format pre-checks refuse only what would crash or hang the importer: valid files with
// unusual but harmless content load.

#include <gtest/gtest.h>

#include <algorithm>
#include <fstream>
#include <string>

#include "mesh/error.h"
#include "mesh/io.h"
#include "support/paths.h"

namespace gen3d::mesh {
namespace {

// Blender 2.4x writes a "Created by ..." line into the PLY header; assimp skips it.
TEST(PlyPrecheck, UnknownHeaderLinesAreSkippedLikeAssimpDoes) {
  const std::string path = test::temp_dir("ply_precheck") + "/blender.ply";
  std::ofstream(path) << "ply\n"
                         "format ascii 1.0\n"
                         "Created by Blender3D 247 - www.blender.org, source file: \n"
                         "element vertex 3\n"
                         "property float x\nproperty float y\nproperty float z\n"
                         "element face 1\n"
                         "property list uchar uint vertex_indices\n"
                         "end_header\n"
                         "0 0 0\n1 0 0\n0 1 0\n"
                         "3 0 1 2\n";
  const Mesh m = load_mesh(path);
  EXPECT_EQ(m.face_count(), 1u);
  EXPECT_EQ(m.vertex_count(), 3u);
}

// A second element of the same name overflows assimp 5.2's arrays (JVN#42386607): refused.
TEST(PlyPrecheck, ElementDeclaredTwiceIsRefused) {
  const std::string path = test::temp_dir("ply_precheck_twice") + "/twice.ply";
  std::ofstream(path) << "ply\n"
                         "format ascii 1.0\n"
                         "element vertex 1\n"
                         "property float x\n"
                         "element vertex 3\n"
                         "property float x\nproperty float y\nproperty float z\n"
                         "element face 1\n"
                         "property list uchar uint vertex_indices\n"
                         "end_header\n"
                         "0\n"
                         "0 0 0\n1 0 0\n0 1 0\n"
                         "3 0 1 2\n";
  try {
    load_mesh(path);
    FAIL() << "loaded a PLY that declares 'vertex' twice";
  } catch (const MeshError& e) {
    EXPECT_NE(std::string(e.what()).find("element 'vertex' is declared twice"), std::string::npos)
        << e.what();
  }
}

// Draco-compressed glTF is decoded with libdraco, and the geometry is the uncompressed file's
// (bounds as the uncompressed 2CylinderEngine.glb's; the encoder dropped its 11,160 zero-area faces
// of 121,496).
TEST(GltfDraco, CompressedMeshesDecode) {
  const Mesh m =
      load_mesh(test::data_dir() + "/mesh/meshes-assimp/glTF2/draco/2CylinderEngine.gltf");
  EXPECT_EQ(m.face_count(), 110336u);
  Vec3 lo = m.positions.front(), hi = lo;
  for (const Vec3& p : m.positions)
    for (int k = 0; k < 3; ++k) {
      lo[k] = std::min(lo[k], p[k]);
      hi[k] = std::max(hi[k], p[k]);
    }
  const Vec3 want_lo{-371.7f, -181.0f, -140.0f}, want_hi{371.7f, 92.04f, 128.0f};
  for (int k = 0; k < 3; ++k) {
    EXPECT_NEAR(lo[k], want_lo[k], 0.1f) << k;
    EXPECT_NEAR(hi[k], want_hi[k], 0.1f) << k;
  }
}

// assimp reads OBJ as 8-bit text: a UTF-16 file is named as such instead of coming back empty;
// the same box as UTF-8 (without a byte-order mark) loads.
// assimp reads the OFF keyword's variants and the counts right after it, glued or not, and files
// that start with the counts; those load like the plain form.
TEST(OffPrecheck, KeywordVariantsAndGluedCountsLoadLikeAssimpReadsThem) {
  const std::string dir = test::temp_dir("off_precheck_variants");
  const std::string quad = "0 0 0\n1 0 0\n1 1 0\n0 1 0\n4 0 1 2 3\n";
  for (const char* header : {"OFF\n4 1 0\n", "OFF4 1 0\n", "nOFF\n3\n4 1 0\n"}) {
    SCOPED_TRACE(header);
    const std::string path = dir + "/quad.off";
    std::ofstream(path) << header << quad;
    const Mesh m = load_mesh(path);
    EXPECT_EQ(m.face_count(), 2u);
    EXPECT_EQ(m.vertex_count(), 4u);
  }
}

// Counts glued to the keyword are bounded like the plain ones: a 77-byte file whose header read
// "OFF9999999999999999999999999" made assimp run 46 s and take 14 GB (found by fuzzing).
TEST(OffPrecheck, AbsurdCountsGluedToTheKeywordAreRefused) {
  const std::string dir = test::temp_dir("off_precheck_glued");
  for (const char* header : {"OFF9999999999999999999999999\n4 2 0\n", "OFF999999 2 0\n",
                             "nOFF 3 999999 2\n", "999999 2 0\n"}) {
    SCOPED_TRACE(header);
    const std::string path = dir + "/big.off";
    std::ofstream(path) << header << "0 0 0\n0 1 0\n1 1 0\n1 0 0\n3 1 3 0\n";
    try {
      (void)load_mesh(path);
      ADD_FAILURE() << "loaded";
    } catch (const MeshError& e) {
      EXPECT_TRUE(std::string(e.what()).find("OFF header") != std::string::npos) << e.what();
    }
  }
}

// assimp 5.2 skips a face line whose count is 0 or above 9 but takes it off the face count
// without counting it as read: the fuzzer's file (data on the counts line, '\r' line breaks, such
// lines) made it announce more faces than it filled, and it crashed. Files it reads correctly
// still pass: data after the counts on their line, and a 10-gon it drops while the count holds.
TEST(OffPrecheck, FaceLinesAreCheckedWhereAssimpReadsThem) {
  const std::string dir = test::temp_dir("off_precheck_faces");
  const auto load = [&](const std::string& text) {
    const std::string path = dir + "/f.off";
    std::ofstream(path, std::ios::binary) << text;
    return load_mesh(path);
  };
  EXPECT_EQ(load("OFF\n4 1 0 0 0 0\n1 0 0\n1 1 0\n0 1 0\n4 0 1 2 3\n").face_count(), 2u);
  EXPECT_EQ(load("OFF\n4 1 0\n0 0 0\n1 0 0\n1 1 0\n0 1 0\n4 0 1 2 3\n"
                 "10 0 1 2 3 0 1 2 3 0 1\n")
                .face_count(),
            2u);
  for (const std::string& bad : {
           std::string("OFF\n4 2 0\n0 0 0\n1 0 0\n1 1 0\n0 1 0\n3 0 1 2\n0\n0\n0\n3 0 1 3\n"),
           std::string("OFF\n4 3 0\n0 0 0\n1 0 0\n1 1 0\n0 1 0\n3 0 1 2\n"
                       "12 1 2 3 4 5 6 7 8 9 10 11 12\n"),
       }) {
    try {
      (void)load(bad);
      ADD_FAILURE() << "loaded: " << bad;
    } catch (const MeshError& e) {
      EXPECT_NE(std::string(e.what()).find("loses count of its faces"), std::string::npos)
          << e.what();
    }
  }
  try {
    (void)load_mesh(test::data_dir() + "/bad/mesh/fuzz_off_face_count_lost.off");
    ADD_FAILURE() << "the fuzzer's file loaded";
  } catch (const MeshError& e) {
    EXPECT_NE(std::string(e.what()).find("fuzz_off_face_count_lost.off"), std::string::npos);
  }
}

TEST(ObjPrecheck, Utf16TextIsNamed) {
  const std::string dir = test::temp_dir("obj_precheck_utf16");
  const std::string box = "v 0 0 0\nv 1 0 0\nv 0 1 0\nf 1 2 3\n";
  std::string utf16 = "\xFE\xFF";
  for (char c : box) utf16 += std::string{'\0', c};
  std::ofstream(dir + "/utf16.obj", std::ios::binary) << utf16;
  std::ofstream(dir + "/utf8.obj", std::ios::binary) << box;
  try {
    load_mesh(dir + "/utf16.obj");
    ADD_FAILURE() << "a UTF-16 OBJ passed";
  } catch (const MeshError& e) {
    EXPECT_NE(std::string(e.what()).find("UTF-16 text"), std::string::npos) << e.what();
  }
  EXPECT_EQ(load_mesh(dir + "/utf8.obj").face_count(), 1u);
}

}  // namespace
}  // namespace gen3d::mesh
