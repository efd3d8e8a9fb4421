// Texture-model benchmark at the official sizes with random weights: the Hunyuan3D-Paint UNet2.5D
// (SD2 UNet, 6 views at 512 px = 64×64 latents; its reference UNet), one denoising step in normal
// mode (CFG: 2 × 6 rows) and in turbo mode (6 rows), the SD VAE encode / decode of the views, and
// the delight UNet (8 input channels, 1 row). FLOPs are counted by the kernels (2 per
// multiply-add), so GFLOP/s is what ran. Minutes per texture are extrapolated from the measured
// parts: VAE encodes (1 reference + N normal + N position images), the reference UNet once, the
// steps, the VAE decode of N views; a texture's time adds delighting (50 delight steps). A step
// is timed before and after the per-texture key / value projections (the baseline in the same
// run, alternated `reps` times; medians), and in normal mode a DeepCache step too, from which
// the minutes at cache intervals 2, 3 and 5 are extrapolated. With
// several precisions (a comma list) each part runs in every precision before the next part, in
// one process, so the ratios are measured side by side. Prints one JSON document.
//
// Part "pbr" (not in the default list): the Hunyuan3D-2.1 PBR UNet2.5D, one step of the official
// CFG batch (3 rows × 2 materials × N views), its reference UNet and condition, against the
// oneDNN matmul roof measured in the same run (a large GEMM through nn::Linear in the run's
// precision). Its step too is timed before and after the per-texture key / value projections
// (reference features, prompt, DINO tokens), alternated `reps` times; medians.
//
// Usage: gen3d_texmodels_bench [views=6] [size=512] [parts=vae,turbo,normal,delight]
//                              [precision=fp32|bf16|auto|fp32,bf16] [reps=1]

#include <sys/resource.h>
#include <tbb/info.h>

#include <algorithm>
#include <chrono>
#include <cstdio>
#include <cstdlib>
#include <filesystem>
#include <string>
#include <vector>

#include <nlohmann/json.hpp>

#include "models/core/precision.h"
#include "models/core/safetensors.h"
#include "models/kernels/dnnl_matmul.h"
#include "models/kernels/flops.h"
#include "models/nn/init.h"
#include "models/paint/mvunet.h"
#include "models/paint/pbr_unet.h"
#include "models/paint/sd_vae.h"
#include "models/paint/unet.h"

