// glTF 2.0 / GLB through tinygltf: a valid GLB written by save_mesh is damaged one field at a time.
// Every damage either gives one MeshError that names the file and the problem, or loads what the
// file still describes correctly (an unused or optional part that is wrong is ignored); nothing
// crashes.
#include <gtest/gtest.h>

#include <algorithm>
#include <cstdint>
#include <cstring>
#include <filesystem>
#include <fstream>
#include <functional>
#include <iterator>
#include <string>

#include <nlohmann/json.hpp>

#include "mesh/error.h"
#include "mesh/io.h"
#include "support/paths.h"
#include "test_meshes.h"

namespace gen3d::mesh {
namespace {
namespace fs = std::filesystem;
using nlohmann::json;
using test::read_bytes;

struct Glb {
  json doc;
  std::string bin;
};

uint32_t u32_at(const std::string& s, size_t at) {
  uint32_t v;
  std::memcpy(&v, s.data() + at, 4);
  return v;
}

void put_u32(std::string& s, uint32_t v) {
  s.append(reinterpret_cast<const char*>(&v), 4);
}

void write_bytes(const std::string& path, const std::string& bytes) {
  std::ofstream(path, std::ios::binary) << bytes;
}

std::string glb_bytes(const std::string& js_in, const std::string& bin) {
  std::string js = js_in;
  while (js.size() % 4) js.push_back(' ');
  std::string out;
  put_u32(out, 0x46546C67);
  put_u32(out, 2);
  put_u32(out, uint32_t(12 + 8 + js.size() + (bin.empty() ? 0 : 8 + bin.size())));
  put_u32(out, uint32_t(js.size()));
  put_u32(out, 0x4E4F534A);
  out += js;
  if (!bin.empty()) {
    put_u32(out, uint32_t(bin.size()));
    put_u32(out, 0x004E4942);
    out += bin;
  }
  return out;
}

class GltfLoad : public ::testing::Test {
 protected:
  void SetUp() override {
    // One directory per test: CTest runs the tests of this fixture in parallel processes.
    dir_ = test::temp_dir(std::string("mesh_gltf_load_") +
                          ::testing::UnitTest::GetInstance()->current_test_info()->name());
    const std::string base = dir_ + "/base.glb";
    save_mesh(testing::textured_cube(), base);
    const std::string bytes = read_bytes(base);
    const uint32_t js_len = u32_at(bytes, 12);
    base_.doc = json::parse(bytes.substr(20, js_len));
    base_.bin = bytes.substr(20 + js_len + 8);
  }

  // Writes the base GLB changed by `edit` and expects load_mesh to fail naming the file and
  // `fragment`.
  void expect_rejected(const std::function<void(Glb&)>& edit, const std::string& fragment,
                       const std::string& name = "damaged.glb") {
    Glb g = base_;
    edit(g);
    const std::string path = dir_ + "/" + name;
    write_bytes(path, glb_bytes(g.doc.dump(), g.bin));
    expect_error(path, fragment);
  }

  void expect_error(const std::string& path, const std::string& fragment) {
    try {
      load_mesh(path);
      ADD_FAILURE() << "no error for " << path << " (expected '" << fragment << "')";
    } catch (const MeshError& e) {
      const std::string msg = e.what();
      EXPECT_NE(msg.find(fs::path(path).filename().string()), std::string::npos) << msg;
      EXPECT_NE(msg.find(fragment), std::string::npos) << msg;
    }
  }

  // Writes the base GLB changed by `edit` and expects it to load with `faces` triangles.
  Mesh expect_loads(const std::function<void(Glb&)>& edit, size_t faces = 12,
                    const std::string& name = "tolerated.glb") {
    Glb g = base_;
    edit(g);
    const std::string path = dir_ + "/" + name;
    write_bytes(path, glb_bytes(g.doc.dump(), g.bin));
    Mesh m;
    try {
      m = load_mesh(path);
    } catch (const MeshError& e) {
      ADD_FAILURE() << e.what();
      return m;
    }
    EXPECT_EQ(m.faces.size(), faces) << path;
    return m;
  }

