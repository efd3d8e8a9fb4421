#include "mesh/pbr.h"

#include <stdexcept>
#include <string>

namespace gen3d::mesh {

namespace {

image::Image channel(const image::Image& im, int c, const char* what) {
  if (im.channels < 3)
    throw std::invalid_argument(std::string(what) + ": a metallic-roughness texture has " +
                                std::to_string(im.channels) + " channels, expected 3 or 4");
  image::Image out(im.width, im.height, 1);
  const size_t n = static_cast<size_t>(im.width) * im.height;
  for (size_t p = 0; p < n; ++p) out.pixels[p] = im.pixels[p * im.channels + c];
  return out;
}

}  // namespace

image::Image gltf_metallic_roughness(const image::Image& mr) {
  if (mr.channels < 2)
    throw std::invalid_argument("gltf_metallic_roughness: the image has " +
                                std::to_string(mr.channels) +
                                " channels, expected metallic in R and roughness in G");
  image::Image out(mr.width, mr.height, 3);
  const size_t n = static_cast<size_t>(mr.width) * mr.height;
  for (size_t p = 0; p < n; ++p) {
    const float* in = mr.pixels.data() + p * mr.channels;
    float* o = out.pixels.data() + p * 3;
    o[0] = 1.0f;   // occlusion: none (glTF reads it only through an occlusionTexture)
    o[1] = in[1];  // roughness
    o[2] = in[0];  // metallic
  }
  return out;
}

image::Image gltf_metallic_roughness_from_maps(const image::Image* metallic,
                                               const image::Image* roughness) {
  if (!metallic && !roughness)
    throw std::invalid_argument("gltf_metallic_roughness_from_maps: no metallic or roughness map");
  if (metallic && roughness &&
      (metallic->width != roughness->width || metallic->height != roughness->height))
    throw std::invalid_argument("the metallic map is " + std::to_string(metallic->width) + "x" +
                                std::to_string(metallic->height) + " but the roughness map is " +
                                std::to_string(roughness->width) + "x" +
                                std::to_string(roughness->height));
  const image::Image& any = metallic ? *metallic : *roughness;
  image::Image out(any.width, any.height, 3, 1.0f);
  const size_t n = static_cast<size_t>(any.width) * any.height;
  for (size_t p = 0; p < n; ++p) {
    if (roughness) out.pixels[p * 3 + 1] = roughness->pixels[p * roughness->channels];
    if (metallic) out.pixels[p * 3 + 2] = metallic->pixels[p * metallic->channels];
  }
  return out;
}

image::Image metallic_channel(const image::Image& gltf_mr) {
  return channel(gltf_mr, 2, "metallic_channel");
}

image::Image roughness_channel(const image::Image& gltf_mr) {
  return channel(gltf_mr, 1, "roughness_channel");
}

}  // namespace gen3d::mesh
