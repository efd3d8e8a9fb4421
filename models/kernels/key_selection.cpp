#include "models/kernels/key_selection.h"

#include <algorithm>
#include <cmath>
#include <limits>
#include <numeric>

namespace gen3d::models::kernels {

namespace {

using i64 = std::int64_t;

// The double score of one key, summed exactly as top_keys_reference sums it.
double exact_score(const double* mean, const float* kj, i64 D) {
  double acc = 0.0;
  for (i64 d = 0; d < D; ++d) acc += mean[d] * kj[d];
  return acc;
}

}  // namespace

void sampled_query_mean(const float* q, i64 q_ld, i64 n_q, i64 stride, i64 D, double* mean) {
  std::fill_n(mean, D, 0.0);
  i64 ns = 0;
  for (i64 s = 0; s < n_q; s += stride, ++ns)
    for (i64 d = 0; d < D; ++d) mean[d] += q[s * q_ld + d];
  for (i64 d = 0; d < D; ++d) mean[d] /= static_cast<double>(ns);
}

void top_keys_reference(const double* mean, const float* k, i64 k_ld, i64 N, i64 D, i64 top_k,
                        std::vector<i64>& idx) {
  std::vector<double> score(static_cast<std::size_t>(N));
  for (i64 j = 0; j < N; ++j)
    score[static_cast<std::size_t>(j)] = exact_score(mean, k + j * k_ld, D);
  idx.resize(static_cast<std::size_t>(N));
  std::iota(idx.begin(), idx.end(), i64{0});
  std::partial_sort(idx.begin(), idx.begin() + top_k, idx.end(), [&](i64 a, i64 b) {
    const double sa = score[static_cast<std::size_t>(a)], sb = score[static_cast<std::size_t>(b)];
    return sa > sb || (sa == sb && a < b);
  });
  idx.resize(static_cast<std::size_t>(top_k));
  std::sort(idx.begin(), idx.end());
}

void top_keys(const double* mean, const float* scores, const float* k, i64 k_ld, i64 N, i64 D,
              i64 top_k, double key_l1_max, std::vector<i64>& idx, TopKeysScratch& w) {
  idx.clear();
  if (top_k >= N) {
    idx.resize(static_cast<std::size_t>(N));
    std::iota(idx.begin(), idx.end(), i64{0});
    return;
  }
  if (top_k <= 0) return;
  // |float score - exact score| <= B for every key: the float mean's rounding (u |m_d|) and the
  // float dot product (gamma_D sum |m_d| |k_jd|, any order, with or without FMA), plus the double
  // sum's own error, all below (D + 2) u max|m| |k_j|_1 / (1 - (D + 2) u); doubled for margin.
  double m_max = 0.0;
  for (i64 d = 0; d < D; ++d) m_max = std::max(m_max, std::abs(mean[d]));
  constexpr double u = std::numeric_limits<float>::epsilon() / 2;
  const double g = static_cast<double>(D + 2) * u;
  const double B = 2.0 * g / (1.0 - g) * m_max * key_l1_max;
  // t: the top_k-th largest float score.
  w.cut.assign(scores, scores + N);
  std::nth_element(w.cut.begin(), w.cut.begin() + (top_k - 1), w.cut.end(), std::greater<>());
  const double t = w.cut[static_cast<std::size_t>(top_k - 1)];
  // A key scoring above t + 2B beats every key scoring t or less in exact arithmetic (at least
  // N - top_k + 1 of them): it is selected. Below t - 2B it loses to at least top_k keys: it is
  // not. The others are decided on their exact scores.
  w.ambiguous.clear();
  for (i64 j = 0; j < N; ++j) {
    const double s = scores[j];
    if (s > t + 2 * B)
      idx.push_back(j);
    else if (s >= t - 2 * B)
      w.ambiguous.push_back(j);
  }
  const i64 need = top_k - static_cast<i64>(idx.size());
  if (need > 0) {
    w.exact.resize(w.ambiguous.size());
    for (std::size_t a = 0; a < w.ambiguous.size(); ++a)
      w.exact[a] = exact_score(mean, k + w.ambiguous[a] * k_ld, D);
    std::vector<i64>& amb = w.ambiguous;
    std::vector<std::size_t> order(amb.size());
    std::iota(order.begin(), order.end(), std::size_t{0});
    std::partial_sort(
        order.begin(), order.begin() + need, order.end(), [&](std::size_t a, std::size_t b) {
          return w.exact[a] > w.exact[b] || (w.exact[a] == w.exact[b] && amb[a] < amb[b]);
        });
    for (i64 a = 0; a < need; ++a) idx.push_back(amb[order[static_cast<std::size_t>(a)]]);
  }
  std::sort(idx.begin(), idx.end());
}

}  // namespace gen3d::models::kernels
