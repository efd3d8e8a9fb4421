#pragma once
// A lit picture of a PBR mesh: base colour, metallic and roughness shaded by one fixed light, so a
// report shows what the metallic-roughness texture does to the surface. A preview, not a renderer:
// one directional light, a constant ambient term, no shadows and no environment.

#include "image/image.h"
#include "mesh/mesh.h"
#include "render/camera.h"
#include "render/rasterizer.h"

namespace gen3d::render {

struct ShadingOptions {
  // Direction towards the light in camera space (the model-view frame), chosen so the light comes
  // from the upper left of the picture: the renderer's pictures put camera -y at the top and
  // camera -x at the right (render/maps.h: rows follow NDC y from -1).
  mesh::Vec3 light{0.4f, -0.6f, 0.7f};
  float intensity = 3.0f;   // light radiance (pi: a white Lambert surface facing it is 1)
  float ambient = 0.15f;    // constant ambient share of the base colour
  float background = 1.0f;  // grey level off the mesh
};

// The mesh seen through `raster` (taken from `camera`) shaded per pixel with Cook-Torrance: GGX
// distribution (alpha = roughness^2), Schlick Fresnel (F0 = 0.04 for dielectrics, the base colour
// for metals), Smith-Schlick geometry, Lambert diffuse scaled by 1 - metallic. The base colour is
// albedo_map's; metallic and roughness come from mesh.pbr (the texture in glTF's layout, B and G,
// times the factors; without a texture the factors, else metallic 0 and roughness 1); normals are
// the mesh's vertex normals (area-weighted ones when it has none), interpolated and normalized.
// Single-material meshes only for the PBR part: with several materials, each face's material's
// pbr is used. Throws like albedo_map.   Returns H x W x 3 in [0, 1].
image::Image shaded_map(const mesh::Mesh& mesh, const Raster& raster, const Camera& camera,
                        const ShadingOptions& options = {});

}  // namespace gen3d::render
