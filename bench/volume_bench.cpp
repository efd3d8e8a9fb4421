// Shape decoding at the official size: a full-size random ShapeVAE (3072 latents, width 1024,
// 16 heads, 16 layers) in each precision. Decoding its field densely at R = 384 (57 M points)
// would take hours on a CPU, so each decoder is measured as a rate and a count:
//  * rate: points per second of the full-size field through the decoder's own code path (dense:
//    one batch of points; hierarchical and FlashVDM: a whole small decode, R 32 from 16, whose
//    points are divided into its time, key selection included);
//  * count: the points that decoder queries at R = 384 on a smooth closed surface (the analytic
//    sphere of shape_bench, logit = 10 * sdf, decoded exactly: the band rule and the level
//    schedule set the count, not the network).
// The latent transformer (vae.decode) is timed once per precision. Extrapolated decode time =
// transformer + count / rate. Prints one JSON document.
//
// Usage: gen3d_volume_bench [precisions=fp32,bf16] [dense_points=16384] [resolution=384]
//        gen3d_volume_bench rates [precision=bf16] [rounds=5] [chunk=8000]
// precisions: fp32, bf16, int8, in the order given; a precision may repeat (bf16,int8,bf16,int8
// interleaves the two for medians on a shared machine).
// `rates` compares the two geometry-decoder paths of a FlashVDM decode in one process, rounds
// alternating: the selected-key path on one chunk of the last level of an R 384 FlashVDM decode
// of the sphere (its buckets as attention groups, the spec's stride and top-k) and the dense path
// on the same points; points/s and GFLOP/s (FLOPs counted per point from the decoder's sizes)
// per round (wall clock, and per CPU second of the process: steadier on a shared machine),
// medians and ranges. The field runs on synthetic decoded latents (the latent
// transformer is not timed there).
// Run with OMP_WAIT_POLICY=passive (as gen3d sets it) so oneDNN's threads do not spin.

#include <sys/resource.h>
#include <tbb/info.h>

#include <algorithm>
#include <chrono>
#include <cmath>
#include <cstdio>
#include <cstdlib>
#include <span>
#include <string>
#include <vector>

#include <nlohmann/json.hpp>

#include "models/shape/field.h"
#include "models/shape/shape_vae.h"
#include "models/shape/volume_decoder.h"

namespace {

using namespace gen3d::models;
using Clock = std::chrono::steady_clock;

double seconds_since(Clock::time_point t0) {
  return std::chrono::duration<double>(Clock::now() - t0).count();
}

bool known_precision(const std::string& p) {
  return p == "fp32" || p == "bf16" || p == "int8";
}
WeightStorage storage_of(const std::string& p) {
  return p == "int8"   ? WeightStorage::kInt8
         : p == "bf16" ? WeightStorage::kBF16
                       : WeightStorage::kF32;
}

std::vector<std::string> split(const std::string& s) {
  std::vector<std::string> out;
  size_t start = 0;
  while (start <= s.size()) {
    const size_t comma = s.find(',', start);
    out.push_back(s.substr(start, comma - start));
    if (comma == std::string::npos) break;
    start = comma + 1;
  }
  return out;
}

// Records the attention groups of every evaluate_groups call and answers with the sphere.
class GroupRecorder final : public Field {
 public:
  struct Call {
    std::vector<float> xyz;
    std::vector<std::int64_t> offsets;
  };
  explicit GroupRecorder(const Field& surface) : surface_(surface) {}
  void evaluate(const float* xyz, std::int64_t n, float* out) const override {
    surface_.evaluate(xyz, n, out);
  }
  void evaluate_groups(const float* xyz, std::span<const std::int64_t> offsets, const KeySelection&,
                       float* out) const override {
    calls.push_back({std::vector<float>(xyz, xyz + 3 * offsets.back()),
                     std::vector<std::int64_t>(offsets.begin(), offsets.end())});
    surface_.evaluate(xyz, offsets.back(), out);
  }
  std::int64_t key_count() const override { return 3072; }
  mutable std::vector<Call> calls;

