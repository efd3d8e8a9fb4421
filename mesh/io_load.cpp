// load_mesh through assimp. We deliberately skip aiProcess_JoinIdenticalVertices: it welds only
// corners whose position, normal and UV all agree, which would split positions at UV seams. We
// weld positions and UVs separately instead, so connectivity is kept and seams stay exact.
#include <algorithm>
#include <cctype>
#include <cmath>
#include <cstring>
#include <filesystem>
#include <fstream>
#include <functional>
#include <initializer_list>
#include <iterator>
#include <map>
#include <mutex>
#include <set>
#include <unordered_map>

#include <assimp/BaseImporter.h>
#include <assimp/material.h>
#include <assimp/postprocess.h>
#include <assimp/scene.h>
#include <spdlog/spdlog.h>
#include <assimp/Importer.hpp>
#include <nlohmann/json.hpp>

#include "image/codec.h"
#include "image/error.h"
#include "image/io.h"
#include "mesh/error.h"
#include "mesh/io.h"
#include "mesh/pbr.h"
#include "mesh/precheck.h"
#include "mesh/scene_parts.h"

namespace gen3d::mesh {
namespace fs = std::filesystem;

namespace {

std::string lower(std::string s) {
  std::transform(s.begin(), s.end(), s.begin(), [](unsigned char c) { return std::tolower(c); });
  return s;
}

// Welds small float vectors by exact value (-0 and +0 count as equal), numbering them in order of
// first insertion.
template <size_t N>
class Welder {
 public:
  struct Key {
    std::array<uint32_t, N> bits;
    bool operator==(const Key&) const = default;
  };
  struct Hash {
    size_t operator()(const Key& k) const {
      uint64_t h = 0x9e3779b97f4a7c15ull;
      for (uint32_t b : k.bits) h = (h ^ b) * 0xff51afd7ed558ccdull;
      return size_t(h ^ (h >> 32));
    }
  };
  uint32_t insert(const std::array<float, N>& v, std::vector<std::array<float, N>>& out) {
    Key key;
    for (size_t i = 0; i < N; ++i) {
      const float x = v[i] == 0.0f ? 0.0f : v[i];
      std::memcpy(&key.bits[i], &x, sizeof x);
    }
    auto [it, inserted] = map_.try_emplace(key, uint32_t(out.size()));
    if (inserted) out.push_back(v);
    return it->second;
  }
  void reserve(size_t n) { map_.reserve(n); }