namespace {

using namespace gen3d::models;
using Clock = std::chrono::steady_clock;

double ms_since(Clock::time_point t0) {
  return std::chrono::duration<double, std::milli>(Clock::now() - t0).count();
}

// Resident memory now (VmRSS), in MiB.
double rss_mb() {
  std::FILE* f = std::fopen("/proc/self/status", "r");
  if (!f) return 0;
  char line[256];
  double kb = 0;
  while (std::fgets(line, sizeof line, f))
    if (std::sscanf(line, "VmRSS: %lf kB", &kb) == 1) break;
  std::fclose(f);
  return kb / 1024.0;
}

double peak_rss_mb() {
  rusage u{};
  getrusage(RUSAGE_SELF, &u);
  return static_cast<double>(u.ru_maxrss) / 1024.0;
}

// Runs f once; returns {ms, GFLOP}.
template <class F>
std::pair<double, double> measure(F&& f) {
  const auto f0 = kernels::flop_counter().load();
  const auto t0 = Clock::now();
  f();
  const double ms = ms_since(t0);
  return {ms, static_cast<double>(kernels::flop_counter().load() - f0) * 1e-9};
}

nlohmann::json figure(std::pair<double, double> m) {
  return {{"ms", m.first}, {"gflop", m.second}, {"gflop_per_s", m.second / (m.first * 1e-3)}};
}

// hunyuan3d-paint-v2-0/unet/config.json (README of the golden set: the official SD2 UNet).
UNetConfig paint_unet() {
  UNetConfig c;  // defaults are SD2's
  c.in_channels = 4;
  return c;
}

Tensor filled(const Shape& s, float v) {
  Tensor t(s);
  for (auto& x : t.span()) x = v;
  return t;
}

bool wants(const std::string& parts, const char* p) {
  return ("," + parts + ",").find(std::string(",") + p + ",") != std::string::npos;
}

struct PrecisionRun {
  std::string name;
  WeightStorage storage = WeightStorage::kF32;
  double vae_encode_ms_per_image = 0, vae_decode_ms_per_image = 0;
  double ref_ms[2] = {0, 0}, step_ms[2] = {0, 0};         // turbo, normal; step_ms: before
  double cond_ms[2] = {0, 0}, step_after_ms[2] = {0, 0};  // the per-texture projections
  double partial_step_ms = 0;                             // normal: a DeepCache step
  double delight_step_ms = 0;
  double pbr_step_ms = 0;  // after the per-texture projections
  nlohmann::json doc;
};

void bench_vae(PrecisionRun& r, int views, int size) {
  const int lat = size / 8;
  SdVaeConfig vc;
  vc.block_out_channels = {128, 256, 512, 512};
  vc.norm_num_groups = 32;
  const std::string path =
      (std::filesystem::temp_directory_path() / "gen3d_bench_vae.safetensors").string();
  {
    std::vector<Tensor> owned;
    std::vector<std::pair<std::string, const Tensor*>> list;
    nn::RandomParams rnd(nn::uniform_init(7));
    const auto expected = SdVae::expected_tensors(vc);
    owned.reserve(expected.size());
    for (const auto& [name, shape] : expected) owned.push_back(rnd.take(name, shape));
    for (std::size_t i = 0; i < expected.size(); ++i)
      list.emplace_back(expected[i].first, &owned[i]);
    write_safetensors(path, list, DType::kF16);
  }
  std::unique_ptr<SdVae> vae;
  {
    WeightMap wm(SafetensorsFile::open(path), "");
    vae = SdVae::load(vc, wm, r.storage);
    wm.finish("SD VAE");
  }
  std::filesystem::remove(path);
  const Tensor images = filled(Shape{views, size, size, 3}, 0.5f);
  (void)vae->encode(images);  // warm-up (primitives, layouts), untimed
  (void)vae->decode(filled(Shape{views, lat, lat, 4}, 0.1f));
  const auto enc = measure([&] { (void)vae->encode(images); });
  const Tensor z = filled(Shape{views, lat, lat, 4}, 0.1f);
  const auto dec = measure([&] { (void)vae->decode(z); });
  r.vae_encode_ms_per_image = enc.first / views;
  r.vae_decode_ms_per_image = dec.first / views;
  r.doc["vae"] = {{"parameters", vae->num_parameters()},
                  {"encode", figure(enc)},
                  {"decode", figure(dec)},
                  {"encode_ms_per_image", r.vae_encode_ms_per_image},
                  {"decode_ms_per_image", r.vae_decode_ms_per_image}};
  std::fprintf(stderr, "[%s] vae: encode %.0f ms, decode %.0f ms for %d views\n", r.name.c_str(),
               enc.first, dec.first, views);
}

double median(std::vector<double> v) {
  std::sort(v.begin(), v.end());
  const std::size_t n = v.size();
  return n == 0 ? 0.0 : n % 2 ? v[n / 2] : 0.5 * (v[n / 2 - 1] + v[n / 2]);
}

nlohmann::json timings(const std::vector<std::pair<double, double>>& m) {
  std::vector<double> ms;
  for (const auto& x : m) ms.push_back(x.first);
  const double med = median(ms);
  const double gflop = m.empty() ? 0.0 : m.front().second;
  return {{"ms_median", med},
          {"ms_min", *std::min_element(ms.begin(), ms.end())},
          {"ms_max", *std::max_element(ms.begin(), ms.end())},
          {"ms_all", ms},
          {"gflop", gflop},
          {"gflop_per_s", gflop / (med * 1e-3)}};
}

double median_ms(const std::vector<std::pair<double, double>>& m) {
  std::vector<double> ms;
  for (const auto& x : m) ms.push_back(x.first);
  return median(ms);
}

// One UNet2.5D step before and after the per-texture projections (the step that re-projects the
// reference features and the prompt every time, MultiviewUNet::forward on RefFeatures, against
// the one on MultiviewConditions), alternated `reps` times (A B, B A, ...); in normal mode also
// the DeepCache step that reuses the deep features of a full one (UNetFeatureCache).
void bench_mvunet(PrecisionRun& r, const MultiviewUNet& net, const char* mode, int views, int size,
                  int reps) {
  const int lat = size / 8;
  std::vector<int> cams;
  const int azim[6] = {0, 90, 180, 270, 0, 180}, elev[6] = {0, 0, 0, 0, 90, -90};
  for (int v = 0; v < views; ++v)
    cams.push_back(MultiviewUNet::camera_id(azim[v % 6], elev[v % 6]));
  const bool cfg = std::string(mode) == "normal";
  const int B = cfg ? 2 : 1;
  const Tensor ref_lat = filled(Shape{B, lat, lat, 4}, 0.1f);
  Tensor rows = filled(Shape{B * views, lat, lat, 4}, 0.1f);
  std::vector<int> cam_rows;
  for (int b = 0; b < B; ++b) cam_rows.insert(cam_rows.end(), cams.begin(), cams.end());
  const std::vector<float> ref_scale = cfg ? std::vector<float>{0.f, 1.f} : std::vector<float>{1.f};
  Tensor text(Shape{B, net.learned_text_gen().dim(1), net.learned_text_gen().dim(2)});
  // One untimed run at the same shapes first: bf16 creates its oneDNN primitives (and reorders a
  // weight whose preferred layout differs for this shape) on first use.
  {
    RefFeatures warm = net.reference_features(ref_lat, 1, net.learned_text_ref());
    const MultiviewConditions c = net.conditions(text, warm, ref_scale);
    (void)net.forward(rows, rows, rows, 500.0f, cam_rows, c, views);
  }
  RefFeatures ref;
  const auto rf =
      measure([&] { ref = net.reference_features(ref_lat, 1, net.learned_text_ref()); });
  MultiviewConditions cond;
  const auto cd = measure([&] { cond = net.conditions(text, ref, ref_scale); });
  std::vector<std::pair<double, double>> before, after, partial;
  UNetFeatureCache cache;
  const auto step_before = [&] {
    before.push_back(measure([&] {
      (void)net.forward(rows, rows, rows, 500.0f, text, cam_rows, ref, ref_scale, views);
    }));
  };
  const auto step_after = [&] {
    after.push_back(measure([&] {
      (void)net.forward(rows, rows, rows, 500.0f, cam_rows, cond, views, cfg ? &cache : nullptr);
    }));
  };
  for (int rep = 0; rep < reps; ++rep) {
    if (rep % 2 == 0) {
      step_before();
      step_after();
    } else {
      step_after();
      step_before();
    }
    if (cfg)
      partial.push_back(measure([&] {
        (void)net.forward(rows, rows, rows, 480.0f, cam_rows, cond, views, &cache, true);
      }));
  }
  const int steps = cfg ? 30 : 10;
  r.ref_ms[cfg] = rf.first;
  r.cond_ms[cfg] = cd.first;
  r.step_ms[cfg] = median_ms(before);
  r.step_after_ms[cfg] = median_ms(after);
  if (cfg) r.partial_step_ms = median_ms(partial);
  auto& d = r.doc["mvunet"][mode];
  d = {{"rows", B * views},
       {"reps", reps},
       {"reference_unet", figure(rf)},
       {"conditions", figure(cd)},
       {"step_before", timings(before)},
       {"step", timings(after)},
       {"steps", steps},
       {"tflop_per_texture_unet_before", (rf.second + steps * before.front().second) * 1e-3},
       {"tflop_per_texture_unet", (rf.second + cd.second + steps * after.front().second) * 1e-3}};
  if (cfg) d["deep_cache_step"] = timings(partial);
  std::fprintf(stderr,
               "[%s] %s: reference %.0f ms, conditions %.0f ms, step before %.0f ms (%.1f "
               "GFLOP), after %.0f ms (%.1f GFLOP)",
               r.name.c_str(), mode, rf.first, cd.first, r.step_ms[cfg], before.front().second,
               r.step_after_ms[cfg], after.front().second);
  if (cfg)
    std::fprintf(stderr, ", deep-cache step %.0f ms (%.1f GFLOP)", r.partial_step_ms,
                 partial.front().second);
  std::fprintf(stderr, "\n");
}

// GFLOP/s of one large GEMM through nn::Linear (the path every UNet projection and 1×1 conv
// takes) in the run's precision: the roof the network's GFLOP/s is read against.
double matmul_roof(const PrecisionRun& r) {
  constexpr std::int64_t M = 8192, K = 1280, N = 1280;
  nn::RandomParams rnd(nn::uniform_init(17), r.storage);
  nn::Linear lin;
  lin.load(rnd, "roof", K, N);
  const Tensor x = filled(Shape{M, K}, 0.1f);
  Tensor y(Shape{M, N});
  lin(y.data(), x.data(), M);  // warm-up (primitive, packing), untimed
  double best = 0;
  for (int rep = 0; rep < 3; ++rep) {
    const auto m = measure([&] { lin(y.data(), x.data(), M); });
    best = std::max(best, m.second / (m.first * 1e-3));
  }
  return best;
}

// The 2.1 PBR UNet2.5D at the official call: CFG rows [uncond (ref_scale 0, DINO zeros), ref
// (ref_scale 1, DINO zeros), full], 2 materials, N views; 257 DINOv2-giant tokens; position maps
// with a disc of geometry on a white background.
void bench_pbr(PrecisionRun& r, int views, int size, int reps) {
  const int lat = size / 8;
  constexpr int R = 3, M = PbrUNet::kMaterials;
  // The roof is measured before and after the network (the better of the two), so a change of
  // load on shared cores during the run shows as a gap between them.
  const double roof_before = matmul_roof(r);
  const auto t0 = Clock::now();
  const auto net = PbrUNet::random(paint_unet(), 21, 77, 1536, r.storage);
  const double init_ms = ms_since(t0);
  const double rss_load = rss_mb();

  std::vector<std::uint16_t> pos(static_cast<std::size_t>(views) * 3 * size * size);
  for (int v = 0; v < views; ++v)
    for (int y = 0; y < size; ++y)
      for (int x = 0; x < size; ++x) {
        const double dx = (x + 0.5) / size - 0.5, dy = (y + 0.5) / size - 0.5;
        const bool in = dx * dx + dy * dy < 0.16;
        for (int c = 0; c < 3; ++c) {
          const float val = in ? static_cast<float>(0.5 + 0.4 * (c == 0   ? dx
                                                                 : c == 1 ? dy
                                                                          : dx * dy))
                               : 1.0f;
          pos[((static_cast<std::size_t>(v) * 3 + c) * size + y) * size + x] = float_to_half(val);
        }
      }
  HalfPositionMaps maps;
  maps.data = pos;
  maps.batch = 1;
  maps.views = views;
  maps.height = size;
  maps.width = size;
  const Tensor ref_lat = filled(Shape{1, lat, lat, 4}, 0.1f);
  Tensor dino(Shape{R, 257, 1536});
  for (std::int64_t i = 2 * 257 * 1536; i < dino.numel(); ++i) dino.data()[i] = 0.01f;
  const Tensor sample = filled(Shape{R * M * views, lat, lat, 4}, 0.1f);
  const Tensor maps_lat = filled(Shape{views, lat, lat, 4}, 0.1f);
  const Tensor text = net->learned_prompt();
  const std::vector<float> ref_scale{0.f, 1.f, 1.f};

  // One untimed run at the same shapes first (bf16 primitives and weight layouts), both ways.
  {
    PbrCondition warm = net->condition(ref_lat, 1, dino, maps, lat);
    (void)net->forward(sample, maps_lat, maps_lat, 500.0f, text, warm, ref_scale);
    net->project(warm, text, ref_scale);
    (void)net->forward(sample, maps_lat, maps_lat, 500.0f, text, warm, ref_scale);
  }
  // `cond` re-projects the reference features, the prompt and the DINO tokens in every step (the
  // step before), `once` reads the keys / values projected once per texture (after).
  PbrCondition cond;
  const auto rf = measure([&] { cond.ref = net->reference_features(ref_lat, 1); });
  const auto cd = measure([&] {
    cond.dino = net->project_dino(dino);
    net->prepare_positions(cond, maps, lat);
  });
  PbrCondition once = cond;
  const auto pj = measure([&] { net->project(once, text, ref_scale); });
  const double projected_mb = static_cast<double>(once.projected.bytes()) / (1024.0 * 1024.0);
  once.ref = RefFeatures();
  once.dino = Tensor();
  std::vector<std::pair<double, double>> before, after;
  const auto step_before = [&] {
    before.push_back(measure(
        [&] { (void)net->forward(sample, maps_lat, maps_lat, 500.0f, text, cond, ref_scale); }));
  };
  const auto step_after = [&] {
    after.push_back(measure(
        [&] { (void)net->forward(sample, maps_lat, maps_lat, 500.0f, text, once, ref_scale); }));
  };
  for (int rep = 0; rep < reps; ++rep) {
    if (rep % 2 == 0) {
      step_before();
      step_after();
    } else {
      step_after();
      step_before();
    }
  }
  const double st_ms = median_ms(after), st_gflop = after.front().second;
  const double gps = st_gflop / (st_ms * 1e-3);
  const double roof_after = matmul_roof(r);
  const double roof = std::max(roof_before, roof_after);
  r.pbr_step_ms = st_ms;
  constexpr int steps = 15;  // the official UniPC run
  r.doc["pbr_unet"] = {
      {"parameters", net->num_parameters()},
      {"init_ms", init_ms},
      {"rss_after_load_mb", rss_load},
      {"rows", R * M * views},
      {"reps", reps},
      {"matmul_roof_gflop_per_s", roof},
      {"matmul_roof_before_after", {roof_before, roof_after}},
      {"reference_unet", figure(rf)},
      {"dino_and_positions", figure(cd)},
      {"projections", figure(pj)},
      {"projections_mib", projected_mb},
      {"step_before", timings(before)},
      {"step", timings(after)},
      {"step_gflop_saved", before.front().second - st_gflop},
      {"step_fraction_of_roof", roof > 0 ? gps / roof : 0.0},
      {"steps", steps},
      {"minutes_for_steps_before", (rf.first + cd.first + steps * median_ms(before)) / 60000.0},
      {"minutes_for_steps", (rf.first + cd.first + pj.first + steps * st_ms) / 60000.0}};
  std::fprintf(stderr,
               "[%s] pbr: roof %.0f GFLOP/s; reference %.0f ms, condition %.0f ms, projections "
               "%.0f ms (%.1f GFLOP, %.1f MiB); step before %.0f ms (%.1f GFLOP), after %.0f ms "
               "(%.1f GFLOP, %.0f GFLOP/s = %.0f%% of the roof)\n",
               r.name.c_str(), roof, rf.first, cd.first, pj.first, pj.second, projected_mb,
               median_ms(before), before.front().second, st_ms, st_gflop, gps,
               roof > 0 ? 100 * gps / roof : 0.0);
}

void bench_delight(PrecisionRun& r, int size) {
  const int lat = size / 8;
  UNetConfig dc = paint_unet();
  dc.in_channels = 8;
  nn::RandomParams rnd(nn::uniform_init(13), r.storage);
  const UNet2DCondition unet = UNet2DCondition::load(dc, rnd);
  const Tensor x = filled(Shape{1, lat, lat, 8}, 0.1f);
  const Tensor text(Shape{1, 77, dc.cross_attention_dim});
  const std::vector<float> t{500.0f};
  (void)unet.forward(x, t, text);  // warm-up (primitives, layouts), untimed
  const auto st = measure([&] { (void)unet.forward(x, t, text); });
  r.delight_step_ms = st.first;
  r.doc["delight"] = {{"parameters", unet.num_parameters()},
                      {"step", figure(st)},
                      {"minutes_for_50_steps", 50 * st.first / 60000.0}};
  std::fprintf(stderr, "[%s] delight: step %.0f ms\n", r.name.c_str(), st.first);
}

}  // namespace

