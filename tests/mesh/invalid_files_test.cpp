// Every file in assimp's invalid/ corpus must give a MeshError naming the file: no crash, no hang
// (CTest runs this binary with a TIMEOUT).
#include <gtest/gtest.h>

#include <filesystem>

#include "mesh/error.h"
#include "mesh/io.h"
#include "support/paths.h"

namespace gen3d::mesh {
namespace {

TEST(LoadMeshInvalidCorpus, EveryFileGivesAClearError) {
  const std::filesystem::path dir = test::data_dir() + "/mesh/meshes-assimp/invalid";
  size_t tried = 0;
  for (const auto& entry : std::filesystem::directory_iterator(dir)) {
    const std::string name = entry.path().filename().string();
    if (name == "readme.txt") continue;
    ++tried;
    try {
      load_mesh(entry.path().string());
      ADD_FAILURE() << name << " loaded without error";
    } catch (const MeshError& e) {
      EXPECT_NE(std::string(e.what()).find(name), std::string::npos) << e.what();
    }
  }
  EXPECT_GE(tried, 6u);
}

}  // namespace
}  // namespace gen3d::mesh
