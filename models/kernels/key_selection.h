#pragma once
// FlashVDM's adaptive key selection for one attention group and head (specs/volume-decoding.md
// 6.2 / 6.3, mode "mean"): score(key j) = mean over the group's sampled queries of q . k_j (raw
// dot product), the top_k highest kept, ties to the lowest index, returned sorted by index.
//
// Scores are defined in double precision (the mean in double, then each dot product in double,
// d = 0..D-1). top_keys_reference computes every score that way; top_keys takes float32 scores
// of the float-rounded mean (one GEMM for many groups, see ShapeVAE's geometry decoder) and
// recomputes in double only the keys whose float score is too close to the cut to decide, so
// both select the same keys.

#include <cstdint>
#include <vector>

namespace gen3d::models::kernels {

// mean[d] = (sum over s = 0, stride, 2 stride, ... < n_q of q[s * q_ld + d]) / count, in double.
void sampled_query_mean(const float* q, std::int64_t q_ld, std::int64_t n_q, std::int64_t stride,
                        std::int64_t D, double* mean);

// Keys k[j * k_ld + d], j < N, d < D. idx: the top_k selected key indices, ascending.
void top_keys_reference(const double* mean, const float* k, std::int64_t k_ld, std::int64_t N,
                        std::int64_t D, std::int64_t top_k, std::vector<std::int64_t>& idx);

struct TopKeysScratch {
  std::vector<float> cut;
  std::vector<std::int64_t> ambiguous;
  std::vector<double> exact;
};

// The same selection from scores[j] = float32 dot product of float(mean) with k_j (any
// summation order), given key_l1_max = the largest L1 norm of the N keys (sum_d |k_jd|).
void top_keys(const double* mean, const float* scores, const float* k, std::int64_t k_ld,
              std::int64_t N, std::int64_t D, std::int64_t top_k, double key_l1_max,
              std::vector<std::int64_t>& idx, TopKeysScratch& scratch);

}  // namespace gen3d::models::kernels
