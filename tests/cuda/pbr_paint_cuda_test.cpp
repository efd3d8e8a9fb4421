// views_from_pbr_model on the GPU, run alone through StageRunner on the tiny Hunyuan3D-Paint-v2-1
// and DINOv2 folders (tests/support/tiny_paint21.h): the PBR UNet2.5D, the SD VAE and DINOv2 on
// the GPU in bf16, the sampler on the host. Its albedo and metallic-roughness views against the
// CPU's bf16 run, the same seed repeating on the GPU, and the GPU's work on the trace's cuda:0
// track.

#include <gtest/gtest.h>

#include <algorithm>
#include <cmath>
#include <cstdio>
#include <string>

#include "cuda_fixture.h"
#include "models/core/device.h"
#include "pipeline/stage_runner.h"
#include "stages/stage_test_helpers.h"
#include "support/paths.h"
#include "support/tiny_paint21.h"

namespace gen3d::test {
namespace {

struct Painted {
  std::shared_ptr<const stages::ImageList> albedo, mr;
  int gpu_spans = 0;
};

// Two views at 64-px network views (8 × 8 latents), two UniPC steps, bf16.
Painted paint(const TinyPaint21Folder& f, const std::string& device) {
  pipeline::StageRunner r = runner("views_from_pbr_model");
  r.profiler().set_device_timelines(true);
  two_view_paint_inputs(r);
  r.param("model", f.dir)
      .param("dino_model", f.dino_dir)
      .param("view_size", 64)
      .param("steps", 2)
      .param("resolution", 64)
      .param("seed", 5)
      .param("precision", "bf16")
      .param("device", device);
  r.run();
  Painted p{r.output<stages::ImageList>("albedo"), r.output<stages::ImageList>("mr")};
  const int track = r.profiler().track("cuda:0");
  for (const auto& s : r.profiler().spans()) p.gpu_spans += s.thread == track;
  return p;
}

// Mean and max |a − b| over every pixel of every view.
std::pair<double, double> diff(const stages::ImageList& a, const stages::ImageList& b) {
  double sum = 0.0, worst = 0.0;
  std::size_t n = 0;
  for (std::size_t v = 0; v < a.size(); ++v)
    for (std::size_t k = 0; k < a[v].pixels.size(); ++k) {
      const double d = std::fabs(static_cast<double>(a[v].pixels[k]) - b[v].pixels[k]);
      sum += d;
      worst = std::max(worst, d);
      ++n;
    }
  return {n ? sum / static_cast<double>(n) : 0.0, worst};
}

TEST(PbrPaintCuda, StageOnTheGpuAgreesWithTheCpuBf16Run) {
  GEN3D_REQUIRE_GPU();
  models::register_device_installer(models::Device::kCuda, &models::cuda::install);
  const TinyPaint21Folder f = write_tiny_paint21_folder(temp_dir("pbr_paint_cuda"), 3);
  const Painted gpu = paint(f, "cuda");
  const Painted again = paint(f, "cuda");
  const Painted cpu = paint(f, "cpu");
  for (const Painted* p : {&gpu, &again, &cpu}) {
    ASSERT_TRUE(p->albedo && p->mr);
    ASSERT_EQ(p->albedo->size(), 2u);
    ASSERT_EQ(p->mr->size(), 2u);
  }
  for (const auto* images : {gpu.albedo.get(), gpu.mr.get()})
    for (const auto& img : *images)
      for (float v : img.pixels) {
        ASSERT_TRUE(std::isfinite(v));
        ASSERT_GE(v, 0.0f);
        ASSERT_LE(v, 1.0f);
      }
  // The same seed repeats on the GPU.
  EXPECT_EQ(diff(*gpu.albedo, *again.albedo).second, 0.0);
  EXPECT_EQ(diff(*gpu.mr, *again.mr).second, 0.0);
  // Near the CPU's bf16 run (both round to bf16, in other orders).
  const auto [am, ax] = diff(*gpu.albedo, *cpu.albedo);
  const auto [mm, mx] = diff(*gpu.mr, *cpu.mr);
  std::printf(
      "[ info ] PBR paint GPU vs CPU bf16: albedo mean %.3g max %.3g, mr mean %.3g max %.3g\n", am,
      ax, mm, mx);
  EXPECT_LE(am, 0.02);
  EXPECT_LE(mm, 0.02);
  // The GPU's work is on the trace's cuda:0 track; the CPU run puts none there.
  EXPECT_GT(gpu.gpu_spans, 0);
  EXPECT_EQ(cpu.gpu_spans, 0);
}

}  // namespace
}  // namespace gen3d::test
