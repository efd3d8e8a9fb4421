// Structural checks of glTF 2.0 files (.gltf JSON, .glb binary) before assimp reads them.
//
// assimp 5.2's glTF2 reader trusts the file. It takes the part of an embedded image's mimeType
// after '/' without checking that there is one (strcmp on address 1: a SEGV found by fuzzing), it
// checks accessor ranges with the component size instead of the element size, it builds triangle
// strips, fans and line loops from counts too small for them, it dereferences optional references
// (sparse index views, skin bind matrices, animation target nodes) without checking them, it parses
// JSON and node hierarchies recursively and it stores data-URI offsets in signed chars. So every
// reference, byte range and count it relies on is validated here, by the rules of the glTF 2.0
// specification, and stricter where assimp would misread a valid file anyway (quantized positions,
// normals and UVs, skins without inverse bind matrices).
#include <algorithm>
#include <array>
#include <cstdint>
#include <cstring>
#include <filesystem>
#include <fstream>
#include <iterator>
#include <map>
#include <optional>
#include <set>
#include <string>
#include <string_view>
#include <vector>

#include <nlohmann/json.hpp>

#include "mesh/error.h"
#include "mesh/precheck.h"

namespace gen3d::mesh::detail {
namespace {

using nlohmann::json;

constexpr int kMaxJsonDepth = 64;          // rapidjson (inside assimp) parses recursively
constexpr size_t kMaxNodeDepth = 256;      // nodes are read and imported recursively
constexpr size_t kMaxNameLength = 512;     // names get suffixes inside fixed 1024-byte strings
constexpr uint64_t kMaxSets = 8;           // TEXCOORD_n / COLOR_n sets assimp keeps
constexpr size_t kMaxDataUriHeader = 100;  // assimp keeps data-URI offsets in signed chars

constexpr uint32_t kGlbMagic = 0x46546C67;  // "glTF"
constexpr uint32_t kChunkJson = 0x4E4F534A;
constexpr uint32_t kChunkBin = 0x004E4942;

constexpr uint64_t kByte = 5120, kUByte = 5121, kShort = 5122, kUShort = 5123, kUInt = 5125,
                   kFloat = 5126;

uint32_t read_u32(std::string_view bytes, size_t at) {
  uint32_t v = 0;
  for (int i = 3; i >= 0; --i) v = (v << 8) | static_cast<unsigned char>(bytes[at + i]);
  return v;
}

// Text from the file, made safe to print in an error message.
std::string printable(std::string_view s) {
  std::string out;
  for (char c : s.substr(0, 40)) out += (c >= 0x20 && c < 0x7f) ? c : '?';
  if (s.size() > 40) out += "...";
  return out;
}

// a + b * c + d <= limit, without overflow (all operands below 2^64).
bool fits(uint64_t a, uint64_t b, uint64_t c, uint64_t d, uint64_t limit) {
  const unsigned __int128 need = static_cast<unsigned __int128>(a) +
                                 static_cast<unsigned __int128>(b) * c +
                                 static_cast<unsigned __int128>(d);
  return need <= limit;
}

int component_size(uint64_t type) {
  switch (type) {
    case kByte:
    case kUByte:
      return 1;
    case kShort:
    case kUShort:
      return 2;
    case kUInt:
    case kFloat:
      return 4;
    default:
      return 0;
  }
}

int component_count(const std::string& type) {
  static const std::array<std::pair<const char*, int>, 7> kTypes = {{{"SCALAR", 1},
                                                                     {"VEC2", 2},
                                                                     {"VEC3", 3},
                                                                     {"VEC4", 4},
                                                                     {"MAT2", 4},
                                                                     {"MAT3", 9},
                                                                     {"MAT4", 16}}};
  for (const auto& [name, n] : kTypes)
    if (type == name) return n;
  return 0;
}

struct View {
  uint64_t buffer = 0, offset = 0, length = 0, stride = 0;
};

struct Accessor {
  std::string type;
  uint64_t component_type = 0, count = 0;
  std::optional<uint64_t> view;  // its bufferView, if any
  uint64_t offset = 0;           // byteOffset in it
  bool sparse = false;
};

class GltfChecker {
 public:
  GltfChecker(const std::string& path, bool binary, const std::string& bytes)
      : path_(path), binary_(binary), bytes_(bytes) {}

  void run() {
    std::string_view text = bytes_;
    if (binary_) text = read_glb_container();
    doc_ = parse_json(text);
    if (!doc_.is_object()) fail("the glTF JSON is not an object");
    check_asset();
    check_extensions_required();
    check_names();
    check_buffers();
    check_buffer_views();
    check_accessors();
    check_images();
    check_samplers();
    check_textures();
    check_materials();
    check_meshes();
    check_skins();
    check_cameras_and_lights();
    check_nodes();
    check_scenes();
    check_animations();
  }

 private:
  [[noreturn]] void fail(const std::string& what) const {
    throw MeshError("cannot load mesh '" + path_ + "': " + what);
  }

  // ---- container and JSON ----

