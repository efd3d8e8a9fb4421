// Texture-model benchmark at the official sizes with random weights: the Hunyuan3D-Paint UNet2.5D
// (SD2 UNet, 6 views at 512 px = 64×64 latents; its reference UNet), one denoising step in normal
// mode (CFG: 2 × 6 rows) and in turbo mode (6 rows), the SD VAE encode / decode of the views, and
// the delight UNet (8 input channels, 1 row). FLOPs are counted by the kernels (2 per
// multiply-add), so GFLOP/s is what ran. Minutes per texture are extrapolated from the measured
// parts: VAE encodes (1 reference + N normal + N position images), the reference UNet once, the
// steps, the VAE decode of N views. Prints one JSON document.
//
// Usage: gen3d_texmodels_bench [views=6] [size=512] [parts=vae,turbo,normal,delight]

#include <sys/resource.h>
#include <tbb/info.h>

#include <chrono>
#include <cstdio>
#include <cstdlib>
#include <filesystem>
#include <string>
#include <vector>

#include <nlohmann/json.hpp>

#include "models/core/safetensors.h"
#include "models/kernels/flops.h"
#include "models/nn/init.h"
#include "models/paint/mvunet.h"
#include "models/paint/sd_vae.h"
#include "models/paint/unet.h"

namespace {

using namespace gen3d::models;
using Clock = std::chrono::steady_clock;

double ms_since(Clock::time_point t0) {
  return std::chrono::duration<double, std::milli>(Clock::now() - t0).count();
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

}  // namespace

int main(int argc, char** argv) {
  const int views = argc > 1 ? std::max(1, std::atoi(argv[1])) : 6;
  const int size = argc > 2 ? std::max(64, std::atoi(argv[2])) : 512;
  const std::string parts = argc > 3 ? argv[3] : "vae,turbo,normal,delight";
  const int lat = size / 8;

  nlohmann::json doc;
  doc["views"] = views;
  doc["size"] = size;
  doc["threads"] = tbb::info::default_concurrency();

  // SD VAE (SD2: 128/256/512/512): random weights through a temporary safetensors file.
  std::unique_ptr<SdVae> vae;
  double vae_encode_ms_per_image = 0, vae_decode_ms_per_image = 0;
  if (wants(parts, "vae")) {
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
    {
      WeightMap wm(SafetensorsFile::open(path), "");
      vae = SdVae::load(vc, wm);
      wm.finish("SD VAE");
    }
    std::filesystem::remove(path);
    const Tensor images = filled(Shape{views, size, size, 3}, 0.5f);
    const auto enc = measure([&] { (void)vae->encode(images); });
    const Tensor z = filled(Shape{views, lat, lat, 4}, 0.1f);
    const auto dec = measure([&] { (void)vae->decode(z); });
    vae_encode_ms_per_image = enc.first / views;
    vae_decode_ms_per_image = dec.first / views;
    doc["vae"] = {{"parameters", vae->num_parameters()},
                  {"encode", figure(enc)},
                  {"decode", figure(dec)},
                  {"encode_ms_per_image", vae_encode_ms_per_image},
                  {"decode_ms_per_image", vae_decode_ms_per_image}};
    std::fprintf(stderr, "vae: encode %.0f ms, decode %.0f ms for %d views\n", enc.first, dec.first,
                 views);
    vae.reset();
  }

  // UNet2.5D (main + reference UNet), full size.
  if (wants(parts, "turbo") || wants(parts, "normal")) {
    const auto t0 = Clock::now();
    const auto net = MultiviewUNet::random(paint_unet(), 11);
    doc["mvunet"]["parameters"] = net->num_parameters();
    doc["mvunet"]["init_ms"] = ms_since(t0);
    const Tensor lat4 = filled(Shape{views, lat, lat, 4}, 0.1f);
    std::vector<int> cams;
    const int azim[6] = {0, 90, 180, 270, 0, 180}, elev[6] = {0, 0, 0, 0, 90, -90};
    for (int v = 0; v < views; ++v)
      cams.push_back(MultiviewUNet::camera_id(azim[v % 6], elev[v % 6]));
    for (const char* mode : {"turbo", "normal"}) {
      if (!wants(parts, mode)) continue;
      const bool cfg = std::string(mode) == "normal";
      const int B = cfg ? 2 : 1;
      const Tensor ref_lat = filled(Shape{B, lat, lat, 4}, 0.1f);
      RefFeatures ref;
      const auto rf =
          measure([&] { ref = net->reference_features(ref_lat, 1, net->learned_text_ref()); });
      Tensor rows = filled(Shape{B * views, lat, lat, 4}, 0.1f);
      std::vector<int> cam_rows;
      for (int b = 0; b < B; ++b) cam_rows.insert(cam_rows.end(), cams.begin(), cams.end());
      const std::vector<float> ref_scale =
          cfg ? std::vector<float>{0.f, 1.f} : std::vector<float>{1.f};
      Tensor text(Shape{B, net->learned_text_gen().dim(1), net->learned_text_gen().dim(2)});
      const auto st = measure([&] {
        (void)net->forward(rows, rows, rows, 500.0f, text, cam_rows, ref, ref_scale, views);
      });
      const int steps = cfg ? 30 : 10;
      const double enc_ms = (1 + 2 * views) * vae_encode_ms_per_image;
      const double dec_ms = views * vae_decode_ms_per_image;
      const double total_ms = enc_ms + rf.first + steps * st.first + dec_ms;
      doc["mvunet"][mode] = {{"rows", B * views},
                             {"reference_unet", figure(rf)},
                             {"step", figure(st)},
                             {"steps", steps},
                             {"tflop_per_texture_unet", (rf.second + steps * st.second) * 1e-3},
                             {"minutes_per_texture", total_ms / 60000.0},
                             {"vae_included", vae_encode_ms_per_image > 0}};
      std::fprintf(stderr, "%s: reference %.0f ms, step %.0f ms (%.0f GFLOP/s), %.1f min/texture\n",
                   mode, rf.first, st.first, st.second / (st.first * 1e-3), total_ms / 60000.0);
    }
  }

  // Delight UNet (InstructPix2Pix: 8 input channels), one row per step (guidance 1.0).
  if (wants(parts, "delight")) {
    UNetConfig dc = paint_unet();
    dc.in_channels = 8;
    nn::RandomParams rnd(nn::uniform_init(13));
    const UNet2DCondition unet = UNet2DCondition::load(dc, rnd);
    const Tensor x = filled(Shape{1, lat, lat, 8}, 0.1f);
    const Tensor text(Shape{1, 77, dc.cross_attention_dim});
    const std::vector<float> t{500.0f};
    const auto st = measure([&] { (void)unet.forward(x, t, text); });
    doc["delight"] = {{"parameters", unet.num_parameters()},
                      {"step", figure(st)},
                      {"minutes_for_50_steps", 50 * st.first / 60000.0}};
    std::fprintf(stderr, "delight: step %.0f ms\n", st.first);
  }
  doc["peak_rss_mb"] = peak_rss_mb();
  std::printf("%s\n", doc.dump(2).c_str());
  return 0;
}
