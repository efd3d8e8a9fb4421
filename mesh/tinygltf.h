#pragma once
// tinygltf (Debian's libtinygltf-dev header) with the configuration every user of it here shares:
// no stb image coding (textures go through gen3d::image) and no external image files read by
// tinygltf itself. The implementation is compiled once, in mesh/tinygltf.cpp.

#define TINYGLTF_NO_STB_IMAGE
#define TINYGLTF_NO_STB_IMAGE_WRITE
#define TINYGLTF_NO_EXTERNAL_IMAGE
#include <tiny_gltf.h>