  // GLB: 12-byte header ("glTF", version 2, total length), a JSON chunk, then optionally a BIN
  // chunk (found where assimp looks for it: after the JSON chunk padded to 4 bytes) and further
  // chunks. Returns the JSON text.
  std::string_view read_glb_container() {
    const std::string_view b = bytes_;
    if (b.size() < 12 || read_u32(b, 0) != kGlbMagic) fail("not a GLB file (missing glTF magic)");
    const uint32_t version = read_u32(b, 4);
    if (version == 1) fail("GLB version 1 (glTF 1.0) is not supported, only glTF 2.0");
    if (version != 2) fail("unsupported GLB version " + std::to_string(version));
    const uint32_t length = read_u32(b, 8);
    if (length != b.size()) {
      fail("GLB header gives a length of " + std::to_string(length) + " bytes but the file has " +
           std::to_string(b.size()));
    }
    if (b.size() < 20) fail("GLB file is truncated: no JSON chunk");
    const uint32_t json_length = read_u32(b, 12);
    if (read_u32(b, 16) != kChunkJson) fail("GLB's first chunk is not JSON");
    if (!fits(20, 1, json_length, 0, b.size())) {
      fail("GLB JSON chunk of " + std::to_string(json_length) +
           " bytes runs past the end of the file");
    }
    size_t pos = 20 + ((uint64_t(json_length) + 3) & ~uint64_t(3));
    bool first = true;
    while (pos < b.size()) {
      if (b.size() - pos < 8) fail("GLB file ends inside a chunk header");
      const uint32_t chunk_length = read_u32(b, pos);
      const uint32_t type = read_u32(b, pos + 4);
      if (first && type != kChunkBin) fail("GLB's second chunk is not BIN");
      if (!fits(pos + 8, 1, chunk_length, 0, b.size())) {
        fail("GLB chunk at byte " + std::to_string(pos) + " (" + std::to_string(chunk_length) +
             " bytes) runs past the end of the file");
      }
      if (first) bin_ = b.substr(pos + 8, chunk_length);
      has_bin_ |= first;
      first = false;
      pos += 8 + ((uint64_t(chunk_length) + 3) & ~uint64_t(3));
    }
    return b.substr(20, json_length);
  }

  // Parses with nlohmann-json but accepts only what assimp's rapidjson reads the same way: the text
  // ends at the first NUL (rapidjson parses a C string), nesting is bounded (rapidjson recurses)
  // and keys are unique (rapidjson uses the first of duplicate keys, nlohmann the last).
  json parse_json(std::string_view text) const {
    text = text.substr(0, text.find('\0'));
    struct TooDeep {};
    struct Duplicate {
      std::string key;
    };
    std::vector<std::set<std::string>> keys;
    const json::parser_callback_t callback = [&keys](int depth, json::parse_event_t event,
                                                     json& parsed) {
      if (depth > kMaxJsonDepth) throw TooDeep{};
      if (event == json::parse_event_t::object_start) {
        keys.emplace_back();
      } else if (event == json::parse_event_t::object_end) {
        if (!keys.empty()) keys.pop_back();
      } else if (event == json::parse_event_t::key && !keys.empty()) {
        std::string key = parsed.get<std::string>();
        if (!keys.back().insert(key).second) throw Duplicate{std::move(key)};
      }
      return true;
    };
    try {
      return json::parse(text.begin(), text.end(), callback);
    } catch (const TooDeep&) {
      fail("glTF JSON is nested more than " + std::to_string(kMaxJsonDepth) + " levels deep");
    } catch (const Duplicate& d) {
      fail("glTF JSON has a duplicate key '" + printable(d.key) + "'");
    } catch (const json::parse_error& e) {
      fail("glTF JSON does not parse (error at byte " + std::to_string(e.byte) + ")");
    } catch (const json::exception&) {
      fail("glTF JSON does not parse");
    }
  }

  // ---- typed access ----

  const json* member(const json& obj, const char* key) const {
    if (!obj.is_object()) return nullptr;
    const auto it = obj.find(key);
    return it == obj.end() ? nullptr : &*it;
  }

  std::optional<uint64_t> opt_uint(const json& obj, const char* key,
                                   const std::string& where) const {
    const json* v = member(obj, key);
    if (!v) return std::nullopt;
    if (!v->is_number_unsigned()) fail(where + ": '" + key + "' is not a non-negative integer");
    return v->get<uint64_t>();
  }

  uint64_t req_uint(const json& obj, const char* key, const std::string& where) const {
    const auto v = opt_uint(obj, key, where);
    if (!v) fail(where + " has no '" + key + "'");
    return *v;
  }

  // An optional reference to element `key` of the top-level array `section` (of size `size`).
  std::optional<uint64_t> opt_ref(const json& obj, const char* key, size_t size,
                                  const char* section, const std::string& where) const {
    const auto v = opt_uint(obj, key, where);
    if (v && *v >= size) {
      fail(where + " refers to " + section + " " + std::to_string(*v) + " but there are " +
           std::to_string(size));
    }
    return v;
  }

  uint64_t req_ref(const json& obj, const char* key, size_t size, const char* section,
                   const std::string& where) const {
    const auto v = opt_ref(obj, key, size, section, where);
    if (!v) fail(where + " has no '" + key + "'");
    return *v;
  }

  const std::string* opt_string(const json& obj, const char* key, const std::string& where) const {
    const json* v = member(obj, key);
    if (!v) return nullptr;
    if (!v->is_string()) fail(where + ": '" + key + "' is not a string");
    return v->get_ptr<const std::string*>();
  }

  // A top-level array of objects (empty when absent).
  const json& section(const char* key) const {
    static const json kEmpty = json::array();
    const json* v = member(doc_, key);
    if (!v) return kEmpty;
    if (!v->is_array()) fail("glTF '" + std::string(key) + "' is not an array");
    for (size_t i = 0; i < v->size(); ++i)
      if (!(*v)[i].is_object())
        fail(std::string(key) + " " + std::to_string(i) + " is not an object");
    return *v;
  }

