#pragma once
// HunyuanDiTPlain: the flow-matching transformer of the Hunyuan3D-2.1 shape pipeline
// (hy3dshape/models/denoisers/hunyuandit.py). The time enters as an extra token ahead of the
// latents; U-ViT blocks with long skips (pre-LN self-attention, cross-attention to the image
// tokens, FFN), RMS q/k norms, and mixture-of-experts FFNs in the last blocks. Built from a
// DiT21Config and a checkpoint with the official state_dict names; the loader is strict.

#include <atomic>
#include <cstdint>
#include <functional>
#include <memory>
#include <string>
#include <utility>
#include <vector>

#include "models/core/dtype.h"
#include "models/core/tensor.h"
#include "models/shape/denoiser.h"
#include "models/shape/dit21_config.h"

namespace gen3d::models {

class WeightMap;

// Expert routing of one forward call, summed over its MoE blocks.
struct MoEUsage {
  std::int64_t tokens = 0;       // rows entering MoE blocks (tokens x blocks)
  std::int64_t routed_rows = 0;  // rows run through routed experts (tokens x top_k when routed)
  std::int64_t dense_rows = 0;   // rows a dense pass of every expert would run (tokens x experts)
};

struct DiT21Options {
  WeightStorage storage = WeightStorage::kF32;  // in-memory dtype of Linear weights (not the gate)
  Device device = Device::kCpu;  // where forward passes run (bf16 layers off the CPU)
};

class HunyuanDiTPlain final : public ShapeDenoiser {
 public:
  using Options = DiT21Options;
  // Called with golden-style names ("act.blocks.3.moe", "trace.blocks.0.attn1.q_norm.out", ...)
  // and the value at that point of the forward pass (a temporary: copy what you keep).
  using TraceFn = std::function<void(const std::string& name, const Tensor& value)>;

  // Claims its tensors from `weights` (names relative to the DiT) and calls weights.finish().
  static HunyuanDiTPlain load(const DiT21Config& config, WeightMap& weights, Options opt = {});
  // Seeded random weights (benchmarks, tests); the MoE gate is scaled so tokens route with
  // margins like a trained model's.
  static HunyuanDiTPlain random(const DiT21Config& config, std::uint64_t seed, Options opt = {});
  // The tensors load() claims, with their shapes; nothing is read.
  static std::vector<std::pair<std::string, Shape>> expected_tensors(const DiT21Config& config);

  HunyuanDiTPlain(HunyuanDiTPlain&&) noexcept;
  HunyuanDiTPlain& operator=(HunyuanDiTPlain&&) noexcept;
  ~HunyuanDiTPlain() override;

  const DiT21Config& config() const;
  std::int64_t num_parameters() const;
  std::size_t weight_bytes() const;  // in-memory bytes of all parameters

  // x [B, L, in_channels], t [B] in [0, 1] (timestep / 1000, as the pipeline passes it), context
  // [B, Lc, context_dim] -> velocity [B, L, in_channels].
  Tensor forward(const Tensor& x, const Tensor& t, const Tensor& context,
                 const TraceFn* trace = nullptr) const;

  std::unique_ptr<DiTPass> begin_pass(const Tensor& x, const Tensor& t, const Tensor& context,
                                      const Tensor* guidance = nullptr) const override;
  int latent_channels() const override { return config().in_channels; }
  int context_dim() const override { return config().context_dim; }
  bool guidance_embedded() const override { return false; }

  // Routing counts since the model was built (all passes, all threads).
  MoEUsage moe_usage() const;

 private:
  struct Impl;
  class Pass;
  explicit HunyuanDiTPlain(std::unique_ptr<Impl> impl);
  std::unique_ptr<Impl> impl_;
};

}  // namespace gen3d::models
