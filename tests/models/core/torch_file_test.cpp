// torch.save files read natively, checked against the values PyTorch itself wrote
// (golden/torchbin: expected.json lists every tensor). Data-driven over $GEN3D_TORCHBIN_DIR
// (default tests/data/golden/torchbin).

#include <gtest/gtest.h>

#include <cstring>
#include <fstream>
#include <iterator>
#include <nlohmann/json.hpp>
#include <string>
#include <vector>

#include "models/core/dtype.h"
#include "models/core/error.h"
#include "models/core/safetensors.h"
#include "models/core/torch_file.h"
#include "support/paths.h"

namespace gen3d::models {
namespace {

std::string dir() {
  return test::env_or("GEN3D_TORCHBIN_DIR", test::data_dir() + "/golden/torchbin");
}

std::string error_of(const std::string& path) {
  try {
    SafetensorsFile::open(path);
  } catch (const ModelError& e) {
    return e.what();
  }
  return "no error";
}

// Stored element k of `info` as a double (every dtype torch.save writes for a state dict).
double element(const SafetensorsFile& f, const TensorInfo& info, std::int64_t k) {
  const auto bytes = f.bytes(info);
  const unsigned char* p = bytes.data() + k * static_cast<std::int64_t>(dtype_size(info.dtype));
  switch (info.dtype) {
    case DType::kI64: {
      std::int64_t v;
      std::memcpy(&v, p, 8);
      return static_cast<double>(v);
    }
    case DType::kBool:
      return *p ? 1.0 : 0.0;
    case DType::kF64: {
      double v;
      std::memcpy(&v, p, 8);
      return v;
    }
    default: {
      float v;
      widen_to_f32(info.dtype, p, 1, &v);
      return v;
    }
  }
}

std::string dtype_of(const std::string& torch_name) {
  if (torch_name == "float32") return "F32";
  if (torch_name == "float16") return "F16";
  if (torch_name == "bfloat16") return "BF16";
  if (torch_name == "float64") return "F64";
  if (torch_name == "int64") return "I64";
  if (torch_name == "bool") return "BOOL";
  return "?" + torch_name;
}

TEST(TorchFile, StateDictMatchesWhatPyTorchWrote) {
  std::ifstream in(dir() + "/expected.json");
  ASSERT_TRUE(in) << dir();
  const auto expected = nlohmann::json::parse(in);
  const auto file = SafetensorsFile::open(dir() + "/state_dict.bin");
  ASSERT_EQ(file->tensors().size(), expected.size());
  for (const auto& [name, want] : expected.items()) {
    SCOPED_TRACE(name);
    const TensorInfo* info = file->find(name);
    ASSERT_NE(info, nullptr);
    EXPECT_EQ(dtype_name(info->dtype), dtype_of(want["dtype"]));
    EXPECT_EQ(info->shape, want["shape"].get<std::vector<std::int64_t>>());
    const auto& values = want["values"];
    ASSERT_EQ(info->numel(), static_cast<std::int64_t>(values.size()));
    for (std::size_t k = 0; k < values.size(); ++k)
      ASSERT_EQ(element(*file, *info, static_cast<std::int64_t>(k)), values[k].get<double>())
          << "element " << k;
  }
  EXPECT_EQ(file->metadata().at("source"), "torch.save");
}

TEST(TorchFile, MaliciousPickleIsRefusedByName) {
  const std::string m = error_of(dir() + "/malicious.bin");
  EXPECT_NE(m.find("refuses to import"), std::string::npos) << m;
  EXPECT_NE(m.find("system"), std::string::npos) << m;
  EXPECT_NE(m.find("malicious.bin"), std::string::npos) << m;
}

TEST(TorchFile, LegacyFormatSaysHowToResave) {
  const std::string m = error_of(dir() + "/state_dict_legacy.bin");
  EXPECT_NE(m.find("legacy"), std::string::npos) << m;
  EXPECT_NE(m.find("re-save"), std::string::npos) << m;
}

TEST(TorchFile, EveryCutThroughTheEntriesIsAClearError) {
  std::ifstream in(dir() + "/state_dict.bin", std::ios::binary);
  const std::vector<unsigned char> bytes((std::istreambuf_iterator<char>(in)),
                                         std::istreambuf_iterator<char>());
  ASSERT_GT(bytes.size(), 3648u);
  // Up to the last entry (state_dict/version at 3648); the central directory follows.
  for (std::size_t n = 0; n < 3648; n += 37) {
    EXPECT_THROW(read_torch_bytes(bytes.data(), n, "cut.bin"), ModelError) << n;
  }
  // A flipped byte in a stored tensor fails the entry's CRC.
  std::vector<unsigned char> flipped = bytes;
  flipped[1088 + 40] ^= 0x5a;  // inside state_dict/data/0 (its data starts at 1088)
  EXPECT_THROW(read_torch_bytes(flipped.data(), flipped.size(), "flip.bin"), ModelError);
}

// Dicts of state dicts as the official nested checkpoints hold them (golden/torchbin/nested_*,
// written by make_nested.py with real PyTorch): nested_expected.json lists per file the flattened
// tensors, or the words of the error.
TEST(TorchFile, NestedStateDictsAreFlattenedWithADot) {
  std::ifstream in(dir() + "/nested_expected.json");
  ASSERT_TRUE(in) << dir();
  const auto expected = nlohmann::json::parse(in);
  ASSERT_GE(expected.size(), 7u);
  int read = 0, refused = 0;
  for (const auto& [file_name, want] : expected.items()) {
    SCOPED_TRACE(file_name);
    const std::string path = dir() + "/" + file_name;
    if (want.contains("error")) {
      const std::string m = error_of(path);
      EXPECT_EQ(m.rfind(path + ":", 0), 0u) << m;
      for (const auto& needle : want["error"])
        EXPECT_NE(m.find(needle.get<std::string>()), std::string::npos) << needle << "\n" << m;
      ++refused;
      continue;
    }
    const auto file = SafetensorsFile::open(path);
    const auto& tensors = want["tensors"];
    ASSERT_EQ(file->tensors().size(), tensors.size());
    for (const auto& [name, t] : tensors.items()) {
      SCOPED_TRACE(name);
      const TensorInfo* info = file->find(name);
      ASSERT_NE(info, nullptr);
      EXPECT_EQ(dtype_name(info->dtype), dtype_of(t["dtype"]));
      EXPECT_EQ(info->shape, t["shape"].get<std::vector<std::int64_t>>());
      const auto& values = t["values"];
      ASSERT_EQ(info->numel(), static_cast<std::int64_t>(values.size()));
      for (std::size_t k = 0; k < values.size(); ++k)
        ASSERT_EQ(element(*file, *info, static_cast<std::int64_t>(k)), values[k].get<double>())
            << "element " << k;
    }
    ++read;
  }
  EXPECT_GE(read, 3);
  EXPECT_GE(refused, 4);
}

TEST(TorchFile, NestedSubModelsArePickedByPrefix) {
  const auto file = SafetensorsFile::open(dir() + "/nested_shape.ckpt");
  for (const char* sub : {"model", "vae", "conditioner"}) {
    SCOPED_TRACE(sub);
    WeightMap w = WeightMap::for_submodel(file, sub);
    std::size_t n = 0;
    for (const TensorInfo& t : file->tensors())
      if (t.name.rfind(std::string(sub) + ".", 0) == 0) ++n;
    EXPECT_GT(n, 0u);
    EXPECT_EQ(w.unclaimed().size(), n);
  }
  WeightMap dit = WeightMap::for_submodel(file, "model");
  EXPECT_TRUE(dit.contains("x_embedder.weight"));
  EXPECT_TRUE(dit.contains("blocks.0.attn1.to_q.weight"));
  WeightMap esr = WeightMap::for_submodel(SafetensorsFile::open(dir() + "/nested_realesrgan.pth"),
                                          "params_ema");
  EXPECT_TRUE(esr.contains("conv_first.weight"));
}

TEST(TorchFile, SafetensorsFilesAreNotMistakenForArchives) {
  const std::vector<unsigned char> safetensors{0x80, 0x02, 0, 0, 0, 0, 0, 0, '{'};
  EXPECT_FALSE(looks_like_torch_save(safetensors.data(), safetensors.size()));
  const std::vector<unsigned char> zip{'P', 'K', 3, 4, 20, 0, 0, 0, 0};
  EXPECT_TRUE(looks_like_torch_save(zip.data(), zip.size()));
}

}  // namespace
}  // namespace gen3d::models
