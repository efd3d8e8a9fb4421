// glTF 2.0 through tinygltf. tinygltf parses the JSON, the GLB container, data URIs and external
// buffers; everything read out of the buffers is bounds-checked here (tinygltf does not check
// accessor ranges), and Draco-compressed primitives are decoded here with libdraco (tinygltf's own
// Draco path does not check the indices it follows). Texture images keep their encoded bytes and
// are decoded by gen3d::image, or read from the file next to the model.
#include <algorithm>
#include <array>
#include <cmath>
#include <cstring>
#include <filesystem>
#include <fstream>
#include <initializer_list>
#include <iterator>
#include <limits>
#include <memory>
#include <string_view>

#include <draco/compression/decode.h>
#include <spdlog/spdlog.h>
#include <Eigen/Core>
#include <Eigen/Geometry>
#include <Eigen/LU>
#include <nlohmann/json.hpp>

#include "image/codec.h"
#include "image/error.h"
#include "image/io.h"
#include "mesh/error.h"
#include "mesh/scene_parts.h"
#include "mesh/tinygltf.h"

namespace gen3d::mesh::detail {
namespace fs = std::filesystem;

namespace {

// Accessors with no bufferView are zeros (plus sparse values): their size is not bounded by the
// file, so it is bounded here (256 M components, 1 GiB of floats).
constexpr uint64_t kMaxZeroComponents = uint64_t{1} << 28;
constexpr int kMaxNodeDepth = 1000;
// Valid glTF nests a dozen levels; tinygltf converts JSON recursively (200,000 levels overflowed
// the stack), so deeper text is refused before it parses.
constexpr int kMaxJsonDepth = 256;

class Reader {
 public:
  explicit Reader(const std::string& path) : path_(path) {}

  [[noreturn]] void fail(const std::string& what) const {
    throw MeshError("cannot load mesh '" + path_ + "': " + what);
  }

  void load() {
    std::ifstream in(path_, std::ios::binary);
    if (!in) fail("cannot open the file");
    const std::string bytes((std::istreambuf_iterator<char>(in)), std::istreambuf_iterator<char>());
    const bool binary = bytes.size() >= 4 && std::memcmp(bytes.data(), "glTF", 4) == 0;
    if (fs::path(path_).extension() == ".glb" && !binary)
      fail("not a GLB file (missing glTF magic)");
    if (bytes.size() >= std::numeric_limits<unsigned>::max()) fail("the file is 4 GiB or larger");
    std::string_view json_text = bytes;
    if (binary) json_text = glb_json(bytes);
    if (json_depth(json_text) > kMaxJsonDepth)
      fail("the glTF JSON is nested more than " + std::to_string(kMaxJsonDepth) +
           " levels deep (tinygltf reads nesting recursively)");
    const std::string text = without_draco_indices(bytes, json_text, binary);
    tinygltf::TinyGLTF loader;
    // Images keep their encoded bytes: decoding waits until a face uses the material. tinygltf
    // hands over a bufferView's bytes without checking the view against its buffer, so that is
    // checked here first.
    loader.SetImageLoader(
        [](tinygltf::Image* image, int index, std::string* err, std::string*, int, int,
           const unsigned char* data, int size, void* user) {
          const tinygltf::Model& model = *static_cast<const tinygltf::Model*>(user);
          if (image->bufferView >= 0) {
            const auto& view = model.bufferViews[size_t(image->bufferView)];
            const size_t buffer = model.buffers[size_t(view.buffer)].data.size();
            if (view.byteOffset > buffer || view.byteLength > buffer - view.byteOffset) {
              if (err)
                *err += "image " + std::to_string(index) + ": bufferView " +
                        std::to_string(image->bufferView) + " runs past the end of buffer " +
                        std::to_string(view.buffer);
              return false;
            }
          }
          image->image.assign(data, data + size);
          image->as_is = true;
          return true;
        },
        &model_);
    // A uri is a file only if it names a regular one: tinygltf would read a directory (an empty
    // uri names the model's own) as a file of 2^63 bytes and fail with std::bad_alloc.
    loader.SetFsCallbacks({[](const std::string& file, void*) {
                             std::error_code ec;
                             return fs::is_regular_file(file, ec);
                           },
                           &tinygltf::ExpandFilePath, &tinygltf::ReadWholeFile,
                           &tinygltf::WriteWholeFile, nullptr});
    std::string err, warn;
    const std::string dir = fs::path(path_).parent_path().string();
    bool ok = false;
    try {
      ok = binary ? loader.LoadBinaryFromMemory(&model_, &err, &warn,
                                                reinterpret_cast<const unsigned char*>(text.data()),
                                                static_cast<unsigned>(text.size()), dir)
                  : loader.LoadASCIIFromString(&model_, &err, &warn, text.data(),
                                               static_cast<unsigned>(text.size()), dir);
    } catch (const std::exception& e) {  // allocation failures on absurd sizes, say
      fail(std::string("the glTF reader failed: ") + e.what());
    }
    if (!warn.empty()) spdlog::debug("{}: tinygltf: {}", path_, first_line(warn));
    if (!ok) fail(first_line(err.empty() ? std::string("the glTF reader failed") : err));
    if (model_.asset.version.rfind("1", 0) == 0) fail("glTF 1.0 is not supported, only glTF 2.0");
    if (model_.asset.version.rfind("2", 0) != 0)
      fail("unsupported glTF version '" + model_.asset.version + "'");
  }

