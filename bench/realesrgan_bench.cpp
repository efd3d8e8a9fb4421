// RealESRGAN x4plus benchmark at the official size (RRDBNet num_feat 64, num_block 23,
// num_grow_ch 32, seeded random weights): one square view upscaled ×4 through RealESRGANer's
// tiling, in each precision. Runs alternate between the precisions (run 1 of each, then run 2,
// ...) so that drift on a shared machine hits both alike; fp32 is the baseline of the bf16 figure.
// FLOPs are counted by the kernels (2 per multiply-add), tile context included. Prints one JSON
// document with every run (wall ms and CPU seconds), the median and the range.
//
// Usage: gen3d_realesrgan_bench [size=512] [runs=3] [tile=256] [tile_pad=10]
//                               [precision=fp32,bf16] [blocks=23]

#include <sys/resource.h>
#include <tbb/info.h>

#include <algorithm>
#include <chrono>
#include <cstdio>
#include <cstdlib>
#include <map>
#include <sstream>
#include <string>
#include <vector>

#include <nlohmann/json.hpp>

#include "models/core/precision.h"
#include "models/kernels/dnnl_matmul.h"
#include "models/kernels/flops.h"
#include "models/nn/init.h"
#include "models/paint/realesrgan.h"

namespace {

using namespace gen3d::models;
using Clock = std::chrono::steady_clock;

double peak_rss_mb() {
  rusage u{};
  getrusage(RUSAGE_SELF, &u);
  return static_cast<double>(u.ru_maxrss) / 1024.0;
}

// CPU seconds of this process so far (every thread: TBB workers and oneDNN's OpenMP threads);
// on a loaded machine CPU time drifts less than wall time.
double cpu_s() {
  rusage u{};
  getrusage(RUSAGE_SELF, &u);
  return static_cast<double>(u.ru_utime.tv_sec + u.ru_stime.tv_sec) +
         1e-6 * static_cast<double>(u.ru_utime.tv_usec + u.ru_stime.tv_usec);
}

double median(std::vector<double> v) {
  std::sort(v.begin(), v.end());
  const std::size_t n = v.size();
  return n % 2 ? v[n / 2] : 0.5 * (v[n / 2 - 1] + v[n / 2]);
}

std::vector<std::string> split(const std::string& s) {
  std::vector<std::string> out;
  std::stringstream ss(s);
  for (std::string item; std::getline(ss, item, ',');)
    if (!item.empty()) out.push_back(item);
  return out;
}

}  // namespace

int main(int argc, char** argv) {
  kernels::passive_omp_wait(argv);
  const int size = argc > 1 ? std::max(16, std::atoi(argv[1])) : 512;
  const int runs = argc > 2 ? std::max(1, std::atoi(argv[2])) : 3;
  TileOptions tiles;
  tiles.tile = argc > 3 ? std::max(0, std::atoi(argv[3])) : 256;
  tiles.tile_pad = argc > 4 ? std::max(0, std::atoi(argv[4])) : 10;
  const std::vector<std::string> precisions = split(argc > 5 ? argv[5] : "fp32,bf16");
  RrdbNetConfig cfg;  // the official x4plus sizes
  if (argc > 6) cfg.num_block = std::max(1, std::atoi(argv[6]));

  // Weights: uniform ±0.02, small enough that 23 blocks keep activations of order 1.
  std::map<std::string, RrdbNet> nets;
  for (const auto& p : precisions)
    nets.emplace(p, RrdbNet::random(cfg, 1234, storage_for(parse_precision(p)), 0.02f));
  Tensor x(Shape{1, size, size, 3});
  nn::uniform_init(7, 0.5f)("image", x);
  for (float& v : x.span()) v += 0.5f;

  std::map<std::string, std::vector<double>> ms, cpu;
  std::map<std::string, double> gflop;
  for (int r = 0; r < runs; ++r)
    for (const auto& p : precisions) {
      const auto f0 = kernels::flop_counter().load();
      const double c0 = cpu_s();
      const auto t0 = Clock::now();
      const Tensor y = nets.at(p).forward_tiled(x, tiles);
      const double t = std::chrono::duration<double, std::milli>(Clock::now() - t0).count();
      ms[p].push_back(t);
      cpu[p].push_back(cpu_s() - c0);
      gflop[p] = static_cast<double>(kernels::flop_counter().load() - f0) * 1e-9;
      std::fprintf(stderr, "%s run %d: %.0f ms (output %lldx%lld)\n", p.c_str(), r + 1, t,
                   static_cast<long long>(y.dim(2)), static_cast<long long>(y.dim(1)));
    }

  nlohmann::json doc;
  doc["benchmark"] = "realesrgan_x4plus";
  doc["model"] = {{"num_feat", cfg.num_feat},
                  {"num_block", cfg.num_block},
                  {"num_grow_ch", cfg.num_grow_ch},
                  {"scale", cfg.scale},
                  {"parameters", nets.begin()->second.num_parameters()}};
  doc["input"] = {size, size};
  doc["output"] = {cfg.scale * size, cfg.scale * size};
  doc["tile"] = tiles.tile;
  doc["tile_pad"] = tiles.tile_pad;
  doc["threads"] = tbb::info::default_concurrency();
  doc["onednn"] = kernels::dnnl_description();
  doc["native_bf16"] = kernels::cpu_has_native_bf16();
  doc["runs"] = runs;
  for (const auto& p : precisions) {
    const auto& v = ms.at(p);
    const double med = median(v);
    doc["precisions"][p] = {{"ms", v},
                            {"median_ms", med},
                            {"min_ms", *std::min_element(v.begin(), v.end())},
                            {"max_ms", *std::max_element(v.begin(), v.end())},
                            {"cpu_s", cpu.at(p)},
                            {"median_cpu_s", median(cpu.at(p))},
                            {"gflop", gflop.at(p)},
                            {"gflop_per_s", gflop.at(p) / (med * 1e-3)}};
  }
  if (ms.count("fp32") && ms.count("bf16"))
    doc["bf16_speedup_vs_fp32"] = median(ms.at("fp32")) / median(ms.at("bf16"));
  doc["peak_rss_mb"] = peak_rss_mb();
  std::printf("%s\n", doc.dump(2).c_str());
  return 0;
}
