#pragma once
// `gen3d shape`: condition tokens -> mesh with the shipped shapegen pipeline
// (assets/pipelines/shapegen.json), its variables set from the command line.

#include <string>
#include <vector>

#include "pipeline/cli/commands.h"

namespace gen3d::cli {

struct ShapeOptions {
  RunOptions run;                                         // --set, trace, metrics, threads
  std::string config = "assets/pipelines/shapegen.json";  // --config: the pipeline to adapt
  std::string cond;                                       // --cond FILE.safetensors
  std::string cond_name;                                  // --cond-name TENSOR
  std::string model;                                      // --model DiT weights / folder
  std::string vae;                                        // --vae VAE weights / folder
  std::string output;                                     // -o, --output mesh file
  std::string method;                                     // --method dense|hierarchical|flashvdm
  std::string cache;       // --cache none|fbcache|teacache|taylorseer
  int steps = -1;          // -1: the config's default
  double guidance = -1e9;  // < -1e8: the config's default
  int seed = -1;
  int resolution = -1;
  int min_resolution = -1;
  int num_chunks = -1;
  int max_faces = -1;
  int latent_tokens = -1;
  bool dump = false;  // print the config it would run, and stop
};

// The --set list that adapts the shapegen config to `options` (options' own --set last, so they
// win).
std::vector<std::string> shape_sets(const ShapeOptions& options);

// Runs (or with dump, prints) the adapted pipeline; returns the process exit code.
int cmd_shape(const ShapeOptions& options);

}  // namespace gen3d::cli