  Scene scene() {
    Scene out;
    // The primitives of every node of the default scene (or of every root node when the file
    // names no scene), each in its node's world transform.
    std::vector<int> roots;
    if (!model_.scenes.empty()) {
      const int s = model_.defaultScene >= 0 ? model_.defaultScene : 0;
      if (s >= int(model_.scenes.size()))
        fail("the default scene " + std::to_string(s) + " is missing");
      roots = model_.scenes[size_t(s)].nodes;
    } else {
      std::vector<uint8_t> child(model_.nodes.size(), 0);
      for (const tinygltf::Node& n : model_.nodes)
        for (int c : n.children)
          if (c >= 0 && c < int(child.size())) child[size_t(c)] = 1;
      for (size_t n = 0; n < model_.nodes.size(); ++n)
        if (!child[n]) roots.push_back(int(n));
    }
    std::vector<uint8_t> on_path(model_.nodes.size(), 0);
    for (int r : roots) visit(r, Eigen::Matrix4d::Identity(), 0, on_path, out);
    out.dropped = dropped_;
    if (out_of_range_ > 0)
      spdlog::warn("{}: dropped {} triangles whose indices are past their vertices", path_,
                   out_of_range_);
    auto model = std::make_shared<tinygltf::Model>(std::move(model_));
    const std::string path = path_;
    out.material = [model, path](unsigned m, bool with_texture) {
      return material(*model, m, with_texture, path);
    };
    return out;
  }

 private:
  // tinygltf (built without its own Draco decoder, which trusts the file's references) refuses a
  // compressed primitive's index accessor, which has no bufferView. The indices come from the
  // Draco stream, so such primitives lose their "indices" before tinygltf reads the JSON (a GLB is
  // reassembled around the new JSON chunk; its BIN chunk is kept as it is).
  // `json_text` is the file's JSON (a GLB's JSON chunk, checked by glb_json).
  static std::string without_draco_indices(const std::string& bytes, std::string_view json_text,
                                           bool binary) {
    if (json_text.find("KHR_draco_mesh_compression") == std::string_view::npos) return bytes;
    nlohmann::json doc = nlohmann::json::parse(json_text, nullptr, /*allow_exceptions=*/false);
    if (!doc.is_object() || !doc.contains("meshes") || !doc["meshes"].is_array()) return bytes;
    bool changed = false;
    for (auto& mesh : doc["meshes"]) {
      if (!mesh.is_object() || !mesh.contains("primitives") || !mesh["primitives"].is_array())
        continue;
      for (auto& p : mesh["primitives"]) {
        if (p.is_object() && p.contains("indices") && p.contains("extensions") &&
            p["extensions"].is_object() && p["extensions"].contains("KHR_draco_mesh_compression")) {
          p.erase("indices");
          changed = true;
        }
      }
    }
    if (!changed) return bytes;
    std::string json = doc.dump();
    if (!binary) return json;
    while (json.size() % 4) json.push_back(' ');
    const std::string_view rest = std::string_view(bytes).substr(20 + json_text.size());
    std::string glb(bytes.substr(0, 8));  // magic and version
    const auto u32 = [&](uint32_t v) { glb.append(reinterpret_cast<const char*>(&v), 4); };
    u32(uint32_t(20 + json.size() + rest.size()));
    u32(uint32_t(json.size()));
    u32(0x4E4F534A);  // "JSON"
    glb += json;
    glb += rest;
    return glb;
  }

  // The GLB container's JSON chunk, after the checks that give a readable message (tinygltf's
  // say "Invalid glTF binary.").
  std::string_view glb_json(const std::string& bytes) const {
    if (bytes.size() < 20) fail("GLB file is truncated: no JSON chunk");
    const auto u32 = [&](size_t at) {
      uint32_t v;
      std::memcpy(&v, bytes.data() + at, 4);
      return v;
    };
    if (u32(4) == 1) fail("GLB version 1 (glTF 1.0) is not supported, only glTF 2.0");
    if (u32(4) != 2) fail("unsupported GLB version " + std::to_string(u32(4)));
    if (u32(8) != bytes.size())
      fail("GLB header gives a length of " + std::to_string(u32(8)) + " bytes but the file has " +
           std::to_string(bytes.size()));
    if (u32(16) != 0x4E4F534A) fail("GLB's first chunk is not JSON");
    if (u32(12) > bytes.size() - 20)
      fail("GLB JSON chunk of " + std::to_string(u32(12)) + " bytes runs past the end of the file");
    return std::string_view(bytes).substr(20, u32(12));
  }

