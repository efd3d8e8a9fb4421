// `gen3d texture` on a million faces, a fifth of a percent of them of zero area (the pole rows of a
// latitude-longitude sphere, as exporters write them): the run succeeds and its memory stays
// within the budget whatever the degenerate geometry.

#include <cmath>
#include <filesystem>
#include <fstream>

#include <gtest/gtest.h>
#include <nlohmann/json.hpp>

#include "mesh/io.h"
#include "support/paths.h"
#include "support/run_command.h"

namespace gen3d::test {
namespace {

// Sanitizer builds keep shadow memory beside every byte, so their RSS says nothing of ours.
#if defined(__SANITIZE_ADDRESS__) || defined(__SANITIZE_THREAD__)
constexpr bool kSanitized = true;
#elif defined(__has_feature)
#if __has_feature(address_sanitizer) || __has_feature(thread_sanitizer)
constexpr bool kSanitized = true;
#else
constexpr bool kSanitized = false;
#endif
#else
constexpr bool kSanitized = false;
#endif

using nlohmann::json;

// rings x segments x 2 faces; both pole rows keep a full ring of vertices at (or, computed in
// double, within 1e-16 of) the pole, so 2 x segments faces have zero or sliver area.
mesh::Mesh sphere_with_pole_rows(int rings, int segments) {
  mesh::Mesh m;
  for (int r = 0; r <= rings; ++r) {
    const double th = M_PI * r / rings;
    for (int s = 0; s < segments; ++s) {
      const double ph = 2 * M_PI * s / segments;
      m.positions.push_back({float(std::sin(th) * std::cos(ph)), float(std::cos(th)),
                             float(-std::sin(th) * std::sin(ph))});
    }
  }
  auto at = [&](int r, int s) { return uint32_t(r * segments + s % segments); };
  for (int r = 0; r < rings; ++r) {
    for (int s = 0; s < segments; ++s) {
      m.faces.push_back({at(r, s), at(r + 1, s), at(r + 1, s + 1)});
      m.faces.push_back({at(r, s), at(r + 1, s + 1), at(r, s + 1)});
    }
  }
  return m;
}

TEST(BigMesh, MillionFacesWithZeroAreaRowsTextureWithinTwoGigabytes) {
  const std::string dir = temp_dir("cli_big_mesh");
  const std::string mesh_path = dir + "/sphere.ply";
  mesh::save_mesh(sphere_with_pole_rows(500, 1000), mesh_path);  // 1,000,000 faces
  const auto r = run_gen3d("texture --mesh " + mesh_path +
                               " --image assets/images/spider_front.png --texture-size 2048"
                               " --render-size 2048 --no-cache -q -o " +
                               dir + "/out.glb --metrics " + dir + "/m.json",
                           600);
  ASSERT_EQ(r.exit_code, 0) << r.output;
  EXPECT_TRUE(std::filesystem::exists(dir + "/out.glb"));
  std::ifstream in(dir + "/m.json");
  const json metrics = json::parse(in);
  EXPECT_GT(metrics["counters"]["clean.degenerate_faces"].get<double>(), 0) << metrics.dump();
  if (!kSanitized) {
    EXPECT_LE(metrics["peak_rss_mb"].get<double>(), 2048.0);
  }
}

}  // namespace
}  // namespace gen3d::test
