#pragma once
// CLIP text encoder (transformers CLIPTextModel, inference) for the one prompt the delighting
// pipeline uses: the empty prompt. The tokens of "" need no BPE: [BOS, EOS, PAD...] padded to the
// context length, with the ids read from the model folder's tokenizer/ files. The output is
// last_hidden_state (after final_layer_norm), what Stable Diffusion pipelines feed the UNet.

#include <memory>
#include <string>
#include <utility>
#include <vector>

#include "models/core/dtype.h"
#include "models/core/tensor.h"

namespace gen3d::models {

class WeightMap;
namespace nn {
class ParamSource;
}

struct ClipTextConfig {
  int vocab_size = 49408;
  int hidden_size = 1024;
  int intermediate_size = 4096;
  int num_hidden_layers = 23;
  int num_attention_heads = 16;
  int max_position_embeddings = 77;
  double layer_norm_eps = 1e-5;
  std::string hidden_act = "gelu";  // gelu (erf) or quick_gelu

  // text_encoder/config.json; unknown activations or inconsistent sizes throw ModelError.
  static ClipTextConfig parse(const std::string& json_text, const std::string& label);
  static ClipTextConfig read(const std::string& path);
};

// The token ids of the empty prompt: BOS, EOS, then PAD up to `length`.
struct EmptyPromptTokens {
  int bos = 49406, eos = 49407, pad = 49407;
  std::vector<int> ids(int length) const;
  // From a tokenizer folder (vocab.json + special_tokens_map.json, as transformers saves it).
  static EmptyPromptTokens read(const std::string& tokenizer_dir);
};

class ClipTextEncoder {
 public:
  // Names as the state_dict: "text_model.embeddings.token_embedding.weight", ... Strict: the caller
  // calls weights.finish(). A stored "text_model.embeddings.position_ids" buffer is accepted.
  // `storage`: in-memory dtype of the Linear weights (kBF16: bf16 precision).
  static std::unique_ptr<ClipTextEncoder> load(const ClipTextConfig& config, WeightMap& weights,
                                               WeightStorage storage = WeightStorage::kF32);
  // text_encoder/ folder: config.json + model.safetensors (or model.fp16.safetensors).
  static std::unique_ptr<ClipTextEncoder> load_folder(const std::string& dir,
                                                      WeightStorage storage = WeightStorage::kF32);
  // The tensors load() expects, with shapes (the position-id buffer is optional and not listed).
  static std::vector<std::pair<std::string, Shape>> expected_tensors(const ClipTextConfig& config);
  ~ClipTextEncoder();

  const ClipTextConfig& config() const;
  // (1, ids.size(), hidden) last_hidden_state; causal self-attention as CLIP's text tower.
  Tensor encode(const std::vector<int>& ids) const;

 private:
  struct Weights;
  ClipTextEncoder();
  void build(const ClipTextConfig& config, nn::ParamSource& params);
  std::unique_ptr<Weights> w_;
};

}  // namespace gen3d::models
