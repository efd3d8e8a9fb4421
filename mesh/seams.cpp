#include "mesh/seams.h"

#include <unordered_map>

#include "mesh/error.h"

namespace gen3d::mesh {

namespace {

// One output vertex per distinct (position, uv, material) corner.
struct Corner {
  uint32_t position, uv, material;
  bool operator==(const Corner&) const = default;
};

struct CornerHash {
  size_t operator()(const Corner& c) const {
    uint64_t h = (uint64_t(c.position) << 32) | c.uv;
    h ^= uint64_t(c.material) * 0x9e3779b97f4a7c15ull;
    h ^= h >> 31;
    return size_t(h * 0xbf58476d1ce4e5b9ull);
  }
};

}  // namespace

Mesh split_uv_seams(const Mesh& mesh, std::vector<uint32_t>* source_vertex) {
  const bool uvs = mesh.has_uvs(), materials = mesh.has_materials();
  if (!uvs && !materials) {
    if (source_vertex) {
      source_vertex->resize(mesh.positions.size());
      for (size_t i = 0; i < source_vertex->size(); ++i) (*source_vertex)[i] = uint32_t(i);
    }
    return mesh;
  }
  if (uvs && mesh.uv_faces.size() != mesh.faces.size()) {
    throw MeshError("split_uv_seams: uv_faces has " + std::to_string(mesh.uv_faces.size()) +
                    " triangles but faces has " + std::to_string(mesh.faces.size()));
  }
  if (materials && mesh.face_materials.size() != mesh.faces.size()) {
    throw MeshError("split_uv_seams: face_materials has " +
                    std::to_string(mesh.face_materials.size()) + " entries but faces has " +
                    std::to_string(mesh.faces.size()));
  }
  Mesh out;
  out.texture = mesh.texture;
  out.pbr = mesh.pbr;
  out.materials = mesh.materials;
  out.shared_atlas = mesh.shared_atlas;
  out.face_materials = mesh.face_materials;
  out.faces.resize(mesh.faces.size());
  std::vector<uint32_t> src;
  std::unordered_map<Corner, uint32_t, CornerHash> index;
  index.reserve(mesh.positions.size() * 2);
  for (size_t f = 0; f < mesh.faces.size(); ++f) {
    for (int k = 0; k < 3; ++k) {
      const uint32_t p = mesh.faces[f][k];
      const uint32_t t = uvs ? mesh.uv_faces[f][k] : 0;
      if (p >= mesh.positions.size() || (uvs && t >= mesh.uvs.size())) {
        throw MeshError("split_uv_seams: face " + std::to_string(f) + " has an index out of range");
      }
      const Corner key{p, t, materials ? mesh.face_materials[f] : 0};
      auto [it, inserted] = index.try_emplace(key, uint32_t(src.size()));
      if (inserted) {
        src.push_back(p);
        out.positions.push_back(mesh.positions[p]);
        if (uvs) out.uvs.push_back(mesh.uvs[t]);
        if (!mesh.normals.empty()) out.normals.push_back(mesh.normals[p]);
        if (!mesh.colors.empty()) out.colors.push_back(mesh.colors[p]);
      }
      out.faces[f][k] = it->second;
    }
  }
  if (uvs) out.uv_faces = out.faces;
  if (source_vertex) *source_vertex = std::move(src);
  return out;
}

}  // namespace gen3d::mesh
