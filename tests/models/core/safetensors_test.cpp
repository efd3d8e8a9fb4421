#include "models/core/safetensors.h"

#include <gtest/gtest.h>

#include <algorithm>
#include <cstring>
#include <fstream>
#include <random>
#include <string>

#include "models/core/error.h"
#include "support/paths.h"

namespace gen3d::models {
namespace {

std::vector<unsigned char> make_file(const std::string& header, std::size_t data_bytes,
                                     std::uint64_t header_len_override = 0) {
  std::vector<unsigned char> out(8 + header.size() + data_bytes, 0);
  const std::uint64_t n = header_len_override ? header_len_override : header.size();
  for (std::size_t i = 0; i < 8; ++i) out[i] = static_cast<unsigned char>((n >> (8 * i)) & 0xff);
  std::copy(header.begin(), header.end(), out.begin() + 8);
  return out;
}

void expect_error(const std::vector<unsigned char>& bytes, const std::string& needle) {
  try {
    SafetensorsFile::from_bytes(bytes, "test.safetensors");
    ADD_FAILURE() << "expected ModelError containing '" << needle << "'";
  } catch (const ModelError& e) {
    EXPECT_NE(std::string(e.what()).find(needle), std::string::npos) << e.what();
    EXPECT_NE(std::string(e.what()).find("test.safetensors"), std::string::npos) << e.what();
  }
}

std::vector<unsigned char> read_all(const std::string& path) {
  std::ifstream in(path, std::ios::binary);
  return {std::istreambuf_iterator<char>(in), std::istreambuf_iterator<char>()};
}

TEST(Safetensors, WriteReadRoundTripAllDtypes) {
  const std::string dir = test::temp_dir("models_safetensors_rt");
  Tensor a({2, 3});
  for (int i = 0; i < 6; ++i) a.data()[i] = 0.25f * static_cast<float>(i) - 0.5f;
  Tensor b({5});
  for (int i = 0; i < 5; ++i) b.data()[i] = static_cast<float>(i * i);
  for (DType dt : {DType::kF32, DType::kF16, DType::kBF16}) {
    const std::string path = dir + "/rt_" + std::string(dtype_name(dt)) + ".safetensors";
    write_safetensors(path, {{"layer.weight", &a}, {"a_bias", &b}}, dt, {{"format", "pt"}});
    auto f = SafetensorsFile::open(path);
    ASSERT_EQ(f->tensors().size(), 2u);
    EXPECT_EQ(f->tensors()[0].name, "a_bias");  // sorted
    EXPECT_EQ(f->metadata().at("format"), "pt");
    const TensorInfo* w = f->find("layer.weight");
    ASSERT_NE(w, nullptr);
    EXPECT_EQ(w->dtype, dt);
    EXPECT_EQ(w->shape_str(), "[2, 3]");
    Tensor ra = f->to_f32("layer.weight");
    Tensor rb = f->to_f32(*f->find("a_bias"));
    for (int i = 0; i < 6; ++i) EXPECT_EQ(ra.data()[i], a.data()[i]);  // all exactly representable
    for (int i = 0; i < 5; ++i) EXPECT_EQ(rb.data()[i], b.data()[i]);
    EXPECT_EQ(f->find("nope"), nullptr);
    EXPECT_THROW(f->to_f32("nope"), ModelError);
  }
}

TEST(Safetensors, RejectsMalformedHeaders) {
  expect_error({1, 2, 3}, "too short");
  expect_error(make_file("{}", 0, 1ull << 40), "exceeds");
  expect_error(make_file("{}", 0, 100), "past the end");
  expect_error(make_file("{not json", 0), "not valid JSON");
  expect_error(make_file("[1,2]", 0), "not a JSON object");
  expect_error(make_file(R"({"a": 3})", 0), "entry is not an object");
  expect_error(make_file(R"({"a": {"dtype":"F32","shape":[1]}})", 4), "data_offsets");
  expect_error(make_file(R"({"a": {"dtype":"Q4","shape":[1],"data_offsets":[0,4]}})", 4),
               "unsupported dtype");
  expect_error(make_file(R"({"a": {"dtype":"F32","shape":[-1],"data_offsets":[0,4]}})", 4),
               "non-negative");
  expect_error(make_file(R"({"a": {"dtype":"F32","shape":[1.5],"data_offsets":[0,4]}})", 4),
               "non-negative");
  expect_error(make_file(R"({"a": {"dtype":"F32","shape":[2],"data_offsets":[0,4]}})", 4),
               "does not match");
  expect_error(make_file(R"({"a": {"dtype":"F32","shape":[1],"data_offsets":[4,0]}})", 4),
               "reversed");
  expect_error(make_file(R"({"a": {"dtype":"F32","shape":[1],"data_offsets":[0,8]}})", 4),
               "past the data section");
  expect_error(make_file(R"({"a": {"dtype":"F32","shape":[1],"data_offsets":[0,4],"x":1}})", 4),
               "unknown field");
  expect_error(
      make_file(
          R"({"a": {"dtype":"F32","shape":[4294967296,4294967296,4294967296],"data_offsets":[0,4]}})",
          4),
      "overflows");
  expect_error(make_file(R"({"__metadata__": {"k": 1}})", 0), "not a string");
  // Overlap, gap and uncovered bytes.
  expect_error(make_file(R"({"a": {"dtype":"F32","shape":[1],"data_offsets":[0,4]},
                             "b": {"dtype":"F32","shape":[1],"data_offsets":[0,4]}})",
                         4),
               "overlaps");
  expect_error(make_file(R"({"a": {"dtype":"F32","shape":[1],"data_offsets":[4,8]}})", 8), "gap");
  expect_error(make_file(R"({"a": {"dtype":"F32","shape":[1],"data_offsets":[0,4]}})", 12),
               "cover");
}

