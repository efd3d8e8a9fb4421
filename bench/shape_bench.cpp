// Volume decoding and surface extraction benchmarks (specs/volume-decoding.md).
//  * Volume decoders on analytic fields (sphere r 0.5 and a torus, logit = 10 * sdf) and on a tiny
//  random
//    ShapeVAE (golden-sized: width 32, 4 heads, 32 latents, 2 layers): dense (the baseline,
//    measured in the same run), hierarchical and FlashVDM at R = 256 and 384. Counters: points
//    queried and their fraction of the dense grid.
//  * Marching cubes on the dense sphere grid and on the torus's FlashVDM grid (a band of values,
//    NaN elsewhere): Mtriangles/s, parallel vs one thread (baseline).
//
//   shape_bench --benchmark_format=json [--benchmark_filter=Analytic]
#include <benchmark/benchmark.h>
#include <oneapi/tbb/global_control.h>

#include <cmath>
#include <map>
#include <memory>

#include "mesh/marching_cubes.h"
#include "models/shape/field.h"
#include "models/shape/shape_vae.h"
#include "models/shape/volume_decoder.h"

namespace {

using namespace gen3d;

const models::Field& sphere() {
  static const models::AnalyticField f = models::sphere_field(0.5, 10.0);
  return f;
}

// A second analytic surface, so a change tuned on the sphere is also timed on another shape.
const models::Field& torus() {
  static const models::AnalyticField f = models::torus_field(0.55, 0.18, 10.0);
  return f;
}

// Tiny random VAE whose zero level set crosses the box (decoded latents of seeded latents).
const models::Field& tiny_vae_field() {
  static const std::shared_ptr<const models::Field> field = [] {
    models::ShapeVAEConfig c;
    c.num_latents = 32;
    c.embed_dim = 8;
    c.num_freqs = 4;
    c.heads = 4;
    c.width = 32;
    c.num_decoder_layers = 2;
    c.scale_factor = 0.75;
    const auto vae = models::ShapeVAE::random(c, 2002);
    models::Tensor lat({1, 32, 8});
    for (std::int64_t i = 0; i < lat.numel(); ++i)
      lat.data()[i] = static_cast<float>(std::sin(0.37 * static_cast<double>(i)));
    return vae.geometry_field(vae.decode(lat), 0);
  }();
  return *field;
}

void run_volume(benchmark::State& state, const models::Field& field) {
  models::VolumeDecodeOptions o;
  o.method = static_cast<models::VolumeMethod>(state.range(0));
  o.resolution = static_cast<int>(state.range(1));
  o.num_chunks = 200000;
  models::VolumeDecodeStats st;
  std::int64_t n = 0;
  for (auto _ : state) {
    const models::VolumeGrid g = models::decode_volume(field, o, &st);
    n = g.n();
    benchmark::DoNotOptimize(g.values.data());
  }
  state.SetLabel(models::volume_method_name(o.method));
  state.counters["points_queried"] = static_cast<double>(st.points_queried);
  state.counters["query_fraction"] = static_cast<double>(st.points_queried) / double(n * n * n);
  state.counters["final_grid"] = static_cast<double>(n);
}

void BM_VolumeAnalytic(benchmark::State& state) {
  run_volume(state, sphere());
}
void BM_VolumeTorus(benchmark::State& state) {
  run_volume(state, torus());
}
void BM_VolumeTinyVAE(benchmark::State& state) {
  run_volume(state, tiny_vae_field());
}

void volume_args(benchmark::internal::Benchmark* b) {
  for (int r : {256, 384})
    for (int m = 0; m < 3; ++m) b->Args({m, r});
  b->Unit(benchmark::kMillisecond)->UseRealTime();
}
BENCHMARK(BM_VolumeAnalytic)->Apply(volume_args);
BENCHMARK(BM_VolumeTorus)->Apply(volume_args);
BENCHMARK(BM_VolumeTinyVAE)->Apply(volume_args)->Iterations(1);

// Dense sphere grids, built once per resolution.
const models::VolumeGrid& sphere_grid(int r) {
  static std::map<int, models::VolumeGrid> grids;
  auto it = grids.find(r);
  if (it == grids.end()) {
    models::VolumeDecodeOptions o;
    o.resolution = r;
    it = grids.emplace(r, models::decode_volume(models::sphere_field(0.5, 10.0), o)).first;
  }
  return it->second;
}

// FlashVDM grids of the torus (what a run hands to marching cubes: the band's vertices, NaN
// elsewhere), built once per resolution.
const models::VolumeGrid& torus_band_grid(int r) {
  static std::map<int, models::VolumeGrid> grids;
  auto it = grids.find(r);
  if (it == grids.end()) {
    models::VolumeDecodeOptions o;
    o.method = models::VolumeMethod::kFlashVDM;
    o.resolution = r;
    it = grids.emplace(r, models::decode_volume(torus(), o)).first;
  }
  return it->second;
}

// range(0): resolution, range(1): 1 = one thread (baseline), 0 = all threads.
void run_marching_cubes(benchmark::State& state, const models::VolumeGrid& g) {
  std::unique_ptr<tbb::global_control> one;
  if (state.range(1))
    one = std::make_unique<tbb::global_control>(tbb::global_control::max_allowed_parallelism, 1);
  std::size_t faces = 0;
  for (auto _ : state) {
    const mesh::Mesh m = mesh::marching_cubes({g.values.data(), g.n(), g.n(), g.n()});
    faces = m.faces.size();
    benchmark::DoNotOptimize(m.faces.data());
  }
  state.SetLabel(state.range(1) ? "1 thread (baseline)" : "all threads");
  state.counters["faces"] = static_cast<double>(faces);
  state.counters["Mtriangles_per_s"] = benchmark::Counter(
      static_cast<double>(faces) * 1e-6, benchmark::Counter::kIsIterationInvariantRate);
}
void BM_MarchingCubes(benchmark::State& state) {
  run_marching_cubes(state, sphere_grid(static_cast<int>(state.range(0))));
}
void BM_MarchingCubesBand(benchmark::State& state) {
  run_marching_cubes(state, torus_band_grid(static_cast<int>(state.range(0))));
}
BENCHMARK(BM_MarchingCubes)
    ->Args({256, 1})
    ->Args({256, 0})
    ->Args({384, 1})
    ->Args({384, 0})
    ->Unit(benchmark::kMillisecond)
    ->UseRealTime();
BENCHMARK(BM_MarchingCubesBand)
    ->Args({384, 1})
    ->Args({384, 0})
    ->Unit(benchmark::kMillisecond)
    ->UseRealTime();

}  // namespace

BENCHMARK_MAIN();
