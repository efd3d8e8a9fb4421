#include "mesh/io.h"

#include <gtest/gtest.h>

#include <cmath>
#include <cstdlib>
#include <filesystem>
#include <fstream>
#include <iterator>
#include <set>

#include "image/io.h"
#include "mesh/error.h"
#include "mesh/pbr.h"
#include "mesh/seams.h"
#include "support/paths.h"
#include "test_meshes.h"

namespace gen3d::mesh {
namespace {
namespace fs = std::filesystem;

std::string asset(const std::string& rel) {
  return test::data_dir() + "/mesh/meshes-assimp/" + rel;
}

void expect_consistent(const Mesh& m, const std::string& what) {
  ASSERT_FALSE(m.faces.empty()) << what;
  for (const Tri& f : m.faces)
    for (uint32_t v : f) ASSERT_LT(v, m.positions.size()) << what;
  if (m.has_uvs()) {
    ASSERT_EQ(m.uv_faces.size(), m.faces.size()) << what;
    for (const Tri& f : m.uv_faces)
      for (uint32_t t : f) ASSERT_LT(t, m.uvs.size()) << what;
  }
  for (const Vec3& p : m.positions)
    for (float x : p) ASSERT_TRUE(std::isfinite(x)) << what;
  if (!m.normals.empty()) {
    ASSERT_EQ(m.normals.size(), m.positions.size()) << what;
  }
  if (!m.colors.empty()) {
    ASSERT_EQ(m.colors.size(), m.positions.size()) << what;
  }
}

// Every referenced position is used by some face and no two are equal (welded).
void expect_welded(const Mesh& m) {
  std::set<Vec3> seen(m.positions.begin(), m.positions.end());
  EXPECT_EQ(seen.size(), m.positions.size());
}

// Multiset of triangles as (position, uv) corner tuples, rotation-normalized: equal for meshes that
// describe the same geometry whatever their vertex numbering.
std::multiset<std::array<float, 15>> corner_set(const Mesh& m) {
  std::multiset<std::array<float, 15>> out;
  for (size_t f = 0; f < m.faces.size(); ++f) {
    std::array<std::array<float, 5>, 3> c;
    for (int k = 0; k < 3; ++k) {
      const Vec3& p = m.positions[m.faces[f][k]];
      const Vec2 t = m.has_uvs() ? m.uvs[m.uv_faces[f][k]] : Vec2{0, 0};
      c[k] = {p[0], p[1], p[2], t[0], t[1]};
    }
    const int first = int(std::min_element(c.begin(), c.end()) - c.begin());
    std::array<float, 15> key;
    for (int k = 0; k < 3; ++k)
      std::copy(c[(first + k) % 3].begin(), c[(first + k) % 3].end(), key.begin() + 5 * k);
    out.insert(key);
  }
  return out;
}

struct FileCase {
  const char* path;
  size_t min_faces;
  bool uvs;
  bool texture;
};

class LoadAssimpFiles : public ::testing::TestWithParam<FileCase> {};

TEST_P(LoadAssimpFiles, LoadsConsistentWeldedMesh) {
  const FileCase c = GetParam();
  const Mesh m = load_mesh(asset(c.path));
  expect_consistent(m, c.path);
  expect_welded(m);
  EXPECT_GE(m.faces.size(), c.min_faces) << c.path;
  EXPECT_EQ(m.has_uvs(), c.uvs) << c.path;
  bool textured = m.texture != nullptr;
  for (const Material& mat : m.materials) textured |= mat.texture != nullptr;
  EXPECT_EQ(textured, c.texture) << c.path;
}

INSTANTIATE_TEST_SUITE_P(Mesh, LoadAssimpFiles,
                         ::testing::Values(FileCase{"OBJ/box.obj", 12, false, false},
                                           FileCase{"OBJ/spider.obj", 1000, true, true},
                                           FileCase{"OBJ/WusonOBJ.obj", 3732, true, false},
                                           FileCase{"OBJ/concave_polygon.obj", 10, false, false},
                                           FileCase{"OBJ/cube_with_vertexcolors.obj", 12, false,
                                                    false},
                                           FileCase{"PLY/cube_uv.ply", 12, true, false},
                                           FileCase{"PLY/cube_binary.ply", 12, false, false},
                                           FileCase{"STL/Spider_binary.stl", 1000, false, false},
                                           FileCase{"STL/sphereWithHole.stl", 285, false, false},
                                           FileCase{"glTF2/BoxTextured.glb", 12, true, true},
                                           FileCase{"glTF2/BoxBadNormals.glb", 12, false, false},
                                           FileCase{"FBX/box.fbx", 12, false, false}));

TEST(LoadMesh, BoxObjIsWeldedCube) {
  const Mesh m = load_mesh(asset("OBJ/box.obj"));
  EXPECT_EQ(m.positions.size(), 8u);
  EXPECT_EQ(m.faces.size(), 12u);
}

TEST(LoadMesh, OffQuadsAreTriangulated) {
  const std::string path = test::temp_dir("mesh_io_off") + "/square.off";
  std::ofstream(path) << "OFF\n# a unit square as one quad\n4 1 0\n0 0 0\n1 0 0\n1 1 0\n0 1 0\n"
                         "4 0 1 2 3\n";
  const Mesh m = load_mesh(path);
  EXPECT_EQ(m.positions.size(), 4u);
  EXPECT_EQ(m.faces.size(), 2u);
}

TEST(LoadMesh, StlTrianglesAreWeldedIntoOneSurface) {
  // STL stores three corners per triangle; welding must share them between neighbours.
  const Mesh m = load_mesh(asset("STL/sphereWithHole.stl"));
  EXPECT_LT(m.positions.size(), m.faces.size());
}

TEST(LoadMesh, ObjVertexColoursAreKept) {
  const Mesh m = load_mesh(asset("OBJ/cube_with_vertexcolors.obj"));
  ASSERT_EQ(m.colors.size(), m.positions.size());
  std::set<std::array<float, 4>> distinct(m.colors.begin(), m.colors.end());
  EXPECT_GT(distinct.size(), 1u);
}

TEST(LoadMesh, EveryMaterialKeepsItsTexture) {
  // spider.mtl gives five materials, four with textures under Windows-style ".\\x.jpg" paths.
  const Mesh m = load_mesh(asset("OBJ/spider.obj"));
  EXPECT_FALSE(m.texture);
  ASSERT_EQ(m.face_materials.size(), m.faces.size());
  std::set<std::string> textures_found;
  for (const Material& mat : m.materials) {
    if (!mat.texture) continue;
    for (const char* f : {"wal67ar_small.jpg", "wal69ar_small.jpg", "SpiderTex.jpg", "drkwood2.jpg",
                          "engineflare1.jpg"}) {
      const image::Image img = image::load_image(asset(std::string("OBJ/") + f));
      if (img.width == mat.texture->width && img.height == mat.texture->height &&
          img.pixels == mat.texture->pixels) {
        textures_found.insert(f);
      }
    }
  }
  std::set<uint32_t> used(m.face_materials.begin(), m.face_materials.end());
  EXPECT_EQ(used.size(), m.materials.size());  // only materials some face uses
  EXPECT_GE(textures_found.size(), 4u);
  EXPECT_EQ(textures_found.size(), m.materials.size());
}

TEST(LoadMesh, UntexturedMaterialsKeepTheirColours) {
  const std::string dir = test::temp_dir("mesh_io_kd_materials");
  std::ofstream(dir + "/two.mtl") << "newmtl red\nKd 1 0 0\nnewmtl blue\nKd 0 0 1\n";
  std::ofstream(dir + "/two.obj") << "mtllib two.mtl\nv 0 0 0\nv 1 0 0\nv 1 1 0\nv 0 1 0\n"
                                     "usemtl red\nf 1 2 3\nusemtl blue\nf 1 3 4\n";
  const Mesh m = load_mesh(dir + "/two.obj");
  ASSERT_EQ(m.materials.size(), 2u);
  ASSERT_EQ(m.face_materials.size(), 2u);
  EXPECT_EQ(m.materials[m.face_materials[0]].base_color, (Vec4{1, 0, 0, 1}));
  EXPECT_EQ(m.materials[m.face_materials[1]].base_color, (Vec4{0, 0, 1, 1}));
}

TEST(LoadMesh, EmbeddedGlbTextureIsDecoded) {
  const Mesh m = load_mesh(asset("glTF2/BoxTextured.glb"));
  ASSERT_TRUE(m.texture);
  EXPECT_GT(m.texture->width, 0);
  EXPECT_GE(m.texture->channels, 3);
  // UVs of a glTF file come back in the OBJ convention, within [0, 1] for this box.
  for (const Vec2& t : m.uvs) {
    EXPECT_GE(t[1], -1e-6f);
    EXPECT_LE(t[1], 1 + 1e-6f);
  }
}

TEST(LoadMeshErrors, Gltf1IsNamedWhateverItsAssetSays) {
  const auto expect_gltf1 = [](const std::string& path) {
    try {
      load_mesh(path);
      ADD_FAILURE() << path << ": expected a MeshError";
    } catch (const MeshError& e) {
      EXPECT_NE(std::string(e.what()).find("glTF 1.0 is not supported"), std::string::npos)
          << e.what();
    }
  };
  const std::string path = asset("glTF/BoxTextured-glTF-Embedded/BoxTextured.gltf");
  expect_gltf1(path);
  // Some 1.0 writers give the asset version as the number 1 (tinygltf then speaks of the asset
  // object), and the asset object is optional in 1.0.
  std::ifstream in(path);
  const std::string text((std::istreambuf_iterator<char>(in)), std::istreambuf_iterator<char>());
  const std::string quoted = "\"version\": \"1.0\"";
  ASSERT_NE(text.rfind(quoted), std::string::npos);
  const std::string numbered = (fs::temp_directory_path() / "gen3d_gltf1_numbered.gltf").string();
  std::string edited = text;
  edited.replace(text.rfind(quoted), quoted.size(), "\"version\": 1");
  std::ofstream(numbered) << edited;
  expect_gltf1(numbered);
  edited = text;
  const size_t asset_at = text.find("\"asset\"");
  ASSERT_NE(asset_at, std::string::npos);
  edited.replace(asset_at, 7, "\"assetX\"");
  std::ofstream(numbered) << edited;
  expect_gltf1(numbered);
  fs::remove(numbered);
}

TEST(LoadMesh, NodeTransformsAreApplied) {
  // A .gltf with one triangle instanced by two nodes, translated by +10 and -10 in x.
  const std::string dir = test::temp_dir("mesh_io_nodes");
  const std::string path = dir + "/two_nodes.gltf";
  std::ofstream(path) << R"({
    "asset": {"version": "2.0"}, "scene": 0, "scenes": [{"nodes": [0, 1]}],
    "nodes": [{"mesh": 0, "translation": [10, 0, 0]}, {"mesh": 0, "translation": [-10, 0, 0]}],
    "meshes": [{"primitives": [{"attributes": {"POSITION": 0}}]}],
    "accessors": [{"bufferView": 0, "componentType": 5126, "count": 3, "type": "VEC3",
                   "min": [0, 0, 0], "max": [1, 1, 0]}],
    "bufferViews": [{"buffer": 0, "byteLength": 36}],
    "buffers": [{"byteLength": 36, "uri":
      "data:application/octet-stream;base64,AAAAAAAAAAAAAAAAAACAPwAAAAAAAAAAAAAAAAAAgD8AAAAA"}]
  })";
  const Mesh m = load_mesh(path);
  ASSERT_EQ(m.faces.size(), 2u);
  float lo = 1e9f, hi = -1e9f;
  for (const Vec3& p : m.positions) {
    lo = std::min(lo, p[0]);
    hi = std::max(hi, p[0]);
  }
  EXPECT_FLOAT_EQ(lo, -10.0f);
  EXPECT_FLOAT_EQ(hi, 11.0f);
}

