#pragma once
// A tiny, self-consistent Hunyuan3D-2 model folder built at test time: random (seeded) DiT,
// ShapeVAE and DINOv2 conditioner whose widths chain (DINOv2 hidden = DiT context_in_dim,
// DiT in_channels = VAE embed_dim), stored in the official combined layout.

#include <cstdint>
#include <string>
#include <utility>
#include <vector>

#include "models/core/tensor.h"

namespace gen3d::test {

// Which config file the folder carries: config.json (the official config converted), or
// config.yaml as the official folders publish it.
enum class TinyConfigFile { kJson, kYaml };

// Which shape generation the folder is: Hunyuan3D-2.0 (Hunyuan3DDiT, weights in
// model.fp16.safetensors) or -2.1 (HunYuanDiTPlain with mixture-of-experts blocks, weights in
// model.fp16.ckpt, a torch.save file of nested state dicts, as the official folder has them).
enum class TinyShapeVersion { k20, k21 };

struct TinyModelFolder {
  std::string dir;         // the folder (pass it as --model DIR)
  std::string weights;     // DIR/model.fp16.safetensors or .ckpt: model.*, vae.*, conditioner.*
  std::string config;      // DIR/config.json or .yaml: "model", "vae", "conditioner" sections
  int context_width = 0;   // DINOv2 hidden size = DiT context_in_dim
  int context_tokens = 0;  // conditioner tokens ((image_size / 14)^2 + CLS)
  int latent_tokens = 0;   // VAE num_latents
};

// Writes the folder `dir` (created; existing files there are overwritten), a few hundred KiB.
// The VAE's random geometry decoder gives logits of a few units around zero, so sampling and
// decoding yields a surface (tens of thousands of faces at resolution 64 with seed 7).
TinyModelFolder write_tiny_model_folder(const std::string& dir, std::uint64_t seed = 1,
                                        TinyConfigFile config = TinyConfigFile::kJson,
                                        TinyShapeVersion version = TinyShapeVersion::k20);

// The folder's config as JSON text, and as YAML text written the way the official config.yaml
// files are (comments, flow lists, `1.e-6`, bare strings); both hold the same values.
std::string tiny_model_config_json(TinyShapeVersion version = TinyShapeVersion::k20);
std::string tiny_model_config_yaml(TinyShapeVersion version = TinyShapeVersion::k20);

// A transformers Dinov2Model config.json (plain FFN, GELU) and a seeded random state_dict in its
// names (embeddings.*, encoder.layer.{i}.*, layernorm.*); position table of
// (image_size / 14)^2 + 1 rows.
std::string tiny_dinov2_config_json(int hidden, int heads, int layers, int image_size);
std::vector<std::pair<std::string, models::Tensor>> tiny_dinov2_weights(std::uint64_t seed,
                                                                        int hidden, int layers,
                                                                        int image_size);

}  // namespace gen3d::test