  void check_number_array(const json& obj, const char* key, size_t n,
                          const std::string& where) const {
    const json* v = member(obj, key);
    if (!v) return;
    if (!v->is_array() || (n > 0 && v->size() != n))
      fail(where + ": '" + key + "' is not an array of " + std::to_string(n) + " numbers");
    for (const json& x : *v)
      if (!x.is_number()) fail(where + ": '" + key + "' holds a value that is not a number");
  }

  // ---- sections ----

  void check_asset() const {
    const json* asset = member(doc_, "asset");
    if (!asset || !asset->is_object()) fail("glTF JSON has no 'asset' object");
    const std::string* version = opt_string(*asset, "version", "asset");
    if (!version) fail("glTF 'asset' has no version");
    if (version->rfind("1", 0) == 0) fail("glTF 1.0 is not supported, only glTF 2.0");
    if (version->rfind("2.", 0) != 0)
      fail("unsupported glTF version '" + printable(*version) + "'");
  }

  void check_extensions_required() const {
    for (const char* key : {"extensionsUsed", "extensionsRequired"}) {
      const json* list = member(doc_, key);
      if (!list) continue;
      if (!list->is_array()) fail(std::string("glTF '") + key + "' is not an array");
      for (const json& e : *list) {
        if (!e.is_string())
          fail(std::string("glTF '") + key + "' holds a value that is not a string");
      }
    }
  }

  void check_names() const {
    for (const auto& [key, value] : doc_.items()) {
      if (!value.is_array()) continue;
      for (const json& item : value) {
        const json* name = member(item, "name");
        if (name && name->is_string() &&
            name->get_ref<const std::string&>().size() > kMaxNameLength)
          fail("glTF " + key + " has a name longer than " + std::to_string(kMaxNameLength) +
               " bytes");
      }
    }
  }

  // URIs must be plain text: assimp takes a leading byte 0x10 for an already-parsed data URI.
  void check_uri_text(const std::string& uri, const std::string& where) const {
    for (unsigned char c : uri)
      if (c < 0x20 || c == 0x7f) fail(where + ": uri holds control characters");
  }

  // "data:[type/subtype][;param]*[;base64],payload". Returns the decoded size; fills `decoded`
  // when given.
  uint64_t check_data_uri(std::string_view uri, const std::string& where,
                          std::string* decoded) const {
    const size_t comma = uri.find(',');
    if (comma == std::string_view::npos) fail(where + ": data URI has no ','");
    if (comma > kMaxDataUriHeader) fail(where + ": data URI header is too long");
    const std::string_view header = uri.substr(5, comma - 5);
    const std::string_view media = header.substr(0, header.find(';'));
    if (!media.empty() && media.find('/') == std::string_view::npos)
      fail(where + ": data URI media type '" + printable(media) +
           "' is not of the form type/subtype");
    bool base64 = false;
    for (size_t p = header.find(';'); p != std::string_view::npos;) {
      const size_t next = header.find(';', p + 1);
      const std::string_view param =
          header.substr(p + 1, next == std::string_view::npos ? next : next - p - 1);
      if (param == "base64") {
        base64 = true;
      } else if (param.rfind("base64", 0) == 0) {
        fail(where + ": data URI has a malformed base64 flag");  // assimp matches the prefix
      }
      p = next;
    }
    const std::string_view payload = uri.substr(comma + 1);
    if (!base64) {
      if (decoded) decoded->assign(payload);
      return payload.size();
    }
    if (payload.size() % 4 != 0) fail(where + ": base64 data length is not a multiple of 4");
    size_t pad = 0;
    for (size_t i = 0; i < payload.size(); ++i) {
      const char c = payload[i];
      const bool alpha = (c >= 'A' && c <= 'Z') || (c >= 'a' && c <= 'z') ||
                         (c >= '0' && c <= '9') || c == '+' || c == '/';
      if (c == '=' && i + 2 >= payload.size()) {
        ++pad;
      } else if (!alpha || pad > 0) {
        fail(where + ": data URI holds invalid base64 data");
      }
    }
    const uint64_t size = payload.size() / 4 * 3 - pad;
    if (decoded) {
      decoded->clear();
      decoded->reserve(size);
      uint32_t acc = 0;
      int bits = 0;
      for (char c : payload.substr(0, payload.size() - pad)) {
        const char* table = "ABCDEFGHIJKLMNOPQRSTUVWXYZabcdefghijklmnopqrstuvwxyz0123456789+/";
        acc = (acc << 6) | uint32_t(std::strchr(table, c) - table);
        bits += 6;
        if (bits >= 8) {
          bits -= 8;
          decoded->push_back(char((acc >> bits) & 0xff));
        }
      }
    }
    return size;
  }