void expect_error(const std::string& path, const std::string& fragment) {
  try {
    load_mesh(path);
    ADD_FAILURE() << "no error for " << path;
  } catch (const MeshError& e) {
    const std::string msg = e.what();
    EXPECT_NE(msg.find(fs::path(path).filename().string()), std::string::npos) << msg;
    EXPECT_NE(msg.find(fragment), std::string::npos) << msg;
  }
}

TEST(LoadMeshErrors, MissingFile) {
  expect_error(asset("OBJ/nope.obj"), "no such file");
}

TEST(LoadMeshErrors, UnsupportedFormat) {
  const std::string path = test::temp_dir("mesh_io_unsupported") + "/model.xyz123";
  std::ofstream(path) << "hello";
  expect_error(path, "unsupported format");
}

TEST(LoadMeshErrors, PointsAndLinesOnly) {
  expect_error(asset("OBJ/point_cloud.obj"), "no triangles");
  expect_error(asset("OBJ/testline.obj"), "no triangles");
}

TEST(LoadMeshErrors, InfinitePositions) {
  expect_error(asset("glTF2/BoxWithInfinites.glb"), "non-finite");
}

TEST(LoadMeshErrors, OutOfRangeIndices) {
  const std::string path = test::temp_dir("mesh_io_range") + "/bad_index.obj";
  std::ofstream(path) << "v 0 0 0\nv 1 0 0\nv 0 1 0\nf 1 2 7\n";
  EXPECT_THROW(load_mesh(path), MeshError);
}

