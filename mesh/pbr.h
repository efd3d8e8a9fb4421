#pragma once
// Metallic-roughness images between the layouts that meet in texgen: Hunyuan3D-2.1's paint model
// makes views with metallic in R and roughness in G, glTF stores roughness in G and metallic in B,
// and OBJ/MTL (map_Pm, map_Pr) keeps each in a grayscale image of its own.

#include "image/image.h"

namespace gen3d::mesh {

// Hunyuan3D-2.1's metallic-roughness image (RGB or RGBA: metallic in R, roughness in G; B and
// alpha unused) as a glTF metallicRoughnessTexture: R 1 (no occlusion), G roughness, B metallic.
// The one place the two layouts meet: everything before it (views, bake, merge, inpaint) keeps
// the paint model's layout, everything after it glTF's. Throws std::invalid_argument for an image
// with fewer than 2 channels.   mr: H x W x C  ->  H x W x 3
image::Image gltf_metallic_roughness(const image::Image& mr);

// Separate metallic and roughness images (MTL's map_Pm / map_Pr: grayscale, or RGB(A) read from
// their first channel) joined into a glTF metallicRoughnessTexture (R 1, G roughness, B metallic);
// a missing one (null) is 1 there, so its factor alone decides. Throws std::invalid_argument when
// both are null or their sizes differ.
image::Image gltf_metallic_roughness_from_maps(const image::Image* metallic,
                                               const image::Image* roughness);

// Grayscale channels of a glTF metallicRoughnessTexture (metallic from B, roughness from G), for
// MTL's map_Pm / map_Pr and for pictures. Throws std::invalid_argument with fewer than 3 channels.
// gltf_mr: H x W x C  ->  H x W x 1
image::Image metallic_channel(const image::Image& gltf_mr);
image::Image roughness_channel(const image::Image& gltf_mr);

}  // namespace gen3d::mesh
