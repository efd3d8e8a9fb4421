// The glTF 2.0 / GLB pre-check: a valid GLB written by save_mesh is damaged one field at a time,
// and every damage must give a MeshError that names the file and the problem, never reach assimp's
// glTF reader (which crashes on several of them).
#include <gtest/gtest.h>

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

std::string read_bytes(const std::string& path) {
  std::ifstream in(path, std::ios::binary);
  return std::string((std::istreambuf_iterator<char>(in)), std::istreambuf_iterator<char>());
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

class GltfPrecheck : public ::testing::Test {
 protected:
  void SetUp() override {
    // One directory per test: CTest runs the tests of this fixture in parallel processes.
    dir_ = test::temp_dir(std::string("mesh_gltf_precheck_") +
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

  std::string dir_;
  Glb base_;
};

TEST_F(GltfPrecheck, UndamagedFilesLoad) {
  Glb g = base_;
  const std::string path = dir_ + "/ok.glb";
  write_bytes(path, glb_bytes(g.doc.dump(), g.bin));
  const Mesh m = load_mesh(path);
  EXPECT_EQ(m.faces.size(), 12u);
  EXPECT_TRUE(m.texture);
  const Mesh box = load_mesh(test::data_dir() + "/mesh/meshes-assimp/glTF2/BoxTextured.glb");
  EXPECT_EQ(box.faces.size(), 12u);
}

// The fuzzer's crash: an embedded image whose mimeType has no '/'.
TEST_F(GltfPrecheck, MimeTypeWithoutSlash) {
  expect_rejected([](Glb& g) { g.doc["images"][0]["mimeType"] = "image-png"; }, "mimeType");
  expect_rejected([](Glb& g) { g.doc["images"][0].erase("mimeType"); }, "no mimeType");
}

TEST_F(GltfPrecheck, RecordedFuzzCrashIsRejected) {
  expect_error(test::data_dir() + "/bad/mesh/fuzz_glb_mimetype_no_slash.glb", "mimeType");
}

TEST_F(GltfPrecheck, Container) {
  const std::string good = glb_bytes(base_.doc.dump(), base_.bin);
  const std::string path = dir_ + "/container.glb";
  write_bytes(path, good.substr(0, good.size() - 5));
  expect_error(path, "length");
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
  const uint32_t js_len = u32_at(good, 12);
  bad[20 + js_len + 4] = 'X';  // BIN chunk type
  write_bytes(path, bad);
  expect_error(path, "not BIN");
  expect_rejected([](Glb& g) { g.bin.resize(16); }, "BIN chunk holds only");
  expect_rejected([](Glb& g) { g.doc["buffers"][0]["uri"] = "data:,abc"; }, "BIN chunk");
}

TEST_F(GltfPrecheck, JsonText) {
  const std::string path = dir_ + "/json.glb";
  write_bytes(path, glb_bytes("{\"asset\": {\"version\": \"2.0\"}, ", base_.bin));
  expect_error(path, "does not parse");
  write_bytes(path, glb_bytes("{\"asset\": {\"version\": \"2.0\"}, \"asset\": {}}", base_.bin));
  expect_error(path, "duplicate key 'asset'");
  write_bytes(
      path, glb_bytes("{\"a\": " + std::string(100, '[') + std::string(100, ']') + "}", base_.bin));
  expect_error(path, "nested more than");
  expect_rejected([](Glb& g) { g.doc["asset"]["version"] = "1.0"; }, "glTF 1.0");
  expect_rejected([](Glb& g) { g.doc.erase("asset"); }, "no 'asset'");
  expect_rejected([](Glb& g) { g.doc["meshes"][0]["name"] = std::string(600, 'n'); },
                  "name longer than");
}

TEST_F(GltfPrecheck, ByteRanges) {
  expect_rejected([](Glb& g) { g.doc["accessors"][1]["count"] = 1000; },
                  "runs past the end of bufferView");
  expect_rejected([](Glb& g) { g.doc["accessors"][1]["byteOffset"] = 8; },
                  "runs past the end of bufferView");
  expect_rejected([](Glb& g) { g.doc["bufferViews"][1]["byteLength"] = 1u << 30; },
                  "runs past the end of buffer 0");
  expect_rejected([](Glb& g) { g.doc["bufferViews"][1]["byteOffset"] = ~uint64_t(0) - 4; },
                  "runs past the end of buffer 0");
  expect_rejected([](Glb& g) { g.doc["bufferViews"][1]["byteStride"] = 4; },
                  "less than the element size");
  expect_rejected([](Glb& g) { g.doc["bufferViews"][1]["byteStride"] = 13; }, "byteStride");
  expect_rejected([](Glb& g) { g.doc["accessors"][1]["count"] = 0; }, "count of 0");
  expect_rejected([](Glb& g) { g.doc["accessors"][1]["componentType"] = 5124; }, "componentType");
  expect_rejected([](Glb& g) { g.doc["accessors"][1]["type"] = "VEC5"; }, "invalid type");
  expect_rejected([](Glb& g) { g.doc["buffers"][0]["byteLength"] = -1; }, "non-negative integer");
}

TEST_F(GltfPrecheck, References) {
  expect_rejected([](Glb& g) { g.doc["accessors"][1]["bufferView"] = 99; },
                  "refers to bufferView 99");
  expect_rejected([](Glb& g) { g.doc["bufferViews"][0]["buffer"] = 1; }, "refers to buffer 1");
  expect_rejected([](Glb& g) { g.doc["textures"][0]["source"] = 3; }, "refers to image 3");
  expect_rejected([](Glb& g) { g.doc["textures"][0]["sampler"] = 3; }, "refers to sampler 3");
  expect_rejected(
      [](Glb& g) {
        g.doc["materials"][0]["pbrMetallicRoughness"]["baseColorTexture"]["index"] = 5;
      },
      "refers to texture 5");
  expect_rejected([](Glb& g) { g.doc["materials"][0]["emissiveTexture"] = json::object(); },
                  "has no 'index'");
  expect_rejected([](Glb& g) { g.doc["meshes"][0]["primitives"][0]["material"] = 2; },
                  "refers to material 2");
  expect_rejected([](Glb& g) { g.doc["meshes"][0]["primitives"][0]["indices"] = 40; },
                  "refers to accessor 40");
  expect_rejected([](Glb& g) { g.doc["nodes"][0]["mesh"] = 1; }, "refers to mesh 1");
  expect_rejected([](Glb& g) { g.doc["scenes"][0]["nodes"] = {4}; }, "not a node index");
  expect_rejected([](Glb& g) { g.doc["scene"] = 1; }, "refers to scene 1");
  expect_rejected([](Glb& g) { g.doc["images"][0]["bufferView"] = 17; }, "refers to bufferView 17");
}

TEST_F(GltfPrecheck, TextureTransformArrays) {
  expect_rejected(
      [](Glb& g) {
        g.doc["materials"][0]["pbrMetallicRoughness"]["baseColorTexture"]["extensions"] = {
            {"KHR_texture_transform", {{"offset", json::array()}}}};
      },
      "offset");
}

TEST_F(GltfPrecheck, Attributes) {
  auto attr = [](Glb& g) -> json& { return g.doc["meshes"][0]["primitives"][0]["attributes"]; };
  expect_rejected([&](Glb& g) { attr(g).erase("POSITION"); }, "no POSITION");
  expect_rejected([&](Glb& g) { attr(g)["POSITIONS"] = 1; }, "unknown attribute 'POSITIONS'");
  expect_rejected([&](Glb& g) { attr(g)["TEXCOORD_-1"] = 3; }, "unknown attribute");
  expect_rejected([&](Glb& g) { attr(g)["COLOR_1"] = attr(g)["NORMAL"]; }, "not numbered");
  expect_rejected([&](Glb& g) { attr(g)["NORMAL"] = attr(g)["TEXCOORD_0"]; },
                  "NORMAL has type VEC2");
  expect_rejected([&](Glb& g) { attr(g)["TEXCOORD_0"] = attr(g)["POSITION"]; }, "not supported");
  expect_rejected([&](Glb& g) { g.doc["accessors"][3]["count"] = 3; }, "elements but POSITION has");
  expect_rejected([&](Glb& g) { attr(g)["JOINTS_0"] = 3; }, "JOINTS_0");
}

TEST_F(GltfPrecheck, PrimitiveModesNeedEnoughVertices) {
  expect_rejected(
      [](Glb& g) {
        g.doc["meshes"][0]["primitives"][0]["mode"] = 6;  // fan
        g.doc["accessors"][0]["count"] = 2;
      },
      "too few for mode 6");
  expect_rejected([](Glb& g) { g.doc["meshes"][0]["primitives"][0]["mode"] = 9; }, "invalid mode");
  expect_rejected([](Glb& g) { g.doc["accessors"][0]["componentType"] = 5126; },
                  "indices has type");
}

// assimp crashes assembling a LINE_LOOP whose indices run past the vertices (a fuzzer's find);
// a LINE_LOOP with valid indices passes the pre-check (assimp reads it: it has no triangles).
TEST_F(GltfPrecheck, LineLoopIndicesMustBeInRange) {
  const auto line_loop = [](Glb& g) { g.doc["meshes"][0]["primitives"][0]["mode"] = 2; };
  {
    Glb g = base_;
    line_loop(g);
    const std::string path = dir_ + "/loop.glb";
    write_bytes(path, glb_bytes(g.doc.dump(), g.bin));
    expect_error(path, "no triangles");
  }
  expect_rejected(
      [&](Glb& g) {
        line_loop(g);
        const size_t a = g.doc["meshes"][0]["primitives"][0]["indices"].get<size_t>();
        const json& idx = g.doc["accessors"][a];
        const json& view = g.doc["bufferViews"][idx["bufferView"].get<size_t>()];
        const size_t at = view.value("byteOffset", size_t{0}) + idx.value("byteOffset", size_t{0});
        g.bin[at + 1] = '\x7f';  // the first index's second byte: far past 24 vertices
      },
      "(a LINE_LOOP) indices: index");
  expect_error(test::data_dir() + "/bad/mesh/fuzz_glb_line_loop_bad_index.glb", "LINE_LOOP");
}

TEST_F(GltfPrecheck, NodeHierarchy) {
  expect_rejected([](Glb& g) { g.doc["nodes"][0]["children"] = {0}; }, "its own child");
  expect_rejected(
      [](Glb& g) {
        g.doc["nodes"] = {{{"mesh", 0}, {"children", {1}}}, {{"children", {0}}}};
      },
      "cycle");
  expect_rejected(
      [](Glb& g) {
        g.doc["nodes"] = {{{"mesh", 0}, {"children", {1, 1}}}, json::object()};
      },
      "more than one parent");
  expect_rejected(
      [](Glb& g) {
        json nodes = json::array();
        for (int i = 0; i < 300; ++i) nodes.push_back({{"children", {i + 1}}});
        nodes.push_back({{"mesh", 0}});
        g.doc["nodes"] = nodes;
      },
      "nested more than");
  expect_rejected([](Glb& g) { g.doc["nodes"][0]["matrix"] = {1, 0, 0}; }, "matrix");
}

TEST_F(GltfPrecheck, SparseAccessors) {
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
  Glb g = base_;
  sparse(2)(g);
  const std::string ok = dir_ + "/sparse_ok.glb";
  write_bytes(ok, glb_bytes(g.doc.dump(), g.bin));
  EXPECT_NO_THROW(load_mesh(ok));
  expect_rejected(sparse(5000), "sparse index 5000");
  expect_rejected([](Glb& g) { g.doc["accessors"][1]["sparse"] = {{"count", 1}}; }, "no indices");
}

TEST_F(GltfPrecheck, SkinsAndAnimations) {
  expect_rejected(
      [](Glb& g) {
        g.doc["skins"] = {{{"joints", {0}}}};
        g.doc["nodes"][0]["skin"] = 0;
      },
      "inverseBindMatrices");
  // Animation keyframes: accessor 0 holds the 36 indices; reuse views as stand-ins for float data.
  auto animation = [](const char* interpolation, uint64_t output_count) {
    return [=](Glb& g) {
      const size_t n = g.doc["accessors"].size();
      g.doc["accessors"].push_back(
          {{"bufferView", 1}, {"componentType", 5126}, {"count", 4}, {"type", "SCALAR"}});
      g.doc["accessors"].push_back(
          {{"bufferView", 1}, {"componentType", 5126}, {"count", output_count}, {"type", "VEC3"}});
      g.doc["animations"] = {
          {{"samplers", {{{"input", n}, {"output", n + 1}, {"interpolation", interpolation}}}},
           {"channels", {{{"sampler", 0}, {"target", {{"node", 0}, {"path", "translation"}}}}}}}};
    };
  };
  Glb g = base_;
  animation("LINEAR", 4)(g);
  const std::string ok = dir_ + "/animated_ok.glb";
  write_bytes(ok, glb_bytes(g.doc.dump(), g.bin));
  EXPECT_NO_THROW(load_mesh(ok));
  expect_rejected(animation("CUBICSPLINE", 4), "values for 4 keyframes");
  expect_rejected(
      [&](Glb& g) {
        animation("LINEAR", 4)(g);
        g.doc["animations"][0]["channels"][0]["target"].erase("node");
      },
      "has no 'node'");
}

// A .gltf file with its buffer in a data URI and in an external file.
TEST_F(GltfPrecheck, TextGltfBuffers) {
  Glb g = base_;
  g.doc["images"][0] = {{"uri", "data:image/png;base64,iVBORw0KGgo="}};
  const std::string ext_path = dir_ + "/external.bin";
  write_bytes(ext_path, g.bin);
  g.doc["buffers"][0]["uri"] = "external.bin";
  const std::string text = dir_ + "/external.gltf";
  std::ofstream(text) << g.doc.dump();
  EXPECT_EQ(load_mesh(text).faces.size(), 12u);

  g.doc["buffers"][0]["uri"] = "data:application/octet-stream;base64,AAAA";
  std::ofstream(text) << g.doc.dump();
  expect_error(text, "data URI holds only 3");
  g.doc["buffers"][0]["uri"] = "data:application/octet-stream;base64,AA*A";
  std::ofstream(text) << g.doc.dump();
  expect_error(text, "invalid base64");
  g.doc["buffers"][0]["uri"] = "external.bin";
  g.doc["images"][0] = {{"uri", "data:imagepng;base64,iVBORw0KGgo="}};
  std::ofstream(text) << g.doc.dump();
  expect_error(text, "media type 'imagepng'");
  g.doc["images"][0] = {{"uri", "data:image/png;" + std::string(200, 'x') + ",AAAA"}};
  std::ofstream(text) << g.doc.dump();
  expect_error(text, "header is too long");
  g.doc["images"][0] = {{"uri",
                         "\x10"
                         "abc"}};
  std::ofstream(text) << g.doc.dump();
  expect_error(text, "control characters");
}

// glTF JSON under another extension must not reach assimp's glTF reader unchecked.
TEST_F(GltfPrecheck, GltfContentUnderOtherExtensionsIsNotReadAsGltf) {
  Glb g = base_;
  g.doc["buffers"][0]["uri"] = "external.bin";
  write_bytes(dir_ + "/external.bin", g.bin);
  g.doc["images"][0]["mimeType"] = "image-png";
  const std::string xml = dir_ + "/scene.xml";
  std::ofstream(xml) << g.doc.dump();
  EXPECT_THROW(load_mesh(xml), MeshError);
}

}  // namespace
}  // namespace gen3d::mesh
