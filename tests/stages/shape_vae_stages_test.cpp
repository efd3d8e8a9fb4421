// The shape-VAE stages (vae_decode, volume_decode, extract_surface), each run alone through
// StageRunner on a tiny random ShapeVAE written at test time in the official folder layout
// (hunyuan3d-vae-v2-0/model.fp16.safetensors + config.json).

#include <cmath>
#include <filesystem>
#include <fstream>

#include <gtest/gtest.h>

#include "mesh/marching_cubes.h"
#include "models/core/safetensors.h"
#include "models/shape/field.h"
#include "models/shape/shape_vae.h"
#include "models/shape/volume_decoder.h"
#include "pipeline/stage_runner.h"
#include "stages/register.h"
#include "stages/types.h"
#include "support/paths.h"

namespace gen3d::stages {
void register_shape_vae_stages(pipeline::Registry& registry);
}

namespace gen3d::test {
namespace {

using models::Tensor;

const pipeline::Registry& registry() {
  static const pipeline::Registry reg = [] {
    pipeline::Registry r;
    stages::register_shape_vae_stages(r);
    return r;
  }();
  return reg;
}

models::ShapeVAEConfig tiny_config() {
  models::ShapeVAEConfig c;
  c.num_latents = 24;
  c.embed_dim = 4;
  c.num_freqs = 3;
  c.heads = 2;
  c.width = 16;
  c.num_decoder_layers = 2;
  c.scale_factor = 0.9;
  return c;
}

// <tmp>/hunyuan3d-vae-v2-0/{model.fp16.safetensors, config.json}; returns the folder.
std::string tiny_model_folder() {
  static const std::string dir = [] {
    // Per test: CTest runs this file's tests as parallel processes, each with its own folder.
    const std::string d =
        temp_dir(std::string("shape_vae_stages_") +
                 ::testing::UnitTest::GetInstance()->current_test_info()->name()) +
        "/hunyuan3d-vae-v2-0";
    std::filesystem::create_directories(d);
    auto w = models::ShapeVAE::random_weights(tiny_config(), 17);
    std::vector<std::pair<std::string, const Tensor*>> list;
    for (auto& [n, t] : w) list.emplace_back(n, &t);
    models::write_safetensors(d + "/model.fp16.safetensors", list, models::DType::kF16);
    std::ofstream(d + "/config.json")
        << R"({"target": "hy3dgen.shapegen.models.ShapeVAE", "params": {"num_latents": 24,
             "embed_dim": 4, "num_freqs": 3, "include_pi": false, "heads": 2, "width": 16,
             "num_decoder_layers": 2, "qkv_bias": false, "qk_norm": true, "scale_factor": 0.9}})";
    return d;
  }();
  return dir;
}

// The same weights as the folder holds (F16-rounded), loaded directly.
const models::ShapeVAE& reference_vae() {
  static const models::ShapeVAE vae =
      models::ShapeVAE::load(tiny_config(), tiny_model_folder() + "/model.fp16.safetensors");
  return vae;
}

Tensor latents() {
  Tensor t({1, 24, 4});
  for (std::int64_t i = 0; i < t.numel(); ++i) t.data()[i] = static_cast<float>(std::sin(0.61 * i));
  return t;
}

TEST(ShapeVaeStages, ContractsAreModelStages) {
  for (const char* name : {"vae_decode", "volume_decode"}) {
    const auto* c = registry().contract(name);
    ASSERT_NE(c, nullptr) << name;
    EXPECT_EQ(c->resource, pipeline::ResourceClass::Model) << name;
  }
  ASSERT_NE(registry().contract("extract_surface"), nullptr);
  EXPECT_NE(registry().contract("volume_decode")->find_param("method"), nullptr);
}

