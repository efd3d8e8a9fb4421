// `gen3d texture --views A --mr-views B` end to end: albedo and metallic-roughness views rendered
// from a sphere, baked into a PBR GLB whose metallic-roughness texture says what the views said,
// through the albedo's rasters; and the bad inputs of the second set of views.

#include <algorithm>
#include <cmath>
#include <filesystem>
#include <fstream>
#include <string>

#include <gtest/gtest.h>
#include <nlohmann/json.hpp>

#include "image/io.h"
#include "mesh/io.h"
#include "mesh/normalize.h"
#include "render/camera.h"
#include "render/maps.h"
#include "render/rasterizer.h"
#include "render/test_meshes.h"
#include "support/paths.h"
#include "support/run_command.h"

namespace gen3d::test {
namespace {

namespace fs = std::filesystem;
using nlohmann::json;

const std::string kSmall = " --texture-size 256 --render-size 256 ";
constexpr int kSize = 256;

// What the synthetic views paint at an internal-frame surface point: the x < 0 half is metallic,
// roughness rises with z; the albedo is warm on one side, cool on the other.
float metallic_at(const mesh::Vec3& p) {
  return p[0] < 0.0f ? 1.0f : 0.0f;
}
float roughness_at(const mesh::Vec3& p) {
  return std::clamp(0.5f + 0.8f * p[2], 0.0f, 1.0f);
}

struct Scene {
  std::string dir, mesh, albedo, mr;
};

// A sphere (with its own UVs, which the pipeline keeps) and its six official views: albedo views
// in `albedo/`, metallic-roughness views (metallic in R, roughness in G, as Hunyuan3D-2.1 paints
// them) in `mr/`, rendered through the pipeline's own normalization so the views land exactly.
Scene make_scene(const std::string& name, int mr_size = kSize, int mr_count = 6) {
  Scene s;
  s.dir = temp_dir(name);
  s.mesh = s.dir + "/sphere.obj";
  s.albedo = s.dir + "/albedo";
  s.mr = s.dir + "/mr";
  fs::create_directories(s.albedo);
  fs::create_directories(s.mr);
  mesh::save_mesh(render::testing::as_loaded(render::testing::bumpy_sphere(24, 32)), s.mesh);
  mesh::Mesh m = mesh::load_mesh(s.mesh);
  mesh::normalize_mesh(m);
  const render::ViewSet views = render::ViewSet::hunyuan6();
  for (size_t v = 0; v < views.size(); ++v) {
    const render::Raster raster = render::rasterize(m, views[v].camera, kSize, kSize);
    const image::Image pos = render::position_map(m, raster);
    image::Image albedo(kSize, kSize, 3, 1.0f), mr(kSize, kSize, 3, 1.0f);
    for (size_t p = 0; p < raster.pixel_count(); ++p) {
      if (raster.face_id[p] == 0) continue;
      const float* e = pos.pixels.data() + p * 3;  // 0.5 - p / 1.15
      const mesh::Vec3 q{(0.5f - e[0]) * 1.15f, (0.5f - e[1]) * 1.15f, (0.5f - e[2]) * 1.15f};
      const float warm = q[0] < 0.0f ? 1.0f : 0.0f;
      albedo.pixels[p * 3 + 0] = 0.2f + 0.6f * warm;
      albedo.pixels[p * 3 + 1] = 0.4f;
      albedo.pixels[p * 3 + 2] = 0.8f - 0.6f * warm;
      mr.pixels[p * 3 + 0] = metallic_at(q);
      mr.pixels[p * 3 + 1] = roughness_at(q);
      mr.pixels[p * 3 + 2] = 0.0f;
    }
    const std::string file = std::to_string(v) + ".png";
    image::save_image(albedo, s.albedo + "/" + file);
    if (int(v) < mr_count) {
      image::Image out(mr_size, mr_size, 3);
      for (int y = 0; y < mr_size; ++y)  // nearest: only the size differs
        for (int x = 0; x < mr_size; ++x)
          std::copy_n(mr.at(x * kSize / mr_size, y * kSize / mr_size), 3, out.at(x, y));
      image::save_image(out, s.mr + "/" + file);
    }
  }
  return s;
}

json read_json(const std::string& path) {
  std::ifstream in(path);
  return json::parse(in);
}

TEST(TexturePbr, AlbedoAndMetallicRoughnessViewsMakeAPbrGlb) {
  const Scene s = make_scene("texture_pbr");
  const std::string out = s.dir + "/out.glb";
  const auto r = run_gen3d("texture --mesh " + s.mesh + " --views " + s.albedo + " --mr-views " +
                           s.mr + kSmall + "-o " + out + " --metrics " + s.dir +
                           "/m.json --report " + s.dir + "/r.html");
  ASSERT_EQ(r.exit_code, 0) << r.output;

  // The Khronos validator finds no error (skipped without node/the package).
  const std::string node_dir = env_or("GEN3D_NODE_DIR", GEN3D_NODE_DIR);
  const auto v =
      run_command("node " + source_dir() + "/tests/mesh/validate_gltf.js " + node_dir + " " + out);
  if (v.exit_code != 77) {
    EXPECT_EQ(v.exit_code, 0) << v.output;
  }
  // The material has both textures, in glTF's JSON as written.
  {
    std::ifstream in(out, std::ios::binary);
    const std::string glb((std::istreambuf_iterator<char>(in)), {});
    EXPECT_NE(glb.find("\"baseColorTexture\""), std::string::npos);
    EXPECT_NE(glb.find("\"metallicRoughnessTexture\""), std::string::npos);
  }
  mesh::Mesh m = mesh::load_mesh(out);
  ASSERT_TRUE(m.texture);
  ASSERT_TRUE(m.pbr.texture);
  EXPECT_EQ(m.pbr.metallic, 1.0f);
  EXPECT_EQ(m.pbr.roughness, 1.0f);
  const image::Image& mr = *m.pbr.texture;
  ASSERT_EQ(mr.width, 256);
  ASSERT_GE(mr.channels, 3);

  // Sampled at the faces' centres (away from the metallic border), the texture says what the
  // views said: metallic in B, roughness in G.
  mesh::normalize_mesh(m);  // the frame the views were rendered in (the UVs' v flipped too)
  size_t checked = 0, metallic_ok = 0, roughness_ok = 0;
  for (size_t f = 0; f < m.faces.size(); ++f) {
    mesh::Vec3 c{0, 0, 0};
    float u = 0, w = 0;
    for (int k = 0; k < 3; ++k) {
      for (int i = 0; i < 3; ++i) c[i] += m.positions[m.faces[f][k]][i] / 3;
      u += m.uvs[m.uv_faces[f][k]][0] / 3;
      w += m.uvs[m.uv_faces[f][k]][1] / 3;
    }
    if (std::fabs(c[0]) < 0.08f) continue;
    float texel[4];
    render::sample_bilinear(mr, u * (mr.width - 1), w * (mr.height - 1), texel);
    ++checked;
    metallic_ok += std::fabs(texel[2] - metallic_at(c)) < 0.1f;
    roughness_ok += std::fabs(texel[1] - roughness_at(c)) < 0.1f;
  }
  ASSERT_GT(checked, 500u);
  EXPECT_GT(metallic_ok, checked * 95 / 100) << metallic_ok << " of " << checked;
  EXPECT_GT(roughness_ok, checked * 95 / 100) << roughness_ok << " of " << checked;

  // The metallic-roughness bake used the albedo's rasters: 6 poses + the UV raster + the 2
  // diagonals of the report's preview, as many as a run without it.
  const json metrics = read_json(s.dir + "/m.json");
  EXPECT_EQ(metrics["counters"]["raster_cache.rasterizations"], 9.0);
  const auto plain =
      run_gen3d("texture --mesh " + s.mesh + " --views " + s.albedo + kSmall + "-o " + s.dir +
                "/plain.glb --metrics " + s.dir + "/plain.json --report " + s.dir + "/plain.html");
  ASSERT_EQ(plain.exit_code, 0) << plain.output;
  const json base = read_json(s.dir + "/plain.json");
  EXPECT_EQ(base["counters"]["raster_cache.rasterizations"],
            metrics["counters"]["raster_cache.rasterizations"]);
  EXPECT_GE(metrics["counters"]["raster_cache.hits"].get<double>(),
            base["counters"]["raster_cache.hits"].get<double>() + 6.0)
      << "each view's metallic-roughness bake is a cache hit";
  // ... and the albedo is the same as without it.
  const mesh::Mesh albedo_only = mesh::load_mesh(s.dir + "/plain.glb");
  ASSERT_TRUE(albedo_only.texture);
  EXPECT_FALSE(albedo_only.pbr.texture);
  EXPECT_EQ(albedo_only.texture->pixels, mesh::load_mesh(out).texture->pixels);

  // The report shows the maps and a lit render.
  std::ifstream in(s.dir + "/r.html");
  const std::string html((std::istreambuf_iterator<char>(in)), {});
  EXPECT_NE(html.find("<h2>Metallic and roughness"), std::string::npos);
  EXPECT_NE(html.find("metallic (glTF B)"), std::string::npos);
  EXPECT_NE(html.find("roughness (glTF G)"), std::string::npos);
  EXPECT_NE(html.find("<h2>Lit result"), std::string::npos);
}

TEST(TexturePbr, ObjOutputHasMetallicAndRoughnessMaps) {
  const Scene s = make_scene("texture_pbr_obj");
  const auto r = run_gen3d("texture --mesh " + s.mesh + " --views " + s.albedo + " --mr-views " +
                           s.mr + kSmall + "-o " + s.dir + "/out.obj");
  ASSERT_EQ(r.exit_code, 0) << r.output;
  std::ifstream in(s.dir + "/out.mtl");
  const std::string mtl((std::istreambuf_iterator<char>(in)), {});
  EXPECT_NE(mtl.find("map_Kd out.png"), std::string::npos) << mtl;
  EXPECT_NE(mtl.find("map_Pm out_metallic.png"), std::string::npos) << mtl;
  EXPECT_NE(mtl.find("map_Pr out_roughness.png"), std::string::npos) << mtl;
  const image::Image metallic = image::load_image(s.dir + "/out_metallic.png");
  const image::Image roughness = image::load_image(s.dir + "/out_roughness.png");
  EXPECT_EQ(metallic.channels, 1);
  EXPECT_EQ(roughness.channels, 1);
  EXPECT_EQ(metallic.width, 256);
  // Both values occur: half the sphere is metallic.
  const auto [lo, hi] = std::minmax_element(metallic.pixels.begin(), metallic.pixels.end());
  EXPECT_LT(*lo, 0.05f);
  EXPECT_GT(*hi, 0.95f);
}

TEST(TexturePbr, MrViewsPickThePbrConfig) {
  const std::string dir = temp_dir("texture_pbr_select");
  const auto r = run_gen3d("texture --mesh assets/meshes/spider/spider.obj --views " + dir +
                           " --mr-views " + dir + "/mr --dump");
  ASSERT_EQ(r.exit_code, 0) << r.output;
  const auto open = r.output.find("{\n"), close = r.output.rfind("\n}");
  ASSERT_NE(open, std::string::npos);
  const json c = json::parse(r.output.substr(open, close + 2 - open));
  EXPECT_EQ(c["name"], "texgen_views_pbr");
  EXPECT_EQ(c["vars"]["views"], dir);
  EXPECT_EQ(c["vars"]["mr_views"], dir + "/mr");
}

TEST(TexturePbr, MismatchedOrMissingMetallicRoughnessViewsFailWithoutOutput) {
  {  // one image short
    const Scene s = make_scene("texture_pbr_count", kSize, 5);
    const auto r = run_gen3d("texture --mesh " + s.mesh + " --views " + s.albedo + " --mr-views " +
                             s.mr + kSmall + "-o " + s.dir + "/out.glb");
    EXPECT_EQ(r.exit_code, 2) << r.output;
    EXPECT_NE(r.output.find("has 5 images but"), std::string::npos) << r.output;
    EXPECT_FALSE(fs::exists(s.dir + "/out.glb"));
  }
  {  // another size
    const Scene s = make_scene("texture_pbr_size", 128);
    const auto r = run_gen3d("texture --mesh " + s.mesh + " --views " + s.albedo + " --mr-views " +
                             s.mr + kSmall + "-o " + s.dir + "/out.glb");
    EXPECT_EQ(r.exit_code, 1) << r.output;
    EXPECT_NE(r.output.find("is 128x128 but"), std::string::npos) << r.output;
    EXPECT_NE(r.output.find("must match one for one"), std::string::npos) << r.output;
    EXPECT_FALSE(fs::exists(s.dir + "/out.glb"));
  }
  const Scene s = make_scene("texture_pbr_missing");
  auto r = run_gen3d("texture --mesh " + s.mesh + " --views " + s.albedo + " --mr-views " + s.dir +
                     "/no_such_dir" + kSmall + "-o " + s.dir + "/out.glb");
  EXPECT_EQ(r.exit_code, 2) << r.output;
  EXPECT_NE(r.output.find("views directory not found: " + s.dir + "/no_such_dir"),
            std::string::npos)
      << r.output;
  r = run_gen3d("texture --mesh " + s.mesh + " --image assets/images/spider_front.png --mr-views " +
                s.mr + " -o " + s.dir + "/out.glb");
  EXPECT_EQ(r.exit_code, 2) << r.output;
  EXPECT_NE(r.output.find("--mr-views"), std::string::npos) << r.output;
  EXPECT_FALSE(fs::exists(s.dir + "/out.glb"));
}

}  // namespace
}  // namespace gen3d::test
