#pragma once
// Internal: structural checks run before assimp on formats whose assimp 5.2 readers are known to
// hang, crash or silently accept damage on malformed input (OFF counts, PLY headers, OBJ faces, and
// every reference, byte range and count of glTF 2.0 / GLB files).

#include <string>

namespace gen3d::mesh::detail {

// Throws MeshError naming `path` when the bytes cannot be a valid file of the format given by the
// lower-case extension `ext` (".off", ".ply", ".obj", ".gltf", ".glb"); other extensions pass
// unchecked.
void precheck_mesh_file(const std::string& path, const std::string& ext, const std::string& bytes);

// glTF 2.0 checks (precheck_gltf.cpp): `binary` for GLB, else the bytes are the JSON document.
// External buffers are read (relative to `path`) only to check sparse accessor indices.
void check_gltf(const std::string& path, bool binary, const std::string& bytes);

}  // namespace gen3d::mesh::detail
