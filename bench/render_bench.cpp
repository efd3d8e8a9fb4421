// Benchmark of the render/ library on a real mesh: rasterization of the six official views, the
// normal/position maps, back-projection and the fast merge, each against a baseline measured in
// the same run (the reference's algorithm: per-triangle scalar rasterizer over a full-frame key
// buffer, one rasterization per request, one thread). Prints one JSON object.
//
//   render_bench [mesh] [--size N] [--texture N] [--reps N] [--no-baseline] [--heap-only]
// mesh defaults to $GEN3D_BENCH_MESH or /work/shared/assets/hunyuan3d-2/1.glb; when it cannot be
// loaded a generated ~40k-face sphere is used (reported as "mesh": "generated").

#include <malloc.h>
#include <sys/resource.h>

#include <oneapi/tbb/info.h>
#include <oneapi/tbb/parallel_for.h>
#include <oneapi/tbb/task_arena.h>

#include <algorithm>
#include <chrono>
#include <cmath>
#include <cstdio>
#include <cstdlib>
#include <functional>
#include <string>
#include <vector>

#include "mesh/io.h"
#include "mesh/normalize.h"
#include "render/back_project.h"
#include "render/camera.h"
#include "render/maps.h"
#include "render/merge.h"
#include "render/raster_cache.h"
#include "render/rasterizer.h"