 private:
  const Field& surface_;
};

// CPU seconds of this process (every thread, user + system).
double cpu_seconds() {
  rusage u{};
  getrusage(RUSAGE_SELF, &u);
  return static_cast<double>(u.ru_utime.tv_sec + u.ru_stime.tv_sec) +
         1e-6 * static_cast<double>(u.ru_utime.tv_usec + u.ru_stime.tv_usec);
}

double median(std::vector<double> v) {
  std::sort(v.begin(), v.end());
  const size_t n = v.size();
  return n % 2 ? v[n / 2] : 0.5 * (v[n / 2 - 1] + v[n / 2]);
}

// The selected-key path against the dense path on the same points, alternating (see the top).
int rates_main(const std::string& precision, int rounds, std::int64_t chunk) {
  if (!known_precision(precision)) {
    std::fprintf(stderr, "unknown precision %s (fp32, bf16, int8)\n", precision.c_str());
    return 2;
  }
  const ShapeVAEConfig config;
  const AnalyticField sphere = sphere_field(0.5, 10.0);
  const GroupRecorder recorder(sphere);
  VolumeDecodeOptions o;
  o.method = VolumeMethod::kFlashVDM;
  o.resolution = 384;
  o.num_chunks = chunk;
  VolumeDecodeStats st;
  decode_volume(recorder, o, &st);
  // Group sizes over the whole decode (points in groups of each size class).
  std::vector<std::int64_t> by_size(8, 0);
  for (const auto& c : recorder.calls)
    for (size_t g = 0; g + 1 < c.offsets.size(); ++g) {
      const std::int64_t n = c.offsets[g + 1] - c.offsets[g];
      size_t cls = 0;
      for (std::int64_t lim = 256; n >= lim && cls < 7; lim *= 4) ++cls;
      by_size[cls] += n;
    }
  std::fprintf(stderr, "%zu calls; points in groups of <256, <1Ki, <4Ki, <16Ki, <64Ki, ...:",
               recorder.calls.size());
  for (std::int64_t n : by_size) std::fprintf(stderr, " %lld", static_cast<long long>(n));
  std::fprintf(stderr, "\n");
  if (rounds <= 0) return 0;
  // The chunk with the most groups (the smallest buckets) that is not level 0.
  size_t pick = 0;
  for (size_t c = 0; c < recorder.calls.size(); ++c)
    if (recorder.calls[c].offsets.size() > recorder.calls[pick].offsets.size()) pick = c;
  const GroupRecorder::Call& call = recorder.calls[pick];
  const std::int64_t P = call.offsets.back();
  const std::int64_t groups = static_cast<std::int64_t>(call.offsets.size()) - 1;

  const ShapeVAE vae = ShapeVAE::random(config, 2002, storage_of(precision));
  Tensor decoded({1, config.num_latents, config.width});
  for (std::int64_t i = 0; i < decoded.numel(); ++i)
    decoded.data()[i] = static_cast<float>(std::sin(0.37 * static_cast<double>(i)));
  const std::shared_ptr<const Field> field = vae.geometry_field(decoded, 0);
  const std::int64_t N = config.num_latents, K = flashvdm_top_k(N);
  const double W = config.geo_width(), M = config.geo_decoder_mlp_expand_ratio * W;
  // Multiply-adds per point x 2: query_proj, c_q, c_proj, MLP, output_proj; attention 2 x 2 W
  // per key.
  const double linear_flop = 2.0 * (config.fourier_dim() * W + 2 * W * W + 2 * W * M + W);
  const double flop_dense = linear_flop + 4.0 * W * static_cast<double>(N);
  const double flop_selected = linear_flop + 4.0 * W * static_cast<double>(K);

  std::vector<float> out(static_cast<size_t>(P));
  const KeySelection sel{K, 50};
  std::vector<double> dense_rate, sel_rate, dense_cpu_rate, sel_cpu_rate;
  nlohmann::json per_round = nlohmann::json::array();
  field->evaluate_groups(call.xyz.data(), call.offsets, sel, out.data());  // warm-up
  for (int r = 0; r < rounds; ++r) {
    auto t0 = Clock::now();
    double c0 = cpu_seconds();
    field->evaluate_groups(call.xyz.data(), call.offsets, sel, out.data());
    const double ts = seconds_since(t0), cs = cpu_seconds() - c0;
    t0 = Clock::now();
    c0 = cpu_seconds();
    field->evaluate(call.xyz.data(), P, out.data());
    const double td = seconds_since(t0), cd = cpu_seconds() - c0;
    sel_rate.push_back(static_cast<double>(P) / ts);
    dense_rate.push_back(static_cast<double>(P) / td);
    sel_cpu_rate.push_back(static_cast<double>(P) / cs);
    dense_cpu_rate.push_back(static_cast<double>(P) / cd);
    per_round.push_back(
        {{"selected_points_per_s", sel_rate.back()},
         {"dense_points_per_s", dense_rate.back()},
         {"selected_points_per_cpu_s", sel_cpu_rate.back()},
         {"dense_points_per_cpu_s", dense_cpu_rate.back()},
         {"gflops_ratio", sel_rate.back() * flop_selected / (dense_rate.back() * flop_dense)},
         {"gflops_ratio_cpu",
          sel_cpu_rate.back() * flop_selected / (dense_cpu_rate.back() * flop_dense)}});
    std::fprintf(stderr, "round %d: selected %.0f points/s, dense %.0f points/s\n", r,
                 sel_rate.back(), dense_rate.back());
  }
  auto summary = [](const std::vector<double>& v, double flop) {
    return nlohmann::json{{"points_per_s", median(v)},
                          {"min", *std::min_element(v.begin(), v.end())},
                          {"max", *std::max_element(v.begin(), v.end())},
                          {"gflop_per_s", median(v) * flop * 1e-9},
                          {"mflop_per_point", flop * 1e-6}};
  };
  std::vector<double> ratios, cpu_ratios;
  for (const auto& j : per_round) {
    ratios.push_back(j["gflops_ratio"].get<double>());
    cpu_ratios.push_back(j["gflops_ratio_cpu"].get<double>());
  }
  nlohmann::json doc = {{"bench", "volume-rates"},
                        {"precision", precision},
                        {"threads", tbb::info::default_concurrency()},
                        {"chunk_points", P},
                        {"chunk_groups", groups},
                        {"top_k", K},
                        {"selected", summary(sel_rate, flop_selected)},
                        {"dense", summary(dense_rate, flop_dense)},
                        {"selected_cpu", summary(sel_cpu_rate, flop_selected)},
                        {"dense_cpu", summary(dense_cpu_rate, flop_dense)},
                        {"gflops_ratio_median", median(ratios)},
                        {"gflops_ratio_cpu_median", median(cpu_ratios)},
                        {"rounds", per_round}};
  std::printf("%s\n", doc.dump(2).c_str());
  return 0;
}

}  // namespace

