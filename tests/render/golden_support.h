#pragma once
// Access to a texgen golden directory (GEN3D_TEXGEN_GOLDEN_DIR, default tests/data/golden/texgen):
// its manifest, .npy arrays and PNGs, and the golden mesh built from its .npy inputs.

#include <gtest/gtest.h>

#include <filesystem>
#include <fstream>
#include <nlohmann/json.hpp>
#include <opencv2/imgcodecs.hpp>
#include <opencv2/imgproc.hpp>
#include <string>
#include <vector>

#include "mesh/mesh.h"
#include "render/camera.h"
#include "support/npy.h"
#include "support/paths.h"

namespace gen3d::render::testing {

struct GoldenView {
  int index = 0;
  Camera camera;
  double weight = 1.0;
};

class GoldenDir {
 public:
  GoldenDir() {
    dir_ =
        gen3d::test::env_or("GEN3D_TEXGEN_GOLDEN_DIR", gen3d::test::data_dir() + "/golden/texgen");
    const std::string path = dir_ + "/manifest.json";
    if (std::filesystem::exists(path)) {
      std::ifstream in(path);
      manifest_ = nlohmann::json::parse(in);
      ok_ = true;
    }
  }
  bool ok() const { return ok_; }
  const std::string& dir() const { return dir_; }
  const nlohmann::json& manifest() const { return manifest_; }
  bool has(const std::string& name) const { return std::filesystem::exists(dir_ + "/" + name); }
  gen3d::test::NpyArray npy(const std::string& name) const {
    return gen3d::test::read_npy(dir_ + "/" + name);
  }
  // 8-bit PNG as stored: grey -> 1 channel, colour -> RGB order.
  cv::Mat png(const std::string& name) const {
    cv::Mat m = cv::imread(dir_ + "/" + name, cv::IMREAD_UNCHANGED);
    if (m.empty()) throw std::runtime_error("cannot read " + dir_ + "/" + name);
    if (m.channels() == 3) cv::cvtColor(m, m, cv::COLOR_BGR2RGB);
    return m;
  }

  int render_size() const { return manifest_.at("render_size").get<int>(); }
  int texture_size() const { return manifest_.at("texture_size").get<int>(); }
  Camera base_camera() const {
    Camera c;
    c.distance = manifest_.value("camera_distance", 1.45);
    c.ortho_scale = manifest_.value("ortho_scale", 1.2);
    return c;
  }
  std::vector<GoldenView> views() const {
    std::vector<GoldenView> out;
    for (const auto& v : manifest_.at("views")) {
      GoldenView g;
      g.index = v.at("index").get<int>();
      g.camera = base_camera();
      g.camera.elev = v.at("elev").get<double>();
      g.camera.azim = v.at("azim").get<double>();
      g.weight = v.at("weight").get<double>();
      out.push_back(g);
    }
    return out;
  }
  // The mesh as the renderer holds it: normalized internal positions, faces, loaded UVs (v
  // flipped, as after mesh::normalize_mesh), uv_faces = faces.
  mesh::Mesh mesh() const {
    mesh::Mesh m;
    const auto pos = npy("vtx_pos_normalized.npy");
    const auto faces = npy("faces.npy");
    const auto uv = npy("vtx_uv_loaded.npy");
    const std::vector<float> p = pos.as_float();
    for (size_t i = 0; i + 2 < p.size(); i += 3) m.positions.push_back({p[i], p[i + 1], p[i + 2]});
    const std::vector<int32_t> f = faces.as_int();
    for (size_t i = 0; i + 2 < f.size(); i += 3) {
      m.faces.push_back({static_cast<uint32_t>(f[i]), static_cast<uint32_t>(f[i + 1]),
                         static_cast<uint32_t>(f[i + 2])});
    }
    const std::vector<float> t = uv.as_float();
    for (size_t i = 0; i + 1 < t.size(); i += 2) m.uvs.push_back({t[i], t[i + 1]});
    m.uv_faces = m.faces;
    return m;
  }

 private:
  std::string dir_;
  nlohmann::json manifest_;
  bool ok_ = false;
};

#define GEN3D_REQUIRE_GOLDEN(g)                                           \
  do {                                                                    \
    if (!(g).ok()) GTEST_SKIP() << "no golden manifest in " << (g).dir(); \
  } while (0)

#define GEN3D_REQUIRE_MESH(g)                                                            \
  do {                                                                                   \
    for (const char* f : {"vtx_pos_normalized.npy", "faces.npy", "vtx_uv_loaded.npy"}) { \
      if (!(g).has(f)) GTEST_SKIP() << "golden mesh input absent: " << f;                \
    }                                                                                    \
  } while (0)

#define GEN3D_REQUIRE_FILE(g, name)                                       \
  do {                                                                    \
    if (!(g).has(name)) GTEST_SKIP() << "golden file absent: " << (name); \
  } while (0)

}  // namespace gen3d::render::testing
