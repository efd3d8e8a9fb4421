// Image-conditioner benchmark: ImageProcessorV2 preprocessing of a synthetic RGBA image, the
// DinoImageEncoder transform (512 -> 518 antialiased resize + normalize) and the DINOv2 forward
// pass with random weights, for a preset (default: giant, Hunyuan3D-2's encoder: hidden 1536,
// 40 layers, 24 heads, SwiGLU, 518 px -> 1370 tokens). Each weight storage is timed in the same
// run (the first listed is the baseline), the storages taking turns within each repeat so that a
// shared machine's load falls on all of them alike; each gets its times, best, median and range.
// Prints one JSON document.
//
// Usage: gen3d_dinov2_bench [preset=giant] [repeats=2] [storages=f32,f16] [batch=1]
//   storages: f32, f16 (weights stored f16, f32 compute), bf16 (the bf16 precision mode), int8
//   (the int8 precision mode)
//   presets: giant, large (1024/24/16, MLP), base (768/12/12, MLP), small (384/12/6, MLP)

#include <sys/resource.h>
#include <tbb/info.h>

#include <algorithm>
#include <chrono>
#include <cmath>
#include <cstdio>
#include <cstdlib>
#include <memory>
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

// CPU milliseconds this process has used (every thread): steadier than wall time on a shared
// machine.
double cpu_ms() {
  rusage u{};
  getrusage(RUSAGE_SELF, &u);
  return 1e3 * (static_cast<double>(u.ru_utime.tv_sec + u.ru_stime.tv_sec) +
                1e-6 * static_cast<double>(u.ru_utime.tv_usec + u.ru_stime.tv_usec));
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

  struct Run {
    std::string storage;
    std::shared_ptr<const Dinov2Model> model;
    double init_ms = 0;
    std::vector<double> times, cpu_times;  // wall and process CPU ms per encode
    double checksum = 0;
  };
  std::vector<Run> runs;
  std::string rest = storages;
  while (!rest.empty()) {
    const auto comma = rest.find(',');
    const std::string s = rest.substr(0, comma);
    rest = comma == std::string::npos ? "" : rest.substr(comma + 1);
    if (s != "f32" && s != "f16" && s != "bf16" && s != "int8") {
      std::fprintf(stderr, "unknown storage %s (f32, f16, bf16, int8)\n", s.c_str());
      return 2;
    }
    const Dinov2Options opt{s == "f16"    ? WeightStorage::kF16
                            : s == "bf16" ? WeightStorage::kBF16
                            : s == "int8" ? WeightStorage::kInt8
                                          : WeightStorage::kF32};
    Run run;
    run.storage = s;
    const auto t0 = Clock::now();
    run.model = std::make_shared<const Dinov2Model>(Dinov2Model::random(ec.model, 1234, opt));
    run.init_ms = ms_since(t0);
    runs.push_back(std::move(run));
  }
  for (int r = 0; r < repeats; ++r)
    for (Run& run : runs) {
      const DinoImageEncoder enc(ec, run.model);
      const auto t0 = Clock::now();
      const double c0 = cpu_ms();
      const Tensor ctx = enc.encode(images);  // [B, 1370, 1536] for giant
      run.times.push_back(ms_since(t0));
      run.cpu_times.push_back(cpu_ms() - c0);
      run.checksum = 0;
      for (float v : ctx.span()) run.checksum += std::abs(v);
      std::fprintf(stderr, "%s: %.0f ms per image (%.0f CPU ms)\n", run.storage.c_str(),
                   run.times.back() / batch, run.cpu_times.back() / batch);
    }
  doc["runs"] = nlohmann::json::array();
  auto median_of = [](std::vector<double> v) {
    std::sort(v.begin(), v.end());
    const std::size_t n = v.size();
    return n % 2 ? v[n / 2] : 0.5 * (v[n / 2 - 1] + v[n / 2]);
  };
  for (const Run& run : runs) {
    std::vector<double> sorted = run.times;
    std::sort(sorted.begin(), sorted.end());
    const double median = median_of(run.times);
    const auto [cpu_lo, cpu_hi] = std::minmax_element(run.cpu_times.begin(), run.cpu_times.end());
    doc["runs"].push_back({{"storage", run.storage},
                           {"baseline", &run == &runs.front()},
                           {"parameters", run.model->num_parameters()},
                           {"weight_mib", run.model->weight_bytes() >> 20},
                           {"init_ms", run.init_ms},
                           {"encode_ms", run.times},
                           {"encode_cpu_ms", run.cpu_times},
                           {"best_ms_per_image", sorted.front() / batch},
                           {"median_ms_per_image", median / batch},
                           {"range_ms_per_image", {sorted.front() / batch, sorted.back() / batch}},
                           {"median_cpu_ms_per_image", median_of(run.cpu_times) / batch},
                           {"range_cpu_ms_per_image", {*cpu_lo / batch, *cpu_hi / batch}},
                           {"abs_sum", run.checksum}});
  }
  std::printf("%s\n", doc.dump(2).c_str());
  return 0;
}