 private:
  std::unordered_map<Key, uint32_t, Hash> map_;
};

// The material's first texture of the first of `types` it has, decoded (embedded or from a file).
std::shared_ptr<const image::Image> load_material_texture(
    const aiScene& scene, const aiMaterial& mat, const std::string& model_path,
    std::initializer_list<aiTextureType> types = {aiTextureType_BASE_COLOR,
                                                  aiTextureType_DIFFUSE}) {
  aiString ref;
  bool found = false;
  for (aiTextureType type : types) {
    if (mat.GetTextureCount(type) > 0 && mat.GetTexture(type, 0, &ref) == aiReturn_SUCCESS) {
      found = true;
      break;
    }
  }
  if (!found || ref.length == 0) return nullptr;
  const std::string name = ref.C_Str();
  try {
    if (const aiTexture* tex = scene.GetEmbeddedTexture(name.c_str())) {
      const std::string what = model_path + " (embedded texture " + name + ")";
      if (tex->mHeight == 0) {  // compressed: mWidth bytes of PNG/JPEG
        return std::make_shared<const image::Image>(
            image::decode_image(reinterpret_cast<const uint8_t*>(tex->pcData), tex->mWidth, what));
      }
      auto img = std::make_shared<image::Image>(int(tex->mWidth), int(tex->mHeight), 4);
      for (size_t i = 0; i < size_t(tex->mWidth) * tex->mHeight; ++i) {
        const aiTexel& t = tex->pcData[i];
        float* px = img->pixels.data() + 4 * i;
        px[0] = t.r / 255.0f;
        px[1] = t.g / 255.0f;
        px[2] = t.b / 255.0f;
        px[3] = t.a / 255.0f;
      }
      return img;
    }
    if (!name.empty() && name[0] == '*') {
      spdlog::warn("{}: embedded texture {} is missing; loading without texture", model_path, name);
      return nullptr;
    }
    const std::string file = detail::resolve_texture_path(name, fs::path(model_path).parent_path());
    if (file.empty()) {
      spdlog::warn("{}: texture '{}' not found; loading without texture", model_path, name);
      return nullptr;
    }
    return std::make_shared<const image::Image>(image::load_image(file));
  } catch (const image::ImageError& e) {  // a broken texture does not make the mesh unusable
    spdlog::warn("{}: {}; loading without texture", model_path, e.what());
    return nullptr;
  }
}

// One placement of a mesh in the scene: its world transform (node chain product).
struct Instance {
  unsigned mesh;
  aiMatrix4x4 transform;
};

// Applies node transforms ourselves instead of aiProcess_PreTransformVertices: that step fails on
// scenes without faces ("all meshes are orphaned") and does not fix the winding under mirroring.
void collect_instances(const aiNode* node, const aiMatrix4x4& parent, unsigned depth,
                       std::vector<Instance>& out, const std::string& path) {
  if (!node) return;
  if (depth > 1000) throw MeshError("cannot load mesh '" + path + "': node hierarchy too deep");
  const aiMatrix4x4 world = parent * node->mTransformation;
  for (unsigned i = 0; i < node->mNumMeshes; ++i) {
    if (node->mMeshes) out.push_back({node->mMeshes[i], world});
  }
  for (unsigned c = 0; c < node->mNumChildren; ++c) {
    if (node->mChildren) collect_instances(node->mChildren[c], world, depth + 1, out, path);
  }
}

// glTF is read by tinygltf, never by assimp; but assimp falls back to content sniffing when the
// readers of an extension decline a file, and its glTF readers accept glTF JSON under any name (a
// ".xml" file, for one). Removing them from this importer keeps glTF out of assimp.
void drop_gltf_readers(Assimp::Importer& importer) {
  for (size_t i = importer.GetImporterCount(); i-- > 0;) {
    Assimp::BaseImporter* reader = importer.GetImporter(i);
    std::set<std::string> extensions;
    reader->GetExtensionList(extensions);
    if ((extensions.count("gltf") || extensions.count("glb")) &&
        importer.UnregisterLoader(reader) == aiReturn_SUCCESS) {
      delete reader;  // unregistered readers are no longer owned by the importer
    }
  }
}

std::string read_file(const std::string& path) {
  std::ifstream in(path, std::ios::binary);
  if (!in) throw MeshError("cannot load mesh '" + path + "': cannot open the file");
  return std::string((std::istreambuf_iterator<char>(in)), std::istreambuf_iterator<char>());
}

// Every face of the raw scene indexes existing vertices (what post-processing assumes).
void check_raw_faces(const aiScene& scene, const std::string& path) {
  for (unsigned m = 0; m < scene.mNumMeshes; ++m) {
    const aiMesh* mesh = scene.mMeshes ? scene.mMeshes[m] : nullptr;
    if (!mesh)
      throw MeshError("cannot load mesh '" + path + "': mesh " + std::to_string(m) + " is missing");
    if (mesh->mNumFaces > 0 && (!mesh->mFaces || !mesh->mVertices))
      throw MeshError("cannot load mesh '" + path + "': mesh " + std::to_string(m) +
                      " has faces but no vertex or face data");
    for (unsigned f = 0; f < mesh->mNumFaces; ++f) {
      const aiFace& face = mesh->mFaces[f];
      if (face.mNumIndices == 0)  // post-processing aborts on empty faces (found by fuzzing OFF)
        throw MeshError("cannot load mesh '" + path + "': face " + std::to_string(f) +
                        " has no vertices");
      if (!face.mIndices)
        throw MeshError("cannot load mesh '" + path + "': face " + std::to_string(f) +
                        " has no indices");
      for (unsigned k = 0; k < face.mNumIndices; ++k)
        if (face.mIndices[k] >= mesh->mNumVertices)
          throw MeshError("cannot load mesh '" + path + "': face " + std::to_string(f) +
                          " of mesh " + std::to_string(m) + " indexes vertex " +
                          std::to_string(face.mIndices[k]) + " of " +
                          std::to_string(mesh->mNumVertices));
    }
  }
}

// Step 1: what the file system can tell before any parser runs.
void check_mesh_file(const std::string& path) {
  std::error_code ec;
  if (!fs::exists(path, ec)) throw MeshError("cannot load mesh '" + path + "': no such file");
  if (!fs::is_regular_file(path, ec)) {
    throw MeshError("cannot load mesh '" + path + "': not a regular file");
  }
  if (fs::file_size(path, ec) == 0) throw MeshError("cannot load mesh '" + path + "': empty file");
}

// glTF 1.0, which tinygltf does not read: a GLB container of version 1, or JSON whose asset version
// is 1.x, or that has no asset object (optional in 1.0) and keeps its accessors in an object (an
// array in 2.0).
bool is_gltf1(const std::string& path) {
  const std::string text = read_file(path);
  if (text.size() >= 8 && text.compare(0, 4, "glTF") == 0) {
    uint32_t version = 0;
    std::memcpy(&version, text.data() + 4, 4);
    return version == 1;
  }
  const nlohmann::json doc = nlohmann::json::parse(text, nullptr, false);
  if (!doc.is_object()) return false;
  if (const auto asset = doc.find("asset"); asset != doc.end()) {
    // A string in 2.0; some 1.0 writers wrote the number 1.
    const auto version = asset->is_object() ? asset->find("version") : asset->end();
    if (version == asset->end()) return false;
    if (version->is_number()) return version->get<double>() >= 1 && version->get<double>() < 2;
    return version->is_string() && version->get<std::string>().rfind("1", 0) == 0;
  }
  const auto accessors = doc.find("accessors");
  return accessors != doc.end() && accessors->is_object();
}

// Step 2 (assimp): the format pre-checks and the import. The scene is owned by `importer`.
const aiScene& import_scene(Assimp::Importer& importer, const std::string& path) {
  const std::string ext = lower(fs::path(path).extension().string());
  if (ext.empty() || !importer.IsExtensionSupported(ext)) {
    throw MeshError("cannot load mesh '" + path + "': unsupported format '" + ext + "'");
  }
  if (ext == ".off" || ext == ".ply" || ext == ".obj")
    detail::precheck_mesh_file(path, ext, read_file(path));
  drop_gltf_readers(importer);
  // No aiProcess_ValidateDataStructure: it rejects face-less meshes (point clouds) with a cryptic
  // message; we check what we use ourselves (null arrays, index ranges, finite positions).
  // aiProcess_SortByPType keeps points and lines out of the way but present, so we can count and
  // report them.
  const unsigned flags = aiProcess_Triangulate | aiProcess_SortByPType;
  const aiScene* scene = nullptr;
  // One import at a time: two assimp imports in parallel (a texture transfer loads its source and
  // target meshes side by side) race inside libassimp, where one import's file-name bytes were seen
  // written by the other (ThreadSanitizer). The textures decode outside this lock.
  static std::mutex import_mutex;
  std::lock_guard lock(import_mutex);
  try {
    // Read without post-processing first: assimp's steps trust the face indices, and a corrupt
    // file with out-of-range ones crashes them (found by fuzzing a binary PLY). Check, then run.
    scene = importer.ReadFile(path, 0);
    if (scene) check_raw_faces(*scene, path);
    if (scene) scene = importer.ApplyPostProcessing(flags);
  } catch (const MeshError&) {
    throw;
  } catch (const std::exception& e) {  // assimp catches most, but not every, internal exception
    throw MeshError("cannot load mesh '" + path + "': " + e.what());
  }
  if (!scene) {
    throw MeshError("cannot load mesh '" + path + "': " + importer.GetErrorString());
  }
  if ((scene->mFlags & AI_SCENE_FLAGS_INCOMPLETE) || !scene->mRootNode) {
    throw MeshError("cannot load mesh '" + path + "': the file holds no complete scene");
  }
  return *scene;
}

// Whether some / all of the converted meshes carry an attribute.
struct Presence {
  bool any = false;
  bool all = true;
  void add(bool has) {
    any |= has;
    all &= has;
  }
};

// Step 3 (assimp): one mesh instance as a Part in world space. A mirroring transform (negative
// determinant) turns CCW faces into CW ones, so their corner order is reversed to keep CCW-outward;
// normals transform by the inverse transpose. Faces that are not triangles count as dropped.
detail::Part assimp_part(const aiScene& scene, const Instance& inst, size_t& dropped,
                         const std::string& path) {
  const unsigned mi = inst.mesh;
  if (mi >= scene.mNumMeshes || !scene.mMeshes) {
    throw MeshError("cannot load mesh '" + path + "': a node references missing mesh " +
                    std::to_string(mi));
  }
  detail::Part part;
  const aiMesh* m = scene.mMeshes[mi];
  if (!m || !(m->mPrimitiveTypes & aiPrimitiveType_TRIANGLE)) {
    if (m) dropped += m->mNumFaces;
    return part;
  }
  if ((m->mNumVertices > 0 && !m->mVertices) || (m->mNumFaces > 0 && !m->mFaces)) {
    throw MeshError("cannot load mesh '" + path + "': mesh " + std::to_string(mi) +
                    " has no vertex or face data");
  }
  part.material = m->mMaterialIndex;
  part.positions.resize(m->mNumVertices);
  for (unsigned v = 0; v < m->mNumVertices; ++v) {
    const aiVector3D w = inst.transform * m->mVertices[v];
    if (!std::isfinite(w.x) || !std::isfinite(w.y) || !std::isfinite(w.z)) {
      throw MeshError("cannot load mesh '" + path + "': vertex " + std::to_string(v) + " of mesh " +
                      std::to_string(mi) + " has a non-finite position (NaN/Inf)");
    }
    part.positions[v] = {w.x, w.y, w.z};
  }
  aiMatrix3x3 normal_xf(inst.transform);
  const bool mirrored = normal_xf.Determinant() < 0;
  normal_xf.Inverse().Transpose();
  if (m->HasNormals()) {
    part.normals.resize(m->mNumVertices);
    for (unsigned v = 0; v < m->mNumVertices; ++v) {
      const aiVector3D n = normal_xf * m->mNormals[v];
      part.normals[v] = {n.x, n.y, n.z};
    }
  }
  if (m->HasTextureCoords(0)) {
    part.uvs.resize(m->mNumVertices);
    for (unsigned v = 0; v < m->mNumVertices; ++v)
      part.uvs[v] = {m->mTextureCoords[0][v].x, m->mTextureCoords[0][v].y};
  }
  if (m->HasVertexColors(0)) {
    part.colors.resize(m->mNumVertices);
    for (unsigned v = 0; v < m->mNumVertices; ++v) {
      const aiColor4D& c = m->mColors[0][v];
      part.colors[v] = {c.r, c.g, c.b, c.a};
    }
  }
  for (unsigned fi = 0; fi < m->mNumFaces; ++fi) {
    const aiFace& face = m->mFaces[fi];
    if (face.mNumIndices != 3 || !face.mIndices) {
      ++dropped;
      continue;
    }
    Tri tri{};
    for (int k = 0; k < 3; ++k) {
      const unsigned idx = face.mIndices[mirrored ? 2 - k : k];
      if (idx >= m->mNumVertices) {
        throw MeshError("cannot load mesh '" + path + "': face " + std::to_string(fi) +
                        " of mesh " + std::to_string(mi) + " uses vertex " + std::to_string(idx) +
                        " but there are only " + std::to_string(m->mNumVertices));
      }
      tri[k] = idx;
    }
    part.faces.push_back(tri);
  }
  return part;
}

// Step 4: every triangle of every part into one Mesh, positions and UVs welded by value, normals
// and colours summed per welded vertex (averaged in finish()). Only the vertices the faces use are
// welded, in the order the faces first use them.
class SceneConverter {
 public:
  explicit SceneConverter(const std::string& path) : path_(path) {}