  // Deepest nesting of arrays and objects in JSON text (strings skipped).
  static int json_depth(std::string_view text) {
    int depth = 0, deepest = 0;
    bool in_string = false;
    for (size_t i = 0; i < text.size(); ++i) {
      const char c = text[i];
      if (in_string) {
        if (c == '\\')
          ++i;
        else if (c == '"')
          in_string = false;
      } else if (c == '"') {
        in_string = true;
      } else if (c == '[' || c == '{') {
        deepest = std::max(deepest, ++depth);
      } else if (c == ']' || c == '}') {
        --depth;
      }
    }
    return deepest;
  }

  static std::string first_line(const std::string& s) {
    std::string line = s.substr(0, s.find('\n'));
    while (!line.empty() && std::isspace(static_cast<unsigned char>(line.back()))) line.pop_back();
    return line;
  }

  Eigen::Matrix4d local_transform(const tinygltf::Node& n) const {
    Eigen::Matrix4d m = Eigen::Matrix4d::Identity();
    if (n.matrix.size() == 16) {
      for (int c = 0; c < 4; ++c)
        for (int r = 0; r < 4; ++r) m(r, c) = n.matrix[size_t(c * 4 + r)];  // column-major
      return m;
    }
    if (n.scale.size() == 3)
      m = Eigen::Vector4d(n.scale[0], n.scale[1], n.scale[2], 1.0).asDiagonal();
    if (n.rotation.size() == 4) {
      Eigen::Quaterniond q(n.rotation[3], n.rotation[0], n.rotation[1], n.rotation[2]);
      if (q.norm() > 0) q.normalize();
      Eigen::Matrix4d r = Eigen::Matrix4d::Identity();
      r.topLeftCorner<3, 3>() = q.toRotationMatrix();
      m = r * m;
    }
    if (n.translation.size() == 3) {
      Eigen::Matrix4d t = Eigen::Matrix4d::Identity();
      t(0, 3) = n.translation[0], t(1, 3) = n.translation[1], t(2, 3) = n.translation[2];
      m = t * m;
    }
    return m;
  }

  void visit(int node, const Eigen::Matrix4d& parent, int depth, std::vector<uint8_t>& on_path,
             Scene& out) {
    if (node < 0 || node >= int(model_.nodes.size()))
      fail("a scene or node refers to node " + std::to_string(node) + " but there are " +
           std::to_string(model_.nodes.size()));
    if (depth > kMaxNodeDepth || on_path[size_t(node)])
      fail("node " + std::to_string(node) + " is nested more than " +
           std::to_string(kMaxNodeDepth) + " levels deep or in a cycle");
    on_path[size_t(node)] = 1;
    const tinygltf::Node& n = model_.nodes[size_t(node)];
    const Eigen::Matrix4d world = parent * local_transform(n);
    if (n.mesh >= 0) {
      if (n.mesh >= int(model_.meshes.size()))
        fail("node " + std::to_string(node) + " refers to mesh " + std::to_string(n.mesh) +
             " but there are " + std::to_string(model_.meshes.size()));
      const tinygltf::Mesh& mesh = model_.meshes[size_t(n.mesh)];
      for (size_t p = 0; p < mesh.primitives.size(); ++p)
        add_primitive(mesh.primitives[p], n.mesh, int(p), world, out);
    }
    for (int c : n.children) visit(c, world, depth + 1, on_path, out);
    on_path[size_t(node)] = 0;
  }

