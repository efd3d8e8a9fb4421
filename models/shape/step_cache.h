#pragma once
// Step-level DiT caches: strategies the sampler consults every denoising step to decide whether
// the DiT blocks run (FULL), are replaced by a cached residual (SKIP) or by Taylor-predicted
// branch outputs (PREDICT). Normative spec: ../shared/specs/dit-cache.md (section numbers below).
//
// Every cache keeps all its state per run: reset(N) at the start of a run clears it (§2.4).
// Decisions are taken once per step for the whole (CFG-batched) DiT batch (§2.2).

#include <cstddef>
#include <limits>
#include <memory>
#include <string>
#include <string_view>
#include <vector>

#include "models/core/tensor.h"
#include "models/shape/dit_pass.h"

namespace gen3d::models {

enum class StepDecision { kFull, kSkip, kPredict, kElided };
const char* to_string(StepDecision d);

enum class CacheMethod { kNone, kFBCache, kTeaCache, kTaylorSeer };
const char* to_string(CacheMethod m);  // "none", "fbcache", "teacache", "taylorseer"
CacheMethod parse_cache_method(std::string_view name);  // also NoCache/FBCache/...; throws

struct FBCacheOptions {
  double rel_l1_thresh = 0.025;  // tau: SKIP iff statistic < tau (strict); <= 0 never skips
  // previous_step (CANN, default): compare with the previous step, relL1_cur, reference updated
  // every step. last_computed (ParaAttention / cache-dit): compare with the last FULL step,
  // relL1_prev, reference updated on FULL steps only (§4.2).
  bool last_computed = false;
  // false: compare block 0's output h1 (CANN); true: its residual h1 - h0 (ParaAttention).
  bool compare_residual = false;
  int warmup_steps = 0;  // steps 0..warmup-1 are FULL (ParaAttention option; CANN has none)
};

struct TeaCacheOptions {
  double rel_l1_thresh = 0.1;  // tau on the accumulated |P(r)|
  int warmup = 2;              // W: steps < W and >= N - W are FULL (forced)
  // Rescale polynomial, highest degree first (TeaCache's HunyuanVideo fit, §5.2).
  std::vector<double> coefficients{733.226126, -401.131952, 67.5869174, -3.149879, 0.0961237896};
};

struct TaylorSeerOptions {
  int n_derivatives = 3;        // n: highest Taylor order kept (>= 0)
  int skip_interval_steps = 4;  // K: one FULL step then K - 1 PREDICT steps (>= 1)
  int warmup = 1;               // W: steps < W are FULL (>= 1, §9.4)
  int cutoff_steps = 1;         // C: the last C steps are FULL (>= 0)
  // Keep no factors for the condition stream (txt_* branches, context rows of single blocks):
  // identical image outputs, about 30 % less memory (§6.2 shortcut).
  bool image_rows_only = false;
};

struct StepCacheConfig {
  CacheMethod method = CacheMethod::kNone;
  FBCacheOptions fbcache;
  TeaCacheOptions teacache;
  TaylorSeerOptions taylorseer;

  // One sentence per out-of-range value of the selected method (empty: valid).
  std::vector<std::string> problems() const;
  void validate() const;  // throws ModelError listing problems()
};

// Per-step record for debugging (§2.4): statistic = relative L1 (NaN when not computed),
// accumulator = TeaCache's acc after the step (NaN otherwise).
struct StepStats {
  int step = 0;
  StepDecision decision = StepDecision::kFull;
  double statistic = std::numeric_limits<double>::quiet_NaN();
  double accumulator = std::numeric_limits<double>::quiet_NaN();
};

struct CacheReport {
  std::string method;
  int steps = 0;               // N of the run
  int full = 0;                // DiT calls with every block computed
  int skipped = 0;             // residual reused
  int predicted = 0;           // branches predicted
  int elided = 0;              // dt == 0: no DiT call at all (§2.1)
  std::size_t peak_bytes = 0;  // largest memory held by cached tensors during the run
  std::vector<StepStats> per_step;
  // CANN "skip rate": (skipped + predicted) / N.
  double skip_rate() const;
};

class StepCache {
 public:
  virtual ~StepCache() = default;
  virtual CacheMethod method() const = 0;

  // Start of a run of `num_steps` steps: drops every cached tensor and counter.
  void reset(int num_steps);
  // The DiT call of step `step` (0-based, in loop order): drives `pass` (stem done) and returns
  // V = final_layer(hL, vec) [B, L, in_channels].
  Tensor forward(DiTPass& pass, int step);
  // Step `step` needs no DiT call (dt == 0); recorded as elided.
  void elided(int step);

  const CacheReport& report() const { return report_; }
  std::size_t memory_bytes() const { return bytes(); }  // held now
  int num_steps() const { return num_steps_; }

 protected:
  // Fills stats.decision (and statistic / accumulator) and returns V.
  virtual Tensor run(DiTPass& pass, int step, StepStats& stats) = 0;
  virtual void clear() = 0;
  virtual std::size_t bytes() const = 0;

 private:
  int num_steps_ = 0;
  CacheReport report_;
};

std::unique_ptr<StepCache> make_step_cache(const StepCacheConfig& config);  // validates

// ---- rule pieces, exposed for tests --------------------------------------------------------

// mean|cur - prev| / (mean|ref| + 1e-8) with ref = prev (by_prev) or cur; sums in double.
double rel_l1(const Tensor& cur, const Tensor& prev, bool by_prev);
// SKIP test shared by FBCache and TeaCache: strict, and NaN never skips.
inline bool below_threshold(double value, double tau) {
  return value < tau;  // false for NaN
}
// P(r) by Horner in double, coefficients highest degree first.
double teacache_polynomial(const std::vector<double>& coefficients, double r);
// TaylorSeer schedule (§6.1): FULL iff i < W or (i - W) mod K == 0 or N - i <= C.
bool taylorseer_full_step(int step, int num_steps, const TaylorSeerOptions& o);

}  // namespace gen3d::models
