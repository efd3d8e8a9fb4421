// save_mesh: GLB through tinygltf (assimp's glTF2 exporter does not give control over the layout
// and material we need), OBJ+MTL+PNG and binary PLY as plain text/bytes.
#include <algorithm>
#include <cctype>
#include <charconv>
#include <cmath>
#include <cstring>
#include <filesystem>
#include <map>
#include <sstream>

#include <spdlog/spdlog.h>

#include "image/codec.h"
#include "image/error.h"
#include "io/atomic_file.h"
#include "io/error.h"
#include "mesh/error.h"
#include "mesh/io.h"
#include "mesh/normals.h"
#include "mesh/pbr.h"
#include "mesh/seams.h"
#include "mesh/tinygltf.h"

namespace gen3d::mesh {
namespace fs = std::filesystem;

namespace {

std::string lower(std::string s) {
  std::transform(s.begin(), s.end(), s.begin(), [](unsigned char c) { return std::tolower(c); });
  return s;
}

void check_writable(const Mesh& mesh, const std::string& path) {
  if (mesh.faces.empty()) throw MeshError("cannot write '" + path + "': the mesh has no faces");
  const size_t nv = mesh.positions.size();
  for (size_t f = 0; f < mesh.faces.size(); ++f) {
    for (uint32_t v : mesh.faces[f]) {
      if (v >= nv) {
        throw MeshError("cannot write '" + path + "': face " + std::to_string(f) + " uses vertex " +
                        std::to_string(v) + " of " + std::to_string(nv));
      }
    }
  }
  for (const Vec3& p : mesh.positions) {
    if (!std::isfinite(p[0]) || !std::isfinite(p[1]) || !std::isfinite(p[2])) {
      throw MeshError("cannot write '" + path + "': the mesh has non-finite positions");
    }
  }
  if (mesh.has_uvs() && mesh.uv_faces.size() != mesh.faces.size()) {
    throw MeshError("cannot write '" + path + "': uv_faces and faces differ in length");
  }
  if (!mesh.normals.empty() && mesh.normals.size() != nv) {
    throw MeshError("cannot write '" + path + "': normals and positions differ in length");
  }
  if (!mesh.colors.empty() && mesh.colors.size() != nv) {
    throw MeshError("cannot write '" + path + "': colors and positions differ in length");
  }
  if (mesh.has_materials()) {
    if (mesh.face_materials.size() != mesh.faces.size()) {
      throw MeshError("cannot write '" + path + "': face_materials and faces differ in length");
    }
    for (uint32_t m : mesh.face_materials) {
      if (m >= mesh.materials.size()) {
        throw MeshError("cannot write '" + path + "': a face uses material " + std::to_string(m) +
                        " of " + std::to_string(mesh.materials.size()));
      }
    }
  }
}

// Unit normals for export: the mesh's own when present and usable, else area-weighted ones.
// Vertices without a defined normal get +Z, since glTF requires unit length.
std::vector<Vec3> export_normals(const Mesh& mesh) {
  std::vector<Vec3> n = mesh.normals.size() == mesh.positions.size()
                            ? mesh.normals
                            : vertex_normals_area_weighted(mesh);
  for (Vec3& v : n) {
    const float len = std::sqrt(v[0] * v[0] + v[1] * v[1] + v[2] * v[2]);
    if (len > 0.0f && std::isfinite(len)) {
      v = {v[0] / len, v[1] / len, v[2] / len};
    } else {
      v = {0.0f, 0.0f, 1.0f};
    }
  }
  return n;
}

// Shortest text that reads back to the same float.
void append_float(std::string& s, float x) {
  char buf[32];
  auto r = std::to_chars(buf, buf + sizeof buf, x);
  s.append(buf, r.ptr);
}

template <class T>
void append_bytes(std::string& s, const T* data, size_t count) {
  s.append(reinterpret_cast<const char*>(data), count * sizeof(T));
}

// The GLB through tinygltf: one buffer (the BIN chunk) holding the index lists, the vertex
// attributes and the PNG textures; one primitive and one material per mesh material.
std::string build_glb(const Mesh& input, const std::string& path) {
  const Mesh mesh = split_uv_seams(input);
  const std::vector<Vec3> normals = export_normals(mesh);
  const size_t nv = mesh.positions.size();
  tinygltf::Model model;
  model.asset.version = "2.0";
  model.asset.generator = "gen3d";
  std::vector<unsigned char>& bin = model.buffers.emplace_back().data;

  const auto add_view = [&](const void* data, size_t bytes, int target) {
    while (bin.size() % 4) bin.push_back(0);
    tinygltf::BufferView view;
    view.buffer = 0;
    view.byteOffset = bin.size();
    view.byteLength = bytes;
    view.target = target;
    const auto* begin = static_cast<const unsigned char*>(data);
    bin.insert(bin.end(), begin, begin + bytes);
    model.bufferViews.push_back(view);
    return int(model.bufferViews.size() - 1);
  };
  const auto add_accessor = [&](int view, int component, size_t count, int type) {
    tinygltf::Accessor a;
    a.bufferView = view;
    a.componentType = component;
    a.count = count;
    a.type = type;
    model.accessors.push_back(a);
    return int(model.accessors.size() - 1);
  };

  // One primitive per material (or one for the whole mesh), sharing the vertex attributes; the
  // index accessors come first.
  std::vector<Material> materials = mesh.materials;
  if (!mesh.has_materials())
    materials = {Material{"material0", mesh.texture, {1, 1, 1, 1}, mesh.pbr}};
  std::vector<int> index_accessor(materials.size(), -1);
  for (size_t m = 0; m < materials.size(); ++m) {
    std::vector<Tri> faces;
    if (!mesh.has_materials()) {
      faces = mesh.faces;
    } else {
      for (size_t f = 0; f < mesh.faces.size(); ++f)
        if (mesh.face_materials[f] == m) faces.push_back(mesh.faces[f]);
    }
    if (faces.empty()) continue;
    index_accessor[m] = add_accessor(
        add_view(faces.data(), faces.size() * sizeof(Tri), TINYGLTF_TARGET_ELEMENT_ARRAY_BUFFER),
        TINYGLTF_COMPONENT_TYPE_UNSIGNED_INT, faces.size() * 3, TINYGLTF_TYPE_SCALAR);
  }
  std::map<std::string, int> attributes;
  constexpr int kFloat = TINYGLTF_COMPONENT_TYPE_FLOAT, kArray = TINYGLTF_TARGET_ARRAY_BUFFER;
  {
    Vec3 lo = mesh.positions[0], hi = mesh.positions[0];
    for (const Vec3& p : mesh.positions) {
      for (int i = 0; i < 3; ++i) {
        lo[i] = std::min(lo[i], p[i]);
        hi[i] = std::max(hi[i], p[i]);
      }
    }
    const int a = add_accessor(add_view(mesh.positions.data(), nv * sizeof(Vec3), kArray), kFloat,
                               nv, TINYGLTF_TYPE_VEC3);
    model.accessors[a].minValues = {lo[0], lo[1], lo[2]};
    model.accessors[a].maxValues = {hi[0], hi[1], hi[2]};
    attributes["POSITION"] = a;
  }
  attributes["NORMAL"] = add_accessor(add_view(normals.data(), nv * sizeof(Vec3), kArray), kFloat,
                                      nv, TINYGLTF_TYPE_VEC3);
  if (mesh.has_uvs()) {
    std::vector<Vec2> uv(nv);  // glTF puts v = 0 at the top of the image
    for (size_t i = 0; i < nv; ++i) uv[i] = {mesh.uvs[i][0], 1.0f - mesh.uvs[i][1]};
    attributes["TEXCOORD_0"] = add_accessor(add_view(uv.data(), nv * sizeof(Vec2), kArray), kFloat,
                                            nv, TINYGLTF_TYPE_VEC2);
  }
  if (!mesh.colors.empty()) {
    std::vector<Vec4> c(nv);
    for (size_t i = 0; i < nv; ++i) {
      for (int k = 0; k < 4; ++k) {
        const float x = mesh.colors[i][k];
        c[i][k] = std::isfinite(x) ? std::clamp(x, 0.0f, 1.0f) : 0.0f;
      }
    }
    attributes["COLOR_0"] =
        add_accessor(add_view(c.data(), nv * sizeof(Vec4), kArray), kFloat, nv, TINYGLTF_TYPE_VEC4);
  }

  // Each image embedded as PNG, with one texture (and the one linear sampler) to reference it.
  const auto add_texture = [&](const image::Image& im, const std::string& what) {
    const std::string png = image::encode_image(im, ".png", path + " (" + what + ")");
    tinygltf::Image image;
    image.bufferView = add_view(png.data(), png.size(), 0);
    image.mimeType = "image/png";
    model.images.push_back(image);
    if (model.samplers.empty()) {
      tinygltf::Sampler linear;
      linear.magFilter = TINYGLTF_TEXTURE_FILTER_LINEAR;
      linear.minFilter = TINYGLTF_TEXTURE_FILTER_LINEAR;
      // UVs past [0, 1] repeat: the texture a mesh's own UVs address is laid out that way.
      linear.wrapS = TINYGLTF_TEXTURE_WRAP_REPEAT;
      linear.wrapT = TINYGLTF_TEXTURE_WRAP_REPEAT;
      model.samplers.push_back(linear);
    }
    tinygltf::Texture texture;
    texture.source = int(model.images.size() - 1);
    texture.sampler = 0;
    model.textures.push_back(texture);
    return int(model.textures.size() - 1);
  };

  // One glTF material per mesh material, each with its own textures.
  for (size_t m = 0; m < materials.size(); ++m) {
    tinygltf::Material out;
    out.name = materials[m].name.empty() ? "material" + std::to_string(m) : materials[m].name;
    const MetallicRoughness& pbr = materials[m].pbr;
    const bool mr_texture = pbr.texture && !pbr.texture->empty() && mesh.has_uvs();
    // With a texture the factors scale it (1: as painted); without one, and without factors, the
    // surface is a rough dielectric, as gen3d's files always said.
    out.pbrMetallicRoughness.metallicFactor = pbr.metallic.value_or(mr_texture ? 1.0f : 0.0f);
    out.pbrMetallicRoughness.roughnessFactor = pbr.roughness.value_or(1.0f);
    const Vec4& c = materials[m].base_color;
    out.pbrMetallicRoughness.baseColorFactor = {c[0], c[1], c[2], c[3]};
    if (materials[m].texture && mesh.has_uvs())
      out.pbrMetallicRoughness.baseColorTexture.index =
          add_texture(*materials[m].texture, "texture " + std::to_string(m));
    if (mr_texture)
      out.pbrMetallicRoughness.metallicRoughnessTexture.index =
          add_texture(*pbr.texture, "metallic-roughness texture " + std::to_string(m));
    model.materials.push_back(out);
  }
  tinygltf::Mesh gl_mesh;
  for (size_t m = 0; m < materials.size(); ++m) {
    if (index_accessor[m] < 0) continue;
    tinygltf::Primitive primitive;
    primitive.attributes = attributes;
    primitive.indices = index_accessor[m];
    primitive.material = int(m);
    primitive.mode = TINYGLTF_MODE_TRIANGLES;
    gl_mesh.primitives.push_back(primitive);
  }
  model.meshes.push_back(gl_mesh);
  tinygltf::Node node;
  node.mesh = 0;
  model.nodes.push_back(node);
  model.scenes.push_back({});
  model.scenes[0].nodes = {0};
  model.defaultScene = 0;
  while (bin.size() % 4) bin.push_back(0);

  std::ostringstream glb;
  tinygltf::TinyGLTF writer;
  if (!writer.WriteGltfSceneToStream(&model, glb, /*prettyPrint=*/false, /*writeBinary=*/true))
    throw MeshError("cannot write '" + path + "': the glTF writer failed");
  return std::move(glb).str();
}

// An MTL material name: no whitespace (MTL reads a name to the end of the line, many readers
// to the first space), unique.
std::vector<std::string> mtl_names(const std::vector<Material>& materials) {
  std::vector<std::string> names;
  for (size_t m = 0; m < materials.size(); ++m) {
    std::string name = materials[m].name;
    if (name.empty()) name = "material" + std::to_string(m);
    for (char& c : name)
      if (std::isspace(static_cast<unsigned char>(c)) || c == '#') c = '_';
    while (std::find(names.begin(), names.end(), name) != names.end())
      name.append(1, '_').append(std::to_string(m));
    names.push_back(name);
  }
  return names;
}

std::vector<io::PendingFile> build_obj(const Mesh& mesh, const std::string& path) {
  const fs::path p(path);
  const std::string stem = p.stem().string();
  const std::vector<Vec3> normals = export_normals(mesh);
  std::string obj = "# written by gen3d\n";
  std::vector<io::PendingFile> files;
  // One MTL material per mesh material (or one for the whole mesh), each with its own PNGs:
  // stem.png for a single material, stem_<k>.png for material k.
  const bool several = mesh.has_materials();
  const std::vector<Material> materials =
      several ? mesh.materials
              : std::vector<Material>{Material{"material0", mesh.texture, {1, 1, 1, 1}, mesh.pbr}};
  const std::vector<std::string> names = mtl_names(materials);
  const auto textured = [&](const Material& m) { return m.texture && mesh.has_uvs(); };
  const bool mtl_needed = several || textured(materials[0]) || !materials[0].pbr.empty();
  if (mtl_needed) {
    obj += "mtllib " + stem + ".mtl\n";
    if (!several) obj += "usemtl " + names[0] + "\n";
    std::string mtl;
    const auto add_png = [&](const image::Image& im, const std::string& name) {
      const std::string png = (p.parent_path() / name).string();
      files.push_back({png, image::encode_image(im, ".png", png)});
    };
    for (size_t m = 0; m < materials.size(); ++m) {
      const Material& mat = materials[m];
      const std::string file = several ? stem + "_" + std::to_string(m) : stem;
      // Without a texture the base colour is the material's; a texture is the colour itself
      // (viewers multiply Kd into map_Kd).
      std::string kd;
      for (int k = 0; k < 3; ++k) {
        if (k) kd += ' ';
        append_float(kd, textured(mat) ? 1.0f : mat.base_color[k]);
      }
      mtl += (m ? "\n" : "") + std::string("newmtl ") + names[m] + "\nKa 1 1 1\nKd " + kd +
             "\nKs 0 0 0\nd 1\nillum 1\n";
      if (textured(mat)) {
        mtl += "map_Kd " + file + ".png\n";
        add_png(*mat.texture, file + ".png");
      }
      const MetallicRoughness& pbr = mat.pbr;
      const bool mr_texture = pbr.texture && !pbr.texture->empty() && mesh.has_uvs();
      if (!pbr.empty()) {
        // The PBR extension of MTL: scalar Pm / Pr, and grayscale maps that they scale, as the
        // glTF factors scale the glTF texture's channels.
        std::string factors;
        append_float(factors, pbr.metallic.value_or(mr_texture ? 1.0f : 0.0f));
        mtl += "Pm " + factors + "\n";
        factors.clear();
        append_float(factors, pbr.roughness.value_or(1.0f));
        mtl += "Pr " + factors + "\n";
      }
      if (mr_texture) {
        mtl += "map_Pm " + file + "_metallic.png\nmap_Pr " + file + "_roughness.png\n";
        add_png(metallic_channel(*pbr.texture), file + "_metallic.png");
        add_png(roughness_channel(*pbr.texture), file + "_roughness.png");
      }
    }
    files.insert(files.begin(), {(p.parent_path() / (stem + ".mtl")).string(), mtl});
  }
  obj.reserve(mesh.positions.size() * 80 + mesh.faces.size() * 40);
  for (size_t i = 0; i < mesh.positions.size(); ++i) {
    obj += "v ";
    for (int k = 0; k < 3; ++k) {
      append_float(obj, mesh.positions[i][k]);
      obj += k < 2 ? " " : "";
    }
    if (!mesh.colors.empty()) {  // the common "v x y z r g b" extension
      for (int k = 0; k < 3; ++k) {
        obj += ' ';
        append_float(obj, mesh.colors[i][k]);
      }
    }
    obj += '\n';
  }
  for (const Vec2& t : mesh.uvs) {
    obj += "vt ";
    append_float(obj, t[0]);
    obj += ' ';
    append_float(obj, t[1]);
    obj += '\n';
  }
  for (const Vec3& n : normals) {
    obj += "vn ";
    for (int k = 0; k < 3; ++k) {
      append_float(obj, n[k]);
      obj += k < 2 ? " " : "";
    }
    obj += '\n';
  }
  for (size_t f = 0; f < mesh.faces.size(); ++f) {
    if (several && (f == 0 || mesh.face_materials[f] != mesh.face_materials[f - 1]))
      obj += "usemtl " + names[mesh.face_materials[f]] + '\n';
    obj += 'f';
    for (int k = 0; k < 3; ++k) {
      const std::string v = std::to_string(mesh.faces[f][k] + 1);
      obj += ' ' + v + '/';
      if (mesh.has_uvs()) obj += std::to_string(mesh.uv_faces[f][k] + 1);
      obj += '/' + v;
    }
    obj += '\n';
  }
  files.insert(files.begin(), {path, std::move(obj)});
  return files;
}

std::string build_ply(const Mesh& input) {
  const Mesh mesh = split_uv_seams(input);
  const std::vector<Vec3> normals = export_normals(mesh);
  const bool uv = mesh.has_uvs(), color = !mesh.colors.empty();
  std::string s = "ply\nformat binary_little_endian 1.0\ncomment written by gen3d\n";
  s += "element vertex " + std::to_string(mesh.positions.size()) + "\n";
  s += "property float x\nproperty float y\nproperty float z\n";
  s += "property float nx\nproperty float ny\nproperty float nz\n";
  if (uv) s += "property float s\nproperty float t\n";
  if (color) {
    s += "property uchar red\nproperty uchar green\nproperty uchar blue\nproperty uchar alpha\n";
  }
  s += "element face " + std::to_string(mesh.faces.size()) + "\n";
  s += "property list uchar int vertex_indices\nend_header\n";
  for (size_t i = 0; i < mesh.positions.size(); ++i) {
    append_bytes(s, mesh.positions[i].data(), 3);
    append_bytes(s, normals[i].data(), 3);
    if (uv) append_bytes(s, mesh.uvs[i].data(), 2);
    if (color) {
      for (int k = 0; k < 4; ++k) {
        const float x = std::isfinite(mesh.colors[i][k]) ? mesh.colors[i][k] : 0.0f;
        s.push_back(char(uint8_t(std::lround(std::clamp(x, 0.0f, 1.0f) * 255.0f))));
      }
    }
  }
  for (const Tri& f : mesh.faces) {
    s.push_back(char(3));
    for (uint32_t v : f) {
      const int32_t i = int32_t(v);
      append_bytes(s, &i, 1);
    }
  }
  return s;
}

}  // namespace

void save_mesh(const Mesh& mesh, const std::string& path) {
  const std::string ext = lower(fs::path(path).extension().string());
  if (ext != ".glb" && ext != ".obj" && ext != ".ply") {
    throw MeshError("cannot write '" + path + "': unsupported extension '" + ext +
                    "' (use .glb, .obj or .ply)");
  }
  check_writable(mesh, path);
  if (mesh.texture && !mesh.has_uvs()) {
    spdlog::warn("{}: the mesh has a texture but no UVs; writing it without the texture", path);
  }
  if (mesh.has_materials() && ext == ".ply") {
    spdlog::warn("{}: {} materials; .ply keeps none, writing the geometry without them", path,
                 mesh.materials.size());
  }
  std::error_code ec;
  const fs::path dir = fs::path(path).parent_path();
  if (!dir.empty() && !fs::is_directory(dir, ec)) {
    throw MeshError("cannot write '" + path + "': directory does not exist");
  }
  // Texture encoding and file errors reach callers as MeshError, like every save_mesh failure.
  try {
    if (ext == ".glb") {
      io::write_files_atomically({{path, build_glb(mesh, path)}});
    } else if (ext == ".obj") {
      io::write_files_atomically(build_obj(mesh, path));
    } else {
      io::write_files_atomically({{path, build_ply(mesh)}});
    }
  } catch (const image::ImageError& e) {
    throw MeshError(e.what());
  } catch (const io::IoError& e) {
    throw MeshError(e.what());
  }
}

}  // namespace gen3d::mesh