  void check_buffers() {
    const json& buffers = section("buffers");
    buffer_length_.assign(buffers.size(), 0);
    buffer_uri_.assign(buffers.size(), "");
    for (size_t i = 0; i < buffers.size(); ++i) {
      const json& buf = buffers[i];
      const std::string where = "buffer " + std::to_string(i);
      const uint64_t length = req_uint(buf, "byteLength", where);
      if (length == 0) fail(where + " has a byteLength of 0");
      buffer_length_[i] = length;
      const std::string* uri = opt_string(buf, "uri", where);
      if (binary_ && i == 0) {
        // assimp always reads the BIN chunk as buffer 0 of a GLB file.
        if (uri) fail(where + " of a GLB file has a uri; it must refer to the BIN chunk");
        if (!has_bin_) fail(where + " refers to the BIN chunk but the GLB file has none");
        if (length > bin_.size())
          fail(where + " is " + std::to_string(length) + " bytes but the BIN chunk holds only " +
               std::to_string(bin_.size()));
        continue;
      }
      if (!uri) fail(where + " has no uri");
      check_uri_text(*uri, where);
      buffer_uri_[i] = *uri;
      if (uri->rfind("data:", 0) == 0) {
        const uint64_t size = check_data_uri(*uri, where, nullptr);
        if (size < length)
          fail(where + " is " + std::to_string(length) + " bytes but its data URI holds only " +
               std::to_string(size));
      }
    }
  }

  // The bytes of a buffer (at least byteLength of them), for the few checks that read data.
  std::string_view buffer_bytes(uint64_t index) {
    if (binary_ && index == 0) return bin_;
    auto it = buffer_data_.find(index);
    if (it != buffer_data_.end()) return it->second;
    const std::string& uri = buffer_uri_[index];
    const std::string where = "buffer " + std::to_string(index);
    std::string data;
    if (uri.rfind("data:", 0) == 0) {
      check_data_uri(uri, where, &data);
    } else {
      const std::filesystem::path file = std::filesystem::path(path_).parent_path() / uri;
      std::ifstream in(file, std::ios::binary);
      if (!in) fail("cannot read " + where + " ('" + printable(uri) + "')");
      data.assign(std::istreambuf_iterator<char>(in), std::istreambuf_iterator<char>());
    }
    if (data.size() < buffer_length_[index])
      fail(where + " ('" + printable(uri) + "') is shorter than its byteLength");
    return buffer_data_.emplace(index, std::move(data)).first->second;
  }

  void check_buffer_views() {
    const json& views = section("bufferViews");
    for (size_t i = 0; i < views.size(); ++i) {
      const json& v = views[i];
      const std::string where = "bufferView " + std::to_string(i);
      View view;
      view.buffer = req_ref(v, "buffer", buffer_length_.size(), "buffer", where);
      view.offset = opt_uint(v, "byteOffset", where).value_or(0);
      view.length = req_uint(v, "byteLength", where);
      if (view.length == 0) fail(where + " has a byteLength of 0");
      if (!fits(view.offset, 1, view.length, 0, buffer_length_[view.buffer]))
        fail(where + " (offset " + std::to_string(view.offset) + ", length " +
             std::to_string(view.length) + ") runs past the end of buffer " +
             std::to_string(view.buffer) + " (" + std::to_string(buffer_length_[view.buffer]) +
             " bytes)");
      view.stride = opt_uint(v, "byteStride", where).value_or(0);
      if (member(v, "byteStride") && (view.stride < 4 || view.stride > 252 || view.stride % 4 != 0))
        fail(where + " has a byteStride of " + std::to_string(view.stride) +
             " (must be a multiple of 4 in [4, 252])");
      opt_uint(v, "target", where);
      views_.push_back(view);
    }
  }

  void check_accessors() {
    const json& accessors = section("accessors");
    for (size_t i = 0; i < accessors.size(); ++i) {
      const json& a = accessors[i];
      const std::string where = "accessor " + std::to_string(i);
      Accessor acc;
      acc.component_type = req_uint(a, "componentType", where);
      const int csize = component_size(acc.component_type);
      if (csize == 0)
        fail(where + " has an invalid componentType " + std::to_string(acc.component_type));
      const std::string* type = opt_string(a, "type", where);
      if (!type) fail(where + " has no type");
      acc.type = *type;
      const int comps = component_count(acc.type);
      if (comps == 0) fail(where + " has an invalid type '" + printable(acc.type) + "'");
      acc.count = req_uint(a, "count", where);
      if (acc.count == 0 || acc.count > UINT32_MAX)
        fail(where + " has a count of " + std::to_string(acc.count));
      const uint64_t elem = uint64_t(comps) * csize;
      const uint64_t offset = opt_uint(a, "byteOffset", where).value_or(0);
      acc.offset = offset;
      if (const auto vi = opt_ref(a, "bufferView", views_.size(), "bufferView", where)) {
        acc.view = *vi;
        const View& view = views_[*vi];
        const uint64_t stride = view.stride ? view.stride : elem;
        if (stride < elem)
          fail(where + ": bufferView " + std::to_string(*vi) + " has a byteStride of " +
               std::to_string(stride) + ", less than the element size " + std::to_string(elem));
        if (!fits(offset, stride, acc.count - 1, elem, view.length))
          fail(where + " (offset " + std::to_string(offset) + ", " + std::to_string(acc.count) +
               " elements of " + std::to_string(elem) + " bytes) runs past the end of bufferView " +
               std::to_string(*vi) + " (" + std::to_string(view.length) + " bytes)");
      }
      if (const json* sparse = member(a, "sparse")) {
        check_sparse(*sparse, acc, elem, where);
        acc.sparse = true;
      }
      accessors_.push_back(acc);
    }
  }

