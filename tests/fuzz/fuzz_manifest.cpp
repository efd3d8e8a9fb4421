// Batch manifests from arbitrary bytes.
#include <cstddef>
#include <cstdint>
#include <sstream>

#include "pipeline/error.h"
#include "pipeline/manifest.h"

extern "C" int LLVMFuzzerTestOneInput(const uint8_t* data, size_t size) {
  std::istringstream in(std::string(reinterpret_cast<const char*>(data), size));
  try {
    for (const auto& job : gen3d::pipeline::parse_manifest(in, "fuzz"))
      (void)gen3d::pipeline::in_shard(job.id, 1, 3);
  } catch (const gen3d::pipeline::ConfigError&) {
  }
  return 0;
}