// ---- saving ----

TEST(SaveMesh, GlbRoundTripKeepsGeometryUvsAndTexture) {
  const Mesh cube = testing::textured_cube();
  const std::string path = test::temp_dir("mesh_io_glb") + "/cube.glb";
  save_mesh(cube, path);
  const Mesh back = load_mesh(path);
  expect_consistent(back, path);
  EXPECT_EQ(back.positions.size(), cube.positions.size());  // re-welded after the seam split
  EXPECT_EQ(corner_set(back), corner_set(cube));
  ASSERT_TRUE(back.texture);
  ASSERT_EQ(back.texture->width, cube.texture->width);
  ASSERT_EQ(back.texture->height, cube.texture->height);
  ASSERT_EQ(back.texture->channels, 3);
  for (size_t i = 0; i < back.texture->pixels.size(); ++i)
    EXPECT_NEAR(back.texture->pixels[i], cube.texture->pixels[i], 0.5f / 255) << i;
  EXPECT_EQ(back.normals.size(), back.positions.size());
}

TEST(SaveMesh, GlbRoundTripKeepsEveryMaterial) {
  const Mesh spider = load_mesh(asset("OBJ/spider.obj"));
  const std::string path = test::temp_dir("mesh_io_glb_materials") + "/spider.glb";
  save_mesh(spider, path);
  const Mesh back = load_mesh(path);
  expect_consistent(back, path);
  ASSERT_EQ(back.materials.size(), spider.materials.size());
  ASSERT_EQ(back.faces.size(), spider.faces.size());
  // Faces per material and each material's texture survive (faces may come back reordered).
  for (size_t k = 0; k < spider.materials.size(); ++k) {
    const auto count = [](const Mesh& m, uint32_t mat) {
      return std::count(m.face_materials.begin(), m.face_materials.end(), mat);
    };
    EXPECT_EQ(count(back, uint32_t(k)), count(spider, uint32_t(k))) << k;
    ASSERT_EQ(bool(back.materials[k].texture), bool(spider.materials[k].texture)) << k;
    if (spider.materials[k].texture) {
      EXPECT_EQ(back.materials[k].texture->width, spider.materials[k].texture->width) << k;
    }
  }
}