  // An accessor's elements as floats (integers normalized where the accessor says so), sparse
  // values applied; every byte range checked against its bufferView and buffer.
  std::vector<float> read_accessor(int index, std::initializer_list<int> types,
                                   const std::string& what) const {
    if (index < 0 || index >= int(model_.accessors.size()))
      fail(what + " refers to accessor " + std::to_string(index) + " but there are " +
           std::to_string(model_.accessors.size()));
    const tinygltf::Accessor& a = model_.accessors[size_t(index)];
    const std::string where = "accessor " + std::to_string(index);
    if (std::find(types.begin(), types.end(), a.type) == types.end())
      fail(where + " (" + what + ") has an unexpected type");
    const int comps = tinygltf::GetNumComponentsInType(uint32_t(a.type));
    const int size = tinygltf::GetComponentSizeInBytes(uint32_t(a.componentType));
    // glTF 2.0's component types: signed and unsigned bytes and shorts, unsigned ints, floats.
    constexpr int kTypes[] = {
        TINYGLTF_COMPONENT_TYPE_BYTE,         TINYGLTF_COMPONENT_TYPE_UNSIGNED_BYTE,
        TINYGLTF_COMPONENT_TYPE_SHORT,        TINYGLTF_COMPONENT_TYPE_UNSIGNED_SHORT,
        TINYGLTF_COMPONENT_TYPE_UNSIGNED_INT, TINYGLTF_COMPONENT_TYPE_FLOAT};
    if (comps <= 0 || size <= 0 ||
        std::find(std::begin(kTypes), std::end(kTypes), a.componentType) == std::end(kTypes))
      fail(where + " has an invalid componentType " + std::to_string(a.componentType));
    const uint64_t count = a.count, elem = uint64_t(comps) * uint64_t(size);
    std::vector<float> out;
    if (a.bufferView >= 0) {
      const auto [data, stride] = view_range(a.bufferView, a.byteOffset, count, elem, where);
      out.resize(count * uint64_t(comps));
      for (uint64_t i = 0; i < count; ++i)
        for (int c = 0; c < comps; ++c)
          out[i * comps + c] = component(data + i * stride + uint64_t(c) * size, a);
    } else {
      if (count * uint64_t(comps) > kMaxZeroComponents)
        fail(where + " has no bufferView and a count of " + std::to_string(count));
      out.assign(count * uint64_t(comps), 0.0f);
    }
    if (a.sparse.isSparse) {
      const auto& s = a.sparse;
      if (s.count < 0 || uint64_t(s.count) > count)
        fail(where + " has a sparse count of " + std::to_string(s.count));
      const int isize = tinygltf::GetComponentSizeInBytes(uint32_t(s.indices.componentType));
      if (isize <= 0 || s.indices.componentType == TINYGLTF_COMPONENT_TYPE_FLOAT ||
          s.indices.componentType == TINYGLTF_COMPONENT_TYPE_DOUBLE)
        fail(where + " has sparse indices of componentType " +
             std::to_string(s.indices.componentType));
      const auto [idata, istride] = view_range(s.indices.bufferView, uint64_t(s.indices.byteOffset),
                                               uint64_t(s.count), uint64_t(isize), where);
      const auto [vdata, vstride] = view_range(s.values.bufferView, uint64_t(s.values.byteOffset),
                                               uint64_t(s.count), elem, where);
      (void)istride, (void)vstride;
      tinygltf::Accessor values = a;
      for (int k = 0; k < s.count; ++k) {
        const uint64_t target =
            unsigned_index(idata + uint64_t(k) * uint64_t(isize), s.indices.componentType);
        if (target >= count)
          fail(where + ": sparse index " + std::to_string(target) + " is past its " +
               std::to_string(count) + " elements");
        for (int c = 0; c < comps; ++c)
          out[target * comps + c] =
              component(vdata + uint64_t(k) * elem + uint64_t(c) * size, values);
      }
    }
    return out;
  }

  // The first byte of `count` elements of `elem` bytes at `offset` in a bufferView, and their
  // stride; fails when any of them lies outside the view or the view outside its buffer.
  std::pair<const unsigned char*, uint64_t> view_range(int view, uint64_t offset, uint64_t count,
                                                       uint64_t elem,
                                                       const std::string& where) const {
    if (view < 0 || view >= int(model_.bufferViews.size()))
      fail(where + " refers to bufferView " + std::to_string(view) + " but there are " +
           std::to_string(model_.bufferViews.size()));
    const tinygltf::BufferView& v = model_.bufferViews[size_t(view)];
    const std::string vw = "bufferView " + std::to_string(view);
    if (v.buffer < 0 || v.buffer >= int(model_.buffers.size()))
      fail(vw + " refers to buffer " + std::to_string(v.buffer) + " but there are " +
           std::to_string(model_.buffers.size()));
    const uint64_t buffer_size = model_.buffers[size_t(v.buffer)].data.size();
    if (v.byteOffset > buffer_size || v.byteLength > buffer_size - v.byteOffset)
      fail(vw + " (offset " + std::to_string(v.byteOffset) + ", length " +
           std::to_string(v.byteLength) + ") runs past the end of buffer " +
           std::to_string(v.buffer) + " (" + std::to_string(buffer_size) + " bytes)");
    const uint64_t stride = v.byteStride ? uint64_t(v.byteStride) : elem;
    if (stride < elem)
      fail(vw + " has a byteStride of " + std::to_string(v.byteStride) + ", less than the " +
           std::to_string(elem) + "-byte elements of " + where);
    if (count > 0) {
      // offset + stride * (count - 1) + elem <= byteLength, without overflow.
      const uint64_t length = v.byteLength;
      const bool fits = offset <= length && elem <= length - offset &&
                        (count - 1) <= (length - offset - elem) / stride;
      if (!fits)
        fail(where + " (offset " + std::to_string(offset) + ", " + std::to_string(count) +
             " elements) runs past the end of " + vw);
    }
    return {model_.buffers[size_t(v.buffer)].data.data() + v.byteOffset + offset, stride};
  }

