#pragma once
// What a mesh file's reader hands to load_mesh's assembly, whatever the format (assimp's scenes,
// glTF through tinygltf): triangle lists placed in world space, each with its material.

#include <cstddef>
#include <filesystem>
#include <functional>
#include <string>
#include <vector>

#include "mesh/mesh.h"

namespace gen3d::mesh::detail {

struct Part {
  std::vector<Vec3> positions;  // world space, finite
  std::vector<Vec3> normals;    // world space (any length), or empty
  std::vector<Vec2> uvs;        // OBJ convention (v up), or empty
  std::vector<Vec4> colors;     // RGBA in [0, 1], or empty
  std::vector<Tri> faces;       // counter-clockwise seen from outside; indices < positions.size()
  unsigned material = 0;
};

struct Scene {
  std::vector<Part> parts;
  size_t dropped = 0;  // point and line primitives (and polygons that are not triangles)
  // The material of a Part::material index; its texture only when `with_texture` (decoding is
  // skipped for meshes without UVs).
  std::function<Material(unsigned material, bool with_texture)> material;
};

// Finds a texture file referenced by a material: relative to the model, with Windows separators
// and "./" prefixes tolerated, falling back to the bare file name and a case-insensitive match.
// Empty when there is none. (io_load.cpp)
std::string resolve_texture_path(const std::string& ref, const std::filesystem::path& model_dir);

// glTF 2.0 (.gltf, .glb) through tinygltf; Draco-compressed primitives decoded by libdraco.
// Throws MeshError naming the file.
Scene read_gltf(const std::string& path);

}  // namespace gen3d::mesh::detail