TEST(Safetensors, IntegerTensorsParseButDoNotWiden) {
  auto f = SafetensorsFile::from_bytes(
      make_file(R"({"faces": {"dtype":"I32","shape":[2,3],"data_offsets":[0,24]}})", 24), "ints");
  EXPECT_THROW(f->to_f32("faces"), ModelError);
  EXPECT_EQ(f->bytes(*f->find("faces")).size(), 24u);
}

TEST(Safetensors, EveryTruncationAndRandomCorruptionIsAnErrorNotACrash) {
  const std::string dir = test::temp_dir("models_safetensors_fuzz");
  Tensor a({3, 5}), b({7});
  for (auto& v : a.span()) v = 1.5f;
  write_safetensors(dir + "/ok.safetensors", {{"a", &a}, {"b", &b}}, DType::kF16);
  const auto good = read_all(dir + "/ok.safetensors");
  ASSERT_NO_THROW(SafetensorsFile::from_bytes(good, "ok"));
  for (std::size_t n = 0; n < good.size(); ++n) {
    std::vector<unsigned char> cut(good.begin(), good.begin() + static_cast<std::ptrdiff_t>(n));
    EXPECT_THROW(SafetensorsFile::from_bytes(cut, "cut"), ModelError) << "prefix " << n;
  }
  std::mt19937 rng(1234);
  int accepted = 0;
  for (int trial = 0; trial < 3000; ++trial) {
    auto bad = good;
    const int flips = 1 + trial % 3;
    for (int k = 0; k < flips; ++k) {
      const std::size_t pos = rng() % bad.size();
      bad[pos] = static_cast<unsigned char>(rng());
    }
    try {
      auto f = SafetensorsFile::from_bytes(bad, "fuzz");
      for (const auto& t : f->tensors()) {  // whatever parsed must be readable in bounds
        if (is_float_dtype(t.dtype) && t.shape.size() <= 4) (void)f->to_f32(t);
      }
      ++accepted;
    } catch (const ModelError&) {
    }
  }
  SUCCEED() << accepted << " corrupted images were still valid (data-byte flips)";
}

TEST(WeightMap, ClaimTrackingAndProblemsListedTogether) {
  const std::string dir = test::temp_dir("models_weightmap");
  Tensor w({4, 3}), bias({4}), extra({2}), wrong({5, 3});
  write_safetensors(
      dir + "/w.safetensors",
      {{"lin.weight", &w}, {"lin.bias", &bias}, {"extra.thing", &extra}, {"other.weight", &wrong}});
  WeightMap m(SafetensorsFile::open(dir + "/w.safetensors"), "");
  EXPECT_EQ(m.take("lin.weight", {4, 3}).shape(), Shape({4, 3}));
  EXPECT_EQ(m.take("lin.bias", {4}).numel(), 4);
  Tensor got = m.take("other.weight", {4, 3});  // mis-shaped: zero placeholder of expected shape
  EXPECT_EQ(got.shape(), Shape({4, 3}));
  m.take("missing.bias", {4});
  EXPECT_EQ(m.unclaimed(), std::vector<std::string>{"extra.thing"});
  try {
    m.finish("TestModel");
    FAIL() << "finish() should throw";
  } catch (const ModelError& e) {
    const std::string msg = e.what();
    EXPECT_NE(msg.find("TestModel"), std::string::npos) << msg;
    EXPECT_NE(msg.find("3 problems"), std::string::npos) << msg;
    EXPECT_NE(msg.find("mis-shaped other.weight: expected [4, 3], got [5, 3]"), std::string::npos)
        << msg;
    EXPECT_NE(msg.find("missing missing.bias (expected shape [4])"), std::string::npos) << msg;
    EXPECT_NE(msg.find("unexpected extra.thing F32 [2]"), std::string::npos) << msg;
  }
}

TEST(WeightMap, SubmodelPrefixesOfCombinedCheckpoints) {
  const std::string dir = test::temp_dir("models_weightmap_prefix");
  Tensor t({2});
  write_safetensors(dir + "/combined.safetensors",
                    {{"model.a.weight", &t}, {"vae.b.weight", &t}, {"conditioner.c", &t}});
  write_safetensors(dir + "/plain.safetensors", {{"a.weight", &t}});
  auto combined = SafetensorsFile::open(dir + "/combined.safetensors");
  WeightMap dit = WeightMap::for_submodel(combined, "model");
  EXPECT_EQ(dit.prefix(), "model.");
  EXPECT_TRUE(dit.contains("a.weight"));
  EXPECT_FALSE(dit.contains("b.weight"));
  dit.take("a.weight", {2});
  EXPECT_NO_THROW(dit.finish("DiT"));  // vae.* / conditioner.* belong to other sub-models
  WeightMap plain =
      WeightMap::for_submodel(SafetensorsFile::open(dir + "/plain.safetensors"), "model");
  EXPECT_EQ(plain.prefix(), "");
  EXPECT_TRUE(plain.contains("a.weight"));
}

TEST(Safetensors, OpenErrorsNameTheFile) {
  try {
    SafetensorsFile::open("/nonexistent/dir/x.safetensors");
    FAIL();
  } catch (const ModelError& e) {
    EXPECT_NE(std::string(e.what()).find("/nonexistent/dir/x.safetensors"), std::string::npos);
  }
}

}  // namespace
}  // namespace gen3d::models
