#pragma once
// Process-wide registry of loaded models: weights load once per process, keyed by (weights path,
// config path, section, storage), and are shared read-only by every node and run. Concurrent
// requests for one key load it once; requests for different keys load in parallel.

#include <cstddef>
#include <cstdint>
#include <memory>
#include <string>

#include "models/dit.h"

namespace gen3d::models {

struct DiTSource {
  std::string weights;            // .safetensors (standalone DiT or combined pipeline checkpoint)
  std::string config;             // JSON config with the official keys
  std::string section = "model";  // section of `config` holding the DiT params
  WeightStorage storage = WeightStorage::kF32;
};

// Resolves `path` (a checkpoint file or a directory) and an optional config path:
// a directory gives DIR/model.fp16.safetensors, DIR/model.safetensors or its only .safetensors
// file; the config defaults to config.json next to the weights. Throws ModelError naming what is
// missing (YAML configs are not read: convert config.yaml to JSON).
DiTSource resolve_dit_source(const std::string& path, const std::string& config = {});

// The shared model for `source` (loaded on first use).
std::shared_ptr<const Hunyuan3DDiT> shared_dit(const DiTSource& source);
// The shared random model for (config, seed) (benchmarks, cache studies without weights).
std::shared_ptr<const Hunyuan3DDiT> shared_random_dit(const DiTConfig& config, std::uint64_t seed);

std::size_t shared_model_count();  // models currently held
void clear_shared_models();        // drops the registry's references (tests)

}  // namespace gen3d::models
