// Benchmark of Hunyuan3D-2.1's bake-view selection (render/view_selection.h) on the real
// Hunyuan3D-2 shape (1.glb, used in place from the shared assets: never copied into the
// repository), normalized as texgen does: all 30 candidates rendered at 1024 x 1024 through a fresh
// raster cache, face sets counted, the greedy rule run to 9 views. Split into its parts to show
// where the time goes (rasterization vs counting), with two baselines measured in the same run:
// the reference's algorithm for the rasters (rasterize_reference: one thread, triangle after
// triangle over a full-frame key buffer) and the reference's way of counting (a set of face ids
// per view, np.unique-like, and set differences per greedy step).
//
//   GEN3D_BENCH_MESH=/path/to/1.glb view_selection_bench --benchmark_repetitions=5
#include <benchmark/benchmark.h>

#include <oneapi/tbb/parallel_for.h>

#include <algorithm>
#include <cstdlib>
#include <filesystem>
#include <set>
#include <string>
#include <vector>

#include "mesh/io.h"
#include "mesh/normalize.h"
#include "render/raster_cache.h"
#include "render/rasterizer.h"
#include "render/view_selection.h"

namespace {

using namespace gen3d;

constexpr int kSize = 1024;        // the reference's face-id render size
constexpr size_t kMaxViews = 9;    // the largest max_views: every greedy step evaluated
constexpr size_t kFixedViews = 6;  // the official six come first
// The select_views stage's cache (stages/shared.cpp): 30 rasters at 1024 fit without eviction.
constexpr size_t kCacheBudget = size_t{1} << 30;

std::string shape_path() {
  const char* env = std::getenv("GEN3D_BENCH_MESH");
  return env && *env ? env : "/work/shared/assets/hunyuan3d-2/1.glb";
}

// The normalized mesh, loaded once; nullptr when the file is not there (the benchmarks skip).
const mesh::Mesh* shape() {
  static const mesh::Mesh* m = []() -> const mesh::Mesh* {
    if (!std::filesystem::exists(shape_path())) return nullptr;
    auto* loaded = new mesh::Mesh(mesh::load_mesh(shape_path()));
    mesh::normalize_mesh(*loaded);
    return loaded;
  }();
  return m;
}

bool skip_without_mesh(benchmark::State& state) {
  if (shape()) return false;
  state.SkipWithError(("mesh not found, skipped: " + shape_path()).c_str());
  return true;
}

// The 30 face-id maps, made once for the counting benchmarks.
const std::vector<render::Raster>& candidate_rasters() {
  static const std::vector<render::Raster> rasters = [] {
    const render::ViewSet c = render::hunyuan21_candidates();
    std::vector<render::Raster> out(c.size());
    for (size_t v = 0; v < c.size(); ++v)
      out[v] = render::rasterize(*shape(), c[v].camera, kSize, kSize);
    return out;
  }();
  return rasters;
}

void report(benchmark::State& state, const render::ViewSelection& s) {
  state.counters["faces"] = static_cast<double>(shape()->faces.size());
  state.counters["views"] = static_cast<double>(s.selected.size());
  state.counters["covered"] = s.covered;
  // The largest newly covered share at the last greedy step evaluated (why the search stopped).
  double best = 0;
  if (!s.gains.empty())
    for (double g : s.gains.back()) best = std::max(best, g);
  state.counters["last_best_gain"] = best;
}

render::ViewSelectionOptions options() {
  render::ViewSelectionOptions o;
  o.max_views = kMaxViews;
  o.fixed_views = kFixedViews;
  return o;
}

// What the select_views stage does: 30 rasters through a fresh cache, face sets, greedy rule.
void BM_SelectViews_1glb(benchmark::State& state) {
  if (skip_without_mesh(state)) return;
  const mesh::Mesh& m = *shape();
  const render::ViewSet candidates = render::hunyuan21_candidates();
  render::ViewSelection s;
  for (auto _ : state) {
    render::RasterCache cache(kCacheBudget);
    const auto visible =
        render::candidate_visible_faces(m, m.fingerprint(), candidates, kSize, cache, kFixedViews);
    s = render::select_views(render::face_areas(m.positions, m.faces), visible, options());
    benchmark::DoNotOptimize(s.selected.data());
  }
  report(state, s);
}

// Its rasterization share: the 30 rasters alone (views in parallel, as above).
void BM_SelectViews_1glb_RasterizeOnly(benchmark::State& state) {
  if (skip_without_mesh(state)) return;
  const mesh::Mesh& m = *shape();
  const render::ViewSet candidates = render::hunyuan21_candidates();
  for (auto _ : state) {
    std::vector<render::Raster> rasters(candidates.size());
    tbb::parallel_for(size_t{0}, candidates.size(), [&](size_t v) {
      rasters[v] = render::rasterize(m, candidates[v].camera, kSize, kSize);
    });
    benchmark::DoNotOptimize(rasters.data());
  }
}

// Its counting share: face sets of 30 prepared maps, face areas and the greedy rule.
void BM_SelectViews_1glb_CountOnly(benchmark::State& state) {
  if (skip_without_mesh(state)) return;
  const mesh::Mesh& m = *shape();
  const auto& rasters = candidate_rasters();
  render::ViewSelection s;
  for (auto _ : state) {
    std::vector<std::vector<uint32_t>> visible(rasters.size());
    tbb::parallel_for(size_t{0}, rasters.size(), [&](size_t v) {
      visible[v] = render::visible_faces(rasters[v].face_id, m.faces.size());
    });
    s = render::select_views(render::face_areas(m.positions, m.faces), visible, options());
    benchmark::DoNotOptimize(s.selected.data());
  }
  report(state, s);
}

// Baseline for the counting: the reference's data structures (pipeline_utils.py: a set of face ids
// per view from np.unique, a set difference and a sum per candidate and greedy step), one thread.
void BM_SelectViews_1glb_CountOnly_SetBaseline(benchmark::State& state) {
  if (skip_without_mesh(state)) return;
  const mesh::Mesh& m = *shape();
  const auto& rasters = candidate_rasters();
  const std::vector<float> areas = render::face_areas(m.positions, m.faces);
  size_t chosen = 0;
  for (auto _ : state) {
    std::vector<std::set<int32_t>> seen(rasters.size());
    for (size_t v = 0; v < rasters.size(); ++v) {
      std::vector<int32_t> ids(rasters[v].face_id.begin(), rasters[v].face_id.end());
      std::sort(ids.begin(), ids.end());  // np.unique sorts
      ids.erase(std::unique(ids.begin(), ids.end()), ids.end());
      seen[v] = std::set<int32_t>(ids.begin(), ids.end());
    }
    double total = 0;
    for (float a : areas) total += a;
    std::set<int32_t> covered;
    std::vector<bool> taken(rasters.size(), false);
    for (size_t v = 0; v < kFixedViews; ++v) {
      covered.insert(seen[v].begin(), seen[v].end());
      taken[v] = true;
    }
    chosen = kFixedViews;
    for (size_t step = kFixedViews; step < kMaxViews; ++step) {
      double best = 0;
      size_t best_v = rasters.size();
      for (size_t v = 0; v < rasters.size(); ++v) {
        if (taken[v]) continue;
        std::vector<int32_t> fresh;
        std::set_difference(seen[v].begin(), seen[v].end(), covered.begin(), covered.end(),
                            std::back_inserter(fresh));
        double gain = 0;
        for (int32_t id : fresh)
          if (id > 0) gain += areas[static_cast<size_t>(id - 1)] / total;
        if (gain > best) best = gain, best_v = v;
      }
      if (best_v == rasters.size() || !(best > 0.01)) break;
      taken[best_v] = true;
      covered.insert(seen[best_v].begin(), seen[best_v].end());
      ++chosen;
    }
    benchmark::DoNotOptimize(chosen);
  }
  state.counters["views"] = static_cast<double>(chosen);
}

// Baseline for the rasters: the reference's algorithm, one thread, one raster per candidate.
void BM_SelectViews_1glb_RasterizeOnly_ReferenceBaseline(benchmark::State& state) {
  if (skip_without_mesh(state)) return;
  const mesh::Mesh& m = *shape();
  const render::ViewSet candidates = render::hunyuan21_candidates();
  for (auto _ : state) {
    for (size_t v = 0; v < candidates.size(); ++v) {
      const auto clip = render::clip_positions(m.positions, candidates[v].camera);
      render::Raster r = render::rasterize_reference(clip, m.faces, kSize, kSize);
      benchmark::DoNotOptimize(r.face_id.data());
    }
  }
}

BENCHMARK(BM_SelectViews_1glb)
    ->Unit(benchmark::kMillisecond)
    ->MeasureProcessCPUTime()
    ->UseRealTime();
BENCHMARK(BM_SelectViews_1glb_RasterizeOnly)
    ->Unit(benchmark::kMillisecond)
    ->MeasureProcessCPUTime()
    ->UseRealTime();
BENCHMARK(BM_SelectViews_1glb_CountOnly)
    ->Unit(benchmark::kMillisecond)
    ->MeasureProcessCPUTime()
    ->UseRealTime();
BENCHMARK(BM_SelectViews_1glb_CountOnly_SetBaseline)
    ->Unit(benchmark::kMillisecond)
    ->MeasureProcessCPUTime()
    ->UseRealTime();
BENCHMARK(BM_SelectViews_1glb_RasterizeOnly_ReferenceBaseline)
    ->Unit(benchmark::kMillisecond)
    ->MeasureProcessCPUTime()
    ->UseRealTime()
    ->Iterations(1);

}  // namespace

BENCHMARK_MAIN();