  void add(const detail::Part& part) {
    if (part.faces.empty()) return;
    const MeshAttributes attrs{!part.uvs.empty(), !part.normals.empty(), !part.colors.empty()};
    std::vector<int64_t> pos_of(part.positions.size(), -1), uv_of(part.positions.size(), -1);
    for (const Tri& face : part.faces) {
      Tri tri{}, uv_tri{};
      for (int k = 0; k < 3; ++k) {
        const uint32_t idx = face[k];
        if (pos_of[idx] < 0) pos_of[idx] = add_vertex(part, idx, attrs);
        tri[k] = uint32_t(pos_of[idx]);
        if (attrs.uvs) {
          if (uv_of[idx] < 0) uv_of[idx] = uv_welder_.insert(part.uvs[idx], out_.uvs);
          uv_tri[k] = uint32_t(uv_of[idx]);
        }
      }
      out_.faces.push_back(tri);
      out_.uv_faces.push_back(uv_tri);  // trimmed in finish() when some part lacks UVs
    }
    face_material_.resize(out_.faces.size(), part.material);
    uvs_.add(attrs.uvs);
    normals_.add(attrs.normals);
    colors_.add(attrs.colors);
  }
  void add_dropped(size_t n) { dropped_ += n; }

  // Keeps an attribute only where every mesh had it (warning otherwise) and it is usable. Throws
  // when the file gave no triangle at all.
  Mesh finish() {
    if (dropped_ > 0) {
      spdlog::warn("{}: dropped {} point/line primitives (only triangles are kept)", path_,
                   dropped_);
    }
    if (out_.faces.empty()) {
      throw MeshError("cannot load mesh '" + path_ + "': the file contains no triangles");
    }
    finish_uvs();
    finish_normals();
    finish_colors();
    return std::move(out_);
  }