  std::string dir_;
  Glb base_;
};

TEST_F(GltfLoad, UndamagedFilesLoad) {
  const Mesh m = expect_loads([](Glb&) {}, 12, "ok.glb");
  EXPECT_TRUE(m.texture);
  EXPECT_TRUE(m.has_uvs());
  const Mesh box = load_mesh(test::data_dir() + "/mesh/meshes-assimp/glTF2/BoxTextured.glb");
  EXPECT_EQ(box.faces.size(), 12u);
  EXPECT_TRUE(box.texture);
}

// The file a fuzzer found crashing assimp's glTF reader (a mimeType without '/') loads: tinygltf
// keeps the image's bytes and gen3d decodes them by their content.
TEST_F(GltfLoad, MimeTypesDoNotDecideDecoding) {
  EXPECT_TRUE(expect_loads([](Glb& g) { g.doc["images"][0]["mimeType"] = "image-png"; }).texture);
  EXPECT_NO_THROW(load_mesh(test::data_dir() + "/mesh/fuzz_glb_mimetype_no_slash.glb"));
}

TEST_F(GltfLoad, Container) {
  const std::string good = glb_bytes(base_.doc.dump(), base_.bin);
  const std::string path = dir_ + "/container.glb";
  write_bytes(path, good.substr(0, good.size() - 5));
  expect_error(path, "gives a length of");
  write_bytes(path, good.substr(0, 14));
  expect_error(path, "truncated");
  std::string bad = good;
  bad[0] = 'x';
  write_bytes(path, bad);
  expect_error(path, "magic");
  bad = good;
  bad[4] = 1;
  write_bytes(path, bad);
  expect_error(path, "glTF 1.0");
  bad = good;
  const uint32_t huge = 0x7fffffff;
  std::memcpy(&bad[12], &huge, 4);  // JSON chunk longer than the file
  write_bytes(path, bad);
  expect_error(path, "runs past the end of the file");
  bad = good;
  bad[16] = 'X';  // JSON chunk type
  write_bytes(path, bad);
  expect_error(path, "first chunk is not JSON");
  bad = good;
  const uint32_t js_len = u32_at(good, 12);
  bad[20 + js_len + 4] = 'X';  // BIN chunk type
  write_bytes(path, bad);
  expect_error(path, "chunk1");
  expect_rejected([](Glb& g) { g.bin.resize(16); }, "byteLength");
  expect_rejected([](Glb& g) { g.doc["buffers"][0]["uri"] = "data:,abc"; }, "data:,abc");
  // A uri naming a directory (here the file's own) is no file.
  expect_rejected([](Glb& g) { g.doc["buffers"][0]["uri"] = "."; }, "File not found");
}

TEST_F(GltfLoad, JsonText) {
  const std::string path = dir_ + "/json.glb";
  write_bytes(path, glb_bytes("{\"asset\": {\"version\": \"2.0\"}, ", base_.bin));
  expect_error(path, "parse error");
  expect_rejected([](Glb& g) { g.doc["asset"]["version"] = "1.0"; }, "glTF 1.0");
  expect_rejected([](Glb& g) { g.doc["asset"]["version"] = "3.0"; }, "unsupported glTF version");
  expect_rejected([](Glb& g) { g.doc.erase("asset"); }, "asset");
  // tinygltf converts JSON recursively: deep nesting is refused before it parses, and nesting
  // within the limit loads.
  expect_rejected(
      [](Glb& g) {
        json deep = json::array();
        for (int i = 0; i < 300; ++i) deep = json::array({deep});
        g.doc["extras"] = deep;
      },
      "nested more than 256 levels");
  expect_loads([](Glb& g) {
    json deep = json::array();
    for (int i = 0; i < 100; ++i) deep = json::array({deep});
    g.doc["extras"] = deep;
  });
  // Strings do not count as nesting.
  expect_loads([](Glb& g) { g.doc["meshes"][0]["name"] = std::string(600, '['); });
}

TEST_F(GltfLoad, ByteRanges) {
  expect_rejected([](Glb& g) { g.doc["accessors"][1]["count"] = 1000; },
                  "runs past the end of bufferView");
  expect_rejected([](Glb& g) { g.doc["accessors"][1]["byteOffset"] = 8; },
                  "runs past the end of bufferView");
  expect_rejected([](Glb& g) { g.doc["bufferViews"][1]["byteLength"] = 1u << 30; },
                  "runs past the end of buffer 0");
  expect_rejected([](Glb& g) { g.doc["bufferViews"][1]["byteOffset"] = uint64_t(1) << 40; },
                  "runs past the end of buffer 0");
  expect_rejected([](Glb& g) { g.doc["bufferViews"][1]["byteStride"] = 4; },
                  "less than the 12-byte elements");
  expect_rejected([](Glb& g) { g.doc["accessors"][1]["count"] = 0; }, "contains no triangles");
  expect_rejected([](Glb& g) { g.doc["accessors"][1]["componentType"] = 5124; },
                  "invalid componentType 5124");
  expect_rejected([](Glb& g) { g.doc["accessors"][1]["type"] = "VEC5"; }, "VEC5");
  expect_rejected([](Glb& g) { g.doc["buffers"][0]["byteLength"] = -1; }, "byteLength");
  // An accessor with no bufferView is zeros; one too large to be real is refused.
  expect_rejected(
      [](Glb& g) {
        g.doc["accessors"][1].erase("bufferView");
        g.doc["accessors"][1]["count"] = uint64_t(1) << 40;
      },
      "no bufferView and a count of");
}

TEST_F(GltfLoad, References) {
  expect_rejected([](Glb& g) { g.doc["accessors"][1]["bufferView"] = 99; },
                  "refers to bufferView 99");
  expect_rejected([](Glb& g) { g.doc["bufferViews"][1]["buffer"] = 1; }, "refers to buffer 1");
  expect_rejected([](Glb& g) { g.doc["meshes"][0]["primitives"][0]["indices"] = 40; },
                  "accessor out of bounds");
  expect_rejected([](Glb& g) { g.doc["nodes"][0]["mesh"] = 1; }, "refers to mesh 1");
  expect_rejected([](Glb& g) { g.doc["scenes"][0]["nodes"] = {4}; }, "refers to node 4");
  expect_rejected([](Glb& g) { g.doc["scene"] = 1; }, "default scene 1 is missing");
  expect_rejected([](Glb& g) { g.doc["images"][0]["bufferView"] = 17; }, "bufferView");
  // tinygltf hands an image's bufferView over unchecked (a fuzzer's find: a heap overflow).
  expect_rejected(
      [](Glb& g) {
        const size_t view = g.doc["images"][0]["bufferView"].get<size_t>();
        g.doc["bufferViews"][view]["byteLength"] = 1u << 20;
      },
      "image 0: bufferView");
  expect_error(test::data_dir() + "/bad/mesh/fuzz_glb_image_view_past_buffer.glb",
               "runs past the end of buffer 0");
  // What only colours the mesh is left out with a warning: the geometry is intact.
  EXPECT_FALSE(expect_loads([](Glb& g) { g.doc["textures"][0]["source"] = 3; }).texture);
  EXPECT_FALSE(expect_loads([](Glb& g) {
                 g.doc["materials"][0]["pbrMetallicRoughness"]["baseColorTexture"]["index"] = 5;
               }).texture);
  EXPECT_TRUE(expect_loads([](Glb& g) { g.doc["textures"][0]["sampler"] = 3; }).texture);
  EXPECT_TRUE(expect_loads([](Glb& g) {
                g.doc["materials"][0]["emissiveTexture"] = json::object();
              }).texture);
  EXPECT_FALSE(
      expect_loads([](Glb& g) { g.doc["meshes"][0]["primitives"][0]["material"] = 2; }).texture);
}

// KHR_texture_transform moves the base-colour UVs (offset, rotation, scale, as the extension
// defines); malformed members of the optional extension are ignored.
TEST_F(GltfLoad, TextureTransform) {
  const Mesh plain = expect_loads([](Glb&) {});
  const auto transform = [](json t) {
    return [t](Glb& g) {
      g.doc["materials"][0]["pbrMetallicRoughness"]["baseColorTexture"]["extensions"] = {
          {"KHR_texture_transform", t}};
    };
  };
  const Mesh moved =
      expect_loads(transform({{"offset", {0.25, 0.5}}, {"scale", {2.0, 0.5}}}), 12, "moved.glb");
  ASSERT_EQ(moved.uvs.size(), plain.uvs.size());
  for (size_t i = 0; i < plain.uvs.size(); ++i) {
    // In glTF terms (v down): u' = 2u + 0.25, v' = 0.5v + 0.5; the mesh holds 1 - v.
    const float u = plain.uvs[i][0], v = 1.0f - plain.uvs[i][1];
    EXPECT_NEAR(moved.uvs[i][0], 2.0f * u + 0.25f, 1e-6f) << i;
    EXPECT_NEAR(moved.uvs[i][1], 1.0f - (0.5f * v + 0.5f), 1e-6f) << i;
  }
  const Mesh turned = expect_loads(transform({{"rotation", 1.5707963267948966}}), 12, "turned.glb");
  for (size_t i = 0; i < plain.uvs.size(); ++i) {
    // A quarter turn: u' = v, v' = -u.
    const float u = plain.uvs[i][0], v = 1.0f - plain.uvs[i][1];
    EXPECT_NEAR(turned.uvs[i][0], v, 1e-6f) << i;
    EXPECT_NEAR(turned.uvs[i][1], 1.0f + u, 1e-6f) << i;
  }
  const Mesh ignored = expect_loads(transform({{"offset", json::array()}}), 12, "ignored.glb");
  EXPECT_EQ(ignored.uvs, plain.uvs);
}

TEST_F(GltfLoad, Attributes) {
  auto attr = [](Glb& g) -> json& { return g.doc["meshes"][0]["primitives"][0]["attributes"]; };
  expect_rejected([&](Glb& g) { attr(g).erase("POSITION"); }, "no POSITION");
  expect_rejected([&](Glb& g) { attr(g)["NORMAL"] = attr(g)["TEXCOORD_0"]; },
                  "NORMAL) has an unexpected type");
  expect_rejected([&](Glb& g) { attr(g)["TEXCOORD_0"] = attr(g)["POSITION"]; },
                  "TEXCOORD) has an unexpected type");
  // Attributes gen3d does not use, and one whose count differs from POSITION's, are ignored.
  expect_loads([&](Glb& g) { attr(g)["POSITIONS"] = 1; });
  expect_loads([&](Glb& g) { attr(g)["COLOR_1"] = attr(g)["NORMAL"]; });
  expect_loads([&](Glb& g) { attr(g)["JOINTS_0"] = 3; });
  const Mesh no_normals = expect_loads(
      [&](Glb& g) { g.doc["accessors"][attr(g)["NORMAL"].get<size_t>()]["count"] = 3; });
  EXPECT_TRUE(no_normals.normals.empty());
}

TEST_F(GltfLoad, PrimitiveModes) {
  expect_rejected(
      [](Glb& g) {
        g.doc["meshes"][0]["primitives"][0]["mode"] = 6;  // fan
        g.doc["accessors"][0]["count"] = 2;
      },
      "contains no triangles");
  expect_rejected([](Glb& g) { g.doc["meshes"][0]["primitives"][0]["mode"] = 9; }, "invalid mode");
  expect_rejected([](Glb& g) { g.doc["accessors"][0]["componentType"] = 5126; },
                  "are not unsigned integers");
  // Strips and fans are unrolled: n indices make n - 2 triangles.
  expect_loads([](Glb& g) { g.doc["meshes"][0]["primitives"][0]["mode"] = 5; }, 34);
  expect_loads([](Glb& g) { g.doc["meshes"][0]["primitives"][0]["mode"] = 6; }, 34);
}

// Lines are dropped whatever their indices (a LINE_LOOP past its vertices crashed assimp).
TEST_F(GltfLoad, LinesAreDropped) {
  const auto line_loop = [](Glb& g) { g.doc["meshes"][0]["primitives"][0]["mode"] = 2; };
  expect_rejected(line_loop, "no triangles");
  expect_rejected(
      [&](Glb& g) {
        line_loop(g);
        const size_t a = g.doc["meshes"][0]["primitives"][0]["indices"].get<size_t>();
        const json& idx = g.doc["accessors"][a];
        const json& view = g.doc["bufferViews"][idx["bufferView"].get<size_t>()];
        const size_t at = view.value("byteOffset", size_t{0}) + idx.value("byteOffset", size_t{0});
        g.bin[at + 1] = '\x7f';  // the first index's second byte: far past 24 vertices
      },
      "no triangles");
  expect_error(test::data_dir() + "/bad/mesh/fuzz_glb_line_loop_bad_index.glb", "no triangles");
}

// Triangles with an index past their vertices are dropped with a warning; the rest load.
TEST_F(GltfLoad, IndicesPastTheVerticesDropTheirTriangles) {
  expect_loads(
      [](Glb& g) {
        const size_t a = g.doc["meshes"][0]["primitives"][0]["indices"].get<size_t>();
        const json& idx = g.doc["accessors"][a];
        const json& view = g.doc["bufferViews"][idx["bufferView"].get<size_t>()];
        const size_t at = view.value("byteOffset", size_t{0}) + idx.value("byteOffset", size_t{0});
        g.bin[at + 1] = '\x7f';
      },
      11);
}

TEST_F(GltfLoad, NodeHierarchy) {
  expect_rejected([](Glb& g) { g.doc["nodes"][0]["children"] = {0}; }, "cycle");
  expect_rejected(
      [](Glb& g) {
        g.doc["nodes"] = {{{"mesh", 0}, {"children", {1}}}, {{"children", {0}}}};
      },
      "cycle");
  expect_rejected(
      [](Glb& g) {
        json nodes = json::array();
        for (int i = 0; i < 1100; ++i) nodes.push_back({{"children", {i + 1}}});
        nodes.push_back({{"mesh", 0}});
        g.doc["nodes"] = nodes;
      },
      "nested more than 1000 levels");
  // A node listed twice is placed twice; 300 levels load.
  expect_loads([](Glb& g) { g.doc["nodes"] = {{{"children", {1, 1}}}, {{"mesh", 0}}}; }, 24);
  expect_loads([](Glb& g) {
    json nodes = json::array();
    for (int i = 0; i < 300; ++i) nodes.push_back({{"children", {i + 1}}});
    nodes.push_back({{"mesh", 0}});
    g.doc["nodes"] = nodes;
  });
  // A matrix that is not 4 x 4 is ignored (tinygltf reads it as absent).
  expect_loads([](Glb& g) { g.doc["nodes"][0]["matrix"] = {1, 0, 0}; });
}

// Node transforms: a translation moves the vertices; a mirroring scale keeps the faces
// counter-clockwise outward by reversing their corners.
TEST_F(GltfLoad, NodeTransformsAndMirroring) {
  const Mesh plain = expect_loads([](Glb&) {});
  const Mesh moved = expect_loads([](Glb& g) { g.doc["nodes"][0]["translation"] = {1, 2, 3}; });
  ASSERT_EQ(moved.positions.size(), plain.positions.size());
  for (size_t i = 0; i < plain.positions.size(); ++i)
    for (int k = 0; k < 3; ++k)
      EXPECT_FLOAT_EQ(moved.positions[i][k], plain.positions[i][k] + float(k + 1));
  const Mesh mirrored = expect_loads([](Glb& g) { g.doc["nodes"][0]["scale"] = {-1, 1, 1}; });
  // Every face's normal (by its corner order) still points away from the centre.
  Vec3 centre{0, 0, 0};
  for (const Vec3& p : mirrored.positions)
    for (int k = 0; k < 3; ++k) centre[k] += p[k] / float(mirrored.positions.size());
  for (const Tri& f : mirrored.faces) {
    const Vec3 &a = mirrored.positions[f[0]], &b = mirrored.positions[f[1]],
               &c = mirrored.positions[f[2]];
    const float ux = b[0] - a[0], uy = b[1] - a[1], uz = b[2] - a[2];
    const float vx = c[0] - a[0], vy = c[1] - a[1], vz = c[2] - a[2];
    const float nx = uy * vz - uz * vy, ny = uz * vx - ux * vz, nz = ux * vy - uy * vx;
    const float cx = (a[0] + b[0] + c[0]) / 3 - centre[0],
                cy = (a[1] + b[1] + c[1]) / 3 - centre[1],
                cz = (a[2] + b[2] + c[2]) / 3 - centre[2];
    EXPECT_GT(nx * cx + ny * cy + nz * cz, 0.0f);
  }
}

TEST_F(GltfLoad, SparseAccessors) {
  // One sparse value replaces element `index` of the POSITION accessor; the index lives in a new
  // buffer view appended to the BIN chunk.
  auto sparse = [](uint16_t index) {
    return [index](Glb& g) {
      const size_t at = g.bin.size();
      g.bin.append(reinterpret_cast<const char*>(&index), 2);
      g.bin.append(2, '\0');
      const float value[3] = {0.5f, 0.5f, 0.5f};
      g.bin.append(reinterpret_cast<const char*>(value), 12);
      g.doc["buffers"][0]["byteLength"] = g.bin.size();
      g.doc["bufferViews"].push_back({{"buffer", 0}, {"byteOffset", at}, {"byteLength", 2}});
      g.doc["bufferViews"].push_back({{"buffer", 0}, {"byteOffset", at + 4}, {"byteLength", 12}});
      const size_t n = g.doc["bufferViews"].size();
      g.doc["accessors"][1]["sparse"] = {
          {"count", 1},
          {"indices", {{"bufferView", n - 2}, {"componentType", 5123}}},
          {"values", {{"bufferView", n - 1}}}};
    };
  };
  const Mesh m = expect_loads(sparse(2));
  EXPECT_NE(std::find(m.positions.begin(), m.positions.end(), Vec3{0.5f, 0.5f, 0.5f}),
            m.positions.end());
  expect_rejected(sparse(5000), "sparse index 5000");
  expect_rejected([](Glb& g) { g.doc["accessors"][1]["sparse"] = {{"count", 1}}; }, "indices");
}

// Skins and animations do not change the mesh as stored (its bind pose), even when malformed.
TEST_F(GltfLoad, SkinsAndAnimationsAreIgnored) {
  expect_loads([](Glb& g) {
    g.doc["skins"] = {{{"joints", {0}}}};
    g.doc["nodes"][0]["skin"] = 0;
  });
  expect_loads([](Glb& g) {
    const size_t n = g.doc["accessors"].size();
    g.doc["accessors"].push_back(
        {{"bufferView", 1}, {"componentType", 5126}, {"count", 4}, {"type", "SCALAR"}});
    g.doc["animations"] = {
        {{"samplers", {{{"input", n}, {"output", n + 7}, {"interpolation", "CUBICSPLINE"}}}},
         {"channels", {{{"sampler", 0}, {"target", {{"path", "translation"}}}}}}}};
  });
}

// A .gltf file with its buffer in a data URI and in an external file.
TEST_F(GltfLoad, TextGltfBuffers) {
  Glb g = base_;
  const std::string ext_path = dir_ + "/external.bin";
  write_bytes(ext_path, g.bin);
  g.doc["buffers"][0]["uri"] = "external.bin";
  const std::string text = dir_ + "/external.gltf";
  std::ofstream(text) << g.doc.dump();
  EXPECT_EQ(load_mesh(text).faces.size(), 12u);
  EXPECT_TRUE(load_mesh(text).texture);

  g.doc["buffers"][0]["uri"] = "data:application/octet-stream;base64,AAAA";
  std::ofstream(text) << g.doc.dump();
  expect_error(text, "Failed to decode");
  g.doc["buffers"][0]["uri"] = "missing.bin";
  std::ofstream(text) << g.doc.dump();
  expect_error(text, "missing.bin");
  // An image that cannot be read leaves the mesh untextured, with a warning.
  g.doc["buffers"][0]["uri"] = "external.bin";
  g.doc["images"][0] = {{"uri", "data:image/png;base64,iVBORw0KGgo="}};
  std::ofstream(text) << g.doc.dump();
  EXPECT_FALSE(load_mesh(text).texture);
  g.doc["images"][0] = {{"uri", "no%20such%20file.png"}};
  std::ofstream(text) << g.doc.dump();
  EXPECT_FALSE(load_mesh(text).texture);
}

// A texture file next to the model, named with percent-escapes as glTF URIs are.
TEST_F(GltfLoad, ExternalImagesAreFoundByTheirDecodedName) {
  Glb g = base_;
  const size_t view = g.doc["images"][0]["bufferView"].get<size_t>();
  const size_t at = g.doc["bufferViews"][view].value("byteOffset", size_t{0});
  const size_t length = g.doc["bufferViews"][view]["byteLength"].get<size_t>();
  write_bytes(dir_ + "/my texture.png", g.bin.substr(at, length));
  g.doc["images"][0] = {{"uri", "my%20texture.png"}};
  const std::string path = dir_ + "/external_image.glb";
  write_bytes(path, glb_bytes(g.doc.dump(), g.bin));
  EXPECT_TRUE(load_mesh(path).texture);
}

// A Draco-compressed GLB (made by Debian's draco_encoder): the box's 12 triangles decode, and a
// damaged bitstream or attribute id is one named error.
TEST_F(GltfLoad, DracoPrimitivesDecodeAndDamageIsNamed) {
  const std::string file = test::data_dir() + "/mesh/draco/box.glb";
  const Mesh box = load_mesh(file);
  EXPECT_EQ(box.faces.size(), 12u);
  EXPECT_EQ(box.positions.size(), 8u);
  const std::string bytes = read_bytes(file);
  const uint32_t js_len = u32_at(bytes, 12);
  Glb draco{json::parse(bytes.substr(20, js_len)), bytes.substr(20 + js_len + 8)};
  const auto damaged = [&](const std::function<void(Glb&)>& edit, const std::string& fragment) {
    Glb g = draco;
    edit(g);
    const std::string path = dir_ + "/draco_damaged.glb";
    write_bytes(path, glb_bytes(g.doc.dump(), g.bin));
    expect_error(path, fragment);
  };
  auto ext = [](Glb& g) -> json& {
    return g.doc["meshes"][0]["primitives"][0]["extensions"]["KHR_draco_mesh_compression"];
  };
  damaged([](Glb& g) { std::fill(g.bin.begin() + 8, g.bin.end(), '\x5a'); }, "does not decode");
  damaged([&](Glb& g) { ext(g)["attributes"]["POSITION"] = 7; }, "no usable POSITION");
  damaged([&](Glb& g) { ext(g)["bufferView"] = 3; }, "refers to bufferView 3");
  damaged([&](Glb& g) { g.doc["bufferViews"][0]["byteLength"] = 1u << 20; },
          "runs past the end of buffer 0");
}

// glTF JSON under another extension is not read as glTF.
TEST_F(GltfLoad, GltfContentUnderOtherExtensionsIsNotReadAsGltf) {
  Glb g = base_;
  g.doc["buffers"][0]["uri"] = "external.bin";
  write_bytes(dir_ + "/external.bin", g.bin);
  const std::string xml = dir_ + "/scene.xml";
  std::ofstream(xml) << g.doc.dump();
  EXPECT_THROW(load_mesh(xml), MeshError);
}

}  // namespace
}  // namespace gen3d::mesh