TEST(SaveMesh, ObjRoundTripKeepsEveryMaterial) {
  const Mesh spider = load_mesh(asset("OBJ/spider.obj"));
  const std::string dir = test::temp_dir("mesh_io_obj_materials");
  save_mesh(spider, dir + "/spider.obj");
  EXPECT_TRUE(fs::exists(dir + "/spider.mtl"));
  const Mesh back = load_mesh(dir + "/spider.obj");
  expect_consistent(back, dir + "/spider.obj");
  ASSERT_EQ(back.materials.size(), spider.materials.size());
  ASSERT_EQ(back.faces.size(), spider.faces.size());
  EXPECT_EQ(back.face_materials, spider.face_materials) << "OBJ keeps the face order";
  // ... and the UVs, as they were (they repeat past [0, 1]).
  for (size_t f = 0; f < spider.faces.size(); ++f)
    for (size_t k = 0; k < 3; ++k)
      ASSERT_EQ(back.uvs[back.uv_faces[f][k]], spider.uvs[spider.uv_faces[f][k]]) << f;
  for (size_t k = 0; k < spider.materials.size(); ++k) {
    EXPECT_EQ(back.materials[k].name, spider.materials[k].name) << k;
    ASSERT_TRUE(back.materials[k].texture) << k;
    EXPECT_TRUE(fs::exists(dir + "/spider_" + std::to_string(k) + ".png")) << k;
    EXPECT_EQ(back.materials[k].texture->width, spider.materials[k].texture->width) << k;
  }
}