  void check_sparse(const json& sparse, const Accessor& acc, uint64_t elem,
                    const std::string& where) {
    const std::string w = where + " sparse";
    if (!sparse.is_object()) fail(w + " is not an object");
    const uint64_t count = req_uint(sparse, "count", w);
    if (count == 0 || count > acc.count)
      fail(w + " count " + std::to_string(count) + " is not in [1, " + std::to_string(acc.count) +
           "]");
    const json* indices = member(sparse, "indices");
    const json* values = member(sparse, "values");
    if (!indices || !indices->is_object()) fail(w + " has no indices object");
    if (!values || !values->is_object()) fail(w + " has no values object");
    const uint64_t iv =
        req_ref(*indices, "bufferView", views_.size(), "bufferView", w + " indices");
    const uint64_t ioff = opt_uint(*indices, "byteOffset", w).value_or(0);
    const uint64_t itype = req_uint(*indices, "componentType", w + " indices");
    if (itype != kUByte && itype != kUShort && itype != kUInt)
      fail(w + " indices have componentType " + std::to_string(itype) + " (must be unsigned)");
    const int isize = component_size(itype);
    if (!fits(ioff, count, isize, 0, views_[iv].length))
      fail(w + " indices run past the end of bufferView " + std::to_string(iv));
    const uint64_t vv = req_ref(*values, "bufferView", views_.size(), "bufferView", w + " values");
    const uint64_t voff = opt_uint(*values, "byteOffset", w).value_or(0);
    if (!fits(voff, count, elem, 0, views_[vv].length))
      fail(w + " values run past the end of bufferView " + std::to_string(vv));
    // assimp writes each value at its index: every index must be inside the accessor.
    const View& view = views_[iv];
    const std::string_view data = buffer_bytes(view.buffer).substr(view.offset + ioff);
    for (uint64_t k = 0; k < count; ++k) {
      uint64_t index = 0;
      for (int b = isize - 1; b >= 0; --b)
        index = (index << 8) | static_cast<unsigned char>(data[k * isize + b]);
      if (index >= acc.count)
        fail(w + " index " + std::to_string(index) + " is past the accessor's " +
             std::to_string(acc.count) + " elements");
    }
  }

  // Every index of a plain (bufferView, not sparse) index accessor is below `vertices`.
  void check_indices_below(const Accessor& idx, uint64_t vertices, const std::string& where) {
    if (!idx.view || idx.sparse) return;
    const View& view = views_[*idx.view];
    const int size = component_size(idx.component_type);
    const uint64_t stride = view.stride ? view.stride : static_cast<uint64_t>(size);
    const std::string_view data = buffer_bytes(view.buffer).substr(view.offset + idx.offset);
    for (uint64_t k = 0; k < idx.count; ++k) {
      uint64_t index = 0;
      for (int b = size - 1; b >= 0; --b)
        index = (index << 8) | static_cast<unsigned char>(data[k * stride + b]);
      if (index >= vertices)
        fail(where + ": index " + std::to_string(index) + " is past the " +
             std::to_string(vertices) + " vertices");
    }
  }

  void check_images() {
    const json& images = section("images");
    image_count_ = images.size();
    for (size_t i = 0; i < images.size(); ++i) {
      const json& img = images[i];
      const std::string where = "image " + std::to_string(i);
      const std::string* uri = opt_string(img, "uri", where);
      const auto view = opt_ref(img, "bufferView", views_.size(), "bufferView", where);
      const std::string* mime = opt_string(img, "mimeType", where);
      // assimp takes the file extension from after the '/' without checking that there is one.
      if (mime && mime->find('/') == std::string::npos)
        fail(where + " has mimeType '" + printable(*mime) + "', not of the form type/subtype");
      if (uri && view) fail(where + " has both a uri and a bufferView");
      if (!uri && !view) fail(where + " has neither a uri nor a bufferView");
      if (view && !mime) fail(where + " is stored in a bufferView but has no mimeType");
      if (uri) {
        check_uri_text(*uri, where);
        if (uri->rfind("data:", 0) == 0) check_data_uri(*uri, where, nullptr);
      }
    }
  }

  void check_samplers() {
    const json& samplers = section("samplers");
    sampler_count_ = samplers.size();
    for (size_t i = 0; i < samplers.size(); ++i)
      for (const char* key : {"magFilter", "minFilter", "wrapS", "wrapT"})
        opt_uint(samplers[i], key, "sampler " + std::to_string(i));
  }

  void check_textures() {
    const json& textures = section("textures");
    texture_count_ = textures.size();
    for (size_t i = 0; i < textures.size(); ++i) {
      const std::string where = "texture " + std::to_string(i);
      opt_ref(textures[i], "source", image_count_, "image", where);
      opt_ref(textures[i], "sampler", sampler_count_, "sampler", where);
      if (const json* ext = member(textures[i], "extensions"); ext && ext->is_object())
        for (const auto& [name, value] : ext->items())
          opt_ref(value, "source", image_count_, "image", where + " extension " + printable(name));
    }
  }

  // A textureInfo object ({"index", "texCoord", KHR_texture_transform}).
  void check_texture_info(const json& info, const std::string& where) const {
    req_ref(info, "index", texture_count_, "texture", where);
    opt_uint(info, "texCoord", where);
    const json* ext = member(info, "extensions");
    const json* transform = ext ? member(*ext, "KHR_texture_transform") : nullptr;
    if (!transform) return;
    const std::string w = where + " KHR_texture_transform";
    if (!transform->is_object()) fail(w + " is not an object");
    // assimp reads elements 0 and 1 of these arrays without checking their size.
    check_number_array(*transform, "offset", 2, w);
    check_number_array(*transform, "scale", 2, w);
    if (const json* r = member(*transform, "rotation"); r && !r->is_number())
      fail(w + ": rotation is not a number");
    opt_uint(*transform, "texCoord", w);
  }

