#pragma once
// Mesh: the triangle-mesh value type every module passes around.

#include <array>
#include <cstdint>
#include <memory>
#include <optional>
#include <string>
#include <vector>

#include "image/image.h"

namespace gen3d::mesh {

using Vec2 = std::array<float, 2>;
using Vec3 = std::array<float, 3>;
using Vec4 = std::array<float, 4>;
using Tri = std::array<uint32_t, 3>;

// The metallic-roughness part of a PBR material, in glTF's layout: the texture holds roughness in G
// and metallic in B (R is unused, or occlusion). Each factor scales its texture channel, as glTF's
// metallicFactor / roughnessFactor do; unset factors are 1 with a texture and, without one, a
// dielectric, fully rough surface (metallic 0, roughness 1: what the writers put before PBR).
struct MetallicRoughness {
  std::shared_ptr<const image::Image> texture;  // may be null; RGB, G roughness, B metallic
  std::optional<float> metallic;                // glTF metallicFactor / MTL Pm
  std::optional<float> roughness;               // glTF roughnessFactor / MTL Pr

  bool empty() const { return !texture && !metallic && !roughness; }
};

// One surface material: the base colour comes from its texture (sampled at the face's UVs) when it
// has one, else from the vertex colours when the mesh has them, else from `base_color`.
struct Material {
  std::string name;
  std::shared_ptr<const image::Image> texture;  // may be null
  Vec4 base_color{1, 1, 1, 1};                  // glTF baseColorFactor / MTL Kd
  MetallicRoughness pbr = {};                   // empty: not a PBR material
};

// UVs have their own index buffer (like OBJ's vt): uv_faces[f][k] indexes `uvs` for corner k of
// face f. This keeps positions welded (normals, connectivity) while UV seams stay exact; the baker
// reads per-corner UVs directly and exporters split seam vertices where a format needs it.
struct Mesh {
  std::vector<Vec3> positions;  // V x 3
  std::vector<Tri> faces;       // F x 3, counter-clockwise seen from outside
  std::vector<Vec3> normals;    // empty or V x 3 (per vertex)
  std::vector<Vec2> uvs;        // empty or T x 2; v up as loaded (OBJ convention), 1 - v after
                                // normalize_mesh (the renderer's convention, see render/)
  std::vector<Tri> uv_faces;    // empty or F x 3, corner -> index into uvs
  std::vector<Vec4> colors;     // empty or V x 4, RGBA in [0, 1]
  std::shared_ptr<const image::Image> texture;  // optional base-colour texture of every face
  MetallicRoughness pbr;  // the single material's metallic-roughness (`materials` hold their own)
  // Several materials (as loaded from a file that has them): face f uses
  // materials[face_materials[f]] and `texture` is null. Both empty for a single-material mesh.
  // Each material's texture is its own texture space, read through the UVs modulo 1 (glTF's
  // REPEAT): UVs may leave [0, 1], and faces of different materials may share UV space...
  std::vector<Material> materials;
  std::vector<uint32_t> face_materials;  // empty or F
  // ... unless the UVs are one atlas over every face (uv_unwrap's): then the materials share one
  // texture space, and a texture baked into it is one texture for all of them.
  bool shared_atlas = false;

  size_t vertex_count() const { return positions.size(); }
  size_t face_count() const { return faces.size(); }
  bool has_uvs() const { return !uv_faces.empty(); }
  bool has_materials() const { return !face_materials.empty(); }

  // Content hash of the triangles' corner positions: what a camera sees. The renderer keys its
  // rasters by it, so a mesh that only gained UVs (an unwrap, a seam split that renumbers the
  // vertices) reuses the rasters of the mesh before it.
  uint64_t fingerprint() const;
  // Content hash of the UVs, UV faces and face materials: the key of texel-space rasters.
  uint64_t uv_fingerprint() const;
};

}  // namespace gen3d::mesh
