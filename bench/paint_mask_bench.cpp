// How sparse the 2.0 turbo paint model's 3-D proximity mask would be on real meshes.
//
// Hunyuan3D-2's hy3dgen/texgen/hunyuanpaint/unet/modules.py defines compute_voxel_grid_mask /
// compute_multi_resolution_mask (grids 32, 16, 8) for the multiview attention of a turbo block
// (Basic2p5DTransformerBlock with is_turbo), but UNet2p5DConditionModel sets is_turbo = False and
// never builds the mask, so the released turbo paint model runs dense multiview attention, as
// this runtime does. This program measures what skipping the mask's zero blocks could have saved:
// it renders the official six views' position maps (render 2048 px, resized to the network's
// 512 px as views_from_model does), builds the mask exactly as the function above (cells with
// fewer than 5 foreground pixels are put at the origin; cells closer than 1.73 / grid attend) and
// prints, per grid, the fraction of mask entries that are true (of all pairs, and of the pairs of
// two foreground cells), the fraction of background cells, and of 16×16 / 64×64 (query, key)
// token tiles with no true entry, plus each level's share of the multiview attention FLOPs.
//
// Usage: gen3d_paint_mask_bench MESH... (prints one JSON document)

#include <cmath>
#include <cstdint>
#include <cstdio>
#include <string>
#include <vector>

#include <nlohmann/json.hpp>

#include "mesh/io.h"
#include "mesh/normalize.h"
#include "render/camera.h"
#include "render/maps.h"
#include "render/rasterizer.h"
#include "render/view_images.h"

namespace {

using namespace gen3d;

constexpr int kRender = 2048, kView = 512;

// The official cell centres of one grid: (N·g², 3), from the views' position maps (N, S, S, 3).
std::vector<float> cell_positions(const std::vector<float>& maps, int views, int g) {
  const int cell = kView / g;
  std::vector<float> out(static_cast<std::size_t>(views) * g * g * 3, 0.0f);
  for (int v = 0; v < views; ++v)
    for (int gy = 0; gy < g; ++gy)
      for (int gx = 0; gx < g; ++gx) {
        double sum[3] = {0, 0, 0};
        int count = 0;
        for (int y = gy * cell; y < (gy + 1) * cell; ++y)
          for (int x = gx * cell; x < (gx + 1) * cell; ++x) {
            const float* p =
                maps.data() + ((static_cast<std::size_t>(v) * kView + y) * kView + x) * 3;
            // valid_mask = (position != 1).all(dim=channels)
            if (p[0] == 1.0f || p[1] == 1.0f || p[2] == 1.0f) continue;
            for (int c = 0; c < 3; ++c) sum[c] += p[c];
            ++count;
          }
        if (count < 5) continue;  // grid_position[count_masked < 5] = 0
        float* o = out.data() + ((static_cast<std::size_t>(v) * g + gy) * g + gx) * 3;
        for (int c = 0; c < 3; ++c) o[c] = static_cast<float>(sum[c] / count);
      }
  return out;
}

nlohmann::json mask_density(const std::vector<float>& maps, int views, int g) {
  const std::vector<float> p = cell_positions(maps, views, g);
  const std::int64_t n = static_cast<std::int64_t>(views) * g * g;
  const float thr = 1.73f / static_cast<float>(g);
  std::vector<std::uint8_t> m(static_cast<std::size_t>(n * n));
  std::vector<std::uint8_t> bg(static_cast<std::size_t>(n));
  for (std::int64_t i = 0; i < n; ++i)
    bg[static_cast<std::size_t>(i)] = p[i * 3] == 0 && p[i * 3 + 1] == 0 && p[i * 3 + 2] == 0;
  std::int64_t on = 0, background = 0, fg_on = 0, fg_pairs = 0;
  for (std::int64_t i = 0; i < n; ++i) {
    background += bg[static_cast<std::size_t>(i)];
    for (std::int64_t j = 0; j < n; ++j) {
      const float dx = p[i * 3] - p[j * 3], dy = p[i * 3 + 1] - p[j * 3 + 1],
                  dz = p[i * 3 + 2] - p[j * 3 + 2];
      const bool a = std::sqrt(dx * dx + dy * dy + dz * dz) < thr;
      m[static_cast<std::size_t>(i * n + j)] = a;
      on += a;
      if (!bg[static_cast<std::size_t>(i)] && !bg[static_cast<std::size_t>(j)]) {
        ++fg_pairs;
        fg_on += a;
      }
    }
  }
  nlohmann::json tiles;
  for (const int t : {16, 64}) {
    std::int64_t empty = 0, total = 0;
    for (std::int64_t i0 = 0; i0 < n; i0 += t)
      for (std::int64_t j0 = 0; j0 < n; j0 += t) {
        bool any = false;
        for (std::int64_t i = i0; i < std::min(n, i0 + t) && !any; ++i)
          for (std::int64_t j = j0; j < std::min(n, j0 + t) && !any; ++j)
            any = m[static_cast<std::size_t>(i * n + j)] != 0;
        empty += !any;
        ++total;
      }
    tiles[std::to_string(t)] = static_cast<double>(empty) / static_cast<double>(total);
  }
  return {{"grid", g},
          {"tokens", n},
          {"true_fraction", static_cast<double>(on) / static_cast<double>(n * n)},
          {"background_cells", static_cast<double>(background) / static_cast<double>(n)},
          {"true_fraction_foreground_pairs",
           fg_pairs ? static_cast<double>(fg_on) / static_cast<double>(fg_pairs) : 0.0},
          {"empty_tile_fraction", tiles}};
}

}  // namespace