  // Every "...Texture" object in a material, its extensions included, is a textureInfo.
  void check_material_textures(const json& obj, const std::string& where) const {
    for (const auto& [key, value] : obj.items()) {
      if (key == "extras" || !value.is_object()) continue;
      if (key.size() > 7 && key.compare(key.size() - 7, 7, "Texture") == 0) {
        check_texture_info(value, where + " " + key);
      } else {
        check_material_textures(value, where);
      }
    }
  }

  void check_materials() {
    const json& materials = section("materials");
    material_count_ = materials.size();
    for (size_t i = 0; i < materials.size(); ++i)
      check_material_textures(materials[i], "material " + std::to_string(i));
  }

  const Accessor& accessor_ref(const json& obj, const char* key, const std::string& where) const {
    return accessors_[req_ref(obj, key, accessors_.size(), "accessor", where)];
  }

  void expect_accessor(const Accessor& a, std::initializer_list<const char*> types,
                       std::initializer_list<uint64_t> components, const std::string& what) const {
    const bool type_ok =
        std::any_of(types.begin(), types.end(), [&](const char* t) { return a.type == t; });
    const bool comp_ok =
        std::find(components.begin(), components.end(), a.component_type) != components.end();
    if (!type_ok || !comp_ok)
      fail(what + " has type " + printable(a.type) + " with componentType " +
           std::to_string(a.component_type) + ", which is not supported for it");
  }

  // "TEXCOORD_3" -> 3 for prefix "TEXCOORD_"; nullopt when `name` is not of that form.
  static std::optional<uint64_t> set_index(const std::string& name, const std::string& prefix) {
    if (name.rfind(prefix, 0) != 0 || name.size() == prefix.size()) return std::nullopt;
    const std::string digits = name.substr(prefix.size());
    if (digits.size() > 3 || (digits.size() > 1 && digits[0] == '0')) return std::nullopt;
    for (char c : digits)
      if (c < '0' || c > '9') return std::nullopt;
    return std::stoull(digits);
  }

  void check_primitive(const json& prim, const std::string& where) {
    const json* attributes = member(prim, "attributes");
    if (!attributes || !attributes->is_object() || attributes->empty())
      fail(where + " has no attributes");
    if (!member(*attributes, "POSITION")) fail(where + " has no POSITION attribute");
    const Accessor& position = accessor_ref(*attributes, "POSITION", where + " POSITION");
    expect_accessor(position, {"VEC3"}, {kFloat}, where + " POSITION");
    const uint64_t vertices = position.count;
    // assimp reads TEXCOORD_n and COLOR_n into arrays indexed by n and dereferences them in order,
    // and matches attribute names by prefix, so names must be exact and sets contiguous.
    std::array<std::set<uint64_t>, 4> sets;
    static const std::array<const char*, 4> kSetNames = {"TEXCOORD_", "COLOR_", "JOINTS_",
                                                         "WEIGHTS_"};
    for (const auto& [name, value] : attributes->items()) {
      const std::string what = where + " " + printable(name);
      const Accessor& a = accessor_ref(*attributes, name.c_str(), what);
      if (name[0] == '_') continue;  // application-specific, ignored by assimp
      if (a.count != vertices)
        fail(what + " has " + std::to_string(a.count) + " elements but POSITION has " +
             std::to_string(vertices));
      if (name == "POSITION") continue;
      if (name == "NORMAL") {
        expect_accessor(a, {"VEC3"}, {kFloat}, what);
        continue;
      }
      if (name == "TANGENT") {
        expect_accessor(a, {"VEC4"}, {kFloat}, what);
        continue;
      }
      size_t kind = 0;
      std::optional<uint64_t> n;
      for (; kind < kSetNames.size() && !n; ++kind) n = set_index(name, kSetNames[kind]);
      if (!n) fail(where + " has an unknown attribute '" + printable(name) + "'");
      --kind;
      if (*n >= kMaxSets)
        fail(what + ": set index too large (at most " + std::to_string(kMaxSets - 1) + ")");
      sets[kind].insert(*n);
      if (kind == 0) expect_accessor(a, {"VEC2"}, {kFloat}, what);
      if (kind == 1) expect_accessor(a, {"VEC3", "VEC4"}, {kFloat, kUByte, kUShort}, what);
      if (kind == 2) expect_accessor(a, {"VEC4"}, {kUByte, kUShort}, what);
      if (kind == 3) expect_accessor(a, {"VEC4"}, {kFloat, kUByte, kUShort}, what);
    }
    for (size_t kind = 0; kind < sets.size(); ++kind)
      if (!sets[kind].empty() && *sets[kind].rbegin() + 1 != sets[kind].size())
        fail(where + ": " + kSetNames[kind] + "n attributes are not numbered 0, 1, 2, ...");
    if (sets[2].size() != sets[3].size())
      fail(where + " has different numbers of JOINTS_n and WEIGHTS_n");

    const uint64_t mode = opt_uint(prim, "mode", where).value_or(4);
    if (mode > 6) fail(where + " has an invalid mode " + std::to_string(mode));
    uint64_t count = vertices;
    if (member(prim, "indices")) {
      const Accessor& idx = accessor_ref(prim, "indices", where + " indices");
      expect_accessor(idx, {"SCALAR"}, {kUByte, kUShort, kUInt}, where + " indices");
      count = idx.count;
    }
    // assimp builds strips, fans and loops from the first elements without checking the count.
    static const std::array<uint64_t, 7> kMinCount = {1, 2, 2, 2, 3, 3, 3};
    if (count < kMinCount[mode])
      fail(where + " has " + std::to_string(count) + " vertices, too few for mode " +
           std::to_string(mode));
    // assimp's line-loop assembly dereferences a null face list when an index is past the
    // vertices (other modes drop such faces); the glTF spec forbids such indices anyway.
    if (mode == 2 && member(prim, "indices"))
      check_indices_below(accessor_ref(prim, "indices", where + " indices"), vertices,
                          where + " (a LINE_LOOP) indices");
    opt_ref(prim, "material", material_count_, "material", where);

    if (const json* targets = member(prim, "targets")) {
      if (!targets->is_array()) fail(where + ": targets is not an array");
      for (size_t t = 0; t < targets->size(); ++t) {
        const json& target = (*targets)[t];
        const std::string tw = where + " target " + std::to_string(t);
        if (!target.is_object()) fail(tw + " is not an object");
        for (const auto& [name, value] : target.items()) {
          const std::string what = tw + " " + printable(name);
          const Accessor& a = accessor_ref(target, name.c_str(), what);
          if (name[0] == '_' || set_index(name, "TEXCOORD_") || set_index(name, "COLOR_")) continue;
          if (name != "POSITION" && name != "NORMAL" && name != "TANGENT")
            fail(tw + " has an unknown attribute '" + printable(name) + "'");
          expect_accessor(a, {"VEC3"}, {kFloat}, what);
          if (a.count != vertices)
            fail(what + " has " + std::to_string(a.count) + " elements but POSITION has " +
                 std::to_string(vertices));
        }
      }
    }
  }

