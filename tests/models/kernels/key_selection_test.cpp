// FlashVDM key selection: the float-score selection (top_keys) against the double reference, over
// many sizes, with tied and nearly tied keys.

#include "models/kernels/key_selection.h"

#include <gtest/gtest.h>

#include <algorithm>
#include <cmath>
#include <random>
#include <vector>

namespace gen3d::models::kernels {
namespace {

using i64 = std::int64_t;

struct Case {
  i64 N, D, top_k, k_ld;
  int duplicates;        // keys copied from others (exact ties), per 16 keys
  float near;            // relative perturbation of further copies (near ties); 0: none
  bool cluster = false;  // every key a perturbed copy of key 0: the cut falls among near ties
};

void check(const Case& c, std::uint64_t seed) {
  SCOPED_TRACE(::testing::Message()
               << "N=" << c.N << " D=" << c.D << " top_k=" << c.top_k << " dup=" << c.duplicates
               << " near=" << c.near << " seed=" << seed);
  std::mt19937_64 rng(seed);
  std::normal_distribution<float> nd(0.0f, 1.0f);
  std::vector<float> k(static_cast<std::size_t>(c.N * c.k_ld), 1e30f);  // gaps poisoned
  for (i64 j = 0; j < c.N; ++j)
    for (i64 d = 0; d < c.D; ++d) k[static_cast<std::size_t>(j * c.k_ld + d)] = nd(rng);
  if (c.cluster)
    for (i64 j = 1; j < c.N; ++j)
      for (i64 d = 0; d < c.D; ++d)
        k[static_cast<std::size_t>(j * c.k_ld + d)] =
            k[static_cast<std::size_t>(d)] * (1.0f + c.near * nd(rng));
  std::uniform_int_distribution<i64> pick(0, c.N - 1);
  for (i64 j = 0; j < c.N; ++j) {
    if (static_cast<int>(j % 16) >= 2 * c.duplicates) continue;
    const i64 from = pick(rng);
    const bool perturb = c.near > 0.0f && j % 2 == 1;
    for (i64 d = 0; d < c.D; ++d) {
      const float v = k[static_cast<std::size_t>(from * c.k_ld + d)];
      k[static_cast<std::size_t>(j * c.k_ld + d)] = perturb ? v * (1.0f + c.near * nd(rng)) : v;
    }
  }
  // Queries: the mean is what matters; make it from a few sampled rows.
  const i64 n_q = 7, stride = 3;
  std::vector<float> q(static_cast<std::size_t>(n_q * c.D));
  for (float& v : q) v = nd(rng);
  std::vector<double> mean(static_cast<std::size_t>(c.D));
  sampled_query_mean(q.data(), c.D, n_q, stride, c.D, mean.data());
  // Float scores the way the decoder makes them: float(mean) . k_j in float32, another order.
  std::vector<float> scores(static_cast<std::size_t>(c.N));
  double l1_max = 0.0;
  for (i64 j = 0; j < c.N; ++j) {
    float acc = 0.0f;
    double l1 = 0.0;
    for (i64 d = c.D - 1; d >= 0; --d) {
      acc = std::fma(static_cast<float>(mean[static_cast<std::size_t>(d)]),
                     k[static_cast<std::size_t>(j * c.k_ld + d)], acc);
      l1 += std::abs(k[static_cast<std::size_t>(j * c.k_ld + d)]);
    }
    scores[static_cast<std::size_t>(j)] = acc;
    l1_max = std::max(l1_max, l1);
  }
  std::vector<i64> expected, actual;
  top_keys_reference(mean.data(), k.data(), c.k_ld, c.N, c.D, c.top_k, expected);
  TopKeysScratch scratch;
  top_keys(mean.data(), scores.data(), k.data(), c.k_ld, c.N, c.D, c.top_k, l1_max, actual,
           scratch);
  ASSERT_EQ(actual, expected);
}

TEST(KeySelection, FloatScoresSelectTheReferenceKeys) {
  const Case cases[] = {
      {1, 1, 1, 1, 0, 0.0f},
      {5, 3, 2, 4, 0, 0.0f},
      {7, 4, 7, 4, 0, 0.0f},
      {64, 8, 21, 8, 0, 0.0f},
      {300, 17, 100, 40, 1, 0.0f},
      {512, 64, 256, 128, 2, 0.0f},
      {513, 64, 171, 64, 4, 1e-7f},
      {1000, 33, 333, 33, 3, 1e-6f},
      {3072, 64, 1024, 128, 1, 1e-7f},
      {3072, 64, 1024, 2048, 0, 0.0f},
      {20, 5, 19, 5, 8, 0.0f},
      {100, 2, 50, 2, 6, 1e-7f},
      // The cut among near ties: float scores order these keys differently from double ones.
      {3072, 64, 1024, 128, 0, 2e-6f, true},
      {3072, 64, 1024, 64, 0, 1e-5f, true},
      {500, 16, 250, 16, 2, 1e-5f, true},
      {64, 64, 3, 64, 0, 1e-6f, true}};
  for (const Case& c : cases)
    for (std::uint64_t seed = 1; seed <= 4; ++seed) check(c, seed * 7919 + c.N);
}

TEST(KeySelection, TopKAtOrAboveKeyCountKeepsEveryKey) {
  std::vector<float> k(12, 0.5f), scores(4, 1.0f);
  const double mean[3] = {1.0, 2.0, 3.0};
  std::vector<i64> idx;
  TopKeysScratch scratch;
  top_keys(mean, scores.data(), k.data(), 3, 4, 3, 4, 1.5, idx, scratch);
  EXPECT_EQ(idx, (std::vector<i64>{0, 1, 2, 3}));
  top_keys(mean, scores.data(), k.data(), 3, 4, 3, 9, 1.5, idx, scratch);
  EXPECT_EQ(idx.size(), 4u);
}

}  // namespace
}  // namespace gen3d::models::kernels
