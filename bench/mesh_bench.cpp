// Benchmarks of gen3d_mesh on the real Hunyuan3D-2 shape (1.glb, 40k faces, used in place from the
// shared assets: never copied into the repository), on assimp's 2CylinderEngine.glb (121k faces of
// hard-surface CAD, thousands of planar regions; also from the shared assets, plain and Draco) and
// on generated 200k- and 1M-face spheres. Missing asset files skip their benchmarks with a message.
// Baselines in the same run: unwrap with planar charts only and no rotations (the cheap strategy
// uv_unwrap falls back to), and simplify without UV seams.
//
//   GEN3D_BENCH_MESH=/path/to/1.glb mesh_bench --benchmark_format=json
#include <benchmark/benchmark.h>

#include <cmath>
#include <cstdlib>
#include <filesystem>
#include <string>

#include "mesh/io.h"
#include "mesh/simplify.h"
#include "mesh/uv_unwrap.h"
#include "tests/mesh/test_meshes.h"

namespace {

using namespace gen3d::mesh;

// A benchmark mesh: the environment variable's path if set, else the shared asset.
std::string bench_path(const char* variable, const char* fallback) {
  const char* env = std::getenv(variable);
  return env && *env ? env : fallback;
}

std::string shape_path() {
  return bench_path("GEN3D_BENCH_MESH", "/work/shared/assets/hunyuan3d-2/1.glb");
}
std::string engine_path() {
  return bench_path("GEN3D_BENCH_CAD_MESH",
                    "/work/shared/assets/meshes-assimp/glTF2/2CylinderEngine.glb");
}
// The same engine as Draco-compressed glTF: decoding welds and reorders its vertices, so its
// charts differ from the plain file's.
std::string draco_engine_path() {
  return bench_path("GEN3D_BENCH_DRACO_MESH",
                    "/work/shared/assets/meshes-assimp/glTF2/draco/2CylinderEngine.gltf");
}

// The mesh at `path`, or nullptr when the file is not there (the benchmarks then skip).
const Mesh* load_if_present(const std::string& path) {
  return std::filesystem::exists(path) ? new Mesh(load_mesh(path)) : nullptr;
}

// Each loaded once.
const Mesh* shape() {
  static const Mesh* mesh = load_if_present(shape_path());
  return mesh;
}
const Mesh* engine() {
  static const Mesh* mesh = load_if_present(engine_path());
  return mesh;
}
const Mesh* draco_engine() {
  static const Mesh* mesh = load_if_present(draco_engine_path());
  return mesh;
}

// Bumpy latitude-longitude sphere: 2 * segments * (rings - 1) faces (224 x 448: 199,808).
Mesh bumpy_sphere(int rings, int segments) {
  Mesh m;
  m.positions.push_back({0, 1, 0});
  for (int r = 1; r < rings; ++r)
    for (int s = 0; s < segments; ++s) {
      const float th = float(M_PI) * r / rings, ph = 2 * float(M_PI) * s / segments;
      const float x = std::sin(th) * std::cos(ph), y = std::cos(th),
                  z = -std::sin(th) * std::sin(ph);
      const float k = 1.0f + 0.1f * std::sin(7 * x) * std::cos(5 * y) * std::sin(6 * z);
      m.positions.push_back({x * k, y * k, z * k});
    }
  m.positions.push_back({0, -1, 0});
  const uint32_t south = uint32_t(m.positions.size() - 1);
  auto at = [&](int r, int s) { return uint32_t(1 + (r - 1) * segments + s % segments); };
  for (int s = 0; s < segments; ++s) m.faces.push_back({0, at(1, s), at(1, s + 1)});
  for (int r = 1; r < rings - 1; ++r)
    for (int s = 0; s < segments; ++s) {
      m.faces.push_back({at(r, s), at(r + 1, s), at(r + 1, s + 1)});
      m.faces.push_back({at(r, s), at(r + 1, s + 1), at(r, s + 1)});
    }
  for (int s = 0; s < segments; ++s)
    m.faces.push_back({at(rings - 1, s), south, at(rings - 1, s + 1)});
  return m;
}

const Mesh& sphere200k() {
  static const Mesh m = bumpy_sphere(224, 448);
  return m;
}

// 2 * 1000 * (501 - 1) = 1,000,000 faces.
const Mesh& sphere1m() {
  static const Mesh m = bumpy_sphere(501, 1000);
  return m;
}

void report(benchmark::State& state, const UnwrapResult& r) {
  state.counters["faces"] = double(r.mesh.faces.size());
  state.counters["charts"] = double(r.metrics.charts);
  state.counters["lscm_charts"] = double(r.metrics.lscm_charts);
  state.counters["utilization"] = r.metrics.utilization;
  state.counters["angle_distortion"] = r.metrics.angle_distortion;
  state.counters["area_distortion"] = r.metrics.area_distortion;
  state.counters["pack_passes"] = r.metrics.pack_passes;
  state.counters["texels_per_unit"] = r.metrics.texels_per_unit;
  state.counters["merged_charts"] = double(r.metrics.merged_charts);
  state.counters["density_reduced"] = r.metrics.density_reduced;
}

void unwrap(benchmark::State& state, const Mesh* mesh, bool baseline, int texture_size = 2048,
            const std::string& path = shape_path()) {
  if (!mesh) {
    state.SkipWithError(("mesh not found, skipped: " + path).c_str());
    return;
  }
  UnwrapOptions o;  // gutter 4
  o.texture_size = texture_size;
  if (baseline) {
    o.use_lscm = false;
    o.rotate_charts = false;
  }
  UnwrapResult r;
  try {
    for (auto _ : state) {
      r = uv_unwrap(*mesh, o);
      benchmark::DoNotOptimize(r.mesh.uvs.data());
    }
  } catch (const std::exception& e) {  // older unwrappers could fail for lack of space
    state.SkipWithError(e.what());
    return;
  }
  report(state, r);
}

void BM_Unwrap_Shape(benchmark::State& s) {
  unwrap(s, shape(), false);
}
void BM_Unwrap_Shape_PlanarBaseline(benchmark::State& s) {
  unwrap(s, shape(), true);
}
void BM_Unwrap_Sphere200k(benchmark::State& s) {
  unwrap(s, &sphere200k(), false);
}
void BM_Unwrap_Sphere200k_PlanarBaseline(benchmark::State& s) {
  unwrap(s, &sphere200k(), true);
}
void BM_Unwrap_Sphere1M(benchmark::State& s) {
  unwrap(s, &sphere1m(), false);
}
// Hard-surface CAD at the shipped size and at a size too small for one chart per planar region.
void BM_Unwrap_Engine(benchmark::State& s) {
  unwrap(s, engine(), false, 2048, engine_path());
}
void BM_Unwrap_Engine512(benchmark::State& s) {
  unwrap(s, engine(), false, 512, engine_path());
}
void BM_Unwrap_EngineDraco(benchmark::State& s) {
  unwrap(s, draco_engine(), false, 2048, draco_engine_path());
}

// A thin pipe of 512 end-to-end slivers, each longer than the atlas at the asked density (the
// mesh of the unwrap test that checks it stays a few charts).
const Mesh& sliver_pipe() {
  static const Mesh m = testing::sliver_pipe();
  return m;
}
void BM_Unwrap_SliverPipe(benchmark::State& s) {
  unwrap(s, &sliver_pipe(), false);
}

void BM_Load_Shape(benchmark::State& state) {
  if (!std::filesystem::exists(shape_path())) {
    state.SkipWithError(("mesh not found: " + shape_path()).c_str());
    return;
  }
  size_t faces = 0;
  for (auto _ : state) faces = load_mesh(shape_path()).faces.size();
  state.counters["faces"] = double(faces);
}

void simplify_bench(benchmark::State& state, bool seams) {
  const Mesh* mesh = shape();
  if (!mesh) {
    state.SkipWithError(("mesh not found: " + shape_path()).c_str());
    return;
  }
  // Simplify a UV-mapped copy so seam handling is exercised.
  static const Mesh mapped = uv_unwrap(*mesh).mesh;
  SimplifyOptions o;
  o.target_faces = size_t(state.range(0));
  o.preserve_uv_seams = seams;
  SimplifyReport rep;
  for (auto _ : state) {
    Mesh out = simplify(mapped, o, &rep);
    benchmark::DoNotOptimize(out.faces.data());
  }
  state.counters["faces_out"] = double(rep.output_faces);
  state.counters["rel_error"] = rep.relative_error;
}

void BM_Simplify_Shape(benchmark::State& s) {
  simplify_bench(s, true);
}
void BM_Simplify_Shape_NoSeamsBaseline(benchmark::State& s) {
  simplify_bench(s, false);
}

BENCHMARK(BM_Load_Shape)->Unit(benchmark::kMillisecond);
BENCHMARK(BM_Unwrap_Shape)->Unit(benchmark::kMillisecond)->MeasureProcessCPUTime()->UseRealTime();
BENCHMARK(BM_Unwrap_Shape_PlanarBaseline)
    ->Unit(benchmark::kMillisecond)
    ->MeasureProcessCPUTime()
    ->UseRealTime();
BENCHMARK(BM_Unwrap_Sphere200k)
    ->Unit(benchmark::kMillisecond)
    ->MeasureProcessCPUTime()
    ->UseRealTime()
    ->Iterations(2);
BENCHMARK(BM_Unwrap_Sphere200k_PlanarBaseline)
    ->Unit(benchmark::kMillisecond)
    ->MeasureProcessCPUTime()
    ->UseRealTime()
    ->Iterations(2);
BENCHMARK(BM_Unwrap_Sphere1M)
    ->Unit(benchmark::kMillisecond)
    ->MeasureProcessCPUTime()
    ->UseRealTime()
    ->Iterations(1);
BENCHMARK(BM_Unwrap_Engine)
    ->Unit(benchmark::kMillisecond)
    ->MeasureProcessCPUTime()
    ->UseRealTime()
    ->Iterations(1);
BENCHMARK(BM_Unwrap_EngineDraco)
    ->Unit(benchmark::kMillisecond)
    ->MeasureProcessCPUTime()
    ->UseRealTime()
    ->Iterations(1);
BENCHMARK(BM_Unwrap_SliverPipe)
    ->Unit(benchmark::kMillisecond)
    ->MeasureProcessCPUTime()
    ->UseRealTime()
    ->Iterations(1);
BENCHMARK(BM_Unwrap_Engine512)
    ->Unit(benchmark::kMillisecond)
    ->MeasureProcessCPUTime()
    ->UseRealTime()
    ->Iterations(1);
BENCHMARK(BM_Simplify_Shape)->Arg(10000)->Arg(2000)->Unit(benchmark::kMillisecond);
BENCHMARK(BM_Simplify_Shape_NoSeamsBaseline)->Arg(10000)->Unit(benchmark::kMillisecond);

}  // namespace

BENCHMARK_MAIN();
