// Precision names, their parsing and the weight storage each asks for.
#include "models/core/precision.h"

#include <gtest/gtest.h>

#include <string>

#include "models/core/error.h"

namespace gen3d::models {
namespace {

TEST(Precision, NamesRoundTripAndPickTheirStorage) {
  for (Precision p : {Precision::kAuto, Precision::kFp32, Precision::kBf16, Precision::kInt8})
    EXPECT_EQ(parse_precision(precision_name(p)), p);
  EXPECT_EQ(storage_for(Precision::kFp32), WeightStorage::kF32);
  EXPECT_EQ(storage_for(Precision::kFp32, WeightStorage::kF16), WeightStorage::kF16);
  EXPECT_EQ(storage_for(Precision::kBf16), WeightStorage::kBF16);
  EXPECT_EQ(storage_for(Precision::kInt8), WeightStorage::kInt8);
  EXPECT_EQ(resolve_precision(Precision::kInt8), Precision::kInt8);
  EXPECT_EQ(storage_name(WeightStorage::kInt8), "int8");
  // int8 keeps the layers it does not quantize as bf16 keeps them.
  EXPECT_TRUE(bf16_storage(WeightStorage::kInt8));
  EXPECT_TRUE(bf16_storage(WeightStorage::kBF16));
  EXPECT_FALSE(bf16_storage(WeightStorage::kF32));
}

TEST(Precision, UnknownNameListsTheChoices) {
  try {
    parse_precision("int4");
    FAIL() << "int4 accepted";
  } catch (const ModelError& e) {
    EXPECT_NE(std::string(e.what()).find("auto, fp32, bf16, int8"), std::string::npos) << e.what();
  }
}

// A device runs bf16 layers: f32 / f16 storage is kept as bf16 there, int8 is refused; the CPU
// keeps what it is asked for.
TEST(Precision, StorageOnADevice) {
  for (WeightStorage s :
       {WeightStorage::kF32, WeightStorage::kF16, WeightStorage::kBF16, WeightStorage::kInt8})
    EXPECT_EQ(storage_on(Device::kCpu, s, "net"), s);
  EXPECT_EQ(storage_on(Device::kCuda, WeightStorage::kF32, "net"), WeightStorage::kBF16);
  EXPECT_EQ(storage_on(Device::kCuda, WeightStorage::kF16, "net"), WeightStorage::kBF16);
  EXPECT_EQ(storage_on(Device::kCuda, WeightStorage::kBF16, "net"), WeightStorage::kBF16);
  try {
    storage_on(Device::kCuda, WeightStorage::kInt8, "paint model m");
    FAIL() << "int8 on cuda accepted";
  } catch (const ModelError& e) {
    EXPECT_NE(std::string(e.what()).find("paint model m: int8 runs on the CPU only, not on cuda"),
              std::string::npos)
        << e.what();
  }
}

}  // namespace
}  // namespace gen3d::models
