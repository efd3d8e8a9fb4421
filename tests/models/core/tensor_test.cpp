#include "models/core/tensor.h"

#include <gtest/gtest.h>

#include "models/core/error.h"

namespace gen3d::models {
namespace {

TEST(Tensor, OwningZeroFilledAndAligned) {
  Tensor t({2, 3, 4});
  EXPECT_EQ(t.rank(), 3);
  EXPECT_EQ(t.numel(), 24);
  EXPECT_FALSE(t.is_view());
  EXPECT_EQ(reinterpret_cast<std::uintptr_t>(t.data()) % 64, 0u);
  for (float v : t.span()) EXPECT_EQ(v, 0.0f);
  t.at(1, 2, 3) = 5.0f;
  EXPECT_EQ(t.data()[23], 5.0f);
  EXPECT_EQ(t.dim(-1), 4);
  EXPECT_THROW(t.dim(3), ModelError);
}

TEST(Tensor, CopySemantics) {
  Tensor a({4});
  a.at(0) = 1.0f;
  Tensor b = a;  // owning -> deep copy
  b.at(0) = 2.0f;
  EXPECT_EQ(a.at(0), 1.0f);
  Tensor v = a.reshaped({2, 2});  // view
  EXPECT_TRUE(v.is_view());
  Tensor w = v;  // copy of a view is a view
  w.at(0, 0) = 3.0f;
  EXPECT_EQ(a.at(0), 3.0f);
  Tensor c = v.clone();
  EXPECT_FALSE(c.is_view());
  c.at(0, 0) = 4.0f;
  EXPECT_EQ(a.at(0), 3.0f);
}

TEST(Tensor, ViewsAndSlices) {
  float buf[12] = {0, 1, 2, 3, 4, 5, 6, 7, 8, 9, 10, 11};
  Tensor t = Tensor::view(buf, {3, 4});
  Tensor s = t.slice0(1, 3);
  EXPECT_EQ(s.shape(), Shape({2, 4}));
  EXPECT_EQ(s.at(0, 0), 4.0f);
  EXPECT_THROW(t.slice0(2, 4), ModelError);
  EXPECT_THROW(t.reshaped({5, 2}), ModelError);
}

TEST(Tensor, ShapeLimits) {
  EXPECT_THROW(Shape({1, 2, 3, 4, 5}), ModelError);
  EXPECT_THROW(Shape({-1}), ModelError);
  EXPECT_EQ(Shape({2, 0, 3}).numel(), 0);
  EXPECT_EQ(Shape({}).numel(), 1);
  EXPECT_EQ(Shape({2, 16, 32}).str(), "[2, 16, 32]");
  Tensor empty;
  EXPECT_TRUE(empty.empty());
  EXPECT_EQ(empty.numel(), 0);
}

// Host tensors copy through to(); a device this process has no backend for is refused by name
// (this binary links no CUDA backend).
TEST(Tensor, DevicesAndTheMissingBackend) {
  Tensor t({2, 3});
  t.at(1, 2) = 7.0f;
  EXPECT_EQ(t.device(), Device::kCpu);
  const Tensor c = t.to(Device::kCpu);
  EXPECT_EQ(c.at(1, 2), 7.0f);
  EXPECT_NE(c.data(), t.data());
  EXPECT_EQ(parse_device("cuda"), Device::kCuda);
  EXPECT_STREQ(device_name(Device::kCuda), "cuda");
  try {
    parse_device("gpu0");
    FAIL() << "unknown device accepted";
  } catch (const ModelError& e) {
    EXPECT_NE(std::string(e.what()).find("'gpu0'"), std::string::npos) << e.what();
  }
  try {
    (void)Tensor({4}, Device::kCuda);
    FAIL() << "a CUDA tensor without a CUDA backend";
  } catch (const ModelError& e) {
    EXPECT_NE(std::string(e.what()).find("no cuda backend"), std::string::npos) << e.what();
  }
}

// on(): a view when the tensor lives on that device already (no copy), else a copy; a device
// this process has no backend for is refused by name.
TEST(Tensor, OnIsAViewWhereTheDataIsAlready) {
  Tensor t({2, 3});
  t.data()[4] = 7.0f;
  const Tensor v = t.on(Device::kCpu);
  EXPECT_EQ(v.data(), t.data());
  EXPECT_TRUE(v.is_view());
  EXPECT_EQ(v.shape(), t.shape());
  if (!has_device_memory(Device::kCuda)) {
    EXPECT_THROW((void)t.on(Device::kCuda), ModelError);
  }
}

}  // namespace
}  // namespace gen3d::models
