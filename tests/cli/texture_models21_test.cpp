// `gen3d texture --image I --models DIR` with a Hunyuan3D-2.1 folder: a tiny PBR paint folder, a
// DINOv2 folder and Real-ESRGAN weights written by the test in the official layouts, run end to
// end through the shipped texgen_models21 config to a PBR GLB.

#include <filesystem>
#include <fstream>
#include <set>

#include <gtest/gtest.h>
#include <nlohmann/json.hpp>

#include "mesh/io.h"
#include "models/core/safetensors.h"
#include "support/paths.h"
#include "support/run_command.h"
#include "support/tiny_paint21.h"
#include "support/torch_save.h"

namespace gen3d::test {
namespace {

namespace fs = std::filesystem;

const std::string kSmall =
    " --texture-size 128 --render-size 128 --set view_size=64 --set steps=2 ";

// DIR/hunyuan3d-paintpbr-v2-1, DIR/dinov2-giant and DIR/RealESRGAN_x4plus.pth ({'params_ema':
// state_dict}, the golden set's tiny RRDBNet) as the official downloads lay them out.
std::string models_root(const std::string& name, bool with_sr) {
  const std::string root = temp_dir(name);
  write_tiny_paint21_folder(root, 4);
  if (with_sr) {
    const auto w = models::SafetensorsFile::open(
        source_dir() + "/tests/data/golden/hunyuan3d-2.1/esrgan/esrgan.weights.fp32.safetensors");
    NamedTensors sd;
    for (const auto& t : w->tensors()) sd.emplace_back(t.name, w->to_f32(t));
    write_torch_save(root + "/RealESRGAN_x4plus.pth", {{"params_ema", std::move(sd)}},
                     models::DType::kF32);
  }
  return root;
}

TEST(TextureModels21, ModelsFolderMakesAPbrGlb) {
  const std::string root = models_root("texture_models21", true);
  const std::string out = temp_dir("texture_models21_out");
  const auto r = run_gen3d(
      "texture --mesh assets/meshes/BoxTextured.glb --image "
      "assets/images/spider_front.png --models " +
      root + kSmall + "-o " + out + "/box.glb --metrics " + out + "/m.json");
  ASSERT_EQ(r.exit_code, 0) << r.output;
  // The 2.1 chain ran: PBR paint, super-resolution of both view sets, the PBR bake.
  std::ifstream in(out + "/m.json");
  const auto metrics = nlohmann::json::parse(in);
  std::set<std::string> stages;
  for (const auto& n : metrics["nodes"]) stages.insert(n["stage"].get<std::string>());
  for (const char* s : {"views_from_pbr_model", "super_resolve", "attach_metallic_roughness"})
    EXPECT_TRUE(stages.count(s)) << s;
  // The Khronos validator finds no error (skipped without node/the package).
  const auto v = run_command("node " + source_dir() + "/tests/mesh/validate_gltf.js " +
                             env_or("GEN3D_NODE_DIR", GEN3D_NODE_DIR) + " " + out + "/box.glb");
  if (v.exit_code != 77) {
    EXPECT_EQ(v.exit_code, 0) << v.output;
  }
  const mesh::Mesh m = mesh::load_mesh(out + "/box.glb");
  ASSERT_TRUE(m.texture);
  ASSERT_TRUE(m.pbr.texture);
  EXPECT_EQ(m.texture->width, 128);
  EXPECT_EQ(m.pbr.texture->width, 128);
  // The folder's checker knows the 2.1 paint folder and finds every tensor where it belongs.
  const auto check = run_gen3d("models check " + root);
  EXPECT_EQ(check.exit_code, 0) << check.output;
  EXPECT_NE(check.output.find("paint-pbr (hunyuan3d-paintpbr-v2-1): ok"), std::string::npos)
      << check.output;
  // ... and what the 2.1 paint reads beside it: DINOv2 and the Real-ESRGAN weights.
  EXPECT_NE(check.output.find("dinov2 (dinov2-giant): ok"), std::string::npos) << check.output;
  EXPECT_NE(check.output.find("realesrgan (texture_models21): ok"), std::string::npos)
      << check.output;
}

// --device reaches the network nodes of the config each paint version runs (Real-ESRGAN stays on
// the CPU); it needs --models, and only cpu or cuda are devices.
TEST(TextureModels21, DeviceReachesThePaintNodes) {
  const std::string root = models_root("texture_models21_device", true);
  const std::string base =
      "texture --mesh assets/meshes/BoxTextured.glb --image "
      "assets/images/spider_front.png -o x.glb --dump ";
  const auto count = [](const std::string& out, const std::string& what) {
    std::size_t n = 0;
    for (auto at = out.find(what); at != std::string::npos; at = out.find(what, at + 1)) ++n;
    return n;
  };
  const auto v21 = run_gen3d(base + "--models " + root + " --device cuda");
  ASSERT_EQ(v21.exit_code, 0) << v21.output;
  EXPECT_NE(v21.output.find("\"device\": \"cuda\""), std::string::npos) << v21.output;
  EXPECT_EQ(count(v21.output, "\"device\": \"$device\""), 1u) << v21.output;  // the PBR node

  fs::create_directories(root + "/hunyuan3d-paint-v2-0");
  const auto v20 = run_gen3d(base + "--models " + root + " --paint-version 2.0 --device cuda");
  ASSERT_EQ(v20.exit_code, 0) << v20.output;
  EXPECT_NE(v20.output.find("\"device\": \"cuda\""), std::string::npos) << v20.output;
  EXPECT_EQ(count(v20.output, "\"device\": \"$device\""), 2u) << v20.output;  // paint, delight

  const auto no_models = run_gen3d(base + "--device cuda");
  EXPECT_EQ(no_models.exit_code, 2) << no_models.output;
  EXPECT_NE(no_models.output.find("--device"), std::string::npos) << no_models.output;
  EXPECT_EQ(run_gen3d(base + "--models " + root + " --device tpu").exit_code, 2);
}

TEST(TextureModels21, FolderProblemsAreNamedAndNothingIsWritten) {
  const std::string root = models_root("texture_models21_bad", false);
  const std::string out = temp_dir("texture_models21_bad_out");
  const std::string base =
      "texture --mesh assets/meshes/BoxTextured.glb --image "
      "assets/images/spider_front.png --models " +
      root + kSmall;
  // Without Real-ESRGAN weights: a warning, and the views are resized instead.
  const auto no_sr = run_gen3d(base + "-o " + out + "/a.glb");
  ASSERT_EQ(no_sr.exit_code, 0) << no_sr.output;
  EXPECT_NE(no_sr.output.find("RealESRGAN_x4plus.pth"), std::string::npos) << no_sr.output;
  // A Real-ESRGAN file short of one tensor: models check names it.
  {
    const auto w = models::SafetensorsFile::open(
        source_dir() + "/tests/data/golden/hunyuan3d-2.1/esrgan/esrgan.weights.fp32.safetensors");
    NamedTensors sd;
    for (const auto& t : w->tensors())
      if (t.name != "body.0.rdb1.conv2.weight") sd.emplace_back(t.name, w->to_f32(t));
    write_torch_save(root + "/RealESRGAN_x4plus.pth", {{"params_ema", std::move(sd)}},
                     models::DType::kF32);
    const auto check = run_gen3d("models check " + root);
    EXPECT_NE(check.exit_code, 0) << check.output;
    EXPECT_NE(check.output.find("missing params_ema.body.0.rdb1.conv2.weight"), std::string::npos)
        << check.output;
    fs::remove(root + "/RealESRGAN_x4plus.pth");
  }
  // The 2.0 paint model asked for where the folder has only 2.1's.
  const auto v20 = run_gen3d(base + "--paint-version 2.0 -o " + out + "/b.glb");
  EXPECT_EQ(v20.exit_code, 2) << v20.output;
  EXPECT_NE(v20.output.find("hunyuan3d-paint-v2-0"), std::string::npos) << v20.output;
  EXPECT_FALSE(fs::exists(out + "/b.glb"));
  // No DINOv2 folder.
  fs::remove_all(root + "/dinov2-giant");
  const auto no_dino = run_gen3d(base + "-o " + out + "/c.glb");
  EXPECT_EQ(no_dino.exit_code, 2) << no_dino.output;
  EXPECT_NE(no_dino.output.find("dinov2-giant"), std::string::npos) << no_dino.output;
  EXPECT_FALSE(fs::exists(out + "/c.glb"));
}

}  // namespace
}  // namespace gen3d::test