  // The file's material index of every face.
  const std::vector<unsigned>& face_material() const { return face_material_; }

 private:
  struct MeshAttributes {
    bool uvs, normals, colors;
  };

  // Welds the position of part vertex `idx` and adds its normal and colour to the welded vertex's
  // sums; returns the welded index.
  uint32_t add_vertex(const detail::Part& part, uint32_t idx, const MeshAttributes& attrs) {
    const size_t before = out_.positions.size();
    const uint32_t w = pos_welder_.insert(part.positions[idx], out_.positions);
    if (out_.positions.size() > before) {
      normal_sum_.push_back({0, 0, 0});
      color_sum_.push_back({0, 0, 0, 0});
      color_count_.push_back(0);
    }
    if (attrs.normals) {
      const Vec3& n = part.normals[idx];
      normal_sum_[w] = {normal_sum_[w][0] + n[0], normal_sum_[w][1] + n[1],
                        normal_sum_[w][2] + n[2]};
    }
    if (attrs.colors) {
      const Vec4& c = part.colors[idx];
      color_sum_[w] = {color_sum_[w][0] + c[0], color_sum_[w][1] + c[1], color_sum_[w][2] + c[2],
                       color_sum_[w][3] + c[3]};
      ++color_count_[w];
    }
    return w;
  }