TEST(SaveMesh, ObjRoundTripWritesMtlAndPng) {
  const Mesh cube = testing::textured_cube();
  const std::string dir = test::temp_dir("mesh_io_obj");
  save_mesh(cube, dir + "/cube.obj");
  EXPECT_TRUE(fs::exists(dir + "/cube.mtl"));
  EXPECT_TRUE(fs::exists(dir + "/cube.png"));
  const Mesh back = load_mesh(dir + "/cube.obj");
  EXPECT_EQ(corner_set(back), corner_set(cube));
  ASSERT_TRUE(back.texture);
  EXPECT_EQ(back.texture->width, 4);
}

// The textured cube with a glTF metallic-roughness texture: metallic (B) x / 3, roughness (G)
// 1 - y / 3, so that every texel tells the channels apart.
Mesh pbr_cube() {
  Mesh m = testing::textured_cube();
  auto mr = std::make_shared<image::Image>(4, 4, 3);
  for (int y = 0; y < 4; ++y)
    for (int x = 0; x < 4; ++x) {
      float* p = mr->at(x, y);
      p[0] = 1.0f;
      p[1] = 1.0f - y / 3.0f;
      p[2] = x / 3.0f;
    }
  m.pbr.texture = mr;
  return m;
}

TEST(SaveMesh, GlbRoundTripKeepsMetallicRoughness) {
  const Mesh cube = pbr_cube();
  const std::string path = test::temp_dir("mesh_io_glb_pbr") + "/cube.glb";
  save_mesh(cube, path);
  const Mesh back = load_mesh(path);
  ASSERT_TRUE(back.texture);
  ASSERT_TRUE(back.pbr.texture);
  const image::Image& mr = *back.pbr.texture;
  ASSERT_EQ(mr.width, 4);
  ASSERT_EQ(mr.height, 4);
  ASSERT_GE(mr.channels, 3);
  for (int y = 0; y < 4; ++y)
    for (int x = 0; x < 4; ++x) {
      EXPECT_NEAR(mr.at(x, y)[1], 1.0f - y / 3.0f, 0.5f / 255) << x << "," << y;
      EXPECT_NEAR(mr.at(x, y)[2], x / 3.0f, 0.5f / 255) << x << "," << y;
    }
  // A texture is written with factors of 1, so that it is read as painted.
  EXPECT_EQ(back.pbr.metallic, 1.0f);
  EXPECT_EQ(back.pbr.roughness, 1.0f);
}

TEST(SaveMesh, GlbRoundTripKeepsMetallicRoughnessFactors) {
  Mesh cube = testing::textured_cube();
  cube.pbr.metallic = 0.25f;
  cube.pbr.roughness = 0.5f;
  const std::string path = test::temp_dir("mesh_io_glb_factors") + "/cube.glb";
  save_mesh(cube, path);
  const Mesh back = load_mesh(path);
  EXPECT_FALSE(back.pbr.texture);
  EXPECT_EQ(back.pbr.metallic, 0.25f);
  EXPECT_EQ(back.pbr.roughness, 0.5f);
  // Without PBR, a gen3d file still says what it always did: a rough dielectric.
  save_mesh(testing::textured_cube(), path);
  const Mesh plain = load_mesh(path);
  EXPECT_EQ(plain.pbr.metallic, 0.0f);
  EXPECT_EQ(plain.pbr.roughness, 1.0f);
}