  static uint64_t unsigned_index(const unsigned char* p, int type) {
    switch (type) {
      case TINYGLTF_COMPONENT_TYPE_UNSIGNED_BYTE:
        return *p;
      case TINYGLTF_COMPONENT_TYPE_UNSIGNED_SHORT: {
        uint16_t v;
        std::memcpy(&v, p, 2);
        return v;
      }
      case TINYGLTF_COMPONENT_TYPE_UNSIGNED_INT: {
        uint32_t v;
        std::memcpy(&v, p, 4);
        return v;
      }
      default:
        return std::numeric_limits<uint64_t>::max();  // signed types are not indices
    }
  }

  static float component(const unsigned char* p, const tinygltf::Accessor& a) {
    const bool norm = a.normalized;
    switch (a.componentType) {
      case TINYGLTF_COMPONENT_TYPE_FLOAT: {
        float v;
        std::memcpy(&v, p, 4);
        return v;
      }
      case TINYGLTF_COMPONENT_TYPE_UNSIGNED_BYTE:
        return norm ? float(*p) / 255.0f : float(*p);
      case TINYGLTF_COMPONENT_TYPE_BYTE: {
        const auto v = static_cast<int8_t>(*p);
        return norm ? std::max(float(v) / 127.0f, -1.0f) : float(v);
      }
      case TINYGLTF_COMPONENT_TYPE_UNSIGNED_SHORT: {
        uint16_t v;
        std::memcpy(&v, p, 2);
        return norm ? float(v) / 65535.0f : float(v);
      }
      case TINYGLTF_COMPONENT_TYPE_SHORT: {
        int16_t v;
        std::memcpy(&v, p, 2);
        return norm ? std::max(float(v) / 32767.0f, -1.0f) : float(v);
      }
      case TINYGLTF_COMPONENT_TYPE_UNSIGNED_INT: {
        uint32_t v;
        std::memcpy(&v, p, 4);
        return float(v);
      }
      default:
        return 0.0f;
    }
  }

  // The indices of a primitive: its accessor (unsigned integers), or 0 .. n-1.
  std::vector<uint32_t> read_indices(const tinygltf::Primitive& p, size_t vertices,
                                     const std::string& what) const {
    std::vector<uint32_t> out;
    if (p.indices < 0) {
      out.resize(vertices);
      for (size_t i = 0; i < vertices; ++i) out[i] = uint32_t(i);
      return out;
    }
    if (p.indices >= int(model_.accessors.size()))
      fail(what + " refers to accessor " + std::to_string(p.indices) + " but there are " +
           std::to_string(model_.accessors.size()));
    const tinygltf::Accessor& a = model_.accessors[size_t(p.indices)];
    const bool unsigned_type = a.componentType == TINYGLTF_COMPONENT_TYPE_UNSIGNED_BYTE ||
                               a.componentType == TINYGLTF_COMPONENT_TYPE_UNSIGNED_SHORT ||
                               a.componentType == TINYGLTF_COMPONENT_TYPE_UNSIGNED_INT;
    if (a.type != TINYGLTF_TYPE_SCALAR || !unsigned_type || a.sparse.isSparse || a.bufferView < 0)
      fail(what + ": its indices (accessor " + std::to_string(p.indices) +
           ") are not unsigned integers in a bufferView");
    const uint64_t size = uint64_t(tinygltf::GetComponentSizeInBytes(uint32_t(a.componentType)));
    const auto [data, stride] = view_range(a.bufferView, a.byteOffset, a.count, size,
                                           "accessor " + std::to_string(p.indices));
    out.resize(a.count);
    for (uint64_t i = 0; i < a.count; ++i) {
      const uint64_t v = unsigned_index(data + i * stride, a.componentType);
      out[i] = v < vertices ? uint32_t(v) : std::numeric_limits<uint32_t>::max();
    }
    return out;
  }

  // Which TEXCOORD set a material's base-colour texture reads, and its KHR_texture_transform.
  struct UvMapping {
    int set = 0;
    bool transform = false;
    double offset[2] = {0, 0}, rotation = 0, scale[2] = {1, 1};
  };
  UvMapping uv_mapping(int material) const {
    UvMapping m;
    if (material < 0 || material >= int(model_.materials.size())) return m;
    const tinygltf::TextureInfo& info =
        model_.materials[size_t(material)].pbrMetallicRoughness.baseColorTexture;
    m.set = std::max(0, info.texCoord);
    const auto ext = info.extensions.find("KHR_texture_transform");
    if (ext == info.extensions.end()) return m;
    const tinygltf::Value& t = ext->second;
    if (!t.IsObject()) return m;  // a malformed optional extension is ignored, as tinygltf does
    const auto number = [](const tinygltf::Value& v, double fallback) {
      return v.IsNumber() ? v.GetNumberAsDouble() : fallback;
    };
    const auto pair = [&](const char* key, double* out) {
      const tinygltf::Value& v = t.Get(key);
      if (v.IsArray() && v.ArrayLen() == 2)
        for (int i = 0; i < 2; ++i) out[i] = number(v.Get(i), out[i]);
    };
    m.transform = true;
    pair("offset", m.offset);
    pair("scale", m.scale);
    m.rotation = number(t.Get("rotation"), 0.0);
    if (t.Get("texCoord").IsInt()) m.set = std::max(0, t.Get("texCoord").GetNumberAsInt());
    return m;
  }

