#pragma once
// `gen3d bench single-image --mesh TEXTURED [--view N] [--size S]`: runs
// assets/pipelines/bench_single_image.json on a textured mesh (its albedo views are the truth, its
// copy is textured from view N alone with the earlier and the current single-image methods, and
// from all views as the ceiling) and prints one JSON line of per-view PSNR against the truth.

#include <string>

#include <CLI/CLI.hpp>

#include "app/cli/commands.h"

namespace gen3d::app::cli {

struct BenchSingleImageOptions {
  RunOptions run;                // -j, --set, --trace, --metrics
  std::string mesh;              // --mesh: a textured mesh
  int view = 0;                  // --view: the view whose render is the reference image
  int size = 1024;               // --size: render and texture size
  std::string delight = "none";  // --delight: delighting of the reference (none, classical)
  CLI::App* command = nullptr;
};

// Adds `bench single-image` to the `bench` group.
void add_bench_single_image(CLI::App& bench, BenchSingleImageOptions& options);
int cmd_bench_single_image(const BenchSingleImageOptions& options);

}  // namespace gen3d::app::cli