namespace {

using namespace gen3d;
using Clock = std::chrono::steady_clock;

// CPU seconds (user + system, all threads) of this process so far.
double process_cpu() {
  rusage u;
  getrusage(RUSAGE_SELF, &u);
  return static_cast<double>(u.ru_utime.tv_sec + u.ru_stime.tv_sec) +
         1e-6 * static_cast<double>(u.ru_utime.tv_usec + u.ru_stime.tv_usec);
}

double seconds(const std::function<void()>& fn) {
  const auto t0 = Clock::now();
  fn();
  return std::chrono::duration<double>(Clock::now() - t0).count();
}

double best_of(int reps, const std::function<void()>& fn) {
  double best = 1e30;
  for (int i = 0; i < reps; ++i) best = std::min(best, seconds(fn));
  return best;
}

// A bumpy UV sphere with per-vertex UVs (about 2 * rings * segments faces), internal frame.
mesh::Mesh generated_mesh(int rings, int segments) {
  mesh::Mesh m;
  for (int r = 0; r <= rings; ++r) {
    const float th = static_cast<float>(M_PI) * r / rings;
    for (int s = 0; s <= segments; ++s) {
      const float ph = 2.0f * static_cast<float>(M_PI) * s / segments;
      const float rad = 0.5f + 0.02f * std::sin(7.0f * ph) * std::sin(5.0f * th);
      m.positions.push_back({rad * std::sin(th) * std::cos(ph), rad * std::sin(th) * std::sin(ph),
                             rad * std::cos(th)});
      m.uvs.push_back({0.01f + 0.98f * s / segments, 0.01f + 0.98f * r / rings});
    }
  }
  const auto id = [&](int r, int s) { return static_cast<uint32_t>(r * (segments + 1) + s); };
  for (int r = 0; r < rings; ++r) {
    for (int s = 0; s < segments; ++s) {
      m.faces.push_back({id(r, s), id(r + 1, s), id(r, s + 1)});
      m.faces.push_back({id(r, s + 1), id(r + 1, s), id(r + 1, s + 1)});
    }
  }
  m.uv_faces = m.faces;
  return m;
}

// Gives a UV-less mesh per-vertex spherical UVs (not a good atlas: enough to time the bake).
void ensure_uvs(mesh::Mesh& m) {
  if (m.has_uvs()) return;
  m.uvs.resize(m.positions.size());
  for (size_t i = 0; i < m.positions.size(); ++i) {
    const auto& p = m.positions[i];
    const float r = std::max(std::sqrt(p[0] * p[0] + p[1] * p[1] + p[2] * p[2]), 1e-6f);
    m.uvs[i] = {0.5f + std::atan2(p[1], p[0]) / (2.0f * static_cast<float>(M_PI)),
                std::acos(std::clamp(p[2] / r, -1.0f, 1.0f)) / static_cast<float>(M_PI)};
  }
  m.uv_faces = m.faces;
}

struct PipelineTimes {
  double rasterize = 0, maps = 0, back_project = 0, merge = 0, total = 0, cpu = 0;
};

// The texgen render work for six views: 8-bit normal + position maps (what the pipeline hands to
// the multiview model), back-projection of a generated view per pose, fast merge. `fast`:
// RasterCache + tiled parallel rasterizer, views in parallel. Otherwise the reference's structure:
// every request rasterizes with the scalar reference rasterizer, views one after another (run it
// inside a 1-thread arena for the reference's 1 core).
PipelineTimes run_pipeline(const mesh::Mesh& m, const render::ViewSet& views, int size, int tex,
                           bool fast) {
  PipelineTimes t;
  const size_t n = views.size();
  std::vector<std::vector<uint8_t>> normals(n), positions(n);
  std::vector<render::SparseBackProjection> bps(n);
  // The generated views would come from the multiview model (8-bit, resized to the render size);
  // float images of the normal maps stand in. Made before the clock starts: they are inputs.
  std::vector<image::Image> generated(n);
  for (size_t v = 0; v < n; ++v) {
    const auto r = render::rasterize(m, views[v].camera, size, size);
    generated[v] = render::normal_map(m, r);
  }
  render::RasterCache cache;
  const uint64_t fp = m.fingerprint();
  render::BakeOptions bo;
  bo.render_size = size;
  bo.texture_size = tex;
  auto raster_of = [&](size_t v) {
    if (fast) return cache.get(fp, m, views[v].camera, size, size);
    const auto clip = render::clip_positions(m.positions, views[v].camera);
    return std::make_shared<const render::Raster>(
        render::rasterize_reference(clip, m.faces, size, size));
  };
  const auto t0 = Clock::now();
  const double c0 = process_cpu();
  auto for_views = [&](const std::function<void(size_t)>& body) {
    if (fast) {
      tbb::parallel_for(size_t{0}, n, body);
    } else {
      for (size_t v = 0; v < n; ++v) body(v);
    }
  };
  std::vector<double> rtime(n, 0.0);
  t.maps = seconds([&] {
    for_views([&](size_t v) {
      std::shared_ptr<const render::Raster> r;
      rtime[v] += seconds([&] { r = raster_of(v); });
      normals[v] = render::normal_map_u8(m, *r);
      std::shared_ptr<const render::Raster> r2;
      rtime[v] += seconds([&] { r2 = raster_of(v); });
      positions[v] = render::position_map_u8(m, *r2);
    });
  });
  t.back_project = seconds([&] {
    for_views([&](size_t v) {
      std::shared_ptr<const render::Raster> r;
      rtime[v] += seconds([&] { r = raster_of(v); });
      bps[v] = render::back_project_sparse(m, *r, views[v].camera, generated[v], bo);
    });
  });
  t.merge = seconds([&] {
    std::vector<double> weights(n);
    for (size_t v = 0; v < n; ++v) weights[v] = views[v].weight;
    const render::MergeResult r = render::merge_fast(bps, weights);
    if (r.texture.empty()) std::abort();
  });
  t.total = std::chrono::duration<double>(Clock::now() - t0).count();
  t.cpu = process_cpu() - c0;
  for (double r : rtime) t.rasterize += r;  // summed over views (CPU-ish time when parallel)
  return t;
}

void print_pipeline(const char* name, const PipelineTimes& t, bool last) {
  std::printf(
      "    \"%s\": {\"total_s\": %.4f, \"cpu_s\": %.4f, \"maps_incl_raster_s\": %.4f, "
      "\"back_project_s\": %.4f, \"merge_s\": %.4f, \"raster_sum_over_views_s\": %.4f}%s\n",
      name, t.total, t.cpu, t.maps, t.back_project, t.merge, t.rasterize, last ? "" : ",");
}

}  // namespace