int main(int argc, char** argv) {
  kernels::passive_omp_wait(argv);
  const int views = argc > 1 ? std::max(1, std::atoi(argv[1])) : 6;
  const int size = argc > 2 ? std::max(64, std::atoi(argv[2])) : 512;
  const std::string parts = argc > 3 ? argv[3] : "vae,turbo,normal,delight";
  const std::string precisions = argc > 4 ? argv[4] : "auto";
  const int reps = argc > 5 ? std::max(1, std::atoi(argv[5])) : 1;

  std::vector<PrecisionRun> runs;
  {
    std::string item;
    for (std::size_t i = 0; i <= precisions.size(); ++i) {
      if (i == precisions.size() || precisions[i] == ',') {
        const Precision p = resolve_precision(parse_precision(item));
        PrecisionRun r;
        r.name = std::string(precision_name(p));
        r.storage = storage_for(p);
        runs.push_back(std::move(r));
        item.clear();
      } else {
        item += precisions[i];
      }
    }
  }

  nlohmann::json doc;
  doc["views"] = views;
  doc["size"] = size;
  doc["threads"] = tbb::info::default_concurrency();
  doc["interleaved"] = runs.size() > 1;

  if (wants(parts, "vae"))
    for (PrecisionRun& r : runs) bench_vae(r, views, size);
  if (wants(parts, "turbo") || wants(parts, "normal")) {
    for (PrecisionRun& r : runs) {
      const auto t0 = Clock::now();
      const auto net = MultiviewUNet::random(paint_unet(), 11, 77, r.storage);
      r.doc["mvunet"]["parameters"] = net->num_parameters();
      r.doc["mvunet"]["init_ms"] = ms_since(t0);
      r.doc["mvunet"]["rss_after_load_mb"] = rss_mb();
      for (const char* mode : {"turbo", "normal"})
        if (wants(parts, mode)) bench_mvunet(r, *net, mode, views, size, reps);
    }
  }
  if (wants(parts, "delight"))
    for (PrecisionRun& r : runs) bench_delight(r, size);
  if (wants(parts, "pbr"))
    for (PrecisionRun& r : runs) bench_pbr(r, views, size, reps);

  for (PrecisionRun& r : runs) {
    // A texture: VAE encodes (1 reference + 2N maps), the reference UNet, the steps, the decode
    // of N views, plus delighting (50 delight steps); parts not run count as 0 (flagged).
    const double enc_ms = (1 + 2 * views) * r.vae_encode_ms_per_image;
    const double dec_ms = views * r.vae_decode_ms_per_image;
    const double delight_ms = 50 * r.delight_step_ms;
    for (int cfg = 0; cfg < 2; ++cfg) {
      if (r.step_ms[cfg] <= 0) continue;
      const int steps = cfg ? 30 : 10;
      const double fixed = enc_ms + r.ref_ms[cfg] + dec_ms + delight_ms;
      const double before = fixed + steps * r.step_ms[cfg];
      const double after = fixed + r.cond_ms[cfg] + steps * r.step_after_ms[cfg];
      const char* mode = cfg ? "normal" : "turbo";
      r.doc["minutes_per_texture"][mode] = {{"before", before / 60000.0},
                                            {"after", after / 60000.0}};
      std::fprintf(stderr,
                   "[%s] %s texture: %.2f min before, %.2f min after (delighting %s, VAE %s)\n",
                   r.name.c_str(), mode, before / 60000.0, after / 60000.0,
                   delight_ms > 0 ? "included" : "not run", enc_ms > 0 ? "included" : "not run");
      if (cfg && r.partial_step_ms > 0)
        for (const int n : {2, 3, 5}) {
          const int full = (steps + n - 1) / n;  // steps 0, n, 2n, ...
          const double t = fixed + r.cond_ms[cfg] + full * r.step_after_ms[cfg] +
                           (steps - full) * r.partial_step_ms;
          r.doc["minutes_per_texture"]["normal_deep_cache"][std::to_string(n)] = t / 60000.0;
          std::fprintf(stderr, "[%s] normal texture, cache_interval %d: %.2f min\n", r.name.c_str(),
                       n, t / 60000.0);
        }
    }
    r.doc["minutes_per_texture"]["vae_included"] = enc_ms > 0;
    r.doc["minutes_per_texture"]["delight_included"] = delight_ms > 0;
    doc["precision"][r.name] = r.doc;
  }
  if (runs.size() > 1) {
    const PrecisionRun &a = runs.front(), &b = runs.back();
    auto ratio = [](double x, double y) { return y > 0 ? x / y : 0.0; };
    doc["speedup"] = {{"of", b.name + " over " + a.name},
                      {"vae_decode", ratio(a.vae_decode_ms_per_image, b.vae_decode_ms_per_image)},
                      {"vae_encode", ratio(a.vae_encode_ms_per_image, b.vae_encode_ms_per_image)},
                      {"turbo_step", ratio(a.step_after_ms[0], b.step_after_ms[0])},
                      {"normal_step", ratio(a.step_after_ms[1], b.step_after_ms[1])},
                      {"delight_step", ratio(a.delight_step_ms, b.delight_step_ms)},
                      {"pbr_step", ratio(a.pbr_step_ms, b.pbr_step_ms)}};
  }
  doc["peak_rss_mb"] = peak_rss_mb();
  std::printf("%s\n", doc.dump(2).c_str());
  return 0;
}
