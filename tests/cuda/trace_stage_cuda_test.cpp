// A model stage on the GPU with device timelines on (a run with --trace): vae_decode, run alone
// through StageRunner on a tiny random ShapeVAE, puts its GPU work on the profiler's cuda:0 track
// as spans of its node, inside the node's own run.

#include <gtest/gtest.h>

#include <cmath>
#include <cstdio>
#include <filesystem>
#include <fstream>
#include <set>
#include <string>
#include <vector>

#include "cuda_fixture.h"
#include "models/core/device.h"
#include "models/core/safetensors.h"
#include "models/shape/shape_vae.h"
#include "pipeline/stage_runner.h"
#include "stages/register.h"
#include "stages/types.h"
#include "support/paths.h"

namespace gen3d::test {
namespace {

using models::Tensor;

// <tmp>/hunyuan3d-vae-v2-0/{model.fp16.safetensors, config.json}, as the stage tests write it.
std::string tiny_vae_folder() {
  const std::string d = temp_dir("trace_stage_cuda") + "/hunyuan3d-vae-v2-0";
  std::filesystem::create_directories(d);
  models::ShapeVAEConfig c;
  c.num_latents = 24;
  c.embed_dim = 4;
  c.num_freqs = 3;
  c.heads = 2;
  c.width = 16;
  c.num_decoder_layers = 2;
  c.scale_factor = 0.9;
  auto w = models::ShapeVAE::random_weights(c, 17);
  std::vector<std::pair<std::string, const Tensor*>> list;
  for (auto& [n, t] : w) list.emplace_back(n, &t);
  models::write_safetensors(d + "/model.fp16.safetensors", list, models::DType::kF16);
  std::ofstream(d + "/config.json")
      << R"({"target": "hy3dgen.shapegen.models.ShapeVAE", "params": {"num_latents": 24,
           "embed_dim": 4, "num_freqs": 3, "include_pi": false, "heads": 2, "width": 16,
           "num_decoder_layers": 2, "qkv_bias": false, "qk_norm": true, "scale_factor": 0.9}})";
  return d;
}

TEST(CudaTrace, VaeDecodeNodePutsItsGpuWorkOnTheCudaTrack) {
  GEN3D_REQUIRE_GPU();
  models::register_device_installer(models::Device::kCuda, &models::cuda::install);
  pipeline::Registry registry;
  stages::register_shape_vae_stages(registry);
  pipeline::StageRunner run(*registry.find("vae_decode"));
  run.profiler().set_device_timelines(true);
  Tensor latents({1, 24, 4});
  for (std::int64_t i = 0; i < latents.numel(); ++i)
    latents.data()[i] = static_cast<float>(std::sin(0.61 * i));
  run.input<Tensor>("latents", std::move(latents))
      .param("model", tiny_vae_folder())
      .param("device", "cuda");
  run.run();
  ASSERT_NE(run.output<Tensor>("decoded"), nullptr);

  pipeline::Profiler& p = run.profiler();
  const int track = p.track("cuda:0");
  std::vector<pipeline::SpanRecord> gpu;
  std::int64_t decode_start = -1, decode_end = -1;
  for (const auto& s : p.spans()) {
    if (s.thread == track) gpu.push_back(s);
    if (s.name == "decode") decode_start = s.start_ns, decode_end = s.start_ns + s.dur_ns;
  }
  ASSERT_FALSE(gpu.empty());
  ASSERT_GE(decode_start, 0);
  std::set<std::string> names;
  for (std::size_t i = 0; i < gpu.size(); ++i) {
    names.insert(gpu[i].name);
    EXPECT_EQ(gpu[i].category, "gpu");
    EXPECT_EQ(gpu[i].node, "vae_decode");
    EXPECT_GE(gpu[i].dur_ns, 0);
    // Inside the node's decode span, give or take the reference event's wait.
    EXPECT_GE(gpu[i].start_ns, decode_start - 100'000) << gpu[i].name;
    EXPECT_LE(gpu[i].start_ns + gpu[i].dur_ns, decode_end + 100'000) << gpu[i].name;
    if (i > 0) {
      EXPECT_GE(gpu[i].start_ns, gpu[i - 1].start_ns + gpu[i - 1].dur_ns - 1000) << i;
    }
  }
  EXPECT_TRUE(names.count("linear")) << ::testing::PrintToString(names);
  EXPECT_TRUE(names.count("attention")) << ::testing::PrintToString(names);
  std::printf("vae_decode on the GPU: %zu spans on cuda:0\n", gpu.size());
}

}  // namespace
}  // namespace gen3d::test