  void finish_uvs() {
    if (uvs_.any && !uvs_.all) {
      spdlog::warn("{}: some meshes have no UVs; dropping UVs for the whole mesh", path_);
    }
    if (!uvs_.all) {
      out_.uvs.clear();
      out_.uv_faces.clear();
    }
    for (const Vec2& t : out_.uvs) {
      if (!std::isfinite(t[0]) || !std::isfinite(t[1])) {
        spdlog::warn("{}: non-finite UVs; dropping UVs", path_);
        out_.uvs.clear();
        out_.uv_faces.clear();
        break;
      }
    }
  }

  void finish_normals() {
    if (!normals_.all) {
      if (normals_.any) spdlog::warn("{}: some meshes have no normals; dropping normals", path_);
      return;
    }
    out_.normals.resize(out_.positions.size());
    for (size_t v = 0; v < out_.positions.size(); ++v) {
      const Vec3& s = normal_sum_[v];
      const float len = std::sqrt(s[0] * s[0] + s[1] * s[1] + s[2] * s[2]);
      if (!(len > 0.0f) || !std::isfinite(len)) {
        spdlog::warn("{}: zero or non-finite normals in the file; dropping them", path_);
        out_.normals.clear();
        return;
      }
      out_.normals[v] = {s[0] / len, s[1] / len, s[2] / len};
    }
  }