  // Attributes of a primitive, from accessors or from its Draco bitstream.
  struct Attributes {
    std::vector<float> positions, normals, uvs, colors;
    int color_components = 4;
    std::vector<uint32_t> indices;
  };

  Attributes read_plain(const tinygltf::Primitive& p, int uv_set, const std::string& what) const {
    Attributes at;
    const auto find = [&](const std::string& name) {
      const auto it = p.attributes.find(name);
      return it == p.attributes.end() ? -1 : it->second;
    };
    const int pos = find("POSITION");
    if (pos < 0) fail(what + " has no POSITION attribute");
    at.positions = read_accessor(pos, {TINYGLTF_TYPE_VEC3}, what + " POSITION");
    const size_t n = at.positions.size() / 3;
    const auto same_count = [&](std::vector<float>& v, int comps, const char* name) {
      if (!v.empty() && v.size() != n * size_t(comps)) {
        spdlog::warn("{}: {} {} has a different count than POSITION; ignoring it", path_, what,
                     name);
        v.clear();
      }
    };
    if (const int a = find("NORMAL"); a >= 0) {
      at.normals = read_accessor(a, {TINYGLTF_TYPE_VEC3}, what + " NORMAL");
      same_count(at.normals, 3, "NORMAL");
    }
    if (const int a = find("TEXCOORD_" + std::to_string(uv_set)); a >= 0) {
      at.uvs = read_accessor(a, {TINYGLTF_TYPE_VEC2}, what + " TEXCOORD");
      same_count(at.uvs, 2, "TEXCOORD");
    }
    if (const int a = find("COLOR_0"); a >= 0) {
      at.colors = read_accessor(a, {TINYGLTF_TYPE_VEC3, TINYGLTF_TYPE_VEC4}, what + " COLOR_0");
      at.color_components = model_.accessors[size_t(a)].type == TINYGLTF_TYPE_VEC3 ? 3 : 4;
      same_count(at.colors, at.color_components, "COLOR_0");
    }
    at.indices = read_indices(p, n, what);
    return at;
  }

  Attributes read_draco(const tinygltf::Primitive& p, const tinygltf::Value& ext, int uv_set,
                        const std::string& what) const {
    const std::string w = what + " KHR_draco_mesh_compression";
    if (!ext.IsObject() || !ext.Get("bufferView").IsInt() || !ext.Get("attributes").IsObject())
      fail(w + " has no bufferView or attributes");
    const int view = ext.Get("bufferView").GetNumberAsInt();
    const unsigned char* data = view_range(view, 0, 1, 1, w).first;  // the view lies in its buffer
    draco::DecoderBuffer buffer;
    buffer.Init(reinterpret_cast<const char*>(data), model_.bufferViews[size_t(view)].byteLength);
    draco::Decoder decoder;
    auto decoded = decoder.DecodeMeshFromBuffer(&buffer);
    if (!decoded.ok()) fail(w + " does not decode: " + decoded.status().error_msg_string());
    const std::unique_ptr<draco::Mesh> dm = std::move(decoded).value();
    const tinygltf::Value& ids = ext.Get("attributes");
    const auto attribute = [&](const std::string& name, int comps, std::vector<float>& out) {
      if (!p.attributes.count(name) || !ids.Has(name)) return false;
      const tinygltf::Value& id = ids.Get(name);
      const draco::PointAttribute* a =
          id.IsInt() ? dm->GetAttributeByUniqueId(uint32_t(id.GetNumberAsInt())) : nullptr;
      if (!a || a->num_components() < comps || a->num_components() > 4)
        fail(w + " has no usable " + name + " attribute");
      out.resize(size_t(dm->num_points()) * size_t(comps));
      float value[4];
      for (draco::PointIndex i(0); i < dm->num_points(); ++i) {
        if (!a->ConvertValue<float>(a->mapped_index(i), a->num_components(), value))
          fail(w + ": " + name + " values do not convert");
        std::copy_n(value, comps, out.begin() + size_t(i.value()) * comps);
      }
      return true;
    };
    Attributes at;
    if (!attribute("POSITION", 3, at.positions)) fail(w + " has no POSITION attribute");
    attribute("NORMAL", 3, at.normals);
    attribute("TEXCOORD_" + std::to_string(uv_set), 2, at.uvs);
    if (p.attributes.count("COLOR_0") && ids.Has("COLOR_0")) {
      const draco::PointAttribute* a =
          ids.Get("COLOR_0").IsInt()
              ? dm->GetAttributeByUniqueId(uint32_t(ids.Get("COLOR_0").GetNumberAsInt()))
              : nullptr;
      at.color_components = a && a->num_components() == 3 ? 3 : 4;
      attribute("COLOR_0", at.color_components, at.colors);
    }
    at.indices.reserve(size_t(dm->num_faces()) * 3);
    for (draco::FaceIndex f(0); f < dm->num_faces(); ++f)
      for (int k = 0; k < 3; ++k) {
        const uint32_t i = dm->face(f)[k].value();
        at.indices.push_back(i < dm->num_points() ? i : std::numeric_limits<uint32_t>::max());
      }
    return at;
  }