int main(int argc, char** argv) {
  const char* env_mesh = std::getenv("GEN3D_BENCH_MESH");
  std::string path = env_mesh ? env_mesh : "/work/shared/assets/hunyuan3d-2/1.glb";
  int size = 2048, tex = 2048, reps = 3;
  bool baseline = true;
  // Optional glibc tuning (an application's choice, not the library's): serve large blocks such as
  // 2048 x 2048 float images from the heap, never trimmed, so repeated runs reuse memory instead
  // of faulting in fresh pages (mallopt cannot raise the mmap threshold past 32 MiB).
  bool heap_only = false;
  for (int i = 1; i < argc; ++i) {
    const std::string a = argv[i];
    if (a == "--size" && i + 1 < argc)
      size = std::atoi(argv[++i]);
    else if (a == "--texture" && i + 1 < argc)
      tex = std::atoi(argv[++i]);
    else if (a == "--reps" && i + 1 < argc)
      reps = std::atoi(argv[++i]);
    else if (a == "--no-baseline")
      baseline = false;
    else if (a == "--heap-only")
      heap_only = true;
    else
      path = a;
  }
  if (heap_only) {
    mallopt(M_MMAP_MAX, 0);
    mallopt(M_TRIM_THRESHOLD, 1 << 30);
  }
  mesh::Mesh m;
  std::string source = path;
  try {
    m = mesh::load_mesh(path);
    mesh::normalize_mesh(m);
  } catch (const std::exception& e) {
    std::fprintf(stderr, "render_bench: %s; using a generated mesh\n", e.what());
    m = generated_mesh(141, 142);
    source = "generated";
  }
  const bool had_uvs = m.has_uvs();
  ensure_uvs(m);
  const render::ViewSet views = render::ViewSet::hunyuan6();
  const double pixels = 6.0 * size * size, tris = 6.0 * m.faces.size();

  // Rasterization alone: 6 views, views in parallel, tiles in parallel.
  std::vector<render::Raster> rasters(6);
  double fast_cpu = 1e30;
  const double fast = best_of(reps, [&] {
    const double c0 = process_cpu();
    tbb::parallel_for(
        0, 6, [&](int v) { rasters[v] = render::rasterize(m, views[v].camera, size, size); });
    fast_cpu = std::min(fast_cpu, process_cpu() - c0);
  });
  double fast_1t = 0;
  {
    tbb::task_arena one(1);
    one.execute([&] {
      fast_1t = best_of(reps, [&] {
        for (int v = 0; v < 6; ++v) rasters[v] = render::rasterize(m, views[v].camera, size, size);
      });
    });
  }
  double base = 0;
  if (baseline) {
    base = seconds([&] {
      for (int v = 0; v < 6; ++v) {
        const auto clip = render::clip_positions(m.positions, views[v].camera);
        rasters[v] = render::rasterize_reference(clip, m.faces, size, size);
      }
    });
  }

  PipelineTimes pf;
  pf.total = 1e30;
  for (int i = 0; i < reps; ++i) {
    const PipelineTimes t = run_pipeline(m, views, size, tex, true);
    if (t.total < pf.total) pf = t;
  }
  PipelineTimes pf1, pb;
  {
    tbb::task_arena one(1);
    one.execute([&] { pf1 = run_pipeline(m, views, size, tex, true); });
    if (baseline) one.execute([&] { pb = run_pipeline(m, views, size, tex, false); });
  }

  std::printf("{\n  \"mesh\": \"%s\", \"faces\": %zu, \"vertices\": %zu, \"mesh_had_uvs\": %s,\n",
              source.c_str(), m.faces.size(), m.positions.size(), had_uvs ? "true" : "false");
  std::printf(
      "  \"render_size\": %d, \"texture_size\": %d, \"views\": 6, \"threads\": %d, "
      "\"heap_only_malloc\": %s,\n",
      size, tex, tbb::info::default_concurrency(), heap_only ? "true" : "false");
  std::printf("  \"rasterize_6_views\": {\n");
  std::printf(
      "    \"tiled_parallel_s\": %.4f, \"tiled_parallel_cpu_s\": %.4f, \"tiled_1thread_s\": %.4f, "
      "\"reference_scalar_s\": %.4f,\n",
      fast, fast_cpu, fast_1t, base);
  std::printf("    \"tiled_mpixel_per_s\": %.1f, \"tiled_mtri_per_s\": %.2f,\n",
              pixels / fast / 1e6, tris / fast / 1e6);
  std::printf("    \"reference_mpixel_per_s\": %.1f, \"reference_mtri_per_s\": %.2f,\n",
              baseline ? pixels / base / 1e6 : 0.0, baseline ? tris / base / 1e6 : 0.0);
  std::printf("    \"speedup_vs_reference\": %.2f, \"speedup_1thread_vs_reference\": %.2f\n  },\n",
              baseline ? base / fast : 0.0, baseline ? base / fast_1t : 0.0);
  std::printf("  \"pipeline_6normal_6position_6backproject_merge\": {\n");
  print_pipeline("fast_cached_parallel", pf, false);
  print_pipeline("fast_cached_1thread", pf1, !baseline);
  if (baseline) {
    print_pipeline("reference_18_rasterizations_1thread", pb, false);
    std::printf("    \"speedup_vs_reference\": %.2f\n", pb.total / pf.total);
  }
  std::printf("  }\n}\n");
  return 0;
}