  void finish_colors() {
    if (!colors_.all) {
      if (colors_.any) {
        spdlog::warn("{}: some meshes have no vertex colours; dropping colours", path_);
      }
      return;
    }
    out_.colors.resize(out_.positions.size());
    for (size_t v = 0; v < out_.positions.size(); ++v) {
      const float n = float(std::max<uint32_t>(color_count_[v], 1));
      for (int c = 0; c < 4; ++c) out_.colors[v][c] = color_sum_[v][c] / n;
    }
  }

  std::string path_;
  Mesh out_;
  Welder<3> pos_welder_;
  Welder<2> uv_welder_;
  std::vector<Vec3> normal_sum_;
  std::vector<Vec4> color_sum_;
  std::vector<uint32_t> color_count_;
  Presence uvs_, normals_, colors_;
  size_t dropped_ = 0;
  std::vector<unsigned> face_material_;
};

// The material's base-colour factor: glTF's baseColorFactor, else the diffuse colour (MTL Kd).
Vec4 material_color(const aiMaterial& mat) {
  aiColor4D c(1, 1, 1, 1);
  if (mat.Get(AI_MATKEY_BASE_COLOR, c) != aiReturn_SUCCESS &&
      mat.Get(AI_MATKEY_COLOR_DIFFUSE, c) != aiReturn_SUCCESS) {
    return {1, 1, 1, 1};
  }
  const auto unit = [](float v) { return std::isfinite(v) ? std::clamp(v, 0.0f, 1.0f) : 1.0f; };
  return {unit(c.r), unit(c.g), unit(c.b), unit(c.a)};
}

// An assimp material: name, base colour and (when asked) its texture.
Material assimp_material(const aiScene& scene, unsigned m, bool with_texture,
                         const std::string& path) {
  Material mat;
  if (m >= scene.mNumMaterials) return mat;
  const aiMaterial& am = *scene.mMaterials[m];
  mat.name = am.GetName().C_Str();
  mat.base_color = material_color(am);
  // PBR: MTL's Pm / Pr (and other formats' factors); map_Pm / map_Pr are separate grayscale
  // images, joined here into glTF's layout.
  float factor = 0;
  if (am.Get(AI_MATKEY_METALLIC_FACTOR, factor) == aiReturn_SUCCESS && std::isfinite(factor))
    mat.pbr.metallic = std::clamp(factor, 0.0f, 1.0f);
  if (am.Get(AI_MATKEY_ROUGHNESS_FACTOR, factor) == aiReturn_SUCCESS && std::isfinite(factor))
    mat.pbr.roughness = std::clamp(factor, 0.0f, 1.0f);
  if (!with_texture) return mat;
  mat.texture = load_material_texture(scene, am, path);
  const auto metallic = load_material_texture(scene, am, path, {aiTextureType_METALNESS});
  const auto roughness = load_material_texture(scene, am, path, {aiTextureType_DIFFUSE_ROUGHNESS});
  if (metallic || roughness) {
    try {
      mat.pbr.texture = std::make_shared<const image::Image>(
          gltf_metallic_roughness_from_maps(metallic.get(), roughness.get()));
    } catch (const std::invalid_argument& e) {  // like a broken texture: the mesh stays usable
      spdlog::warn("{}: {}; loading without the metallic-roughness texture", path, e.what());
    }
  }
  return mat;
}

// Step 5: the materials. One material gives the mesh its texture (as every consumer expects of a
// single-material mesh); several keep each face's own material, textures and colours alike, so a
// render of the mesh shows every part as the file does.
void attach_materials(const std::function<Material(unsigned, bool)>& material_of,
                      const std::vector<unsigned>& face_material, Mesh& mesh,
                      const std::string& path) {
  std::map<unsigned, uint32_t> slot;  // file material index -> index into mesh.materials
  for (unsigned m : face_material) slot.emplace(m, 0);
  if (slot.empty()) return;
  if (slot.size() == 1) {
    Material only = material_of(slot.begin()->first, mesh.has_uvs());
    mesh.texture = std::move(only.texture);
    mesh.pbr = std::move(only.pbr);
    return;
  }
  for (auto& [m, index] : slot) {
    index = uint32_t(mesh.materials.size());
    mesh.materials.push_back(material_of(m, mesh.has_uvs()));
  }
  mesh.face_materials.resize(face_material.size());
  for (size_t f = 0; f < face_material.size(); ++f) mesh.face_materials[f] = slot[face_material[f]];
  size_t textured = 0;
  for (const Material& mat : mesh.materials) textured += mat.texture != nullptr;
  spdlog::debug("{}: {} materials ({} textured)", path, mesh.materials.size(), textured);
}

}  // namespace

namespace detail {

// Finds a texture file referenced by a material: relative to the model, with Windows separators
// and "./" prefixes tolerated, falling back to the bare file name and a case-insensitive match.
std::string resolve_texture_path(const std::string& ref, const std::filesystem::path& model_dir) {
  std::string p = ref;
  std::replace(p.begin(), p.end(), '\\', '/');
  while (p.rfind("./", 0) == 0) p = p.substr(2);
  std::vector<fs::path> candidates;
  const fs::path rel(p);
  if (rel.is_absolute()) candidates.push_back(rel);
  candidates.push_back(model_dir / rel);
  candidates.push_back(model_dir / rel.filename());
  std::error_code ec;
  for (const auto& c : candidates) {
    if (fs::is_regular_file(c, ec)) return c.string();
  }
  const std::string want = lower(rel.filename().string());
  for (const auto& entry : fs::directory_iterator(model_dir.empty() ? "." : model_dir, ec)) {
    if (entry.is_regular_file(ec) && lower(entry.path().filename().string()) == want) {
      return entry.path().string();
    }
  }
  return {};
}

}  // namespace detail

Mesh load_mesh(const std::string& path) {
  check_mesh_file(path);
  SceneConverter converter(path);
  const std::string ext = lower(fs::path(path).extension().string());
  if (ext == ".gltf" || ext == ".glb") {
    try {
      const detail::Scene scene = detail::read_gltf(path);
      for (const detail::Part& part : scene.parts) converter.add(part);
      converter.add_dropped(scene.dropped);
      Mesh mesh = converter.finish();
      attach_materials(scene.material, converter.face_material(), mesh, path);
      return mesh;
    } catch (const MeshError& e) {
      // tinygltf names glTF 1.0 only where the file gives its version as a string; a 1.0 file that
      // gives a number, or no asset object, got a message about the asset object. Asked only once
      // tinygltf has failed, so glTF 2.0 files are not parsed twice. assimp's glTF 1.0 reader is
      // not used: a one-byte change to a valid file makes it abort the process (an assertion left
      // on in the Debian build, found by fuzzing).
      if (std::string(e.what()).find("glTF 1.0") == std::string::npos && is_gltf1(path))
        throw MeshError("cannot load mesh '" + path +
                        "': glTF 1.0 is not supported, only glTF 2.0");
      throw;
    }
  }
  Assimp::Importer importer;
  const aiScene& scene = import_scene(importer, path);
  std::vector<Instance> instances;
  collect_instances(scene.mRootNode, aiMatrix4x4(), 0, instances, path);
  size_t dropped = 0;
  for (const Instance& inst : instances) converter.add(assimp_part(scene, inst, dropped, path));
  converter.add_dropped(dropped);
  Mesh mesh = converter.finish();
  attach_materials(
      [&](unsigned m, bool with_texture) { return assimp_material(scene, m, with_texture, path); },
      converter.face_material(), mesh, path);
  return mesh;
}

}  // namespace gen3d::mesh
