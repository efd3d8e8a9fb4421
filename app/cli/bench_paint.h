#pragma once
// `gen3d bench paint`: the networks of a Hunyuan3D-2 texture at the official sizes, built from
// seeded random weights in memory: the delight model (InstructPix2Pix UNet with 8 input channels,
// SD VAE; 50 steps without guidance, as the texture pipeline runs it) on one reference image,
// then the paint model (UNet2.5D and SD VAE) on the reference and N views' normal and position
// maps, turbo (LCM, 10 steps, no guidance) or normal (30 Euler steps, guidance 2). The same
// entry points the texture stages call (delight_network, paint_views), so the sampler's host
// work and every copy to and from a device are in the figures. Prints one JSON line per run with
// the seconds of each part. Rasterising, baking, inpainting and saving are not in it: with
// random weights the views are noise.

#include <CLI/CLI.hpp>
#include <string>

namespace gen3d::app::cli {

struct BenchPaintOptions {
  std::string device = "cpu";      // cpu, or cuda (the networks in bf16 on the GPU)
  std::string precision = "auto";  // CPU storage: auto, fp32 or bf16 (cuda: bf16)
  bool turbo = true;               // false: the normal paint model (30 steps, guidance 2)
  int views = 6;
  int size = 512;            // view and reference size in pixels (a multiple of 64)
  int delight_steps = 50;    // 0 leaves the delight model out
  bool tiny = false;         // tiny networks, for a quick check of the path
  std::string write_models;  // non-empty: write the random networks as model folders there
  int reps = 1;              // runs after one build (the first also uploads weights to a device)
  CLI::App* command = nullptr;
};

void add_bench_paint(CLI::App& bench, BenchPaintOptions& opt);
int cmd_bench_paint(const BenchPaintOptions& opt);

}  // namespace gen3d::app::cli