  void check_meshes() {
    const json& meshes = section("meshes");
    mesh_count_ = meshes.size();
    for (size_t m = 0; m < meshes.size(); ++m) {
      const std::string where = "mesh " + std::to_string(m);
      const json* prims = member(meshes[m], "primitives");
      if (!prims || !prims->is_array() || prims->empty()) fail(where + " has no primitives");
      for (size_t p = 0; p < prims->size(); ++p) {
        const std::string pw = where + " primitive " + std::to_string(p);
        if (!(*prims)[p].is_object()) fail(pw + " is not an object");
        check_primitive((*prims)[p], pw);
      }
      check_number_array(meshes[m], "weights", 0, where);
    }
  }

  void check_skins() {
    const json& skins = section("skins");
    const size_t nodes = section("nodes").size();
    for (size_t s = 0; s < skins.size(); ++s) {
      const json& skin = skins[s];
      const std::string where = "skin " + std::to_string(s);
      const json* joints = member(skin, "joints");
      if (!joints || !joints->is_array() || joints->empty()) fail(where + " has no joints");
      for (const json& j : *joints)
        if (!j.is_number_unsigned() || j.get<uint64_t>() >= nodes)
          fail(where + " has a joint that is not a node index");
      opt_ref(skin, "skeleton", nodes, "node", where);
      std::optional<uint64_t> ibm;
      if (member(skin, "inverseBindMatrices")) {
        const Accessor& a =
            accessor_ref(skin, "inverseBindMatrices", where + " inverseBindMatrices");
        expect_accessor(a, {"MAT4"}, {kFloat}, where + " inverseBindMatrices");
        if (a.count < joints->size())
          fail(where + " has " + std::to_string(joints->size()) + " joints but only " +
               std::to_string(a.count) + " inverse bind matrices");
        ibm = a.count;
      }
      skin_has_ibm_.push_back(ibm.has_value());
    }
  }

  void check_cameras_and_lights() {
    camera_count_ = section("cameras").size();
    const json* ext = member(doc_, "extensions");
    const json* punctual = ext ? member(*ext, "KHR_lights_punctual") : nullptr;
    const json* lights = punctual ? member(*punctual, "lights") : nullptr;
    if (lights) {
      if (!lights->is_array()) fail("KHR_lights_punctual lights is not an array");
      for (const json& l : *lights)
        if (!l.is_object()) fail("a KHR_lights_punctual light is not an object");
      light_count_ = lights->size();
    }
  }

  void check_nodes() {
    const json& nodes = section("nodes");
    node_count_ = nodes.size();
    std::vector<int64_t> parent(nodes.size(), -1);
    for (size_t n = 0; n < nodes.size(); ++n) {
      const json& node = nodes[n];
      const std::string where = "node " + std::to_string(n);
      if (const json* children = member(node, "children")) {
        if (!children->is_array()) fail(where + ": children is not an array");
        for (const json& c : *children) {
          if (!c.is_number_unsigned() || c.get<uint64_t>() >= nodes.size())
            fail(where + " has a child that is not a node index");
          const uint64_t child = c.get<uint64_t>();
          if (child == n) fail(where + " is its own child");
          if (parent[child] >= 0)
            fail("node " + std::to_string(child) + " has more than one parent");
          parent[child] = int64_t(n);
        }
      }
      const auto mesh = opt_ref(node, "mesh", mesh_count_, "mesh", where);
      const auto skin = opt_ref(node, "skin", skin_has_ibm_.size(), "skin", where);
      // assimp reads a skinned mesh's inverse bind matrices without checking they exist.
      if (mesh && skin && !skin_has_ibm_[*skin])
        fail(where + ": skin " + std::to_string(*skin) + " has no inverseBindMatrices");
      opt_ref(node, "camera", camera_count_, "camera", where);
      check_number_array(node, "matrix", 16, where);
      check_number_array(node, "translation", 3, where);
      check_number_array(node, "rotation", 4, where);
      check_number_array(node, "scale", 3, where);
      check_number_array(node, "weights", 0, where);
      if (const json* ext = member(node, "extensions"))
        if (const json* punctual = member(*ext, "KHR_lights_punctual"))
          opt_ref(*punctual, "light", light_count_, "light", where);
    }
    // One parent each, so the nodes form a forest unless a parent chain loops.
    for (size_t n = 0; n < nodes.size(); ++n) {
      size_t depth = 0;
      for (int64_t p = parent[n]; p >= 0; p = parent[p])
        if (++depth > kMaxNodeDepth)
          fail("node " + std::to_string(n) + " is nested more than " +
               std::to_string(kMaxNodeDepth) + " levels deep, or in a cycle");
    }
  }

