// Image-conditioner benchmark: ImageProcessorV2 preprocessing of a synthetic RGBA image, the
// DinoImageEncoder transform (512 -> 518 antialiased resize + normalize) and the DINOv2 forward
// pass with random weights, for a preset (default: giant, Hunyuan3D-2's encoder: hidden 1536,
// 40 layers, 24 heads, SwiGLU, 518 px -> 1370 tokens). Each weight storage is timed in the same
// run (f32 is the baseline). Prints one JSON document.
//
// Usage: gen3d_dinov2_bench [preset=giant] [repeats=2] [storages=f32,f16] [batch=1]
//   storages: f32 (baseline), f16 (weights stored f16, f32 compute), bf16 (the bf16 precision mode)
//   presets: giant, large (1024/24/16, MLP), base (768/12/12, MLP), small (384/12/6, MLP)

#include <tbb/info.h>

#include <algorithm>
#include <chrono>
#include <cmath>
#include <cstdio>
#include <cstdlib>
#include <string>
#include <vector>

#include <nlohmann/json.hpp>

#include "models/shape/dinov2.h"
#include "models/shape/image_preprocess.h"

namespace {

using namespace gen3d::models;
using Clock = std::chrono::steady_clock;

double ms_since(Clock::time_point t0) {
  return std::chrono::duration<double, std::milli>(Clock::now() - t0).count();
}

Dinov2Config preset(const std::string& name) {
  Dinov2Config c = Dinov2Config::giant();
  if (name == "giant") return c;
  c.use_swiglu_ffn = false;
  if (name == "large") {
    c.hidden_size = 1024;
    c.num_hidden_layers = 24;
    c.num_attention_heads = 16;
  } else if (name == "base") {
    c.hidden_size = 768;
    c.num_hidden_layers = 12;
    c.num_attention_heads = 12;
  } else if (name == "small") {
    c.hidden_size = 384;
    c.num_hidden_layers = 12;
    c.num_attention_heads = 6;
  } else {
    std::fprintf(stderr, "unknown preset %s (giant, large, base, small)\n", name.c_str());
    std::exit(2);
  }
  return c;
}

// A soft-edged coloured ellipse on transparent background, 640 x 480.
gen3d::image::ImageU8 synthetic_rgba() {
  gen3d::image::ImageU8 img(640, 480, 4, 0);
  for (int y = 0; y < img.height; ++y)
    for (int x = 0; x < img.width; ++x) {
      const double dx = (x - 330) / 200.0, dy = (y - 250) / 150.0;
      const double r = std::sqrt(dx * dx + dy * dy);
      std::uint8_t* p = img.row(y) + x * 4;
      p[0] = static_cast<std::uint8_t>(x * 255 / img.width);
      p[1] = static_cast<std::uint8_t>(y * 255 / img.height);
      p[2] = static_cast<std::uint8_t>((x + y) % 256);
      p[3] = static_cast<std::uint8_t>(std::clamp((1.05 - r) * 10.0, 0.0, 1.0) * 255);
    }
  return img;
}

}  // namespace

int main(int argc, char** argv) {
  const std::string preset_name = argc > 1 ? argv[1] : "giant";
  const int repeats = argc > 2 ? std::max(1, std::atoi(argv[2])) : 2;
  const std::string storages = argc > 3 ? argv[3] : "f32,f16";
  const int batch = argc > 4 ? std::max(1, std::atoi(argv[4])) : 1;

  ImageEncoderConfig ec;
  ec.model = preset(preset_name);
  ec.image_size = 518;
  ec.use_cls_token = true;

  nlohmann::json doc;
  doc["preset"] = preset_name;
  doc["config"] = {{"hidden_size", ec.model.hidden_size},
                   {"layers", ec.model.num_hidden_layers},
                   {"heads", ec.model.num_attention_heads},
                   {"swiglu", ec.model.use_swiglu_ffn},
                   {"image_size", ec.image_size},
                   {"tokens", ec.tokens()},
                   {"batch", batch}};
  doc["threads"] = tbb::info::default_concurrency();
  doc["repeats"] = repeats;

  // Preprocessing (u8 recipes) and transform: cheap, timed once per repeat, best kept.
  const gen3d::image::ImageU8 rgba = synthetic_rgba();
  double best_pre = 1e300, best_tf = 1e300;
  Tensor images;
  for (int r = 0; r < repeats; ++r) {
    auto t0 = Clock::now();
    const PreprocessedImage p = preprocess_image(rgba, {512, 0.15});
    best_pre = std::min(best_pre, ms_since(t0));
    images = p.image;
    t0 = Clock::now();
    (void)encoder_transform(images, ec.image_size);
    best_tf = std::min(best_tf, ms_since(t0));
  }
  if (batch > 1) {
    Tensor b({batch, 3, 512, 512});
    for (int i = 0; i < batch; ++i)
      std::copy_n(images.data(), images.numel(), b.data() + i * images.numel());
    images = std::move(b);
  }
  doc["preprocess_ms"] = best_pre;
  doc["transform_ms"] = best_tf;

  doc["runs"] = nlohmann::json::array();
  std::string rest = storages;
  while (!rest.empty()) {
    const auto comma = rest.find(',');
    const std::string s = rest.substr(0, comma);
    rest = comma == std::string::npos ? "" : rest.substr(comma + 1);
    const Dinov2Options opt{s == "f16"    ? WeightStorage::kF16
                            : s == "bf16" ? WeightStorage::kBF16
                                          : WeightStorage::kF32};
    auto t0 = Clock::now();
    auto model = std::make_shared<const Dinov2Model>(Dinov2Model::random(ec.model, 1234, opt));
    const double init_ms = ms_since(t0);
    const DinoImageEncoder enc(ec, model);
    std::vector<double> times;
    double checksum = 0;
    for (int r = 0; r < repeats; ++r) {
      t0 = Clock::now();
      const Tensor ctx = enc.encode(images);  // [B, 1370, 1536] for giant
      times.push_back(ms_since(t0));
      checksum = 0;
      for (float v : ctx.span()) checksum += std::abs(v);
    }
    const double best = *std::min_element(times.begin(), times.end());
    doc["runs"].push_back({{"storage", s},
                           {"baseline", s == "f32"},
                           {"parameters", model->num_parameters()},
                           {"weight_mib", model->weight_bytes() >> 20},
                           {"init_ms", init_ms},
                           {"encode_ms", times},
                           {"best_ms_per_image", best / batch},
                           {"abs_sum", checksum}});
    std::fprintf(stderr, "%s: %.0f ms per image\n", s.c_str(), best / batch);
  }
  std::printf("%s\n", doc.dump(2).c_str());
  return 0;
}
