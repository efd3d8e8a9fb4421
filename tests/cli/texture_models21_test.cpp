// The draft Hunyuan3D-2.1 texture config (assets/pipelines/texgen_models21.json) end to end on a
// tiny PBR paint folder and DINOv2 folder written by the test in the official layouts.

#include <filesystem>

#include <gtest/gtest.h>

#include "image/io.h"
#include "mesh/io.h"
#include "support/paths.h"
#include "support/run_command.h"
#include "support/tiny_paint21.h"

namespace gen3d::test {
namespace {

namespace fs = std::filesystem;

TEST(TextureModels21, DraftConfigBakesAlbedoAndWritesMrViews) {
  const TinyPaint21Folder f = write_tiny_paint21_folder(temp_dir("texture_models21"), 4);
  const std::string out = temp_dir("texture_models21_out");
  const auto r = run_gen3d("run assets/pipelines/texgen_models21.json --set mesh=" +
                           std::string("assets/meshes/BoxTextured.glb") +
                           " --set paint_model=" + f.dir + " --set dino_model=" + f.dino_dir +
                           " --set view_size=64 --set render_size=128 --set texture_size=128"
                           " --set steps=2 --set out=" +
                           out + "/box.glb --set mr_dir=" + out + "/mr");
  ASSERT_EQ(r.exit_code, 0) << r.output;
  const mesh::Mesh m = mesh::load_mesh(out + "/box.glb");
  ASSERT_TRUE(m.texture);
  EXPECT_EQ(m.texture->width, 128);
  // The six official views (max_views 6): one metallic-roughness image each, at render_size.
  for (int v = 0; v < 6; ++v) {
    const std::string png = out + "/mr/mr_view_" + std::to_string(v) + ".png";
    ASSERT_TRUE(fs::exists(png)) << png;
    EXPECT_EQ(image::load_image(png).width, 128);
  }
  EXPECT_FALSE(fs::exists(out + "/mr/mr_view_6.png"));
}

}  // namespace
}  // namespace gen3d::test
