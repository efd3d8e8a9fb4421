// Hunyuan3D-2's Blender add-on (blender_addon.py) against `gen3d serve`, with Debian's Blender in
// the user's place: the add-on's request for "Generate Texture" on a selected mesh goes to
// /generate, and the GLB that comes back is imported by Blender's glTF importer, as the add-on
// imports it. What Blender made of it is checked: one mesh object, its material, its image, and
// the material's base colour taken from that image. One input mesh is the one the other serve
// tests send; the other is a primitive exported by Blender the way the add-on sends the selected
// mesh. Blender's side is tests/cli/blender/gltf_roundtrip.py.
//
// Label `slow` (Blender is large and optional: `scripts/setup.sh --slow` installs it); skipped,
// saying why, where there is no blender.

#include <unistd.h>

#include <fstream>
#include <sstream>
#include <string>
#include <vector>

#include <gtest/gtest.h>
#include <httplib.h>
#include <nlohmann/json.hpp>

#include "io/base64.h"
#include "support/paths.h"
#include "support/run_command.h"
#include "support/serve_process.h"

namespace gen3d::test {
namespace {

using nlohmann::json;

const std::string kBox = "tests/data/mesh/meshes-assimp/glTF2/BoxTextured.glb";
const std::string kImage = "assets/images/spider_front.png";
constexpr int kTextureSize = 2048;  // the server's default, which the add-on's user gets

// The blender to run: $GEN3D_BLENDER, else the first on PATH ("" for none).
std::string find_blender() {
  const std::string given = env_or("GEN3D_BLENDER", "");
  if (!given.empty()) return ::access(given.c_str(), X_OK) == 0 ? given : "";
  std::istringstream path(env_or("PATH", "/usr/bin:/bin"));
  std::string dir;
  while (std::getline(path, dir, ':'))
    if (!dir.empty() && ::access((dir + "/blender").c_str(), X_OK) == 0) return dir + "/blender";
  return "";
}

// Runs gltf_roundtrip.py in a fresh background Blender: `mode` is "export" or "import", `glb` the
// file written or read. What the script printed on its GEN3D_BLENDER line (null when it failed).
json run_blender(const std::string& blender, const std::string& mode, const std::string& glb) {
  const CommandResult r = run_command(
      "timeout -k 10 300 '" + blender + "' -b --factory-startup --python-exit-code 1 --python '" +
      source_dir() + "/tests/cli/blender/gltf_roundtrip.py' -- " + mode + " '" + glb + "'");
  EXPECT_EQ(r.exit_code, 0) << r.output;
  const std::string tag = "GEN3D_BLENDER ";
  const size_t at = r.output.find("\n" + tag);
  if (at == std::string::npos) {
    ADD_FAILURE() << "Blender printed no " << tag << "line:\n" << r.output;
    return nullptr;
  }
  const size_t from = at + 1 + tag.size();
  return json::parse(r.output.substr(from, r.output.find('\n', from) - from));
}

// The body blender_addon.py posts to /generate with a mesh selected, a front image chosen and
// "Generate Texture" ticked (Hunyuan3DOperator.generate_model): the shape settings at its panel's
// defaults, which a server ignores when it is given a mesh.
json addon_payload(const std::string& glb_bytes) {
  return {{"mesh", io::base64_encode(glb_bytes)},
          {"image", io::base64_encode(read_bytes(kImage))},
          {"octree_resolution", 256},
          {"num_inference_steps", 20},
          {"guidance_scale", 5.5},
          {"texture", true}};
}

class ServeBlender : public ::testing::Test {
 protected:
  static void SetUpTestSuite() {
    blender_ = find_blender();
    if (blender_.empty()) return;
    server_ =
        new ServeProcess({"--data", temp_dir("serve_blender_data_" + std::to_string(::getpid()))});
  }
  static void TearDownTestSuite() {
    delete server_;
    server_ = nullptr;
  }
  void SetUp() override {
    if (blender_.empty())
      GTEST_SKIP() << "no blender on PATH (install Debian's blender, as `scripts/setup.sh --slow` "
                      "does, or set GEN3D_BLENDER)";
  }

  // Sends `input` (a GLB file) as the add-on does, then imports the answer and the input in
  // Blender; checks that the answer comes back as one textured mesh with the input's faces.
  static void round_trip(const std::string& input, const std::string& name) {
    auto c = server_->client();
    c.set_read_timeout(600, 0);
    const auto r = c.Post("/generate", addon_payload(read_bytes(input)).dump(), "application/json");
    ASSERT_TRUE(r);
    ASSERT_EQ(r->status, 200) << r->body;
    ASSERT_TRUE(r->body.starts_with("glTF"));
    const std::string out = temp_dir("serve_blender_" + name) + "/textured.glb";
    std::ofstream(out, std::ios::binary) << r->body;

    const json before = run_blender(blender_, "import", input);
    const json after = run_blender(blender_, "import", out);
    ASSERT_TRUE(before.is_object() && after.is_object());
    EXPECT_EQ(after["mesh_objects"], 1) << after;
    EXPECT_EQ(after["selected_mesh_objects"], 1) << after;  // what the add-on moves into place
    EXPECT_EQ(after["faces"], before["faces"]) << after;
    EXPECT_GE(after["uv_layers"], 1) << after;
    EXPECT_EQ(after["materials"], 1) << after;
    EXPECT_EQ(after["images"], 1) << after;
    EXPECT_EQ(after["image_sizes"], json::array({json::array({kTextureSize, kTextureSize})}))
        << after;
    EXPECT_EQ(after["base_color_textured"].size(), 1u) << after;
  }

  static std::string blender_;
  static ServeProcess* server_;
};
std::string ServeBlender::blender_;
ServeProcess* ServeBlender::server_ = nullptr;

TEST_F(ServeBlender, ImportsTheTexturedBox) {
  round_trip(source_dir() + "/" + kBox, "box");
}

TEST_F(ServeBlender, TexturesAMeshThatBlenderExported) {
  const std::string exported = temp_dir("serve_blender_export") + "/suzanne.glb";
  const json e = run_blender(blender_, "export", exported);
  ASSERT_TRUE(e.is_object());
  const std::string bytes = read_bytes(exported);
  ASSERT_TRUE(bytes.starts_with("glTF"));
  EXPECT_NE(bytes.find("Khronos glTF Blender I/O"), std::string::npos);  // asset.generator
  round_trip(exported, "suzanne");
}

}  // namespace
}  // namespace gen3d::test
