#include "mesh/vertex_inpaint.h"

#include <algorithm>
#include <cmath>

#include "mesh/error.h"

namespace gen3d::mesh {

std::array<int, 2> uv_to_texel(const Vec2& uv, int texture_size) {
  const double scale = static_cast<double>(texture_size - 1);
  // nearbyint follows the current rounding mode, which is round-to-nearest-even by default.
  const int row = static_cast<int>(std::nearbyint((1.0 - static_cast<double>(uv[1])) * scale));
  const int col = static_cast<int>(std::nearbyint(static_cast<double>(uv[0]) * scale));
  return {std::clamp(row, 0, texture_size - 1), std::clamp(col, 0, texture_size - 1)};
}

VertexInpaintStats vertex_inpaint(const Mesh& mesh, image::Image& texture,
                                  std::vector<uint8_t>& mask, bool v_flipped) {
  if (!mesh.has_uvs()) throw MeshError("vertex inpainting needs a mesh with UVs");
  const int size = texture.width;
  if (texture.height != size || mask.size() != static_cast<size_t>(size) * size)
    throw MeshError("vertex inpainting needs a square texture and a mask of the same size");
  const int channels = texture.channels;
  const size_t n = mesh.uvs.size();

  std::vector<uint32_t> position_of(n, UINT32_MAX);
  for (size_t f = 0; f < mesh.faces.size(); ++f)
    for (int k = 0; k < 3; ++k)
      if (position_of[mesh.uv_faces[f][k]] == UINT32_MAX)
        position_of[mesh.uv_faces[f][k]] = mesh.faces[f][k];

  std::vector<std::array<int, 2>> texel(n);
  for (size_t i = 0; i < n; ++i) {
    const Vec2& uv = mesh.uvs[i];
    texel[i] = uv_to_texel(v_flipped ? Vec2{uv[0], 1.0f - uv[1]} : uv, size);
  }

  // Colours are float32 and are summed in float32 with each float64 weight rounded to float32, as
  // the reference's numpy arithmetic does (a float32 array times a float64 scalar stays float32);
  // only the weight total is float64. Summing in double instead differs in the last bit, which the
  // 8-bit truncation before cv::inpaint turns into whole steps at some texture sizes.
  std::vector<float> color(n * channels, 0.0f);
  std::vector<uint8_t> known(n, 0);
  std::vector<uint32_t> work;  // one entry per corner whose vertex is unknown, duplicates kept
  std::vector<std::vector<uint32_t>> neighbours(n);
  for (size_t f = 0; f < mesh.faces.size(); ++f) {
    for (int k = 0; k < 3; ++k) {
      const uint32_t v = mesh.uv_faces[f][k];
      const auto [row, col] = texel[v];
      if (mask[static_cast<size_t>(row) * size + col]) {
        known[v] = 1;
        const float* px = texture.at(col, row);
        for (int c = 0; c < channels; ++c) color[v * channels + c] = px[c];
      } else {
        work.push_back(v);
      }
      neighbours[v].push_back(mesh.uv_faces[f][(k + 1) % 3]);
    }
  }
  VertexInpaintStats stats;
  for (uint8_t k : known) stats.known_vertices += k;

  const auto distance = [&](uint32_t a, uint32_t b) {
    const Vec3& p = mesh.positions[position_of[a]];
    const Vec3& q = mesh.positions[position_of[b]];
    const float dx = q[0] - p[0], dy = q[1] - p[1], dz = q[2] - p[2];
    return std::sqrt(dx * dx + dy * dy + dz * dz);
  };

  int counter = 2;
  size_t last = 0;
  std::vector<float> sum(channels);
  while (counter > 0) {
    size_t uncoloured = 0;
    for (uint32_t v : work) {
      std::fill(sum.begin(), sum.end(), 0.0f);
      double weight_sum = 0.0;
      for (uint32_t u : neighbours[v]) {
        if (!known[u]) continue;
        const double d = std::max(static_cast<double>(distance(v, u)), 1e-4);
        const double w = 1.0 / d;
        const double w2 = w * w;
        const float wf = static_cast<float>(w2);
        for (int c = 0; c < channels; ++c) sum[c] += color[u * channels + c] * wf;
        weight_sum += w2;
      }
      if (weight_sum > 0.0) {
        const float total = static_cast<float>(weight_sum);
        for (int c = 0; c < channels; ++c) color[v * channels + c] = sum[c] / total;
        known[v] = 1;
      } else {
        ++uncoloured;
      }
    }
    counter += uncoloured == last ? -1 : 1;
    last = uncoloured;
    ++stats.sweeps;
  }

  for (size_t v = 0; v < n; ++v) {
    if (!known[v] || position_of[v] == UINT32_MAX) continue;
    const auto [row, col] = texel[v];
    float* px = texture.at(col, row);
    for (int c = 0; c < channels; ++c) px[c] = color[v * channels + c];
    mask[static_cast<size_t>(row) * size + col] = 255;
  }
  size_t total = 0;
  for (size_t v = 0; v < n; ++v) total += known[v] && position_of[v] != UINT32_MAX;
  stats.filled_vertices = total - std::min(total, stats.known_vertices);
  for (size_t v = 0; v < n; ++v)
    stats.unreached_vertices += !known[v] && position_of[v] != UINT32_MAX;
  return stats;
}

}  // namespace gen3d::mesh
