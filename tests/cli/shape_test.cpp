// `gen3d shape` end to end on the tiny golden models (tests/data/golden): condition tokens ->
// sampled latents -> ShapeVAE -> volume decoding -> marching cubes -> mesh file; and its
// bad-input paths.

#include <filesystem>
#include <fstream>

#include <gtest/gtest.h>
#include <nlohmann/json.hpp>

#include "mesh/io.h"
#include "support/paths.h"
#include "support/run_command.h"

namespace gen3d::test {
namespace {

namespace fs = std::filesystem;

bool golden_models_present() {
  const std::string g = source_dir() + "/tests/data/golden/";
  return fs::exists(g + "dit_weights.fp32.safetensors") &&
         fs::exists(g + "vae_weights.fp32.safetensors") && fs::exists(g + "sampler.safetensors") &&
         fs::exists(g + "config.json");
}

TEST(ShapeCommand, EveryVolumeMethodWritesAMesh) {
  if (!golden_models_present()) GTEST_SKIP() << "golden models absent";
  for (const char* method : {"dense", "hierarchical", "flashvdm"}) {
    const std::string dir = temp_dir(std::string("shape_") + method);
    const auto r =
        run_gen3d(std::string("shape --steps 4 --resolution 64 --min-resolution 16 ") +
                  "--method " + method + " -o " + dir + "/shape.obj --metrics " + dir + "/m.json");
    ASSERT_EQ(r.exit_code, 0) << method << "\n" << r.output;
    const mesh::Mesh m = mesh::load_mesh(dir + "/shape.obj");
    EXPECT_GT(m.face_count(), 100u) << method;
    std::ifstream in(dir + "/m.json");
    const auto metrics = nlohmann::json::parse(in);
    const double points = metrics["counters"]["volume_decode.points_queried"].get<double>();
    if (std::string(method) == "dense") {
      EXPECT_EQ(points, 65.0 * 65 * 65);
    } else {
      EXPECT_LT(points, 65.0 * 65 * 65) << method;
    }
  }
}

TEST(ShapeCommand, DumpShowsTheAdaptedConfig) {
  const auto r = run_gen3d("shape --method flashvdm --resolution 380 --dump");
  ASSERT_EQ(r.exit_code, 0) << r.output;
  EXPECT_NE(r.output.find("flashvdm"), std::string::npos) << r.output;
  EXPECT_NE(r.output.find("380"), std::string::npos) << r.output;
}

TEST(ShapeCommand, BadInputsFailCleanly) {
  EXPECT_EQ(run_gen3d("shape --method octree --dump").exit_code, 2);
  const auto r = run_gen3d("shape --vae /nonexistent/vae.safetensors --steps 2 -o " +
                           temp_dir("shape_bad") + "/x.obj");
  EXPECT_NE(r.exit_code, 0);
  EXPECT_NE(r.output.find("/nonexistent/vae.safetensors"), std::string::npos) << r.output;
}

}  // namespace
}  // namespace gen3d::test
