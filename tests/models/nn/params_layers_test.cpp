// The layer library: parameter sources and their accounting, the layers against the reference
// kernels, shape checks.

#include <gtest/gtest.h>

#include <cmath>
#include <cstring>
#include <string>
#include <vector>

#include "models/core/dtype.h"
#include "models/core/error.h"
#include "models/core/safetensors.h"
#include "models/kernels/conv.h"
#include "models/kernels/linear.h"
#include "models/kernels/norms.h"
#include "models/nn/init.h"
#include "models/nn/layers.h"
#include "models/nn/params.h"

namespace gen3d::models::nn {
namespace {

// Values from the seeded noise, so that every test sees the same non-trivial numbers.
RandomParams noise_params(std::uint64_t seed, WeightStorage storage = WeightStorage::kF32) {
  auto count = std::make_shared<std::uint64_t>(0);
  return RandomParams(
      [seed, count](const std::string&, Tensor& t) {
        t = gaussian_noise(t.shape(), stream_seed(seed, ++*count));
      },
      storage);
}

TEST(ParamSource, CountsParametersAndBytesOnce) {
  RandomParams p = noise_params(1);
  Linear l;
  l.load(p, "fc", 8, 4);
  LayerNorm n;
  n.load(p, "ln", 4, 1e-5f);
  EXPECT_EQ(p.parameters(), 8 * 4 + 4 + 4 + 4);
  EXPECT_EQ(p.bytes(), static_cast<std::size_t>(p.parameters()) * 4);
}

TEST(ParamSource, HalfStorageHalvesTheWeightBytesOnly) {
  RandomParams p = noise_params(1, WeightStorage::kF16);
  Linear l;
  l.load(p, "fc", 8, 4);
  EXPECT_TRUE(l.weight.empty());
  EXPECT_EQ(l.weight16.size(), 32u);
  EXPECT_EQ(p.bytes(), 32u * 2 + 4u * 4);  // half weights, float32 bias
}

TEST(ParamSource, RecorderListsNamesAndShapesWithAPrefix) {
  ShapeRecorder rec("unet.");
  Linear l;
  l.load(rec, "proj", 3, 5, /*has_bias=*/false);
  Conv2d c;
  c.load_padded(rec, "conv", 6, 2, 3);  // nothing to pack: must not touch data
  ASSERT_EQ(rec.list.size(), 3u);
  EXPECT_EQ(rec.list[0].first, "unet.proj.weight");
  EXPECT_EQ(rec.list[0].second, (Shape{5, 3}));
  EXPECT_EQ(rec.list[1].first, "unet.conv.weight");
  EXPECT_EQ(rec.list[1].second, (Shape{6, 2, 3, 3}));
  EXPECT_EQ(rec.list[2].first, "unet.conv.bias");
  EXPECT_EQ(rec.parameters(), 15 + 108 + 6);
}

TEST(ParamSource, CheckpointSourceClaimsAndReportsEveryProblem) {
  const Tensor w = gaussian_noise({4, 3}, 5), b = gaussian_noise({4}, 6);
  const std::vector<std::pair<std::string, const Tensor*>> list{{"fc.weight", &w}, {"fc.bias", &b}};
  const std::string path = ::testing::TempDir() + "nn_params.safetensors";
  write_safetensors(path, list);
  WeightMap map(SafetensorsFile::open(path), "");
  CheckpointParams p(map);
  EXPECT_TRUE(p.has("fc.weight"));
  EXPECT_FALSE(p.has("fc.missing"));
  Linear l;
  l.load(p, "fc", 3, 4);
  EXPECT_EQ(l.weight.data()[5], w.data()[5]);
  map.finish("fc");  // everything claimed

  WeightMap wrong(SafetensorsFile::open(path), "");
  CheckpointParams q(wrong);
  Linear m;
  m.load(q, "fc", 4, 3);  // transposed shape
  try {
    wrong.finish("fc");
    ADD_FAILURE() << "a mis-shaped weight passed";
  } catch (const ModelError& e) {
    EXPECT_NE(std::string(e.what()).find("fc.weight"), std::string::npos) << e.what();
  }
}

// take_transient reads a checkpoint's values into one buffer reused from call to call; a layer
// that keeps its float32 weight takes its own copy, so a later transient read leaves it intact,
// and a bf16 layer built from the transient read equals one built from its own copy.
TEST(ParamSource, TransientReadsReuseOneBufferAndLeaveKeptWeightsIntact) {
  const Tensor big = gaussian_noise({8, 9}, 7), small = gaussian_noise({4, 3}, 8),
               bias = gaussian_noise({4}, 9), conv = gaussian_noise({2, 3, 3, 3}, 10);
  const std::vector<std::pair<std::string, const Tensor*>> list{{"big", &big},
                                                                {"fc.weight", &small},
                                                                {"fc.bias", &bias},
                                                                {"conv.weight", &conv},
                                                                {"conv.bias", &bias}};
  const std::string path = ::testing::TempDir() + "nn_params_transient.safetensors";
  write_safetensors(path, list);

  WeightMap map(SafetensorsFile::open(path), "");
  CheckpointParams p(map);
  const float* first = p.take_transient("big", {8, 9}).data();
  EXPECT_EQ(0, std::memcmp(first, big.data(), 72 * sizeof(float)));
  Linear kept;  // float32 storage: keeps its own weight
  kept.load(p, "fc", 3, 4);
  const Tensor& t = p.take_transient("conv.weight", {2, 3, 3, 3});
  EXPECT_EQ(t.data(), first) << "a read that fits takes the same buffer";
  EXPECT_EQ(0, std::memcmp(t.data(), conv.data(), 54 * sizeof(float)));
  EXPECT_EQ(0, std::memcmp(kept.weight.data(), small.data(), 12 * sizeof(float)));
  EXPECT_EQ(p.parameters(), 72 + 12 + 4 + 54);

  WeightMap map16(SafetensorsFile::open(path), "");
  CheckpointParams p16(map16, WeightStorage::kBF16);
  (void)p16.take_transient("big", {8, 9});
  Linear from_file;
  from_file.load(p16, "fc", 3, 4);          // through the reused buffer
  (void)p16.take_transient("big", {8, 9});  // overwrites that buffer
  RandomParams own(
      [&](const std::string& name, Tensor& x) { x = name == "fc.weight" ? small : bias; },
      WeightStorage::kBF16);
  Linear from_copy;
  from_copy.load(own, "fc", 3, 4);
  const Tensor x = gaussian_noise({5, 3}, 11);
  Tensor a({5, 4}), b({5, 4});
  from_file(a.data(), x.data(), 5);
  from_copy(b.data(), x.data(), 5);
  EXPECT_EQ(0, std::memcmp(a.data(), b.data(), 20 * sizeof(float)));
}

TEST(Layers, LinearMatchesTheReferenceKernelInBothStorages) {
  const Tensor x = gaussian_noise({7, 8}, 3);
  for (WeightStorage s : {WeightStorage::kF32, WeightStorage::kF16}) {
    RandomParams p = noise_params(2, s);
    Linear l;
    l.load(p, "fc", 8, 5);
    RandomParams same = noise_params(2);
    const Tensor w = same.take("fc.weight", {5, 8}), b = same.take("fc.bias", {5});
    Tensor want({7, 5}), got({7, 5});
    kernels::ref::linear(want.data(), 5, x.data(), 8, w.data(), b.data(), 7, 8, 5);
    l(got.data(), x.data(), 7);
    const float tol = s == WeightStorage::kF32 ? 1e-5f : 1e-2f;
    for (std::int64_t i = 0; i < want.numel(); ++i)
      EXPECT_NEAR(got.data()[i], want.data()[i], tol) << i;
  }
}

// int8 storage quantizes only the Linears marked kInt8 (one byte a weight plus a float32 scale
// per output channel, then the int8 kernel); the others are kept and run as in bf16.
TEST(Layers, Int8StorageQuantizesOnlyTheMarkedLinears) {
  const Tensor x = gaussian_noise({7, 8}, 3);
  RandomParams p = noise_params(2, WeightStorage::kInt8);
  Linear q, kept;
  q.load(p, "fc", 8, 5, true, Quantize::kInt8);
  EXPECT_EQ(p.bytes(), 40u + 5u * 4 + 5u * 4);  // int8 weights, scales, float32 bias
  kept.load(p, "mod", 8, 5, true);
  ASSERT_NE(q.weight_int8, nullptr);
  EXPECT_EQ(q.weight_bf16, nullptr);
  EXPECT_TRUE(q.int8());
  EXPECT_TRUE(q.bf16());  // the attention over it runs in bf16
  EXPECT_EQ(kept.weight_int8, nullptr);
  ASSERT_NE(kept.weight_bf16, nullptr);
  EXPECT_FALSE(kept.int8());
  RandomParams same = noise_params(2);
  const Tensor w = same.take("fc.weight", {5, 8}), b = same.take("fc.bias", {5});
  Tensor want({7, 5}), got({7, 5});
  kernels::ref::linear_int8(want.data(), 5, x.data(), 8, q.weight_int8->data(),
                            q.weight_int8->scales(), b.data(), 7, 8, 5);
  q(got.data(), x.data(), 7);
  for (std::int64_t i = 0; i < want.numel(); ++i)
    EXPECT_NEAR(got.data()[i], want.data()[i], 1e-5f) << i;
  // Outside kInt8 storage the mark changes nothing.
  for (WeightStorage s : {WeightStorage::kF32, WeightStorage::kBF16}) {
    RandomParams ps = noise_params(2, s);
    Linear l;
    l.load(ps, "fc", 8, 5, true, Quantize::kInt8);
    EXPECT_EQ(l.weight_int8, nullptr);
  }
}

TEST(Layers, NormsAndConvolutionMatchTheReferenceKernels) {
  RandomParams p = noise_params(4);
  LayerNorm ln;
  ln.load(p, "ln", 6, 1e-5f);
  GroupNorm gn;
  gn.load(p, "gn", 6, 3, 1e-6f);
  Conv2d conv;
  conv.load_padded(p, "conv", 4, 6, 3, 2);

  const Tensor x = gaussian_noise({1, 5, 5, 6}, 9);
  Tensor a({25, 6}), b({25, 6});
  ln(a.data(), x.data(), 25);
  kernels::ref::layer_norm(b.data(), 6, x.data(), 6, 25, 6, 1e-5f, ln.weight.data(),
                           ln.bias.data());
  for (std::int64_t i = 0; i < a.numel(); ++i) EXPECT_NEAR(a.data()[i], b.data()[i], 1e-5f);

  gn(a.data(), x.data(), 1, 25, true);
  kernels::ref::group_norm(b.data(), x.data(), 1, 25, 6, 3, 1e-6f, gn.weight.data(), gn.bias.data(),
                           true);
  for (std::int64_t i = 0; i < a.numel(); ++i) EXPECT_NEAR(a.data()[i], b.data()[i], 1e-5f);

  const Tensor y = conv(x);
  EXPECT_EQ(y.shape(), (Shape{1, 3, 3, 4}));  // padding 1, stride 2
  Tensor want({1, 3, 3, 4});
  kernels::ref::conv2d(want.data(), x.data(), 1, 5, 5, conv.weight, conv.geometry);
  for (std::int64_t i = 0; i < want.numel(); ++i) EXPECT_NEAR(y.data()[i], want.data()[i], 1e-4f);
}

TEST(Layers, CheckShapeNamesWhereWhatAndBothShapes) {
  const Tensor t({2, 3});
  EXPECT_NO_THROW(check_shape(t, "Net::forward", "x", {-1, 3}));
  try {
    check_shape(t, "Net::forward", "x", {2, -1, 4});
    ADD_FAILURE() << "rank mismatch passed";
  } catch (const ModelError& e) {
    EXPECT_EQ(std::string(e.what()), "Net::forward: x has shape [2, 3], expected [2, *, 4]");
  }
  EXPECT_THROW(check_shape(Tensor(), "Net::forward", "x", {}), ModelError);
}

TEST(Init, SplitMixAndNoiseAreSeededAndThreadFree) {
  SplitMix a(7), b(7), c(8);
  for (int i = 0; i < 4; ++i) {
    const float x = a.symmetric();
    EXPECT_EQ(x, b.symmetric());
    EXPECT_GE(x, -1.0f);
    EXPECT_LT(x, 1.0f);
  }
  EXPECT_NE(a.next(), c.next());
  EXPECT_NE(stream_seed(1, 1), stream_seed(1, 2));

  RandomParams p(uniform_init(3, 0.5f)), q(uniform_init(3, 0.5f));
  const Tensor w = p.take("layer.weight", {300, 300}), w2 = q.take("layer.weight", {300, 300});
  float lo = 1, hi = -1;
  for (std::int64_t i = 0; i < w.numel(); ++i) {
    ASSERT_EQ(w.data()[i], w2.data()[i]);
    lo = std::min(lo, w.data()[i]);
    hi = std::max(hi, w.data()[i]);
  }
  EXPECT_LT(lo, -0.45f);
  EXPECT_GT(hi, 0.45f);
  EXPECT_GE(lo, -0.5f);
  EXPECT_EQ(p.take("layer.bias", {3}).data()[1], 0.0f);
  EXPECT_EQ(p.take("norm1.weight", {3}).data()[2], 1.0f);
}

}  // namespace
}  // namespace gen3d::models::nn