int main(int argc, char** argv) {
  if (argc > 1 && std::string(argv[1]) == "rates")
    return rates_main(argc > 2 ? argv[2] : "bf16", argc > 3 ? std::max(0, std::atoi(argv[3])) : 5,
                      argc > 4 ? std::max(256L, std::atol(argv[4])) : 8000);
  const auto precisions = split(argc > 1 ? argv[1] : "fp32,bf16");
  const std::int64_t dense_points = argc > 2 ? std::max(256L, std::atol(argv[2])) : 16384;
  const int resolution = argc > 3 ? std::max(32, std::atoi(argv[3])) : 384;

  nlohmann::json doc;
  const ShapeVAEConfig config;  // the official v2-0 ShapeVAE
  doc["config"] = {{"num_latents", config.num_latents},
                   {"width", config.width},
                   {"heads", config.heads},
                   {"layers", config.num_decoder_layers},
                   {"embed_dim", config.embed_dim},
                   {"num_freqs", config.num_freqs}};
  doc["threads"] = tbb::info::default_concurrency();
  doc["resolution"] = resolution;

  // Points each decoder queries at the resolution, on the sphere.
  const AnalyticField sphere = sphere_field(0.5, 10.0);
  nlohmann::json counts;
  for (VolumeMethod m :
       {VolumeMethod::kDense, VolumeMethod::kHierarchical, VolumeMethod::kFlashVDM}) {
    VolumeDecodeOptions o;
    o.method = m;
    o.resolution = resolution;
    VolumeDecodeStats st;
    decode_volume(sphere, o, &st);
    counts[volume_method_name(m)] = st.points_queried;
  }
  doc["points_at_resolution"] = counts;
  std::fprintf(stderr, "points at R %d: %s\n", resolution, counts.dump().c_str());

  // Points spread over the box, the same for every precision.
  std::vector<float> xyz(static_cast<size_t>(dense_points) * 3);
  for (size_t i = 0; i < xyz.size(); ++i)
    xyz[i] =
        static_cast<float>(std::fmod(0.6180339887 * static_cast<double>(i + 1) * 7.1, 2.02) - 1.01);
  std::vector<float> out(static_cast<size_t>(dense_points));

  Tensor latents({1, config.num_latents, config.embed_dim});
  for (std::int64_t i = 0; i < latents.numel(); ++i)
    latents.data()[i] = static_cast<float>(std::sin(0.37 * static_cast<double>(i)));

  doc["runs"] = nlohmann::json::array();
  for (const std::string& p : precisions) {
    if (!known_precision(p)) {
      std::fprintf(stderr, "unknown precision %s (fp32, bf16, int8)\n", p.c_str());
      return 2;
    }
    auto t0 = Clock::now();
    const ShapeVAE vae = ShapeVAE::random(config, 2002, storage_of(p));
    const double init_s = seconds_since(t0);
    t0 = Clock::now();
    double c0 = cpu_seconds();
    const Tensor decoded = vae.decode(latents);
    const double transformer_s = seconds_since(t0), transformer_cpu_s = cpu_seconds() - c0;
    const std::shared_ptr<const Field> field = vae.geometry_field(decoded, 0);

    nlohmann::json run = {{"precision", p},
                          {"baseline", p == "fp32"},
                          {"init_s", init_s},
                          {"latent_transformer_s", transformer_s},
                          {"latent_transformer_cpu_s", transformer_cpu_s}};
    // Dense: one batch through evaluate().
    t0 = Clock::now();
    c0 = cpu_seconds();
    field->evaluate(xyz.data(), dense_points, out.data());
    const double dense_s = seconds_since(t0), dense_cpu_s = cpu_seconds() - c0;
    nlohmann::json rates = {{"dense", static_cast<double>(dense_points) / dense_s}};
    run["dense_points_per_cpu_s"] = static_cast<double>(dense_points) / dense_cpu_s;
    // Hierarchical and FlashVDM: a whole small decode.
    for (VolumeMethod m : {VolumeMethod::kHierarchical, VolumeMethod::kFlashVDM}) {
      VolumeDecodeOptions o;
      o.method = m;
      o.resolution = 32;
      o.min_resolution = 16;
      o.mini_grid_num = 2;
      VolumeDecodeStats st;
      t0 = Clock::now();
      decode_volume(*field, o, &st);
      const double s = seconds_since(t0);
      rates[volume_method_name(m)] = static_cast<double>(st.points_queried) / s;
    }
    run["points_per_s"] = rates;
    nlohmann::json decode;
    for (const auto& [method, rate] : rates.items()) {
      const double points = counts[method].get<double>();
      decode[method] = transformer_s + points / rate.get<double>();
    }
    run["extrapolated_decode_s"] = decode;
    std::fprintf(stderr, "%s: transformer %.1f s, points/s %s, decode at R %d %s s\n", p.c_str(),
                 transformer_s, rates.dump().c_str(), resolution, decode.dump().c_str());
    doc["runs"].push_back(run);
  }
  std::printf("%s\n", doc.dump(2).c_str());
  return 0;
}
