#pragma once
// A tiny, self-consistent Hunyuan3D-2 model folder built at test time: random (seeded) DiT,
// ShapeVAE and DINOv2 conditioner whose widths chain (DINOv2 hidden = DiT context_in_dim,
// DiT in_channels = VAE embed_dim), stored in the official combined layout.

#include <cstdint>
#include <string>

namespace gen3d::test {

// Which shape generation the folder is: Hunyuan3D-2.0 (Hunyuan3DDiT) or -2.1 (HunYuanDiTPlain
// with mixture-of-experts blocks).
enum class TinyShapeVersion { k20, k21 };

struct TinyModelFolder {
  std::string dir;         // the folder (pass it as --model DIR)
  std::string weights;     // DIR/model.fp16.safetensors: model.*, vae.*, conditioner.* keys
  std::string config;      // DIR/config.json: "model", "vae", "conditioner" sections
  int context_width = 0;   // DINOv2 hidden size = DiT context_in_dim
  int context_tokens = 0;  // conditioner tokens ((image_size / 14)^2 + CLS)
  int latent_tokens = 0;   // VAE num_latents
};

// Writes the folder `dir` (created; existing files there are overwritten), a few hundred KiB.
// The VAE's random geometry decoder gives logits of a few units around zero, so sampling and
// decoding yields a surface (tens of thousands of faces at resolution 64 with seed 7).
TinyModelFolder write_tiny_model_folder(const std::string& dir, std::uint64_t seed = 1,
                                        TinyShapeVersion version = TinyShapeVersion::k20);

}  // namespace gen3d::test
