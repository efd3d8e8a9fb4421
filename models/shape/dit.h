#pragma once
// Hunyuan3DDiT: the flow-matching transformer of the Hunyuan3D-2 shape pipeline (double-stream
// blocks over [context; latent] tokens, then single-stream blocks), float32 compute.
// Built from a DiTConfig and a checkpoint with the official state_dict names; the loader is
// strict (see WeightMap). See golden/README.md "DiT forward" for the exact recipe.

#include <cstdint>
#include <functional>
#include <memory>
#include <string>
#include <utility>
#include <vector>

#include "models/core/dtype.h"
#include "models/core/tensor.h"
#include "models/shape/denoiser.h"
#include "models/shape/dit_config.h"
#include "models/shape/dit_pass.h"

namespace gen3d::models {

class SafetensorsFile;
class WeightMap;

struct DiTOptions {
  WeightStorage storage = WeightStorage::kF32;  // in-memory dtype of Linear weights
  // Where forward passes run. On a device the layers run in bf16 (weights uploaded there once,
  // on first use) and inputs and outputs stay host tensors.
  Device device = Device::kCpu;
};

class Hunyuan3DDiT final : public ShapeDenoiser {
 public:
  using Options = DiTOptions;
  // Called with golden-style names ("act.vec", "trace.single_blocks.0.linear1.out", ...) and
  // the value at that point of the forward pass (a temporary: copy what you keep).
  using TraceFn = std::function<void(const std::string& name, const Tensor& value)>;

  // Loads a standalone DiT checkpoint or the "model." part of a combined pipeline checkpoint.
  static Hunyuan3DDiT load(const DiTConfig& config, const std::string& path, Options opt = {});
  static Hunyuan3DDiT load(const DiTConfig& config, std::shared_ptr<const SafetensorsFile> file,
                           Options opt = {});
  // Claims its tensors from `weights` and calls weights.finish("DiT").
  static Hunyuan3DDiT load(const DiTConfig& config, WeightMap& weights, Options opt = {});
  // Seeded random weights with the golden set's init recipe (benchmarks, tests).
  static Hunyuan3DDiT random(const DiTConfig& config, std::uint64_t seed, Options opt = {});
  // The tensors load() claims (names relative to the DiT), with their shapes; nothing is read.
  static std::vector<std::pair<std::string, Shape>> expected_tensors(const DiTConfig& config);
  // Same, then `adjust(name, value)` on every tensor (official name) before it is stored, to
  // shape random weights (e.g. a band-limited time embedding for cache studies).
  using WeightAdjustFn = std::function<void(const std::string& name, Tensor& value)>;
  static Hunyuan3DDiT random(const DiTConfig& config, std::uint64_t seed, Options opt,
                             const WeightAdjustFn& adjust);

  Hunyuan3DDiT(Hunyuan3DDiT&&) noexcept;
  Hunyuan3DDiT& operator=(Hunyuan3DDiT&&) noexcept;
  ~Hunyuan3DDiT() override;

  const DiTConfig& config() const;
  std::int64_t num_parameters() const;
  std::size_t weight_bytes() const;  // in-memory bytes of all parameters

  // x [B, L, in_channels], t [B] in [0, 1] (t = 0 is noise), context [B, Lc, context_in_dim],
  // guidance [B] (required iff guidance_embed) -> velocity [B, L, in_channels].
  Tensor forward(const Tensor& x, const Tensor& t, const Tensor& context,
                 const Tensor* guidance = nullptr, const TraceFn* trace = nullptr) const;

  // Stage-by-stage evaluation of forward() for step caches (dit_pass.h): the stem (vec, latent_in)
  // runs now, cond_in on the first block. Running every block without a hook and then output()
  // gives exactly forward()'s result. x, t, context and guidance must outlive the pass.
  std::unique_ptr<DiTPass> begin_pass(const Tensor& x, const Tensor& t, const Tensor& context,
                                      const Tensor* guidance = nullptr) const override;
  int latent_channels() const override { return config().in_channels; }
  int context_dim() const override { return config().context_in_dim; }
  bool guidance_embedded() const override { return config().guidance_embed; }

  // The sinusoidal embedding the model applies to t: [B] -> [B, 256] = [cos(a) | sin(a)] with
  // a_i = float32(float32(t * 1000) * f_i), f_i = float32(exp(float32(float32(i * float32(-ln P)) /
  // 128))) with P = time_factor (float32 argument as in the reference: 119 of 128 entries equal its
  // table).
  Tensor timestep_embedding(const Tensor& t) const;
  const std::vector<float>& time_freqs() const;

 private:
  struct Impl;
  class Pass;
  explicit Hunyuan3DDiT(std::unique_ptr<Impl> impl);
  std::unique_ptr<Impl> impl_;
};

}  // namespace gen3d::models
