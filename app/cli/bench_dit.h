#pragma once
// `gen3d bench dit`: times the DiT forward at any size with seeded random weights and prints one
// JSON line per precision (ms_per_forward, gflops, threads, CPU use; with --alongside, the same
// forward beside a CPU-bound TBB workload in a flow graph).

#include <CLI/CLI.hpp>
#include <string>

namespace gen3d::app::cli {

struct BenchDitOptions {
  // "2.0": Hunyuan3DDiT (double + single blocks); "2.1": HunyuanDiTPlain (U-ViT blocks, the last
  // `moe_layers` with mixture-of-experts FFNs).
  std::string arch = "2.0";
  int moe_layers = 1, experts = 8, top_k = 2;
  int hidden = 1024, heads = 16, depth = 1, single = 2;
  int tokens = 512, context_tokens = 257, context_dim = 1536, in_channels = 64, batch = 2;
  int threads = 0;  // 0: all cores
  int reps = 3;
  // One precision, or several separated by commas: their repetitions are interleaved in one
  // process so the ratios are fair on a shared machine.
  std::string precision = "auto";
  // Also time a forward side by side with a CPU-bound TBB workload in a flow graph (as a model
  // stage runs beside image stages), against the two alone: whether oneDNN's OpenMP threads and
  // TBB's share the cores without loss.
  bool alongside = false;
  // Also time the GEMM roof in the same run: one Linear of the model's widest shape
  // ([B·L, H] x [H, 4H], the FFN's first product) per precision, interleaved with the forwards,
  // and report the forward's GFLOP/s as a fraction of it.
  bool roof = false;
  // cpu, or cuda (the 2.0 DiT in bf16 on the GPU).
  std::string device = "cpu";
  CLI::App* command = nullptr;
};

// Re-executes the process with OMP_WAIT_POLICY=passive unless it is set (models/kernels/
// dnnl_matmul.h: oneDNN's OpenMP threads must not spin while TBB runs); returns otherwise.
void passive_omp_wait(char** argv);

// Adds `bench dit` to the `bench` group.
void add_bench_dit(CLI::App& bench, BenchDitOptions& opt);
int cmd_bench_dit(const BenchDitOptions& opt);

}  // namespace gen3d::app::cli
