#include "render/merge.h"

#include <oneapi/tbb/blocked_range.h>
#include <oneapi/tbb/parallel_for.h>
#include <oneapi/tbb/parallel_reduce.h>

#include <algorithm>
#include <cmath>
#include <string>
#include <utility>

#include "render/back_project.h"
#include "render/error.h"

namespace gen3d::render {
namespace {

constexpr size_t kGrain = 16384;

template <class F>
void parallel_texels(size_t n, F&& body) {
  tbb::parallel_for(tbb::blocked_range<size_t>(0, n, kGrain),
                    [&](const tbb::blocked_range<size_t>& r) {
                      for (size_t t = r.begin(); t < r.end(); ++t) body(t);
                    });
}

}  // namespace

namespace {

// float(view_weight) * cos^exponent, exactly as bake_weight computes it.
struct WeightFn {
  float w;
  double e;
  float operator()(float cos) const {
    const double c = cos;
    double p;
    if (c == 0.0) {
      p = 0.0;
    } else if (e == 4.0) {
      const double c2 = c * c;  // exact: a float's square fits in a double
      p = c2 * c2;              // one rounding, like a correctly rounded pow
    } else {
      p = std::pow(c, e);
    }
    return w * static_cast<float>(p);
  }
};

using Counts = std::pair<uint64_t, uint64_t>;

// The fast merge over n views of W x H x C textures. weight(v, t) gives view v's merge weight at
// texel t, tex(v) view v's texture pixels. The texel count of view v + 1 (which needs the weights
// accumulated through view v) is taken in the same pass as view v's accumulation.
template <class Weight, class Tex>
MergeResult merge_impl(size_t views, int W, int H, int C, Weight&& weight, Tex&& tex) {
  const size_t n = static_cast<size_t>(W) * H;
  MergeResult out;
  out.texture = image::Image(W, H, C, 0.0f);
  out.weight = image::Image(W, H, 1, 0.0f);
  float* acc = out.texture.pixels.data();
  float* trust = out.weight.pixels.data();
  const auto reduce = [&](auto&& body) {
    return tbb::parallel_reduce(
        tbb::blocked_range<size_t>(0, n, kGrain), Counts{0, 0},
        [&](const tbb::blocked_range<size_t>& r, Counts c) {
          for (size_t t = r.begin(); t < r.end(); ++t) body(t, c);
          return c;
        },
        [](Counts a, Counts b) {
          return Counts{a.first + b.first, a.second + b.second};
        });
  };
  const auto count = [&](size_t v, size_t t, Counts& c) {
    if (weight(v, t) > 0.0f) {
      ++c.first;
      c.second += trust[t] > 0.0f;
    }
  };
  Counts counts = reduce([&](size_t t, Counts& c) { count(0, t, c); });
  for (size_t v = 0; v < views; ++v) {
    MergeViewStat stat;
    stat.texels_with_weight = counts.first;
    stat.already_painted = counts.second;
    stat.ratio = static_cast<float>(counts.second) / static_cast<float>(counts.first);
    stat.skipped = stat.ratio > 0.99f;  // NaN (no weighted texel) compares false: kept
    out.views.push_back(stat);
    const bool next = v + 1 < views;
    const float* tv = tex(v);
    if (stat.skipped) {
      if (next) counts = reduce([&](size_t t, Counts& c) { count(v + 1, t, c); });
      continue;
    }
    counts = reduce([&](size_t t, Counts& c) {
      const float w = weight(v, t);
      if (w != 0.0f) {  // adding +-0 products would change nothing
        for (int ch = 0; ch < C; ++ch) acc[t * C + ch] += tv[t * C + ch] * w;
        trust[t] += w;
      }
      if (next) count(v + 1, t, c);
    });
  }
  out.trust_mask.resize(n);
  parallel_texels(n, [&](size_t t) {
    const float denom = std::max(trust[t], 1e-8f);
    for (int ch = 0; ch < C; ++ch) acc[t * C + ch] /= denom;
    out.trust_mask[t] = trust[t] > 1e-8f ? 255 : 0;
  });
  return out;
}

std::string shape(const image::Image& m) {
  return std::to_string(m.width) + "x" + std::to_string(m.height) + "x" +
         std::to_string(m.channels);
}

}  // namespace

image::Image bake_weight(const image::Image& cos, double view_weight, float exponent) {
  if (cos.channels != 1) {
    throw RenderError("bake_weight: cos map has " + std::to_string(cos.channels) +
                      " channels, expected 1");
  }
  image::Image out(cos.width, cos.height, 1);
  const WeightFn fn{static_cast<float>(view_weight), exponent};
  parallel_texels(cos.pixels.size(), [&](size_t t) { out.pixels[t] = fn(cos.pixels[t]); });
  return out;
}

MergeResult merge_fast(std::span<const image::Image> textures,
                       std::span<const image::Image> weights) {
  if (textures.empty() || textures.size() != weights.size()) {
    throw RenderError("merge_fast: " + std::to_string(textures.size()) + " textures and " +
                      std::to_string(weights.size()) + " weight maps (need the same, at least 1)");
  }
  const int W = textures[0].width, H = textures[0].height, C = textures[0].channels;
  for (size_t v = 0; v < textures.size(); ++v) {
    if (textures[v].width != W || textures[v].height != H || textures[v].channels != C ||
        weights[v].width != W || weights[v].height != H || weights[v].channels != 1) {
      throw RenderError("merge_fast: view " + std::to_string(v) + " has texture " +
                        shape(textures[v]) + " and weight " + shape(weights[v]) + ", expected " +
                        shape(textures[0]) + " and " + std::to_string(W) + "x" + std::to_string(H) +
                        "x1");
    }
  }
  return merge_impl(
      textures.size(), W, H, C, [&](size_t v, size_t t) { return weights[v].pixels[t]; },
      [&](size_t v) { return textures[v].pixels.data(); });
}

MergeResult merge_fast(std::span<const BackProjection> views, std::span<const double> view_weights,
                       float exponent) {
  if (views.empty() || views.size() != view_weights.size()) {
    throw RenderError("merge_fast: " + std::to_string(views.size()) + " back-projections and " +
                      std::to_string(view_weights.size()) +
                      " view weights (need the same, at least 1)");
  }
  const image::Image& t0 = views[0].texture;
  for (size_t v = 0; v < views.size(); ++v) {
    const image::Image& t = views[v].texture;
    const image::Image& c = views[v].cos;
    if (t.width != t0.width || t.height != t0.height || t.channels != t0.channels ||
        c.width != t0.width || c.height != t0.height || c.channels != 1) {
      throw RenderError("merge_fast: view " + std::to_string(v) + " has texture " + shape(t) +
                        " and cos " + shape(c) + ", expected " + shape(t0) + " and x1");
    }
  }
  std::vector<WeightFn> fns;
  for (double w : view_weights) fns.push_back({static_cast<float>(w), exponent});
  return merge_impl(
      views.size(), t0.width, t0.height, t0.channels,
      [&](size_t v, size_t t) { return fns[v](views[v].cos.pixels[t]); },
      [&](size_t v) { return views[v].texture.pixels.data(); });
}

MergeResult merge_fast(std::span<const SparseBackProjection> views,
                       std::span<const double> view_weights, float exponent) {
  if (views.empty() || views.size() != view_weights.size()) {
    throw RenderError("merge_fast: " + std::to_string(views.size()) +
                      " sparse back-projections and " + std::to_string(view_weights.size()) +
                      " view weights (need the same, at least 1)");
  }
  const int W = views[0].width, H = views[0].height, C = views[0].channels;
  for (size_t v = 0; v < views.size(); ++v) {
    const SparseBackProjection& b = views[v];
    if (b.width != W || b.height != H || b.channels != C || b.cos.size() != b.texel.size() ||
        b.texture.size() != b.texel.size() * static_cast<size_t>(C)) {
      throw RenderError("merge_fast: sparse view " + std::to_string(v) +
                        " is inconsistent or differs in size from view 0");
    }
    for (uint32_t t : b.texel) {
      if (t >= static_cast<size_t>(W) * H) {
        throw RenderError("merge_fast: sparse view " + std::to_string(v) + " lists texel " +
                          std::to_string(t) + " outside its " + std::to_string(W) + "x" +
                          std::to_string(H) + " map");
      }
    }
  }
  const size_t n = static_cast<size_t>(W) * H;
  MergeResult out;
  out.texture = image::Image(W, H, C, 0.0f);
  out.weight = image::Image(W, H, 1, 0.0f);
  float* acc = out.texture.pixels.data();
  float* trust = out.weight.pixels.data();
  for (size_t v = 0; v < views.size(); ++v) {
    const SparseBackProjection& b = views[v];
    const WeightFn fn{static_cast<float>(view_weights[v]), exponent};
    const size_t k = b.texel.size();
    // Unlisted texels have cos 0, hence weight 0: counting the listed ones is counting all.
    const Counts counts = tbb::parallel_reduce(
        tbb::blocked_range<size_t>(0, k, kGrain), Counts{0, 0},
        [&](const tbb::blocked_range<size_t>& r, Counts c) {
          for (size_t i = r.begin(); i < r.end(); ++i) {
            if (fn(b.cos[i]) > 0.0f) {
              ++c.first;
              c.second += trust[b.texel[i]] > 0.0f;
            }
          }
          return c;
        },
        [](Counts a, Counts c) {
          return Counts{a.first + c.first, a.second + c.second};
        });
    MergeViewStat stat;
    stat.texels_with_weight = counts.first;
    stat.already_painted = counts.second;
    stat.ratio = static_cast<float>(counts.second) / static_cast<float>(counts.first);
    stat.skipped = stat.ratio > 0.99f;
    out.views.push_back(stat);
    if (stat.skipped) continue;
    // Texels are listed once per view: updates are independent.
    parallel_texels(k, [&](size_t i) {
      const float w = fn(b.cos[i]);
      if (w == 0.0f) return;
      const size_t t = b.texel[i];
      for (int ch = 0; ch < C; ++ch) acc[t * C + ch] += b.texture[i * C + ch] * w;
      trust[t] += w;
    });
  }
  out.trust_mask.resize(n);
  parallel_texels(n, [&](size_t t) {
    const float denom = std::max(trust[t], 1e-8f);
    for (int ch = 0; ch < C; ++ch) acc[t * C + ch] /= denom;
    out.trust_mask[t] = trust[t] > 1e-8f ? 255 : 0;
  });
  return out;
}

}  // namespace gen3d::render