TEST(SaveMesh, ObjWritesGrayscaleMetallicAndRoughnessMaps) {
  const Mesh cube = pbr_cube();
  const std::string dir = test::temp_dir("mesh_io_obj_pbr");
  save_mesh(cube, dir + "/cube.obj");
  std::ifstream in(dir + "/cube.mtl");
  const std::string mtl((std::istreambuf_iterator<char>(in)), std::istreambuf_iterator<char>());
  EXPECT_NE(mtl.find("map_Kd cube.png\n"), std::string::npos) << mtl;
  EXPECT_NE(mtl.find("map_Pm cube_metallic.png\n"), std::string::npos) << mtl;
  EXPECT_NE(mtl.find("map_Pr cube_roughness.png\n"), std::string::npos) << mtl;
  EXPECT_NE(mtl.find("Pm 1\n"), std::string::npos) << mtl;
  EXPECT_NE(mtl.find("Pr 1\n"), std::string::npos) << mtl;
  const image::Image metallic = image::load_image(dir + "/cube_metallic.png");
  const image::Image roughness = image::load_image(dir + "/cube_roughness.png");
  ASSERT_EQ(metallic.channels, 1);
  ASSERT_EQ(roughness.channels, 1);
  ASSERT_EQ(metallic.width, 4);
  ASSERT_EQ(roughness.height, 4);
  for (int y = 0; y < 4; ++y)
    for (int x = 0; x < 4; ++x) {
      EXPECT_NEAR(metallic.at(x, y)[0], x / 3.0f, 0.5f / 255) << x << "," << y;
      EXPECT_NEAR(roughness.at(x, y)[0], 1.0f - y / 3.0f, 0.5f / 255) << x << "," << y;
    }
  // Read back, the two maps join into one texture in glTF's layout again.
  const Mesh back = load_mesh(dir + "/cube.obj");
  EXPECT_EQ(corner_set(back), corner_set(cube));
  ASSERT_TRUE(back.texture);
  ASSERT_TRUE(back.pbr.texture);
  const image::Image& mr = *back.pbr.texture;
  ASSERT_EQ(mr.width, 4);
  ASSERT_EQ(mr.channels, 3);
  for (int y = 0; y < 4; ++y)
    for (int x = 0; x < 4; ++x) {
      EXPECT_NEAR(mr.at(x, y)[1], 1.0f - y / 3.0f, 0.5f / 255) << x << "," << y;
      EXPECT_NEAR(mr.at(x, y)[2], x / 3.0f, 0.5f / 255) << x << "," << y;
    }
  EXPECT_EQ(back.pbr.metallic, 1.0f);
  EXPECT_EQ(back.pbr.roughness, 1.0f);
}

TEST(SaveMesh, ObjWithoutPbrHasNoPbrLines) {
  const std::string dir = test::temp_dir("mesh_io_obj_nopbr");
  save_mesh(testing::textured_cube(), dir + "/cube.obj");
  std::ifstream in(dir + "/cube.mtl");
  const std::string mtl((std::istreambuf_iterator<char>(in)), std::istreambuf_iterator<char>());
  EXPECT_EQ(mtl.find("Pm"), std::string::npos) << mtl;
  EXPECT_FALSE(fs::exists(dir + "/cube_metallic.png"));
}

TEST(SaveMesh, PlyRoundTripKeepsColours) {
  Mesh cube = testing::textured_cube();
  cube.texture.reset();
  cube.colors.resize(cube.positions.size());
  for (size_t i = 0; i < cube.colors.size(); ++i)
    cube.colors[i] = {float(i % 2), float(i / 4), 0.0f, 1.0f};
  const std::string path = test::temp_dir("mesh_io_ply") + "/cube.ply";
  save_mesh(cube, path);
  const Mesh back = load_mesh(path);
  EXPECT_EQ(corner_set(back), corner_set(cube));
  ASSERT_EQ(back.colors.size(), back.positions.size());
  for (size_t i = 0; i < back.positions.size(); ++i) {
    const size_t src = std::find(cube.positions.begin(), cube.positions.end(), back.positions[i]) -
                       cube.positions.begin();
    ASSERT_LT(src, cube.positions.size());
    for (int c = 0; c < 4; ++c) EXPECT_NEAR(back.colors[i][c], cube.colors[src][c], 1e-6f);
  }
}

TEST(SaveMesh, FailureLeavesNoFile) {
  const std::string dir = test::temp_dir("mesh_io_atomic");
  Mesh bad = testing::textured_cube();
  bad.faces[3][1] = 99;  // out of range
  EXPECT_THROW(save_mesh(bad, dir + "/bad.glb"), MeshError);
  EXPECT_THROW(save_mesh(testing::textured_cube(), dir + "/missing/dir/x.glb"), MeshError);
  EXPECT_THROW(save_mesh(testing::textured_cube(), dir + "/x.stl"), MeshError);
  // The final path is a non-empty directory: the rename fails after the temp file was written.
  fs::create_directories(dir + "/taken.glb/inside");
  EXPECT_THROW(save_mesh(testing::textured_cube(), dir + "/taken.glb"), MeshError);
  size_t files = 0;
  for (const auto& e : fs::recursive_directory_iterator(dir)) files += e.is_regular_file();
  EXPECT_EQ(files, 0u);
}

