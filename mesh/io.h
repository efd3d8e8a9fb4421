#pragma once
// Mesh files in and out: glTF/GLB through tinygltf (Draco through libdraco), the other formats
// through assimp (OBJ+MTL, PLY, STL, FBX, OFF, ...); GLB / OBJ / PLY out, with the base-colour
// texture.

#include <string>

#include "mesh/mesh.h"

namespace gen3d::mesh {

// Loads every triangle of every mesh in the file into one Mesh:
// - polygons are triangulated and node transforms applied (the result is in world space);
// - points and lines are dropped with a warning;
// - positions are welded by exact value, in order of first use by the faces (the file's own vertex
//   order is not kept: assimp does not preserve it for OBJ);
// - UV channel 0 is kept with its own index buffer (uv_faces), welded by exact value; UVs follow
//   the OBJ convention (v up, texture row 0 at v = 1) whatever the format;
// - per-vertex normals and colours (channel 0) are averaged over the welded corners;
// - every material is kept: one gives Mesh::texture, several give Mesh::materials and
//   face_materials; base-colour (or diffuse) textures are loaded embedded or from a file next to
//   the model (Windows "\" paths and glTF's percent-escapes accepted); glTF's metallic and
//   roughness factors and metallicRoughnessTexture go to the material's `pbr`, and so do MTL's
//   Pm / Pr and map_Pm / map_Pr (the two grayscale maps joined in glTF's layout);
// - glTF: the default scene's nodes with their transforms (mirroring ones keep faces CCW), triangle
//   lists, strips and fans, sparse accessors, quantized attributes, KHR_texture_transform on the
//   base-colour UVs, KHR_draco_mesh_compression; skins, morph targets and animations are ignored
//   (the mesh as stored); triangles with indices past their vertices are dropped with a warning.
// Throws MeshError naming the file for: missing file, unsupported format, parse failure, no
// triangles, non-finite positions, out-of-range indices.
Mesh load_mesh(const std::string& path);

// Writes the mesh in the format given by the extension:
// - ".glb": binary glTF 2.0, seam vertices split (one UV per vertex), NORMAL (given or
//   area-weighted), TEXCOORD_0, COLOR_0, texture embedded as PNG as baseColorTexture; the `pbr`
//   texture as metallicRoughnessTexture (factors 1 unless set), else the set factors, else
//   metallic 0, roughness 1;
// - ".obj": OBJ with vt/vn, plus <stem>.mtl and <stem>.png next to it when there is a texture;
//   with `pbr`, Pm / Pr and map_Pm <stem>_metallic.png / map_Pr <stem>_roughness.png (grayscale);
// - ".ply": binary little-endian PLY with vertex colours when present (no UVs).
// Every file is written to a temporary file in the same directory and renamed into place, so a
// failure leaves no partial file. Throws MeshError naming the file.
void save_mesh(const Mesh& mesh, const std::string& path);

}  // namespace gen3d::mesh
