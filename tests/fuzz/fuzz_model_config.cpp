// The JSON files of a model folder from arbitrary bytes: every network config reader (shape DiT,
// ShapeVAE, DINOv2 and its image encoder section, UNet, SD VAE, CLIP text encoder, scheduler)
// and the tokenizer files, and the official config.yaml (YAML to JSON, then the shape readers on
// its sections). The first byte picks the reader, the rest is the file; for the tokenizer a NUL
// byte splits it into vocab.json and special_tokens_map.json.
#include <unistd.h>

#include <algorithm>
#include <cstddef>
#include <cstdint>
#include <filesystem>
#include <fstream>
#include <string>

#include "models/core/error.h"
#include "models/nn/config_reader.h"
#include "models/paint/clip_text.h"
#include "models/paint/diffusion_scheduler.h"
#include "models/paint/sd_vae.h"
#include "models/paint/unet.h"
#include "models/shape/dinov2.h"
#include "models/shape/dit_config.h"
#include "models/shape/shape_vae.h"

namespace {

void write_file(const std::filesystem::path& path, const uint8_t* data, size_t size) {
  std::ofstream(path, std::ios::binary).write(reinterpret_cast<const char*>(data), long(size));
}

void read_tokenizer(const uint8_t* data, size_t size) {
  namespace fs = std::filesystem;
  const fs::path dir =
      fs::temp_directory_path() / ("gen3d_fuzz_tokenizer_" + std::to_string(getpid()));
  fs::create_directories(dir);
  const uint8_t* split = std::find(data, data + size, uint8_t(0));
  write_file(dir / "vocab.json", data, size_t(split - data));
  const uint8_t* rest = split == data + size ? split : split + 1;
  write_file(dir / "special_tokens_map.json", rest, size_t(data + size - rest));
  try {
    (void)gen3d::models::EmptyPromptTokens::read(dir.string());
  } catch (const gen3d::models::ModelError&) {
  }
  std::error_code ec;
  fs::remove_all(dir, ec);
}

void read_yaml(const std::string& text) {
  using namespace gen3d::models;
  const nlohmann::json j = nn::parse_yaml_config(text, "fuzz");
  const auto section = [&](const char* key) {
    return j.contains(key) ? j[key].dump() : std::string("{}");
  };
  try {
    (void)DiTConfig::from_json(section("model"));
  } catch (const ModelError&) {
  }
  try {
    (void)ShapeVAEConfig::from_json(section("vae"));
  } catch (const ModelError&) {
  }
  (void)ImageEncoderConfig::from_json(section("conditioner"));
}

}  // namespace

extern "C" int LLVMFuzzerTestOneInput(const uint8_t* data, size_t size) {
  using namespace gen3d::models;
  if (size < 1) return 0;
  const std::string text(reinterpret_cast<const char*>(data + 1), size - 1);
  try {
    switch (data[0] % 10) {
      case 0:
        (void)DiTConfig::from_json(text);
        break;
      case 1:
        (void)ShapeVAEConfig::from_json(text);
        break;
      case 2:
        (void)Dinov2Config::from_json(text);
        break;
      case 3:
        (void)ImageEncoderConfig::from_json(text);
        break;
      case 4:
        (void)UNetConfig::parse(text, "fuzz");
        break;
      case 5:
        (void)SdVaeConfig::parse(text, "fuzz");
        break;
      case 6:
        (void)ClipTextConfig::parse(text, "fuzz");
        break;
      case 7:
        (void)SchedulerConfig::parse(text, "fuzz");
        break;
      case 9:
        read_yaml(text);
        break;
      default:
        read_tokenizer(data + 1, size - 1);
        break;
    }
  } catch (const ModelError&) {
  }
  return 0;
}
