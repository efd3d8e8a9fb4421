// Mesh stages, each run alone through StageRunner on real files.

#include <filesystem>

#include <gtest/gtest.h>

#include "mesh/io.h"
#include "pipeline/error.h"
#include "pipeline/stage_runner.h"
#include "stages/register.h"
#include "stages/types.h"
#include "support/paths.h"

namespace gen3d::test {
namespace {

const pipeline::Registry& registry() {
  static const pipeline::Registry reg = [] {
    pipeline::Registry r;
    stages::register_all_stages(r);
    return r;
  }();
  return reg;
}

TEST(MeshStages, LoadInfoSaveRoundTrip) {
  pipeline::StageRunner load(*registry().find("load_mesh"));
  load.param("path", source_dir() + "/assets/meshes/BoxTextured.glb");
  load.run();
  auto m = load.output<mesh::Mesh>("mesh");
  ASSERT_TRUE(m);
  EXPECT_EQ(m->face_count(), 12u);
  EXPECT_TRUE(m->texture);

  pipeline::StageRunner info(*registry().find("mesh_info"));
  info.input<mesh::Mesh>("mesh", m);
  info.run();
  EXPECT_EQ(info.output<mesh::Mesh>("mesh"), m) << "passes the same value on, no copy";
  EXPECT_EQ(info.profiler().counter_totals().at("mesh.faces"), 12.0);

  const std::string out = temp_dir("mesh_stages") + "/box.glb";
  pipeline::StageRunner save(*registry().find("save_mesh"));
  save.input<mesh::Mesh>("mesh", m).param("path", out);
  save.run();
  const mesh::Mesh back = mesh::load_mesh(out);
  EXPECT_EQ(back.face_count(), 12u);
  EXPECT_TRUE(back.texture);
}

TEST(MeshStages, ChecksRejectMissingInputAndBadOutput) {
  pipeline::StageRunner load(*registry().find("load_mesh"));
  load.param("path", "no/such/file.obj");
  EXPECT_THROW(load.run(), pipeline::ConfigError);

  pipeline::StageRunner save(*registry().find("save_mesh"));
  save.input("mesh", mesh::Mesh{}).param("path", temp_dir("mesh_stages_bad") + "/x.fbx");
  EXPECT_THROW(save.run(), pipeline::ConfigError);
  save.param("path", source_dir() + "/assets/meshes/BoxTextured.glb/x.glb");
  EXPECT_THROW(save.run(), pipeline::ConfigError);
}

}  // namespace
}  // namespace gen3d::test