TEST(ShapeVaeStages, DecodeThenVolumeMatchesTheLibrary) {
  pipeline::StageRunner dec(*registry().find("vae_decode"));
  // fp32: compared with the float32 library path.
  dec.input<Tensor>("latents", latents()).param("model", tiny_model_folder());
  dec.param("precision", "fp32");
  dec.run();
  const auto decoded = dec.output<Tensor>("decoded");
  ASSERT_NE(decoded, nullptr);
  const Tensor want = reference_vae().decode(latents());
  ASSERT_EQ(decoded->numel(), want.numel());
  for (std::int64_t i = 0; i < want.numel(); ++i) ASSERT_EQ(decoded->data()[i], want.data()[i]);

  for (const char* method : {"dense", "hierarchical", "flashvdm"}) {
    pipeline::StageRunner vol(*registry().find("volume_decode"));
    vol.input<Tensor>("decoded", decoded)
        .param("model", tiny_model_folder())
        .param("method", method)
        .param("precision", "fp32")
        .param("resolution", 64)
        .param("min_resolution", 16)
        .param("num_chunks", 5000);
    vol.run();
    const auto grid = vol.output<models::VolumeGrid>("grid");
    ASSERT_NE(grid, nullptr) << method;
    models::VolumeDecodeOptions o;
    o.method = models::parse_volume_method(method);
    o.resolution = 64;
    o.min_resolution = 16;
    models::VolumeDecodeStats st;
    const auto g = models::decode_volume(*reference_vae().geometry_field(want, 0), o, &st);
    ASSERT_EQ(grid->values.size(), g.values.size()) << method;
    for (std::size_t v = 0; v < g.values.size(); ++v) {
      ASSERT_EQ(std::isnan(grid->values[v]), std::isnan(g.values[v])) << method;
      if (!std::isnan(g.values[v])) {
        ASSERT_NEAR(grid->values[v], g.values[v], 1e-5) << method;
      }
    }
    const auto totals = vol.profiler().counter_totals();
    ASSERT_TRUE(totals.count("volume_decode.points_queried")) << method;
    EXPECT_EQ(totals.at("volume_decode.points_queried"), static_cast<double>(st.points_queried));
  }
}

TEST(ShapeVaeStages, ExtractSurfaceOnAnalyticGrid) {
  models::VolumeDecodeOptions o;
  o.method = models::VolumeMethod::kHierarchical;
  o.resolution = 128;
  const auto grid = std::make_shared<const models::VolumeGrid>(
      models::decode_volume(models::torus_field(0.55, 0.18, 10.0), o));
  pipeline::StageRunner ex(*registry().find("extract_surface"));
  ex.input<models::VolumeGrid>("grid", grid).param("vertex_mapping", "exact");
  ex.run();
  const auto m = ex.output<mesh::Mesh>("mesh");
  ASSERT_NE(m, nullptr);
  EXPECT_GT(m->faces.size(), 1000u);
  EXPECT_GT(mesh::signed_volume(*m), 0.0);

  pipeline::StageRunner red(*registry().find("extract_surface"));
  red.input<models::VolumeGrid>("grid", grid)
      .param("max_faces", 2000)
      .param("floater_ratio", 0.005);
  red.run();
  EXPECT_LE(red.output<mesh::Mesh>("mesh")->faces.size(), 2000u);
}

TEST(ShapeVaeStages, NoSurfaceIsAnErrorUnlessAllowed) {
  models::VolumeDecodeOptions o;
  o.resolution = 16;
  const auto grid = std::make_shared<const models::VolumeGrid>(
      models::decode_volume(models::sphere_field(0.5, 10.0), o));
  pipeline::StageRunner ex(*registry().find("extract_surface"));
  ex.input<models::VolumeGrid>("grid", grid).param("level", 100.0);
  EXPECT_ANY_THROW(ex.run());
  pipeline::StageRunner ok(*registry().find("extract_surface"));
  ok.input<models::VolumeGrid>("grid", grid).param("level", 100.0).param("allow_empty", true);
  ok.run();
  EXPECT_TRUE(ok.output<mesh::Mesh>("mesh")->faces.empty());
}

TEST(ShapeVaeStages, BadModelFolderNamesTheProblem) {
  pipeline::StageRunner dec(*registry().find("vae_decode"));
  dec.input<Tensor>("latents", latents()).param("model", temp_dir("shape_vae_empty"));
  try {
    dec.run();
    FAIL() << "expected an error";
  } catch (const std::exception& e) {
    EXPECT_NE(std::string(e.what()).find("safetensors"), std::string::npos) << e.what();
  }
}

}  // namespace
}  // namespace gen3d::test
