#include "mesh/seams.h"

#include <unordered_map>

#include "mesh/error.h"

namespace gen3d::mesh {

Mesh split_uv_seams(const Mesh& mesh, std::vector<uint32_t>* source_vertex) {
  if (!mesh.has_uvs()) {
    if (source_vertex) {
      source_vertex->resize(mesh.positions.size());
      for (size_t i = 0; i < source_vertex->size(); ++i) (*source_vertex)[i] = uint32_t(i);
    }
    return mesh;
  }
  if (mesh.uv_faces.size() != mesh.faces.size()) {
    throw MeshError("split_uv_seams: uv_faces has " + std::to_string(mesh.uv_faces.size()) +
                    " triangles but faces has " + std::to_string(mesh.faces.size()));
  }
  Mesh out;
  out.texture = mesh.texture;
  out.faces.resize(mesh.faces.size());
  std::vector<uint32_t> src;
  // Key = position index in the high half, uv index in the low half: unique per corner pair.
  std::unordered_map<uint64_t, uint32_t> index;
  index.reserve(mesh.positions.size() * 2);
  for (size_t f = 0; f < mesh.faces.size(); ++f) {
    for (int k = 0; k < 3; ++k) {
      const uint32_t p = mesh.faces[f][k];
      const uint32_t t = mesh.uv_faces[f][k];
      if (p >= mesh.positions.size() || t >= mesh.uvs.size()) {
        throw MeshError("split_uv_seams: face " + std::to_string(f) + " has an index out of range");
      }
      const uint64_t key = (uint64_t(p) << 32) | t;
      auto [it, inserted] = index.try_emplace(key, uint32_t(src.size()));
      if (inserted) {
        src.push_back(p);
        out.positions.push_back(mesh.positions[p]);
        out.uvs.push_back(mesh.uvs[t]);
        if (!mesh.normals.empty()) out.normals.push_back(mesh.normals[p]);
        if (!mesh.colors.empty()) out.colors.push_back(mesh.colors[p]);
      }
      out.faces[f][k] = it->second;
    }
  }
  out.uv_faces = out.faces;
  if (source_vertex) *source_vertex = std::move(src);
  return out;
}

}  // namespace gen3d::mesh
