#pragma once
// The 2.1 DiT golden set and the reduced-precision check of its forward pass, shared by the CPU
// golden tests and the GPU ones (tests/cuda): the set's files, the model loaded from them, and
// reduced_forward (bf16 / int8 / a device against the float32 goldens, routing included).

#include <gtest/gtest.h>

#include <algorithm>
#include <cmath>
#include <cstring>
#include <filesystem>
#include <fstream>
#include <map>
#include <string>
#include <vector>

#include <nlohmann/json.hpp>

#include "models/bf16_golden.h"
#include "models/core/safetensors.h"
#include "models/shape/dit21.h"
#include "support/paths.h"

namespace gen3d::models::dit21test {

inline std::string set_file(const std::string& name) {
  return test::env_or("GEN3D_GOLDEN_H21_DIR",
                      test::source_dir() + "/tests/data/golden/hunyuan3d-2.1") +
         "/shape21/" + name;
}

#define REQUIRE_GOLDEN(path)                                                              \
  do {                                                                                    \
    if (!std::filesystem::exists(path)) GTEST_SKIP() << "golden file absent: " << (path); \
  } while (0)

inline nlohmann::json golden_json() {
  std::ifstream f(set_file("config.json"));
  return nlohmann::json::parse(f);
}

inline DiT21Config golden_config() {
  return DiT21Config::from_file(set_file("config.json"), "model");
}

inline HunyuanDiTPlain golden_model(WeightStorage storage, Device device = Device::kCpu) {
  auto file = SafetensorsFile::open(set_file("dit21_weights.fp16.safetensors"));
  WeightMap w = WeightMap::for_submodel(file, "model");
  return HunyuanDiTPlain::load(golden_config(), w, {storage, device});
}

// max over elements of |a - g| / (abs + rel |g|); <= 1 passes.
inline double usage(const float* a, const float* g, std::int64_t n, double abs, double rel) {
  double u = 0.0;
  for (std::int64_t i = 0; i < n; ++i) {
    if (std::isnan(a[i]) || std::isnan(g[i])) return INFINITY;
    u = std::max(u, std::abs(static_cast<double>(a[i]) - g[i]) / (abs + rel * std::abs(g[i])));
  }
  return u;
}

inline std::vector<std::int32_t> ints(const SafetensorsFile& f, const std::string& name) {
  const TensorInfo* info = f.find(name);
  if (!info || info->dtype != DType::kI32) return {};
  const auto bytes = f.bytes(*info);
  std::vector<std::int32_t> v(bytes.size() / 4);
  std::memcpy(v.data(), bytes.data(), v.size() * 4);
  return v;
}

struct GoldenForward {
  std::shared_ptr<const SafetensorsFile> file =
      SafetensorsFile::open(set_file("dit21_forward.safetensors"));
  Tensor x = file->to_f32("in.x"), t = file->to_f32("in.t"), ctx = file->to_f32("in.context");
};

// bf16 mode against the same float32 goldens (tolerance: bf16_golden.h, transformers). Expert
// routing must be the reference's (as a set of experts per token) wherever the reference's score
// gap between the k-th and the next expert exceeds twice the bf16 error of the gate scores
// (measured here, reported); below that either choice is as faithful as bf16 allows, and a token
// routed elsewhere differs by a whole expert's output, so an MoE branch's nmse is taken over the
// tokens routed as the reference (the others are counted). The blocks after it, the output and
// the sampler carry those tokens and are held to the bound as they are.
inline std::vector<std::int32_t> expert_set(const float* idx, std::int64_t K) {
  std::vector<std::int32_t> s(static_cast<std::size_t>(K));
  for (std::int64_t k = 0; k < K; ++k)
    s[static_cast<std::size_t>(k)] = static_cast<std::int32_t>(idx[k]);
  std::sort(s.begin(), s.end());
  return s;
}

// int8 mode runs the same checks with the int8 bound (bf16_golden.h); the gate stays float32 but
// its input carries the int8 error, measured the same way.
inline void reduced_forward(WeightStorage storage, const std::string& label, double tolerance,
                            const std::string& mode, Device device = Device::kCpu) {
  const auto model = golden_model(storage, device);
  GoldenForward g;
  bf16test::NmseCheck check(label, tolerance, mode);
  std::map<std::string, Tensor> scores;               // gate scores of this run, by block
  std::map<std::string, std::vector<bool>> rerouted;  // tokens routed unlike the reference
  int tokens_compared = 0, tokens_required = 0, tokens_rerouted = 0;
  double worst_score_err = 0.0;
  HunyuanDiTPlain::TraceFn fn = [&](const std::string& name, const Tensor& v) {
    const TensorInfo* info = g.file->find(name);
    if (!info || name.rfind("act.", 0) != 0) return;
    if (name.ends_with(".gate.scores")) scores[name] = v.clone();
    if (info->dtype == DType::kI32) {
      const std::string gate = name.substr(0, name.size() - std::strlen(".topk_idx"));
      const Tensor ref_scores = g.file->to_f32(gate + ".scores");
      const Tensor& ours = scores.at(gate + ".scores");
      const auto ref = ints(*g.file, name);
      const std::int64_t E = ref_scores.dim(1), K = info->shape[1], R = ref_scores.dim(0);
      double err = 0.0;
      for (std::int64_t i = 0; i < ours.numel(); ++i)
        err = std::max(err, std::abs(static_cast<double>(ours.data()[i]) - ref_scores.data()[i]));
      worst_score_err = std::max(worst_score_err, err);
      std::vector<bool>& moved = rerouted[gate.substr(0, gate.size() - std::strlen(".gate"))];
      moved.assign(static_cast<std::size_t>(R), false);
      for (std::int64_t r = 0; r < R; ++r) {
        std::vector<float> s(ref_scores.data() + r * E, ref_scores.data() + (r + 1) * E);
        std::sort(s.begin(), s.end(), std::greater<>());
        const double gap = s[static_cast<std::size_t>(K - 1)] - s[static_cast<std::size_t>(K)];
        std::vector<float> ref_f(ref.begin() + r * K, ref.begin() + (r + 1) * K);
        const bool same = expert_set(v.data() + r * K, K) == expert_set(ref_f.data(), K);
        moved[static_cast<std::size_t>(r)] = !same;
        tokens_rerouted += same ? 0 : 1;
        ++tokens_compared;
        if (gap <= 2.0 * err) continue;  // within the score error: either choice is faithful
        ++tokens_required;
        EXPECT_TRUE(same) << name << " token " << r << " (score gap " << gap << ", " << mode
                          << " score error " << err << ")";
      }
      return;
    }
    const Tensor ref = g.file->to_f32(*info);
    ASSERT_EQ(ref.numel(), v.numel()) << name;
    const auto moved = rerouted.find(name);
    if (moved == rerouted.end()) {
      check.add(name, v.data(), ref.data(), ref.numel());
      return;
    }
    const std::int64_t H = v.dim(v.rank() - 1);
    std::vector<float> a, b;
    for (std::size_t r = 0; r < moved->second.size(); ++r) {
      if (moved->second[r]) continue;
      a.insert(a.end(), v.data() + r * H, v.data() + (r + 1) * H);
      b.insert(b.end(), ref.data() + r * H, ref.data() + (r + 1) * H);
    }
    check.add(name + " (tokens routed as the reference)", a.data(), b.data(),
              static_cast<std::int64_t>(a.size()));
  };
  const Tensor out = model.forward(g.x, g.t, g.ctx, &fn);
  const Tensor ref_out = g.file->to_f32("out");
  check.add("out", out.data(), ref_out.data(), ref_out.numel());
  EXPECT_GT(check.count(), 1);
  EXPECT_GT(tokens_compared, 0);
  check.report();
  std::printf(
      "[ info ] %s routing: %d tokens x MoE blocks, %d with a score gap over twice the score "
      "error (%.3g), all routed as the reference; %d routed elsewhere\n",
      label.c_str(), tokens_compared, tokens_required, worst_score_err, tokens_rerouted);
}

}  // namespace gen3d::models::dit21test
