// `gen3d texture` on meshes that bring their own UVs: kept where no two faces of a material share
// texels of its texture (UVs taken modulo 1, as viewers repeat them), with one texture per
// material; replaced, with the reason, where they do; replaced anyway with --reunwrap.

#include <algorithm>
#include <array>
#include <cmath>
#include <cstdint>
#include <cstring>
#include <filesystem>
#include <fstream>
#include <map>
#include <set>
#include <string>
#include <vector>

#include <gtest/gtest.h>
#include <nlohmann/json.hpp>

#include "mesh/io.h"
#include "support/paths.h"
#include "support/run_command.h"

namespace gen3d::test {
namespace {

using nlohmann::json;

// Three parts of assimp's spider (one leg, the chest, one eye), a material each; the eye's UVs
// reach past 1 without overlapping modulo 1.
const std::string kParts = "tests/data/mesh/spider_parts/spider_parts.obj";
// The whole spider: its eight legs share one texture square, its two eyes another.
const std::string kSpider = "assets/meshes/spider/spider.obj";
const std::string kFront = " --image assets/images/spider_front.png";
const std::string kSmall = " --texture-size 256 --render-size 256";

json read_json(const std::string& path) {
  std::ifstream in(path);
  return json::parse(in);
}

// The JSON chunk of a GLB file.
json glb_json(const std::string& path) {
  std::ifstream in(path, std::ios::binary);
  const std::string bytes((std::istreambuf_iterator<char>(in)), {});
  uint32_t length = 0, type = 0;
  if (bytes.size() < 20 || bytes.compare(0, 4, "glTF") != 0) return {};
  std::memcpy(&length, bytes.data() + 12, 4);
  std::memcpy(&type, bytes.data() + 16, 4);
  if (type != 0x4E4F534A || bytes.size() < 20 + size_t(length)) return {};
  return json::parse(bytes.substr(20, length));
}

// Per material name, the UV triangles of its faces (corners sorted; to 1e-6, the precision of the
// files' UVs, far above what a write and read back changes), as a multiset.
using UvTriangles = std::map<std::string, std::multiset<std::array<long, 6>>>;
UvTriangles uv_triangles(const mesh::Mesh& m) {
  UvTriangles out;
  for (size_t f = 0; f < m.faces.size(); ++f) {
    std::array<std::array<long, 2>, 3> corners;
    for (size_t k = 0; k < 3; ++k)
      for (size_t a = 0; a < 2; ++a)
        corners[k][a] = std::lround(double(m.uvs[m.uv_faces[f][k]][a]) * 1e6);
    std::sort(corners.begin(), corners.end());
    const std::string name = m.has_materials() ? m.materials[m.face_materials[f]].name : "";
    out[name].insert(
        {corners[0][0], corners[0][1], corners[1][0], corners[1][1], corners[2][0], corners[2][1]});
  }
  return out;
}

// The Khronos validator finds no error in the GLB (skipped without node or the package).
void expect_valid_gltf(const std::string& path) {
  const std::string node_dir = env_or("GEN3D_NODE_DIR", GEN3D_NODE_DIR);
  const auto v =
      run_command("node " + source_dir() + "/tests/mesh/validate_gltf.js " + node_dir + " " + path);
  if (v.exit_code != 77) {
    EXPECT_EQ(v.exit_code, 0) << v.output;
  }
}

// Every material of the GLB has a base-colour texture, all through a REPEAT sampler.
void expect_textured_materials(const std::string& path, size_t materials) {
  const json g = glb_json(path);
  ASSERT_TRUE(g.contains("materials")) << path;
  ASSERT_EQ(g["materials"].size(), materials);
  std::set<int> images;
  for (const json& m : g["materials"]) {
    ASSERT_TRUE(m["pbrMetallicRoughness"].contains("baseColorTexture")) << m.dump();
    const int texture = m["pbrMetallicRoughness"]["baseColorTexture"]["index"];
    images.insert(g["textures"][size_t(texture)]["source"].get<int>());
    // The new texture is the colour: no factor of the old material tints it.
    if (m["pbrMetallicRoughness"].contains("baseColorFactor")) {
      EXPECT_EQ(m["pbrMetallicRoughness"]["baseColorFactor"], json::array({1.0, 1.0, 1.0, 1.0}));
    }
  }
  EXPECT_EQ(images.size(), materials) << "an image per material";
  for (const json& s : g["samplers"]) {
    EXPECT_EQ(s.value("wrapS", 10497), 10497);
    EXPECT_EQ(s.value("wrapT", 10497), 10497);
  }
}

// Textured from renders of itself (`--source-mesh`, the parts' own textures): every material's
// texture holds what the views saw through its own UVs.
TEST(TextureOwnUvs, KeptWithATexturePerMaterialAndRepeatingPastTheEdge) {
  const std::string dir = temp_dir("texture_uvs_kept");
  const auto r =
      run_gen3d("texture --mesh " + kParts + " --source-mesh " + kParts + kSmall + " -o " + dir +
                "/out.glb --metrics " + dir + "/m.json --report " + dir + "/r.html");
  ASSERT_EQ(r.exit_code, 0) << r.output;
  EXPECT_NE(r.output.find("keeping the mesh's own UVs: 3 materials, a 256 x 256 texture each; 4 "
                          "UV coordinates outside [0, 1] repeat"),
            std::string::npos)
      << r.output;
  const json m = read_json(dir + "/m.json");
  EXPECT_EQ(m["counters"]["uv.kept"], 1.0);
  EXPECT_EQ(m["counters"]["uv.textures"], 3.0);
  // The result re-rendered against the views it was made from: 21.6 dB measured (the same run
  // unwrapped anew: 24.9 dB; a texture baked for another material reads as noise, below 15).
  EXPECT_GT(m["counters"]["psnr.mean_db"].get<double>(), 20.0);
  expect_textured_materials(dir + "/out.glb", 3);
  expect_valid_gltf(dir + "/out.glb");

  const mesh::Mesh in = mesh::load_mesh(kParts), out = mesh::load_mesh(dir + "/out.glb");
  ASSERT_EQ(out.materials.size(), 3u);
  for (const mesh::Material& mat : out.materials) {
    ASSERT_TRUE(mat.texture) << mat.name;
    EXPECT_EQ(mat.texture->width, 256) << mat.name;
    EXPECT_EQ(mat.texture->height, 256) << mat.name;
    const std::vector<float>& p = mat.texture->pixels;
    const auto [lo, hi] = std::minmax_element(p.begin(), p.end());
    EXPECT_GT(*hi - *lo, 0.1f) << mat.name << ": a flat texture";
  }
  // The layout is the mesh's own: every material's UV triangles, as loaded.
  EXPECT_EQ(uv_triangles(out), uv_triangles(in));

  // The report shows where each view's surface came from, through every material's texture.
  std::ifstream report(dir + "/r.html");
  const std::string html((std::istreambuf_iterator<char>(report)), {});
  const auto origin = html.find("<h2>Where the result came from");
  ASSERT_NE(origin, std::string::npos);
  size_t pictures = 0;
  for (auto at = html.find("<img", origin); at < html.find("<h2>", origin + 1);
       at = html.find("<img", at + 1))
    ++pictures;
  EXPECT_EQ(pictures, 8u);
}

TEST(TextureOwnUvs, UvsThatOverlapWithinAMaterialAreReplacedWithTheReason) {
  const std::string dir = temp_dir("texture_uvs_overlap");
  const auto r = run_gen3d("texture --mesh " + kSpider + kFront + kSmall + " -o " + dir +
                           "/out.glb --metrics " + dir + "/m.json");
  ASSERT_EQ(r.exit_code, 0) << r.output;
  EXPECT_NE(r.output.find("the mesh's own UVs cannot hold a new texture (faces of material '"),
            std::string::npos)
      << r.output;
  EXPECT_NE(r.output.find("share texels"), std::string::npos) << r.output;
  EXPECT_EQ(read_json(dir + "/m.json")["counters"]["uv.kept"], 0.0);
  const mesh::Mesh out = mesh::load_mesh(dir + "/out.glb");
  EXPECT_FALSE(out.has_materials());
  ASSERT_TRUE(out.texture);
  EXPECT_EQ(out.texture->width, 256);
}

// Asked to (the largest overlap allowed: all of it), the spider keeps its layout all the same: a
// texture for each of its four materials, shared by the faces that share its texels.
TEST(TextureOwnUvs, OverlapAllowedKeepsEverySpiderMaterial) {
  const std::string dir = temp_dir("texture_uvs_spider");
  const auto r = run_gen3d("texture --mesh " + kSpider + kFront + kSmall +
                           " --set uv.max_overlap=1 -o " + dir + "/out.glb");
  ASSERT_EQ(r.exit_code, 0) << r.output;
  expect_textured_materials(dir + "/out.glb", 4);
  expect_valid_gltf(dir + "/out.glb");
  const mesh::Mesh in = mesh::load_mesh(kSpider), out = mesh::load_mesh(dir + "/out.glb");
  ASSERT_EQ(out.materials.size(), 4u);
  // Each material's faces keep their UVs (the clean-up drops the 56 faces of zero area).
  const UvTriangles want = uv_triangles(in), got = uv_triangles(out);
  ASSERT_EQ(got.size(), want.size());
  size_t kept = 0;
  for (const auto& [name, triangles] : got) {
    ASSERT_TRUE(want.count(name)) << name;
    EXPECT_TRUE(std::includes(want.at(name).begin(), want.at(name).end(), triangles.begin(),
                              triangles.end()))
        << name;
    kept += triangles.size();
  }
  EXPECT_EQ(kept, 1368u - 56u);
}

// A PBR run (--views, --mr-views) on kept UVs: each material gets its metallic-roughness texture
// beside its base colour, both from its own tile.
TEST(TextureOwnUvs, PbrGivesEachMaterialItsMetallicRoughnessTexture) {
  const std::string dir = temp_dir("texture_uvs_pbr");
  for (const char* sub : {"/views", "/mr"}) {
    std::filesystem::create_directories(dir + sub);
    for (int v = 0; v < 6; ++v)
      std::filesystem::copy_file(source_dir() + "/assets/images/spider_front.png",
                                 dir + sub + "/" + std::to_string(v) + ".png");
  }
  const auto r = run_gen3d("texture --mesh " + kParts + " --views " + dir + "/views --mr-views " +
                           dir + "/mr" + kSmall + " -o " + dir + "/out.glb");
  ASSERT_EQ(r.exit_code, 0) << r.output;
  expect_textured_materials(dir + "/out.glb", 3);
  expect_valid_gltf(dir + "/out.glb");
  const json g = glb_json(dir + "/out.glb");
  std::set<int> textures;
  for (const json& m : g["materials"]) {
    ASSERT_TRUE(m["pbrMetallicRoughness"].contains("metallicRoughnessTexture")) << m.dump();
    textures.insert(m["pbrMetallicRoughness"]["metallicRoughnessTexture"]["index"].get<int>());
  }
  EXPECT_EQ(textures.size(), 3u);
  const mesh::Mesh out = mesh::load_mesh(dir + "/out.glb");
  ASSERT_EQ(out.materials.size(), 3u);
  for (const mesh::Material& mat : out.materials) {
    ASSERT_TRUE(mat.pbr.texture) << mat.name;
    EXPECT_EQ(mat.pbr.texture->width, 256) << mat.name;
  }
}

TEST(TextureOwnUvs, ReunwrapGivesOneAtlas) {
  const std::string dir = temp_dir("texture_uvs_reunwrap");
  const auto r = run_gen3d("texture --mesh " + kParts + kFront + kSmall + " --reunwrap -o " + dir +
                           "/out.glb");
  ASSERT_EQ(r.exit_code, 0) << r.output;
  expect_textured_materials(dir + "/out.glb", 1);
  const mesh::Mesh out = mesh::load_mesh(dir + "/out.glb");
  EXPECT_FALSE(out.has_materials());
  ASSERT_TRUE(out.texture);
  EXPECT_EQ(out.texture->width, 256);
}

}  // namespace
}  // namespace gen3d::test
