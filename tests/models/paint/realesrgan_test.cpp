// RRDBNet unit tests: the strict loader (missing / mis-shaped / unexpected tensors named), the
// checkpoint layouts (bare state_dict, "params_ema." and "params." levels), config inference,
// RealESRGANer's tiling and its 8-bit pre/post-processing. Small seeded random networks.

#include <gtest/gtest.h>

#include <algorithm>
#include <cmath>
#include <cstdint>
#include <nlohmann/json.hpp>
#include <string>
#include <utility>
#include <vector>

#include "models/core/error.h"
#include "models/core/safetensors.h"
#include "models/nn/init.h"
#include "models/paint/realesrgan.h"
#include "support/paths.h"

namespace gen3d::models {
namespace {

RrdbNetConfig tiny() {
  RrdbNetConfig c;
  c.num_feat = 6;
  c.num_block = 2;
  c.num_grow_ch = 4;
  return c;
}

// Seeded tensors for every name `cfg` implies (values large enough that the network's output
// depends visibly on each of them).
std::vector<std::pair<std::string, Tensor>> tensors_for(const RrdbNetConfig& cfg,
                                                        std::uint64_t seed = 7) {
  std::vector<std::pair<std::string, Tensor>> out;
  const auto fill = nn::uniform_init(seed, 0.2f);
  for (const auto& [name, shape] : RrdbNet::expected_tensors(cfg)) {
    Tensor t(shape);
    fill(name, t);
    out.emplace_back(name, std::move(t));
  }
  return out;
}

std::string write(const std::string& tag, const std::vector<std::pair<std::string, Tensor>>& ts,
                  const std::string& prefix = "") {
  std::vector<std::pair<std::string, const Tensor*>> refs;
  std::vector<std::string> names;
  names.reserve(ts.size());
  for (const auto& [n, t] : ts) names.push_back(prefix + n);
  for (std::size_t i = 0; i < ts.size(); ++i) refs.emplace_back(names[i], &ts[i].second);
  const std::string path = test::temp_dir("realesrgan_" + tag) + "/w.safetensors";
  write_safetensors(path, refs);
  return path;
}

std::string load_error(const std::string& path) {
  try {
    RrdbNet::load_file(path);
  } catch (const ModelError& e) {
    return e.what();
  }
  return "";
}

Tensor random_image(std::int64_t h, std::int64_t w, std::uint64_t seed) {
  Tensor x(Shape{1, h, w, 3});
  const auto fill = nn::uniform_init(seed, 0.5f);
  fill("image", x);
  for (float& v : x.span()) v += 0.5f;  // [0, 1]
  return x;
}

double max_abs_diff(const Tensor& a, const Tensor& b) {
  double worst = 0.0;
  for (std::int64_t i = 0; i < a.numel(); ++i)
    worst = std::max(worst, std::fabs(double(a.data()[i]) - b.data()[i]));
  return worst;
}

TEST(RrdbNetLoader, ExpectedTensorsFollowTheOfficialNames) {
  const auto names = RrdbNet::expected_tensors(tiny());
  // conv_first, 2 blocks · 3 dense blocks · 5 convs, conv_body, up1, up2, hr, last; weight + bias.
  EXPECT_EQ(names.size(), 2u * (1 + 2 * 3 * 5 + 5));
  auto find = [&](const std::string& n) {
    return std::find_if(names.begin(), names.end(), [&](const auto& p) { return p.first == n; });
  };
  ASSERT_NE(find("body.1.rdb3.conv5.weight"), names.end());
  EXPECT_EQ(find("body.1.rdb3.conv5.weight")->second, (Shape{6, 6 + 4 * 4, 3, 3}));
  EXPECT_EQ(find("body.0.rdb2.conv3.weight")->second, (Shape{4, 6 + 2 * 4, 3, 3}));
  EXPECT_EQ(find("conv_last.weight")->second, (Shape{3, 6, 3, 3}));
}

TEST(RrdbNetLoader, MissingTensorIsNamed) {
  auto ts = tensors_for(tiny());
  ts.erase(std::find_if(ts.begin(), ts.end(),
                        [](const auto& p) { return p.first == "body.1.rdb2.conv4.bias"; }));
  const std::string msg = load_error(write("missing", ts));
  EXPECT_NE(msg.find("missing body.1.rdb2.conv4.bias"), std::string::npos) << msg;
}

TEST(RrdbNetLoader, MisShapedTensorIsNamedWithBothShapes) {
  auto ts = tensors_for(tiny());
  for (auto& [n, t] : ts)
    if (n == "body.0.rdb3.conv2.weight") t = Tensor(Shape{4, 9, 3, 3});
  const std::string msg = load_error(write("misshaped", ts));
  EXPECT_NE(msg.find("body.0.rdb3.conv2.weight"), std::string::npos) << msg;
  EXPECT_NE(msg.find("[4, 9, 3, 3]"), std::string::npos) << msg;
  EXPECT_NE(msg.find("[4, 10, 3, 3]"), std::string::npos) << msg;
}

TEST(RrdbNetLoader, UnexpectedTensorIsNamed) {
  auto ts = tensors_for(tiny());
  ts.emplace_back("body.0.rdb1.conv6.weight", Tensor(Shape{4, 4, 3, 3}));
  const std::string msg = load_error(write("unexpected", ts));
  EXPECT_NE(msg.find("body.0.rdb1.conv6.weight"), std::string::npos) << msg;
}

TEST(RrdbNetLoader, AConfigThatDisagreesWithTheFileNamesTheTensors) {
  const std::string path = write("config", tensors_for(tiny()));
  RrdbNetConfig more = tiny();
  more.num_block = 3;  // body.2.* are missing
  try {
    RrdbNet::load_file(path, WeightStorage::kF32, &more);
    FAIL() << "expected a ModelError";
  } catch (const ModelError& e) {
    EXPECT_NE(std::string(e.what()).find("missing body.2.rdb1.conv1.weight"), std::string::npos)
        << e.what();
  }
}

TEST(RrdbNetLoader, NotAnRrdbNetCheckpoint) {
  std::vector<std::pair<std::string, Tensor>> ts;
  ts.emplace_back("encoder.conv_in.weight", Tensor(Shape{4, 3, 3, 3}));
  const std::string msg = load_error(write("foreign", ts));
  EXPECT_NE(msg.find("conv_first.weight"), std::string::npos) << msg;
}

// Scale 2 / 1 checkpoints (conv_first over pixel_unshuffle'd input) are refused by name.
TEST(RrdbNetLoader, OtherScalesAreRefused) {
  auto ts = tensors_for(tiny());
  for (auto& [n, t] : ts)
    if (n == "conv_first.weight") t = Tensor(Shape{6, 12, 3, 3});
  const std::string msg = load_error(write("x2", ts));
  EXPECT_NE(msg.find("'scale' 2"), std::string::npos) << msg;
}

// A bare state_dict, the .pth's {'params_ema': ...} (read as "params_ema.<name>") and
// {'params': ...} load the same network; with both levels present params_ema wins, as in
// RealESRGANer.
TEST(RrdbNetLoader, CheckpointLevels) {
  const auto ts = tensors_for(tiny());
  const Tensor x = random_image(5, 7, 3);
  const Tensor want = RrdbNet::load_file(write("bare", ts)).forward(x);
  for (const std::string prefix : {"params_ema.", "params."}) {
    SCOPED_TRACE(prefix);
    const RrdbNet net = RrdbNet::load_file(write("level", ts, prefix));
    EXPECT_EQ(net.config(), tiny());
    EXPECT_EQ(max_abs_diff(net.forward(x), want), 0.0);
  }
  // Both levels: params_ema holds the network, params holds other values.
  auto both = ts;
  for (auto& [n, t] : both) n = "params_ema." + n;
  for (const auto& [n, t] : tensors_for(tiny(), 99)) both.emplace_back("params." + n, t);
  const RrdbNet net = RrdbNet::load_file(write("both", both));
  EXPECT_EQ(max_abs_diff(net.forward(x), want), 0.0);
}

TEST(RrdbNetConfigTest, FromJsonIsStrict) {
  const auto j = nlohmann::json::parse(R"({"num_in_ch": 3, "num_out_ch": 3, "scale": 4,
      "num_feat": 8, "num_block": 2, "num_grow_ch": 4})");
  const RrdbNetConfig c = RrdbNetConfig::from_json(j, "t");
  EXPECT_EQ(c.num_feat, 8);
  EXPECT_EQ(c.num_block, 2);
  auto bad = j;
  bad["num_blocks"] = 3;
  EXPECT_THROW(RrdbNetConfig::from_json(bad, "t"), ModelError);
  bad = j;
  bad["scale"] = 2;
  EXPECT_THROW(RrdbNetConfig::from_json(bad, "t"), ModelError);
  bad = j;
  bad["num_feat"] = 0;
  EXPECT_THROW(RrdbNetConfig::from_json(bad, "t"), ModelError);
}

// ---------------------------------------------------------------------------------------------
// Tiling

TEST(RrdbNetTiling, ContextOfTheReceptiveRadiusMakesTilesExact) {
  const RrdbNet net = RrdbNet::random(tiny(), 5, WeightStorage::kF32, 0.2f);
  const int r = net.receptive_radius();
  EXPECT_EQ(r, 4 + 15 * tiny().num_block);
  // Several tiles each way, the last ones partial, the image wider than tile + 2 pads.
  const Tensor x = random_image(2 * r + 11, 3 * r + 5, 11);
  const Tensor whole = net.forward(x);
  const Tensor tiled = net.forward_tiled(x, {.tile = r, .tile_pad = r});
  ASSERT_EQ(tiled.shape(), whole.shape());
  EXPECT_LE(max_abs_diff(tiled, whole), 1e-5);
  // Less context than the radius changes the seams (what a small tile_pad costs).
  const Tensor seams = net.forward_tiled(x, {.tile = r, .tile_pad = 2});
  EXPECT_GT(max_abs_diff(seams, whole), 1e-4);
}

// realesrgan/utils.py tile_process, written out: each tile's padded crop through the network,
// the tile's own region of its output pasted at scale × its position.
TEST(RrdbNetTiling, TheTilingMathOfRealEsrganer) {
  const RrdbNet net = RrdbNet::random(tiny(), 5, WeightStorage::kF32, 0.2f);
  const std::int64_t H = 23, W = 30, T = 8, pad = 3, s = 4;
  const Tensor x = random_image(H, W, 12);
  std::vector<std::pair<int, int>> progress;
  const Tensor tiled = net.forward_tiled(x, {.tile = T, .tile_pad = pad}, [&](int done, int total) {
    progress.emplace_back(done, total);
  });
  ASSERT_EQ(tiled.shape(), (Shape{1, s * H, s * W, 3}));
  const int count = static_cast<int>(((H + T - 1) / T) * ((W + T - 1) / T));  // 3 × 4 tiles
  ASSERT_EQ(static_cast<int>(progress.size()), count);
  EXPECT_EQ(progress.back(), std::make_pair(count, count));
  Tensor want(tiled.shape());
  for (std::int64_t y0 = 0; y0 < H; y0 += T)
    for (std::int64_t x0 = 0; x0 < W; x0 += T) {
      const std::int64_t y1 = std::min(y0 + T, H), x1 = std::min(x0 + T, W);
      const std::int64_t py0 = std::max<std::int64_t>(y0 - pad, 0), py1 = std::min(y1 + pad, H);
      const std::int64_t px0 = std::max<std::int64_t>(x0 - pad, 0), px1 = std::min(x1 + pad, W);
      Tensor crop(Shape{1, py1 - py0, px1 - px0, 3});
      for (std::int64_t r = py0; r < py1; ++r)
        for (std::int64_t c = px0; c < px1; ++c)
          for (int k = 0; k < 3; ++k)
            crop.data()[((r - py0) * (px1 - px0) + (c - px0)) * 3 + k] =
                x.data()[(r * W + c) * 3 + k];
      const Tensor o = net.forward(crop);
      for (std::int64_t r = s * y0; r < s * y1; ++r)
        for (std::int64_t c = s * x0; c < s * x1; ++c)
          for (int k = 0; k < 3; ++k)
            want.data()[(r * s * W + c) * 3 + k] =
                o.data()[((r - s * py0) * o.dim(2) + (c - s * px0)) * 3 + k];
    }
  EXPECT_EQ(max_abs_diff(tiled, want), 0.0);
}

TEST(RrdbNetTiling, TileZeroIsOneForwardAndBigTilesAreToo) {
  const RrdbNet net = RrdbNet::random(tiny(), 5, WeightStorage::kF32, 0.2f);
  const Tensor x = random_image(9, 13, 4);
  const Tensor whole = net.forward(x);
  EXPECT_EQ(max_abs_diff(net.forward_tiled(x, {.tile = 0, .tile_pad = 10}), whole), 0.0);
  EXPECT_EQ(max_abs_diff(net.forward_tiled(x, {.tile = 13, .tile_pad = 0}), whole), 0.0);
  EXPECT_THROW(net.forward_tiled(x, {.tile = -1, .tile_pad = 0}), ModelError);
  EXPECT_THROW(net.forward_tiled(x, {.tile = 4, .tile_pad = -1}), ModelError);
}

TEST(RrdbNetTest, RejectsWrongInput) {
  const RrdbNet net = RrdbNet::random(tiny(), 5);
  EXPECT_THROW(net.forward(Tensor(Shape{1, 4, 4, 4})), ModelError);
  EXPECT_THROW(net.forward(Tensor(Shape{4, 4, 3})), ModelError);
}

// ---------------------------------------------------------------------------------------------
// RealESRGANer's 8-bit pre/post-processing

TEST(RealEsrganIo, InputIsBgrOver255) {
  image::ImageU8 img(2, 1, 3);
  const std::uint8_t px[6] = {10, 20, 30, 255, 0, 128};
  std::copy(px, px + 6, img.pixels.begin());
  const Tensor x = esrgan_input(img);
  ASSERT_EQ(x.shape(), (Shape{1, 1, 2, 3}));
  EXPECT_EQ(x.data()[0], 30.0f / 255.0f);
  EXPECT_EQ(x.data()[1], 20.0f / 255.0f);
  EXPECT_EQ(x.data()[2], 10.0f / 255.0f);
  EXPECT_EQ(x.data()[3], 128.0f / 255.0f);
  EXPECT_EQ(x.data()[5], 1.0f);
  EXPECT_THROW(esrgan_input(image::ImageU8(2, 2, 4)), ModelError);
}

// A float32 v whose float32 product v · 255 is exactly `tie` (searched next to tie / 255).
float value_with_product(float tie) {
  float v = tie / 255.0f;
  for (int i = 0; i < 64 && v * 255.0f != tie; ++i)
    v = std::nextafter(v, v * 255.0f < tie ? 1.0f : 0.0f);
  return v;
}

TEST(RealEsrganIo, OutputClampsRoundsHalfToEvenAndReversesChannels) {
  const float t25 = value_with_product(2.5f), t35 = value_with_product(3.5f);
  ASSERT_EQ(t25 * 255.0f, 2.5f);
  ASSERT_EQ(t35 * 255.0f, 3.5f);
  Tensor y(Shape{1, 1, 2, 3});
  // B, G, R of two pixels: clamped below 0 and above 1, ties 2.5 -> 2 and 3.5 -> 4 (numpy's
  // round-half-to-even).
  const float v[6] = {-0.3f, 1.7f, t25, t35, 0.5f, 1.0f};
  std::copy(v, v + 6, y.data());
  const image::ImageU8 img = esrgan_output(y);
  ASSERT_EQ(img.width, 2);
  ASSERT_EQ(img.height, 1);
  EXPECT_EQ(img.pixels[0], 2);    // R <- t25
  EXPECT_EQ(img.pixels[1], 255);  // G <- 1.7
  EXPECT_EQ(img.pixels[2], 0);    // B <- -0.3
  EXPECT_EQ(img.pixels[3], 255);  // R <- 1.0
  EXPECT_EQ(img.pixels[4], 128);  // G <- 0.5 (127.5 -> 128)
  EXPECT_EQ(img.pixels[5], 4);    // B <- t35
}

TEST(RealEsrganIo, EnhanceShapes) {
  const RrdbNet net = RrdbNet::random(tiny(), 5);
  const image::ImageU8 out = esrgan_enhance(net, image::ImageU8(7, 5, 3, 100), {4, 2});
  EXPECT_EQ(out.width, 28);
  EXPECT_EQ(out.height, 20);
  EXPECT_EQ(out.channels, 3);
}

}  // namespace
}  // namespace gen3d::models
