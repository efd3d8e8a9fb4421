#pragma once
// Internal: structural checks run before assimp on formats whose assimp 5.2 readers are known to
// hang, crash or silently accept damage on malformed input (OFF counts, PLY headers, OBJ faces).
// glTF does not go through assimp (mesh/gltf_load.cpp).

#include <string>

namespace gen3d::mesh::detail {

// Throws MeshError naming `path` when the bytes cannot be a valid file of the format given by the
// lower-case extension `ext` (".off", ".ply", ".obj"); other extensions pass unchecked.
void precheck_mesh_file(const std::string& path, const std::string& ext, const std::string& bytes);

}  // namespace gen3d::mesh::detail
