// Mesh files from arbitrary bytes through the assimp loading wrapper. The first byte picks the
// format (extension), the rest is the file.
#include <unistd.h>

#include <cstddef>
#include <cstdint>
#include <cstdio>
#include <string>

#include "mesh/error.h"
#include "mesh/io.h"

extern "C" int LLVMFuzzerTestOneInput(const uint8_t* data, size_t size) {
  static const char* kExt[] = {".obj", ".ply", ".stl", ".off", ".glb", ".gltf", ".fbx"};
  if (size < 1) return 0;
  const std::string path = "/tmp/gen3d_fuzz_mesh_" + std::to_string(getpid()) + kExt[data[0] % 7];
  if (std::FILE* f = std::fopen(path.c_str(), "wb")) {
    std::fwrite(data + 1, 1, size - 1, f);
    std::fclose(f);
  }
  try {
    (void)gen3d::mesh::load_mesh(path);
  } catch (const gen3d::mesh::MeshError&) {
  }
  std::remove(path.c_str());
  return 0;
}
