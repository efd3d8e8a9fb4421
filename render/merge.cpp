#include "render/merge.h"

#include <oneapi/tbb/blocked_range.h>
#include <oneapi/tbb/parallel_for.h>
#include <oneapi/tbb/parallel_reduce.h>

#include <algorithm>
#include <cmath>
#include <string>
#include <utility>

#include "render/error.h"

namespace gen3d::render {
namespace {

constexpr size_t kGrain = 16384;

template <class F>
void parallel_texels(size_t n, F&& body) {
  tbb::parallel_for(tbb::blocked_range<size_t>(0, n, kGrain), [&](const tbb::blocked_range<size_t>& r) {
    for (size_t t = r.begin(); t < r.end(); ++t) body(t);
  });
}

}  // namespace

mesh::Image bake_weight(const mesh::Image& cos, double view_weight, float exponent) {
  if (cos.channels != 1) {
    throw RenderError("bake_weight: cos map has " + std::to_string(cos.channels) +
                      " channels, expected 1");
  }
  mesh::Image out(cos.width, cos.height, 1);
  const float w = static_cast<float>(view_weight);
  // torch's scalar pow path (std::pow in double, rounded to float). Its vectorized path (Sleef
  // powf, 1 ulp) can differ in the last bit, so merged textures match the reference to ~1e-7.
  const double e = exponent;
  parallel_texels(cos.pixels.size(), [&](size_t t) { out.pixels[t] = w * static_cast<float>(std::pow(static_cast<double>(cos.pixels[t]), e));
  });
  return out;
}

MergeResult merge_fast(std::span<const mesh::Image> textures, std::span<const mesh::Image> weights) {
  if (textures.empty() || textures.size() != weights.size()) {
    throw RenderError("merge_fast: " + std::to_string(textures.size()) + " textures and " +
                      std::to_string(weights.size()) + " weight maps (need the same, at least 1)");
  }
  const int W = textures[0].width, H = textures[0].height, C = textures[0].channels;
  for (size_t v = 0; v < textures.size(); ++v) {
    if (textures[v].width != W || textures[v].height != H || textures[v].channels != C ||
        weights[v].width != W || weights[v].height != H || weights[v].channels != 1) {
      throw RenderError("merge_fast: view " + std::to_string(v) + " has texture " +
                        std::to_string(textures[v].width) + "x" + std::to_string(textures[v].height) +
                        "x" + std::to_string(textures[v].channels) + " and weight " +
                        std::to_string(weights[v].width) + "x" + std::to_string(weights[v].height) +
                        "x" + std::to_string(weights[v].channels) + ", expected " +
                        std::to_string(W) + "x" + std::to_string(H) + "x" + std::to_string(C) +
                        " and x1");
    }
  }
  const size_t n = static_cast<size_t>(W) * H;
  MergeResult out;
  out.texture = mesh::Image(W, H, C, 0.0f);
  out.weight = mesh::Image(W, H, 1, 0.0f);
  float* acc = out.texture.pixels.data();
  float* trust = out.weight.pixels.data();
  for (size_t v = 0; v < textures.size(); ++v) {
    const float* tex = textures[v].pixels.data();
    const float* w = weights[v].pixels.data();
    using Counts = std::pair<uint64_t, uint64_t>;
    const Counts counts = tbb::parallel_reduce(
        tbb::blocked_range<size_t>(0, n, kGrain), Counts{0, 0},
        [&](const tbb::blocked_range<size_t>& r, Counts c) {
          for (size_t t = r.begin(); t < r.end(); ++t) {
            if (w[t] > 0.0f) {
              ++c.first;
              c.second += trust[t] > 0.0f;
            }
          }
          return c;
        },
        [](Counts a, Counts b) { return Counts{a.first + b.first, a.second + b.second}; });
    MergeViewStat stat;
    stat.texels_with_weight = counts.first;
    stat.already_painted = counts.second;
    stat.ratio = static_cast<float>(counts.second) / static_cast<float>(counts.first);
    stat.skipped = stat.ratio > 0.99f;  // NaN (no weighted texel) compares false: kept
    out.views.push_back(stat);
    if (stat.skipped) continue;
    parallel_texels(n, [&](size_t t) {
      for (int c = 0; c < C; ++c) acc[t * C + c] += tex[t * C + c] * w[t];
      trust[t] += w[t];
    });
  }
  out.trust_mask.resize(n);
  parallel_texels(n, [&](size_t t) {
    const float denom = std::max(trust[t], 1e-8f);
    for (int c = 0; c < C; ++c) acc[t * C + c] /= denom;
    out.trust_mask[t] = trust[t] > 1e-8f ? 255 : 0;
  });
  return out;
}

}  // namespace gen3d::render
