// The format pre-checks refuse only what would crash or hang the importer: valid files with
// unusual but harmless content load.

#include <gtest/gtest.h>

#include <fstream>
#include <string>

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

}  // namespace
}  // namespace gen3d::mesh
