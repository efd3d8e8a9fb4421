#pragma once
// PyTorch `torch.save` state dicts (the zip format written since PyTorch 1.6, as the official
// diffusers `.bin` weights are published), read natively and safely.
//
// The archive's `<name>/data.pkl` is run on a restricted unpickler that understands only what
// torch.save writes for a state dict: `collections.OrderedDict`, `torch._utils._rebuild_tensor_v2`
// (and `_rebuild_parameter`), and the typed storages as persistent ids
// ('storage', torch.<Type>Storage, key, location, numel) whose bytes are `<name>/data/<key>`.
// Any other global is refused by name before anything is called; nothing is ever executed.
//
// Besides a flat state dict, a dict of state dicts is read, as official checkpoints nest them
// (Hunyuan3D-2.1's model.fp16.ckpt: {'model': sd, 'vae': sd, 'conditioner': sd}; RealESRGAN's
// .pth: {'params_ema': sd}, BasicSR's also 'params'): names are flattened with a dot
// ("model.blocks.0.norm1.weight", "params_ema.conv_first.weight"), the form of the combined
// safetensors files, so WeightMap::for_submodel picks a sub-model. Dicts nest 4 deep at most.
// Scalars beside the tensors (None, bool, int, float, str: training bookkeeping such as 'epoch',
// which torch.load(weights_only=True) in the official loaders accepts too) are skipped; any other
// leaf (a list, a tuple, a bare storage) is refused naming its flattened key.
// The pre-1.6 (non-zip) format is refused with a message that says how to re-save it.

#include <memory>
#include <string>
#include <vector>

#include "models/core/safetensors.h"

namespace gen3d::models {

// True when `bytes` start like a torch.save file (a zip archive, or a legacy pickle) rather than a
// safetensors file (whose 8-byte header length is followed by '{').
bool looks_like_torch_save(const unsigned char* bytes, std::size_t size);

// The state dict of a torch.save file's bytes as an in-memory safetensors image (tensor names as
// in the dict; views materialized contiguous), so that every loader reads it like a .safetensors
// file; SafetensorsFile::open calls it for files that look like torch.save. Throws ModelError
// naming `label` and the problem (corrupt zip, refused global, bad tensor).
std::shared_ptr<const SafetensorsFile> read_torch_bytes(const unsigned char* bytes,
                                                        std::size_t size, const std::string& label);

}  // namespace gen3d::models