int main(int argc, char** argv) {
  if (argc < 2) {
    std::fprintf(stderr, "usage: %s MESH...\n", argv[0]);
    return 2;
  }
  const render::ViewSet views = render::ViewSet::hunyuan6();
  const int nv = static_cast<int>(views.size());
  nlohmann::json doc;
  // Multiview attention FLOPs per site ∝ (N·L)²·C: the mask has no level for the 64×64 latents
  // (its grids 32, 16, 8 are levels 1, 2 and the mid block), which run dense.
  {
    const double lv[4][3] = {{64, 320, 5}, {32, 640, 5}, {16, 1280, 5}, {8, 1280, 1}};
    double total = 0;
    for (const auto& l : lv) total += l[2] * std::pow(nv * l[0] * l[0], 2) * l[1];
    nlohmann::json share;
    for (const auto& l : lv)
      share[std::to_string(static_cast<int>(l[0])) + "x" + std::to_string(static_cast<int>(l[0]))] =
          l[2] * std::pow(nv * l[0] * l[0], 2) * l[1] / total;
    doc["multiview_attention_flop_share_by_latent_size"] = share;
  }
  for (int a = 1; a < argc; ++a) {
    mesh::Mesh m = mesh::load_mesh(argv[a]);
    mesh::normalize_mesh(m);
    std::vector<float> maps(static_cast<std::size_t>(nv) * kView * kView * 3);
    for (int v = 0; v < nv; ++v) {
      const render::Raster r =
          render::rasterize(m, views[static_cast<std::size_t>(v)].camera, kRender, kRender);
      render::paint_input_rgb(render::position_map(m, r), kView, 1.0f,
                              maps.data() + static_cast<std::size_t>(v) * kView * kView * 3);
    }
    std::int64_t fg = 0;
    for (std::size_t i = 0; i < maps.size(); i += 3)
      fg += maps[i] != 1.0f && maps[i + 1] != 1.0f && maps[i + 2] != 1.0f;
    nlohmann::json grids = nlohmann::json::array();
    for (const int g : {32, 16, 8}) grids.push_back(mask_density(maps, nv, g));
    doc["meshes"].push_back(
        {{"mesh", argv[a]},
         {"faces", m.faces.size()},
         {"foreground_pixels", static_cast<double>(fg) * 3 / static_cast<double>(maps.size())},
         {"grids", grids}});
    std::fprintf(stderr, "%s: done\n", argv[a]);
  }
  std::printf("%s\n", doc.dump(2).c_str());
  return 0;
}
