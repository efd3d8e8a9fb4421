#include "models/shape/multiview.h"

#include <cmath>
#include <string>

#include "models/core/error.h"

namespace gen3d::models {

std::optional<int> multiview_index(std::string_view name) {
  for (std::size_t i = 0; i < kMultiviewNames.size(); ++i)
    if (kMultiviewNames[i] == name) return static_cast<int>(i);
  return std::nullopt;
}

Tensor multiview_embedding(int hidden, int view_num) {
  if (hidden <= 0 || hidden % 2 != 0 || view_num <= 0)
    throw ModelError("multiview embedding: the width (" + std::to_string(hidden) +
                     ") must be even and positive, and the view count (" +
                     std::to_string(view_num) + ") positive");
  const int half = hidden / 2;
  Tensor out({view_num, hidden});  // [V, C]
  for (int v = 0; v < view_num; ++v)
    for (int i = 0; i < half; ++i) {
      // numpy: omega = arange(D/2, float64) / (D/2); omega = 1 / 10000**omega; out = pos * omega.
      const double omega = 1.0 / std::pow(10000.0, static_cast<double>(i) / half);
      const double a = static_cast<double>(static_cast<float>(v)) * omega;  // pos is float32
      out.data()[v * hidden + i] = static_cast<float>(std::sin(a));
      out.data()[v * hidden + half + i] = static_cast<float>(std::cos(a));
    }
  return out;
}

Tensor add_multiview_embedding(const Tensor& hidden, std::span<const int> view_idxs,
                               const Tensor& view_embed) {
  if (hidden.rank() != 3 || view_embed.rank() != 2 || hidden.dim(2) != view_embed.dim(1) ||
      hidden.dim(0) != static_cast<std::int64_t>(view_idxs.size()) || view_idxs.empty())
    throw ModelError("multiview condition: hidden " + hidden.shape().str() + ", " +
                     std::to_string(view_idxs.size()) + " view indices and view embedding " +
                     view_embed.shape().str() + " do not fit ([V, T, C], V, [views, C])");
  const std::int64_t V = hidden.dim(0), T = hidden.dim(1), C = hidden.dim(2);
  for (std::size_t i = 0; i < view_idxs.size(); ++i) {
    if (view_idxs[i] < 0 || view_idxs[i] >= view_embed.dim(0))
      throw ModelError("multiview condition: view index " + std::to_string(view_idxs[i]) +
                       " is outside the " + std::to_string(view_embed.dim(0)) + " views");
    if (i > 0 && view_idxs[i] <= view_idxs[i - 1])
      throw ModelError("multiview condition: view indices must increase (a view given twice?)");
  }
  Tensor out({1, V * T, C});  // [1, V T, C]
  for (std::int64_t v = 0; v < V; ++v) {
    const float* e = view_embed.data() + view_idxs[v] * C;  // the row of this view's index
    for (std::int64_t t = 0; t < T; ++t) {
      const float* h = hidden.data() + (v * T + t) * C;
      float* o = out.data() + (v * T + t) * C;
      for (std::int64_t c = 0; c < C; ++c) o[c] = h[c] + e[c];
    }
  }
  return out;
}

}  // namespace gen3d::models
