#pragma once
// A tiny Hunyuan3D-Paint-v2-1 folder in the official layout, written at test time: the
// hunyuan3d-paintpbr-v2-1 diffusers folder (unet/config.json + diffusion_pytorch_model.bin, a
// torch.save state_dict of unet.* / unet_dual.*; vae/config.json + weights; scheduler/
// scheduler_config.json) and a DINOv2 folder in the transformers layout (config.json +
// model.safetensors, preprocessor_config.json). Seeded random weights whose widths chain: VAE
// latent channels = UNet in_channels, DINOv2 hidden = the UNet's DINO projection input.

#include <cstdint>
#include <string>

namespace gen3d::test {

struct TinyPaint21Folder {
  std::string dir;       // the paint folder (unet/, vae/, scheduler/)
  std::string dino_dir;  // the DINOv2 folder
  int dino_width = 0;    // DINOv2 hidden size
  int downscale = 0;     // VAE downsampling (view size / latent size)
};

// Writes both folders under `root` (created; files there are overwritten), a few hundred KiB.
TinyPaint21Folder write_tiny_paint21_folder(const std::string& root, std::uint64_t seed = 1);

}  // namespace gen3d::test
