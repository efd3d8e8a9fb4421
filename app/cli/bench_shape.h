#pragma once
// `gen3d bench shape`: image -> mesh end to end with the full-size networks of a published shape
// model (--model: full (2.0), fast, turbo, mini, mini-turbo) built from seeded random weights in
// memory: DINOv2 on one 518 px image, every sampler step (with classifier-free guidance: batch 2;
// guidance-embedded models: batch 1), the latent transformer, the volume decode and marching
// cubes, with the model's steps, schedule, VAE and volume decoding. Prints one JSON line per run
// with the seconds of each stage.
//
// Random weights give a field without a real surface, so the volume decode evaluates the VAE's
// geometry decoder on every point it asks for (the full cost) but hands back a sphere's values
// (logit = 10 * sdf, radius 0.5): the refinement band, and so the point count, is that of a
// smooth closed surface.

#include <CLI/CLI.hpp>
#include <string>
#include <vector>

namespace gen3d::app::cli {

struct BenchShapeOptions {
  std::string model = "full";      // full (2.0), fast, turbo, mini, mini-turbo, mv-turbo, 2.1
  std::string device = "cpu";      // cpu, or cuda (the networks in bf16 on the GPU)
  std::string precision = "auto";  // CPU storage: auto, fp32, bf16, int8 (cuda: bf16)
  // Sampler runs, paired by position (one model build serves them all): steps, and guidance
  // scales (< 0: no classifier-free guidance, batch 1; one value applies to every run). Empty:
  // the model's (50 and 5; 5 steps for the turbos).
  std::vector<int> steps;
  std::vector<double> guidance;
  int octree = 384;
  int image_size = 0;  // the conditioner's input size in pixels (0: the model's, 518)
  std::string volume;  // dense, hierarchical, flashvdm; empty: the model's
  bool tiny = false;   // tiny networks, for a quick check of the path
  std::vector<long long> chunks{1 << 16};  // points per volume-decoder call on a device
  int reps = 1;  // end-to-end runs after one build (the first also uploads weights to a device)
  // After the runs, one more volume decode with the device's per-operation profile (a line of
  // its own: events around every operation cost time, so the timed runs go without).
  bool profile = false;
  CLI::App* command = nullptr;
};

void add_bench_shape(CLI::App& bench, BenchShapeOptions& opt);
int cmd_bench_shape(const BenchShapeOptions& opt);

}  // namespace gen3d::app::cli
