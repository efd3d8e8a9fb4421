// glTF 2.0 files from arbitrary bytes through the mesh loader (tinygltf, then gen3d's
// bounds-checked reading of accessors, Draco streams, nodes and materials). Bytes starting with the
// GLB magic are a .glb, the rest a .gltf (JSON), so the seeds are plain files and every mutation
// stays on the glTF paths.
#include <unistd.h>

#include <cstddef>
#include <cstdint>
#include <cstdio>
#include <cstring>
#include <string>

#include "mesh/error.h"
#include "mesh/io.h"

extern "C" int LLVMFuzzerTestOneInput(const uint8_t* data, size_t size) {
  const bool glb = size >= 4 && std::memcmp(data, "glTF", 4) == 0;
  const std::string path =
      "/tmp/gen3d_fuzz_gltf_" + std::to_string(getpid()) + (glb ? ".glb" : ".gltf");
  if (std::FILE* f = std::fopen(path.c_str(), "wb")) {
    std::fwrite(data, 1, size, f);
    std::fclose(f);
  }
  try {
    (void)gen3d::mesh::load_mesh(path);
  } catch (const gen3d::mesh::MeshError&) {
  }
  std::remove(path.c_str());
  return 0;
}