  void check_scenes() {
    const json& scenes = section("scenes");
    for (size_t s = 0; s < scenes.size(); ++s) {
      const json* nodes = member(scenes[s], "nodes");
      if (!nodes) continue;
      if (!nodes->is_array()) fail("scene " + std::to_string(s) + ": nodes is not an array");
      for (const json& n : *nodes)
        if (!n.is_number_unsigned() || n.get<uint64_t>() >= node_count_)
          fail("scene " + std::to_string(s) + " has a node that is not a node index");
    }
    opt_ref(doc_, "scene", scenes.size(), "scene", "glTF");
  }

  void check_animations() {
    const json& animations = section("animations");
    for (size_t an = 0; an < animations.size(); ++an) {
      const std::string where = "animation " + std::to_string(an);
      const json* samplers = member(animations[an], "samplers");
      const json* channels = member(animations[an], "channels");
      if (!samplers || !samplers->is_array()) fail(where + " has no samplers");
      if (!channels || !channels->is_array()) fail(where + " has no channels");
      for (size_t s = 0; s < samplers->size(); ++s) {
        const json& sampler = (*samplers)[s];
        const std::string sw = where + " sampler " + std::to_string(s);
        const Accessor& input = accessor_ref(sampler, "input", sw + " input");
        accessor_ref(sampler, "output", sw + " output");
        expect_accessor(input, {"SCALAR"}, {kFloat}, sw + " input");
        const std::string* interp = opt_string(sampler, "interpolation", sw);
        if (interp && *interp != "LINEAR" && *interp != "STEP" && *interp != "CUBICSPLINE")
          fail(sw + " has an unknown interpolation '" + printable(*interp) + "'");
      }
      for (size_t c = 0; c < channels->size(); ++c) {
        const json& channel = (*channels)[c];
        const std::string cw = where + " channel " + std::to_string(c);
        const uint64_t s = req_ref(channel, "sampler", samplers->size(), "sampler", cw);
        const json* target = member(channel, "target");
        if (!target || !target->is_object()) fail(cw + " has no target");
        req_ref(*target, "node", node_count_, "node", cw + " target");  // assimp needs the node
        const std::string* path = opt_string(*target, "path", cw + " target");
        if (!path) fail(cw + " target has no path");
        const json& sampler = (*samplers)[s];
        const Accessor& input = accessor_ref(sampler, "input", cw);
        const Accessor& output = accessor_ref(sampler, "output", cw);
        const std::string* interp = opt_string(sampler, "interpolation", cw);
        const uint64_t k = interp && *interp == "CUBICSPLINE" ? 3 : 1;
        const std::string ow = cw + " output";
        if (*path == "translation" || *path == "scale") {
          expect_accessor(output, {"VEC3"}, {kFloat}, ow);
        } else if (*path == "rotation") {
          expect_accessor(output, {"VEC4"}, {kFloat, kByte, kUByte, kShort, kUShort}, ow);
        } else if (*path == "weights") {
          expect_accessor(output, {"SCALAR"}, {kFloat, kByte, kUByte, kShort, kUShort}, ow);
          // assimp derives the number of morph targets from output / input.
          if (output.count % input.count != 0 || (output.count / input.count) % k != 0)
            fail(ow + " has " + std::to_string(output.count) + " values for " +
                 std::to_string(input.count) + " keyframes");
          continue;
        } else {
          fail(cw + " target has an unknown path '" + printable(*path) + "'");
        }
        if (output.count < input.count * k)
          fail(ow + " has " + std::to_string(output.count) + " values for " +
               std::to_string(input.count) + " keyframes");
      }
    }
  }

  const std::string& path_;
  const bool binary_;
  const std::string& bytes_;
  json doc_;
  std::string_view bin_;
  bool has_bin_ = false;
  std::vector<uint64_t> buffer_length_;
  std::map<uint64_t, std::string> buffer_data_;  // decoded or read on demand
  std::vector<std::string> buffer_uri_;
  std::vector<View> views_;
  std::vector<Accessor> accessors_;
  std::vector<bool> skin_has_ibm_;
  size_t image_count_ = 0, sampler_count_ = 0, texture_count_ = 0, material_count_ = 0;
  size_t mesh_count_ = 0, camera_count_ = 0, light_count_ = 0, node_count_ = 0;
};

}  // namespace

void check_gltf(const std::string& path, bool binary, const std::string& bytes) {
  GltfChecker(path, binary, bytes).run();
}

}  // namespace gen3d::mesh::detail
