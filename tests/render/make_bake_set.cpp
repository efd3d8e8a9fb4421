// Writes the bake of a texgen golden directory's view inputs at another texture size:
//   make_bake_set SIZE OUT_DIR   (the golden directory as for the golden tests)
// OUT_DIR gets bake_texture.npy (SIZE x SIZE x 3 float32) and bake_trust_mask.png: every view
// back-projected at the golden render size into a SIZE texture and merged with the fast method,
// as GoldenTexgen.BakeAllViews checks against the reference at the golden size (max 1e-5).

#include <cstdint>
#include <cstdio>
#include <filesystem>
#include <fstream>
#include <sstream>
#include <string>
#include <vector>

#include "golden_support.h"
#include "render/back_project.h"
#include "render/merge.h"
#include "render/rasterizer.h"

namespace {

using gen3d::render::testing::GoldenDir;

void write_npy(const std::string& path, const std::vector<float>& values, int h, int w, int c) {
  std::ostringstream dict;
  dict << "{'descr': '<f4', 'fortran_order': False, 'shape': (" << h << ", " << w << ", " << c
       << "), }";
  // Magic, version and length take 10 bytes; the header ends in a newline at a multiple of 64.
  const size_t unpadded = 10 + dict.str().size() + 1;
  dict << std::string((64 - unpadded % 64) % 64, ' ') << '\n';
  const std::string header = dict.str();
  std::ofstream out(path, std::ios::binary);
  out.write("\x93NUMPY\x01\x00", 8);
  const uint16_t len = static_cast<uint16_t>(header.size());
  const char len_bytes[2] = {static_cast<char>(len & 0xff), static_cast<char>(len >> 8)};
  out.write(len_bytes, 2);
  out.write(header.data(), static_cast<std::streamsize>(header.size()));
  out.write(reinterpret_cast<const char*>(values.data()),
            static_cast<std::streamsize>(values.size() * sizeof(float)));
  if (!out) throw std::runtime_error("cannot write " + path);
}

}  // namespace

int main(int argc, char** argv) {
  if (argc != 3) {
    std::fprintf(stderr, "usage: %s SIZE OUT_DIR\n", argv[0]);
    return 2;
  }
  namespace r = gen3d::render;
  const int size = std::stoi(argv[1]);
  const std::string out_dir = argv[2];
  const GoldenDir g;
  if (!g.ok()) {
    std::fprintf(stderr, "no golden manifest in %s\n", g.dir().c_str());
    return 1;
  }
  const gen3d::mesh::Mesh m = g.mesh();
  std::vector<r::BackProjection> views;
  std::vector<double> weights;
  for (const auto& v : g.views()) {
    // The view as the reference reads it: uint8 / 255.0 (float64) -> float32.
    std::ostringstream name;
    name << 'v' << v.index << "_view_input.png";
    const cv::Mat png = g.png(name.str());
    gen3d::image::Image view(png.cols, png.rows, png.channels());
    for (size_t i = 0; i < view.pixels.size(); ++i)
      view.pixels[i] = static_cast<float>(png.data[i] / 255.0);
    r::BakeOptions o;
    o.render_size = g.render_size();
    o.texture_size = size;
    views.push_back(
        r::back_project(m, r::rasterize(m, v.camera, view.width, view.height), v.camera, view, o));
    weights.push_back(v.weight);
  }
  const r::MergeResult merged = r::merge_fast(views, weights, g.manifest().value("bake_exp", 4.0f));
  write_npy(std::filesystem::path(out_dir) / "bake_texture.npy", merged.texture.pixels, size, size,
            merged.texture.channels);
  const cv::Mat mask(size, size, CV_8UC1, const_cast<uint8_t*>(merged.trust_mask.data()));
  if (!cv::imwrite(std::filesystem::path(out_dir) / "bake_trust_mask.png", mask))
    throw std::runtime_error("cannot write the trust mask");
  return 0;
}