  void add_primitive(const tinygltf::Primitive& p, int mesh, int index,
                     const Eigen::Matrix4d& world, Scene& out) {
    const std::string what = "mesh " + std::to_string(mesh) + " primitive " + std::to_string(index);
    if (p.mode < 0 || p.mode > TINYGLTF_MODE_TRIANGLE_FAN)
      fail(what + " has an invalid mode " + std::to_string(p.mode));
    const UvMapping mapping = uv_mapping(p.material);
    const auto draco = p.extensions.find("KHR_draco_mesh_compression");
    Attributes at = draco != p.extensions.end() ? read_draco(p, draco->second, mapping.set, what)
                                                : read_plain(p, mapping.set, what);
    const size_t n = at.positions.size() / 3;
    if (p.mode < TINYGLTF_MODE_TRIANGLES) {  // points and lines, counted as assimp counts them
      const size_t k = at.indices.size();
      dropped_ += p.mode == TINYGLTF_MODE_POINTS      ? k
                  : p.mode == TINYGLTF_MODE_LINE      ? k / 2
                  : p.mode == TINYGLTF_MODE_LINE_LOOP ? k
                                                      : (k > 0 ? k - 1 : 0);
      return;
    }

    Part part;
    part.material = unsigned(model_.materials.size());  // the default material
    if (p.material >= int(model_.materials.size()))
      spdlog::warn("{}: {} refers to material {} but there are {}; using the default material",
                   path_, what, p.material, model_.materials.size());
    else if (p.material >= 0)
      part.material = unsigned(p.material);
    const Eigen::Matrix3d linear = world.topLeftCorner<3, 3>();
    const Eigen::Matrix3d normal_xf = linear.inverse().transpose();
    const bool mirrored = linear.determinant() < 0;
    part.positions.resize(n);
    for (size_t v = 0; v < n; ++v) {
      const Eigen::Vector4d q =
          world * Eigen::Vector4d(at.positions[v * 3], at.positions[v * 3 + 1],
                                  at.positions[v * 3 + 2], 1.0);
      part.positions[v] = {float(q[0]), float(q[1]), float(q[2])};
      for (float c : part.positions[v])
        if (!std::isfinite(c))
          fail("vertex " + std::to_string(v) + " of " + what +
               " has a non-finite position (NaN/Inf)");
    }
    if (!at.normals.empty()) {
      part.normals.resize(n);
      for (size_t v = 0; v < n; ++v) {
        const Eigen::Vector3d q =
            normal_xf *
            Eigen::Vector3d(at.normals[v * 3], at.normals[v * 3 + 1], at.normals[v * 3 + 2]);
        part.normals[v] = {float(q[0]), float(q[1]), float(q[2])};
      }
    }
    if (!at.uvs.empty()) {
      part.uvs.resize(n);
      const double c = std::cos(mapping.rotation), s = std::sin(mapping.rotation);
      for (size_t v = 0; v < n; ++v) {
        double u = at.uvs[v * 2], t = at.uvs[v * 2 + 1];
        if (mapping.transform) {  // offset * rotation * scale, as KHR_texture_transform defines
          const double x = u * mapping.scale[0], y = t * mapping.scale[1];
          u = c * x + s * y + mapping.offset[0];
          t = -s * x + c * y + mapping.offset[1];
        }
        part.uvs[v] = {float(u), float(1.0 - t)};  // glTF's v runs down the image
      }
    }
    if (!at.colors.empty()) {
      part.colors.resize(n);
      const int k = at.color_components;
      for (size_t v = 0; v < n; ++v)
        part.colors[v] = {at.colors[v * k], at.colors[v * k + 1], at.colors[v * k + 2],
                          k == 4 ? at.colors[v * k + 3] : 1.0f};
    }
    // Triangles (strips and fans unrolled with the winding the specification gives).
    const std::vector<uint32_t>& ix = at.indices;
    const auto add = [&](uint32_t a, uint32_t b, uint32_t c) {
      if (a >= n || b >= n || c >= n) {
        ++out_of_range_;
        return;
      }
      part.faces.push_back(mirrored ? Tri{c, b, a} : Tri{a, b, c});
    };
    if (p.mode == TINYGLTF_MODE_TRIANGLES) {
      for (size_t i = 0; i + 2 < ix.size(); i += 3) add(ix[i], ix[i + 1], ix[i + 2]);
    } else if (p.mode == TINYGLTF_MODE_TRIANGLE_STRIP) {
      for (size_t i = 0; i + 2 < ix.size(); ++i)
        i % 2 ? add(ix[i + 1], ix[i], ix[i + 2]) : add(ix[i], ix[i + 1], ix[i + 2]);
    } else {
      for (size_t i = 1; i + 1 < ix.size(); ++i) add(ix[0], ix[i], ix[i + 1]);
    }
    out.parts.push_back(std::move(part));
  }

