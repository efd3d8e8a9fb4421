#pragma once
// What the flow-matching sampler and the step caches need of a shape DiT: its latent and
// condition widths, whether guidance is embedded, and a pass (dit_pass.h) per call. Hunyuan3DDiT
// (2.0, double/single-stream blocks) and HunyuanDiTPlain (2.1, U-ViT blocks with MoE) both are.

#include <memory>

#include "models/core/tensor.h"
#include "models/shape/dit_pass.h"

namespace gen3d::models {

class ShapeDenoiser {
 public:
  virtual ~ShapeDenoiser() = default;
  virtual int latent_channels() const = 0;  // C of the latents [B, L, C]
  virtual int context_dim() const = 0;      // width of the condition tokens [B, Lc, ·]
  // A guidance-distilled model takes the guidance scale as an input (one forward per step);
  // the others run classifier-free guidance over [cond; uncond] rows.
  virtual bool guidance_embedded() const = 0;
  // One call evaluated stage by stage; x, t, context and guidance must outlive the pass.
  virtual std::unique_ptr<DiTPass> begin_pass(const Tensor& x, const Tensor& t,
                                              const Tensor& context,
                                              const Tensor* guidance = nullptr) const = 0;
};

}  // namespace gen3d::models
