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
// Run with OMP_WAIT_POLICY=passive (as gen3d sets it) so oneDNN's threads do not spin.

#include <tbb/info.h>

#include <algorithm>
#include <chrono>
#include <cmath>
#include <cstdio>
#include <cstdlib>
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

}  // namespace

int main(int argc, char** argv) {
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
    if (p != "fp32" && p != "bf16") {
      std::fprintf(stderr, "unknown precision %s (fp32, bf16)\n", p.c_str());
      return 2;
    }
    const WeightStorage storage = p == "bf16" ? WeightStorage::kBF16 : WeightStorage::kF32;
    auto t0 = Clock::now();
    const ShapeVAE vae = ShapeVAE::random(config, 2002, storage);
    const double init_s = seconds_since(t0);
    t0 = Clock::now();
    const Tensor decoded = vae.decode(latents);
    const double transformer_s = seconds_since(t0);
    const std::shared_ptr<const Field> field = vae.geometry_field(decoded, 0);

    nlohmann::json run = {{"precision", p},
                          {"baseline", p == "fp32"},
                          {"init_s", init_s},
                          {"latent_transformer_s", transformer_s}};
    // Dense: one batch through evaluate().
    t0 = Clock::now();
    field->evaluate(xyz.data(), dense_points, out.data());
    const double dense_s = seconds_since(t0);
    nlohmann::json rates = {{"dense", static_cast<double>(dense_points) / dense_s}};
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