TEST(SaveMesh, OverwritesExistingFileAtomically) {
  const std::string path = test::temp_dir("mesh_io_overwrite") + "/cube.glb";
  std::ofstream(path) << "old";
  save_mesh(testing::textured_cube(), path);
  EXPECT_EQ(load_mesh(path).faces.size(), 12u);
  size_t files = 0;
  for (auto it = fs::directory_iterator(fs::path(path).parent_path());
       it != fs::directory_iterator(); ++it)
    ++files;
  EXPECT_EQ(files, 1u);
}

TEST(SplitUvSeams, OneUvPerVertex) {
  const Mesh cube = testing::textured_cube();
  std::vector<uint32_t> src;
  const Mesh s = split_uv_seams(cube, &src);
  EXPECT_EQ(s.positions.size(), 24u);  // 6 faces x 4 corners, every cube edge is a seam
  EXPECT_EQ(s.uvs.size(), s.positions.size());
  EXPECT_EQ(s.uv_faces, s.faces);
  ASSERT_EQ(src.size(), s.positions.size());
  for (size_t v = 0; v < src.size(); ++v) EXPECT_EQ(s.positions[v], cube.positions[src[v]]);
  EXPECT_EQ(corner_set(s), corner_set(cube));
}

TEST(SplitUvSeams, MaterialBordersSplitVertices) {
  Mesh quad;  // two triangles sharing an edge, one material each, no UVs
  quad.positions = {{0, 0, 0}, {1, 0, 0}, {1, 1, 0}, {0, 1, 0}};
  quad.faces = {{0, 1, 2}, {0, 2, 3}};
  quad.materials = {Material{"a", nullptr, {1, 0, 0, 1}}, Material{"b", nullptr, {0, 0, 1, 1}}};
  quad.face_materials = {0, 1};
  std::vector<uint32_t> src;
  const Mesh s = split_uv_seams(quad, &src);
  EXPECT_EQ(s.positions.size(), 6u);  // the shared edge's two vertices, once per material
  EXPECT_EQ(s.face_materials, quad.face_materials);
  EXPECT_TRUE(s.uvs.empty());
}

// ---- Khronos glTF validator (node + npm package gltf-validator) ----

TEST(SaveMesh, GlbPassesKhronosValidator) {
  const std::string node_dir = test::env_or("GEN3D_NODE_DIR", GEN3D_NODE_DIR);
  if (std::system("node --version > /dev/null 2>&1") != 0) {
    GTEST_SKIP() << "node is not installed; skipping the glTF validator check";
  }
  if (!fs::exists(node_dir + "/node_modules/gltf-validator")) {
    GTEST_SKIP() << "gltf-validator is not installed in " << node_dir << " (npm install --prefix "
                 << node_dir << " gltf-validator)";
  }
  const std::string dir = test::temp_dir("mesh_io_validator");
  Mesh plain = testing::textured_cube();
  plain.texture.reset();
  Mesh colored = plain;
  colored.uvs.clear();
  colored.uv_faces.clear();
  colored.colors.assign(colored.positions.size(), {0.2f, 0.4f, 0.6f, 1.0f});
  std::vector<std::string> files = {dir + "/textured.glb", dir + "/plain.glb", dir + "/colored.glb",
                                    dir + "/materials.glb", dir + "/pbr.glb"};
  save_mesh(testing::textured_cube(), files[0]);
  save_mesh(plain, files[1]);
  save_mesh(colored, files[2]);
  save_mesh(load_mesh(asset("OBJ/spider.obj")), files[3]);  // one primitive per material
  save_mesh(pbr_cube(), files[4]);                          // metallicRoughnessTexture
  if (const char* real = std::getenv("GEN3D_VALIDATE_EXTRA_GLB")) files.push_back(real);
  for (const auto& f : files) {
    const std::string cmd =
        "node " + std::string(GEN3D_MESH_TEST_DIR) + "/validate_gltf.js " + node_dir + " " + f;
    const int rc = std::system(cmd.c_str());
    ASSERT_TRUE(WIFEXITED(rc)) << cmd;
    EXPECT_EQ(WEXITSTATUS(rc), 0) << "glTF validator reported errors for " << f;
  }
}

}  // namespace
}  // namespace gen3d::mesh