  // Material m of the file (m == materials.size(): the default material), with its base-colour
  // and metallic-roughness textures decoded when asked. A texture that cannot be read is left out
  // with a warning.
  static Material material(const tinygltf::Model& model, unsigned m, bool with_texture,
                           const std::string& path) {
    Material out;
    if (m >= model.materials.size()) return out;
    const tinygltf::Material& gm = model.materials[m];
    out.name = gm.name;
    const auto unit = [](double v) {
      return std::isfinite(v) ? float(std::clamp(v, 0.0, 1.0)) : 1.0f;
    };
    const std::vector<double>& f = gm.pbrMetallicRoughness.baseColorFactor;
    if (f.size() == 4) out.base_color = {unit(f[0]), unit(f[1]), unit(f[2]), unit(f[3])};
    int texture = gm.pbrMetallicRoughness.baseColorTexture.index;
    // Files made for the specular-glossiness workflow name their colour there.
    const auto sg = gm.extensions.find("KHR_materials_pbrSpecularGlossiness");
    if (sg != gm.extensions.end() && sg->second.IsObject()) {
      const tinygltf::Value& diffuse = sg->second.Get("diffuseTexture");
      if (texture < 0 && diffuse.IsObject() && diffuse.Get("index").IsInt())
        texture = diffuse.Get("index").GetNumberAsInt();
    }
    // Factors as the file gives them (glTF's default is 1 for both); the metallic-roughness
    // texture, when there is one, is read like the base colour's (from the same UVs).
    out.pbr.metallic = unit(gm.pbrMetallicRoughness.metallicFactor);
    out.pbr.roughness = unit(gm.pbrMetallicRoughness.roughnessFactor);
    if (!with_texture) return out;
    if (texture >= 0) out.texture = load_texture(model, m, texture, path);
    const int mr = gm.pbrMetallicRoughness.metallicRoughnessTexture.index;
    if (mr >= 0) out.pbr.texture = load_texture(model, m, mr, path);
    return out;
  }

  // Texture `texture` of material m, decoded; null (with a warning) when it cannot be read: a
  // broken texture does not make the mesh unusable.
  static std::shared_ptr<const image::Image> load_texture(const tinygltf::Model& model, unsigned m,
                                                          int texture, const std::string& path) {
    if (texture >= int(model.textures.size())) {
      spdlog::warn("{}: material {} refers to missing texture {}; loading without texture", path, m,
                   texture);
      return nullptr;
    }
    const tinygltf::Texture& t = model.textures[size_t(texture)];
    int source = t.source;
    for (const char* ext : {"EXT_texture_webp"}) {  // formats gen3d decodes itself
      const auto it = t.extensions.find(ext);
      if (it != t.extensions.end() && it->second.IsObject() && it->second.Get("source").IsInt())
        source = it->second.Get("source").GetNumberAsInt();
    }
    if (source < 0 || source >= int(model.images.size())) {
      spdlog::warn("{}: texture {} has no usable image; loading without texture", path, texture);
      return nullptr;
    }
    const tinygltf::Image& image = model.images[size_t(source)];
    try {
      if (!image.image.empty())
        return std::make_shared<const image::Image>(
            image::decode_image(image.image.data(), image.image.size(),
                                path + " (image " + std::to_string(source) + ")"));
      const std::string file =
          resolve_texture_path(decode_uri(image.uri), fs::path(path).parent_path());
      if (file.empty()) {
        spdlog::warn("{}: texture '{}' not found; loading without texture", path, image.uri);
        return nullptr;
      }
      return std::make_shared<const image::Image>(image::load_image(file));
    } catch (const image::ImageError& e) {
      spdlog::warn("{}: {}; loading without texture", path, e.what());
    }
    return nullptr;
  }

  // glTF URIs are percent-encoded ("my%20texture.png").
  static std::string decode_uri(const std::string& uri) {
    std::string out;
    for (size_t i = 0; i < uri.size(); ++i) {
      if (uri[i] == '%' && i + 2 < uri.size() && std::isxdigit(uint8_t(uri[i + 1])) &&
          std::isxdigit(uint8_t(uri[i + 2]))) {
        out.push_back(char(std::stoi(uri.substr(i + 1, 2), nullptr, 16)));
        i += 2;
      } else {
        out.push_back(uri[i]);
      }
    }
    return out;
  }

  std::string path_;
  tinygltf::Model model_;
  size_t dropped_ = 0;
  size_t out_of_range_ = 0;
};

}  // namespace

Scene read_gltf(const std::string& path) {
  Reader reader(path);
  reader.load();
  return reader.scene();
}

}  // namespace gen3d::mesh::detail
