// Unit tests of the UNet2DConditionModel / UNet2.5D: config parsing and its errors, the camera id
// formula, strict weight loading (missing / extra / mis-shaped tensors), and properties of the
// forward passes on tiny random networks (text broadcast, reference isolation under CFG,
// multiview coupling, camera embedding).

#include <gtest/gtest.h>

#include <cmath>
#include <cstring>
#include <functional>
#include <random>
#include <string>
#include <vector>

#include "models/core/error.h"
#include "models/core/safetensors.h"
#include "models/paint/mvunet.h"
#include "models/paint/unet.h"
#include "support/paths.h"

namespace gen3d::models {
namespace {

const char* kTinyConfig = R"({
  "_class_name": "UNet2DConditionModel", "_diffusers_version": "0.32.2", "sample_size": 8,
  "in_channels": 4, "out_channels": 4,
  "down_block_types": ["CrossAttnDownBlock2D", "DownBlock2D"],
  "up_block_types": ["UpBlock2D", "CrossAttnUpBlock2D"],
  "block_out_channels": [8, 16], "layers_per_block": 1, "attention_head_dim": [2, 4],
  "cross_attention_dim": 12, "use_linear_projection": true, "norm_num_groups": 4,
  "norm_eps": 1e-05, "flip_sin_to_cos": true, "freq_shift": 0, "act_fn": "silu",
  "center_input_sample": false, "downsample_padding": 1, "mid_block_scale_factor": 1,
  "dual_cross_attention": false, "upcast_attention": false, "class_embed_type": null
})";

UNetConfig tiny() {
  return UNetConfig::parse(kTinyConfig, "tiny");
}

// The tiny config with `key` set to the JSON value `value`.
std::string with(const std::string& key, const std::string& value) {
  auto j = std::string(kTinyConfig);
  const std::string needle = "\"" + key + "\":";
  const auto at = j.find(needle);
  if (at == std::string::npos) {
    j.insert(j.find('{') + 1, needle + " " + value + ",");
    return j;
  }
  const auto start = at + needle.size();
  // Replace up to the next top-level ',' or '}' (values here have no nested commas unless
  // they are lists, which end with ']').
  std::size_t end = start;
  int depth = 0;
  for (; end < j.size(); ++end) {
    const char c = j[end];
    if (c == '[') ++depth;
    if (c == ']') --depth;
    if (depth == 0 && (c == ',' || c == '}')) break;
  }
  j.replace(start, end - start, " " + value);
  return j;
}

void expect_config_error(const std::string& json_text, const std::string& needle) {
  try {
    UNetConfig::parse(json_text, "cfg.json");
    ADD_FAILURE() << "no error for " << needle;
  } catch (const ModelError& e) {
    EXPECT_NE(std::string(e.what()).find(needle), std::string::npos) << e.what();
    EXPECT_NE(std::string(e.what()).find("cfg.json"), std::string::npos) << e.what();
  }
}

TEST(UNetConfig, ParsesDiffusersConfig) {
  const UNetConfig c = tiny();
  EXPECT_EQ(c.in_channels, 4);
  EXPECT_EQ(c.levels(), 2);
  EXPECT_EQ(c.attention_head_dim, (std::vector<int>{2, 4}));
  EXPECT_EQ(c.transformer_layers_per_block, (std::vector<int>{1, 1}));
  EXPECT_EQ(c.cross_attention_dim, 12);
  EXPECT_EQ(c.time_embed_dim(), 32);
  // A scalar head count applies to every level.
  const UNetConfig s = UNetConfig::parse(with("attention_head_dim", "2"), "s");
  EXPECT_EQ(s.attention_head_dim, (std::vector<int>{2, 2}));
  const UNetConfig t = UNetConfig::parse(with("transformer_layers_per_block", "[1, 2]"), "t");
  EXPECT_EQ(t.transformer_layers_per_block, (std::vector<int>{1, 2}));
  // upcast_attention changes nothing in float32.
  EXPECT_NO_THROW(UNetConfig::parse(with("upcast_attention", "true"), "u"));
}

TEST(UNetConfig, RejectsUnsupportedOptionsByName) {
  expect_config_error(with("use_linear_projection", "false"), "use_linear_projection");
  expect_config_error(with("class_embed_type", "\"timestep\""), "class_embed_type");
  expect_config_error(with("addition_embed_type", "\"text\""), "addition_embed_type");
  expect_config_error(with("dual_cross_attention", "true"), "dual_cross_attention");
  expect_config_error(with("num_class_embeds", "10"), "num_class_embeds");
  expect_config_error(with("encoder_hid_dim_type", "\"text_proj\""), "encoder_hid_dim_type");
  expect_config_error(with("act_fn", "\"gelu\""), "act_fn");
  expect_config_error(with("resnet_time_scale_shift", "\"scale_shift\""),
                      "resnet_time_scale_shift");
  expect_config_error(with("mid_block_type", "null"), "mid_block_type");
  expect_config_error(with("down_block_types", "[\"AttnDownBlock2D\", \"DownBlock2D\"]"),
                      "AttnDownBlock2D");
  expect_config_error(with("up_block_types", "[\"UpBlock2D\"]"), "up_block_types");
  expect_config_error(with("attention_head_dim", "[3, 4]"), "attention_head_dim[0]");
  expect_config_error(with("block_out_channels", "[8, 18]"), "norm_num_groups");
  expect_config_error(with("in_channels", "\"four\""), "in_channels");
  expect_config_error("{not json", "not a JSON object");
}

TEST(UNetConfig, ReadsFileAndNamesIt) {
  EXPECT_THROW(UNetConfig::read("/nonexistent/unet/config.json"), ModelError);
}

TEST(MultiviewUNet, CameraIdsOfTheOfficialViews) {
  const int azim[] = {0, 90, 180, 270, 0, 180};
  const int elev[] = {0, 0, 0, 0, 90, -90};
  const int want[] = {21, 12, 15, 18, 43, 37};
  for (int i = 0; i < 6; ++i) EXPECT_EQ(MultiviewUNet::camera_id(azim[i], elev[i]), want[i]) << i;
  EXPECT_EQ(MultiviewUNet::camera_id(-30, 20), ((-1 + 9) % 12) + 24);  // floor division
  EXPECT_EQ(MultiviewUNet::camera_id(330, -20), (11 + 9) % 12);
  EXPECT_THROW(MultiviewUNet::camera_id(0, 45), ModelError);
}

// ---- weights ------------------------------------------------------------------------------

using TensorList = std::vector<std::pair<std::string, Shape>>;

// Random weights for the listed tensors: norm weights near 1, everything else small.
std::vector<std::pair<std::string, Tensor>> random_weights(const TensorList& list,
                                                           std::uint32_t seed) {
  std::mt19937 rng(seed);
  std::uniform_real_distribution<float> u(-1.0f, 1.0f);
  std::vector<std::pair<std::string, Tensor>> out;
  for (const auto& [name, shape] : list) {
    Tensor t(shape);
    const bool is_norm_weight = name.find("norm") != std::string::npos && name.size() > 7 &&
                                name.substr(name.size() - 7) == ".weight";
    const float fan_in = shape.rank() >= 2 ? float(shape.numel() / shape[0]) : 1.0f;
    for (float& v : t.span())
      v = is_norm_weight ? 1.0f + 0.1f * u(rng) : u(rng) * std::sqrt(1.0f / fan_in);
    out.emplace_back(name, std::move(t));
  }
  return out;
}

std::string write_file(const std::string& dir, const std::string& name,
                       const std::vector<std::pair<std::string, Tensor>>& tensors) {
  std::vector<std::pair<std::string, const Tensor*>> refs;
  for (const auto& [n, t] : tensors) refs.emplace_back(n, &t);
  const std::string path = dir + "/" + name;
  write_safetensors(path, refs);
  return path;
}

std::string load_error(const std::function<void()>& f) {
  try {
    f();
  } catch (const ModelError& e) {
    return e.what();
  }
  return "";
}

TEST(UNetWeights, StrictLoadingListsMissingExtraAndMisShaped) {
  const UNetConfig c = tiny();
  const std::string dir = test::temp_dir("unet_weights");
  const TensorList list = UNet2DCondition::expected_tensors(c);
  ASSERT_FALSE(list.empty());
  auto weights = random_weights(list, 1);
  std::int64_t numel = 0;
  for (const auto& [n, s] : list) numel += s.numel();

  const std::string ok = write_file(dir, "ok.safetensors", weights);
  const UNet2DCondition unet = UNet2DCondition::load(c, SafetensorsFile::open(ok));
  EXPECT_EQ(unet.num_parameters(), numel);
  ASSERT_EQ(unet.transformer_sites().size(), 4u);
  EXPECT_EQ(unet.transformer_sites()[0].name, "down_0_0_0");
  EXPECT_EQ(unet.transformer_sites()[1].name, "mid_0_0");
  EXPECT_EQ(unet.transformer_sites()[2].name, "up_1_0_0");
  EXPECT_EQ(unet.transformer_sites()[3].name, "up_1_1_0");
  EXPECT_EQ(unet.transformer_sites()[3].path, "up_blocks.1.attentions.1.transformer_blocks.0");

  auto missing = weights;
  const std::string gone = "down_blocks.0.attentions.0.transformer_blocks.0.attn2.to_k.weight";
  std::erase_if(missing, [&](const auto& p) { return p.first == gone; });
  ASSERT_EQ(missing.size() + 1, weights.size());
  const std::string p1 = write_file(dir, "missing.safetensors", missing);
  const std::string e1 = load_error([&] { UNet2DCondition::load(c, SafetensorsFile::open(p1)); });
  EXPECT_NE(e1.find("missing " + gone), std::string::npos) << e1;

  auto extra = weights;
  extra.emplace_back("down_blocks.0.attentions.0.transformer_blocks.0.attn_multiview.to_q.weight",
                     Tensor({8, 8}));
  const std::string p2 = write_file(dir, "extra.safetensors", extra);
  const std::string e2 = load_error([&] { UNet2DCondition::load(c, SafetensorsFile::open(p2)); });
  EXPECT_NE(e2.find("unexpected down_blocks.0.attentions.0.transformer_blocks.0.attn_multiview"),
            std::string::npos)
      << e2;

  auto shaped = weights;
  for (auto& [n, t] : shaped)
    if (n == "conv_in.weight") t = Tensor({8, 5, 3, 3});
  const std::string p3 = write_file(dir, "shaped.safetensors", shaped);
  const std::string e3 = load_error([&] { UNet2DCondition::load(c, SafetensorsFile::open(p3)); });
  EXPECT_NE(e3.find("conv_in.weight"), std::string::npos) << e3;
}

TEST(MultiviewUNetWeights, StrictLoadingOverBothPrefixes) {
  const UNetConfig c = tiny();
  const std::string dir = test::temp_dir("mvunet_weights");
  const TensorList list = MultiviewUNet::expected_tensors(c, 5);
  auto weights = random_weights(list, 2);
  const std::string ok = write_file(dir, "ok.safetensors", weights);
  const auto net = MultiviewUNet::load(c, ok);
  EXPECT_EQ(net->learned_text_gen().shape(), (Shape{1, 5, 12}));
  EXPECT_EQ(net->class_embedding().shape(), (Shape{49, 32}));

  auto broken = weights;
  const std::string gone =
      "unet.up_blocks.1.attentions.1.transformer_blocks.0.attn_refview.to_v.weight";
  std::erase_if(broken, [&](const auto& p) { return p.first == gone; });
  ASSERT_EQ(broken.size() + 1, weights.size());
  broken.emplace_back("unet_dual.class_embedding.weight", Tensor({49, 32}));
  broken.emplace_back("stray.tensor", Tensor({2}));
  const std::string p = write_file(dir, "broken.safetensors", broken);
  const std::string e = load_error([&] { MultiviewUNet::load(c, p); });
  EXPECT_NE(e.find("missing " + gone), std::string::npos) << e;
  EXPECT_NE(e.find("unexpected unet_dual.class_embedding.weight"), std::string::npos) << e;
  EXPECT_NE(e.find("unexpected stray.tensor"), std::string::npos) << e;
  EXPECT_NE(e.find("3 problems"), std::string::npos) << e;

  const std::string folder = test::temp_dir("mvunet_folder");
  EXPECT_NE(load_error([&] { MultiviewUNet::load_folder(folder); }).find("config.json"),
            std::string::npos);
}

// ---- forward properties -------------------------------------------------------------------

Tensor random_tensor(const Shape& s, std::uint32_t seed) {
  std::mt19937 rng(seed);
  std::normal_distribution<float> n(0.0f, 1.0f);
  Tensor t(s);
  for (float& v : t.span()) v = n(rng);
  return t;
}

double max_abs_diff(const float* a, const float* b, std::int64_t n) {
  double m = 0;
  for (std::int64_t i = 0; i < n; ++i) m = std::max(m, std::abs(double(a[i]) - double(b[i])));
  return m;
}

TEST(UNetForward, SharedTextEqualsRepeatedText) {
  const UNetConfig c = tiny();
  const std::string dir = test::temp_dir("unet_forward");
  const auto w = random_weights(UNet2DCondition::expected_tensors(c), 3);
  const UNet2DCondition unet =
      UNet2DCondition::load(c, SafetensorsFile::open(write_file(dir, "w.safetensors", w)));
  const Tensor x = random_tensor({3, 8, 8, 4}, 4);
  const Tensor text1 = random_tensor({1, 5, 12}, 5);
  Tensor text3({3, 5, 12});
  for (int b = 0; b < 3; ++b) std::memcpy(text3.data() + b * 60, text1.data(), 60 * sizeof(float));
  const std::vector<float> t = {10.0f, 500.0f, 999.0f};
  const Tensor a = unet.forward(x, t, text1);
  const Tensor b = unet.forward(x, t, text3);
  EXPECT_EQ(a.shape(), (Shape{3, 8, 8, 4}));
  EXPECT_LT(max_abs_diff(a.data(), b.data(), a.numel()), 1e-5);
  for (float v : a.span()) ASSERT_TRUE(std::isfinite(v));
  EXPECT_THROW(unet.forward(random_tensor({3, 7, 7, 4}, 1), t, text1), ModelError);  // odd size
  EXPECT_THROW(unet.forward(x, std::vector<float>{1.0f}, text1), ModelError);
}

TEST(MultiviewUNetForward, ReferenceIsolationMultiviewCouplingAndCameras) {
  const UNetConfig c = tiny();
  const std::string dir = test::temp_dir("mvunet_forward");
  const auto w = random_weights(MultiviewUNet::expected_tensors(c, 5), 6);
  const auto net = MultiviewUNet::load(c, write_file(dir, "w.safetensors", w));
  const int B = 2, N = 3;
  const Tensor lat = random_tensor({B * N, 8, 8, 4}, 7);
  const Tensor nrm = random_tensor({B * N, 8, 8, 4}, 8);
  const Tensor pos = random_tensor({B * N, 8, 8, 4}, 9);
  Tensor ref_lat = random_tensor({B, 8, 8, 4}, 10);
  Tensor text({B, 5, 12});
  std::memcpy(text.data() + 60, net->learned_text_gen().data(), 60 * sizeof(float));
  const std::vector<int> cams = {21, 12, 15, 21, 12, 15};
  const std::vector<float> scale = {0.0f, 1.0f};

  auto run = [&](const Tensor& l, const Tensor& r, const std::vector<int>& ids) {
    const RefFeatures ref = net->reference_features(r, 1, net->learned_text_ref());
    return net->forward(l, nrm, pos, 500.0f, text, ids, ref, scale, N);
  };
  const Tensor base = run(lat, ref_lat, cams);
  EXPECT_EQ(base.shape(), (Shape{B * N, 8, 8, 4}));
  const std::int64_t item = N * 8 * 8 * 4;

  // A different reference for the conditional item: the unconditional item is bit-identical.
  Tensor ref2 = ref_lat.clone();
  for (std::int64_t i = 8 * 8 * 4; i < ref2.numel(); ++i) ref2.data()[i] += 0.5f;
  const Tensor r2 = run(lat, ref2, cams);
  EXPECT_EQ(0, std::memcmp(base.data(), r2.data(), sizeof(float) * item));
  EXPECT_GT(max_abs_diff(base.data() + item, r2.data() + item, item), 1e-4);

  // Perturbing view 0 of item 1 changes its other views (multiview attention), not item 0.
  Tensor lat2 = lat.clone();
  for (std::int64_t i = item; i < item + 8 * 8 * 4; ++i) lat2.data()[i] += 0.5f;
  const Tensor v2 = run(lat2, ref_lat, cams);
  EXPECT_EQ(0, std::memcmp(base.data(), v2.data(), sizeof(float) * item));
  EXPECT_GT(max_abs_diff(base.data() + item + 256, v2.data() + item + 256, 2 * 256), 1e-5);

  // Another camera id for one view changes that view.
  std::vector<int> cams2 = cams;
  cams2[4] = 43;
  const Tensor c2 = run(lat, ref_lat, cams2);
  EXPECT_GT(max_abs_diff(base.data() + 4 * 256, c2.data() + 4 * 256, 256), 1e-5);

  std::vector<int> bad = cams;
  bad[0] = 44;  // 44 + 5 is past the 49 rows
  EXPECT_THROW(run(lat, ref_lat, bad), ModelError);
}

// The keys / values of the reference features and of the prompt projected once per generation
// (MultiviewConditions) give the same bits as projecting them in every forward.
TEST(MultiviewUNetForward, PrecomputedConditionsAreBitIdentical) {
  const UNetConfig c = UNetConfig::parse(with("layers_per_block", "2"), "tiny2");
  const std::string dir = test::temp_dir("mvunet_conditions");
  const auto w = random_weights(MultiviewUNet::expected_tensors(c, 5), 16);
  const auto net = MultiviewUNet::load(c, write_file(dir, "w.safetensors", w));
  const int N = 3;
  for (const int B : {1, 2}) {
    SCOPED_TRACE("batch " + std::to_string(B));
    const Tensor lat = random_tensor({B * N, 8, 8, 4}, 17);
    const Tensor nrm = random_tensor({B * N, 8, 8, 4}, 18);
    const Tensor pos = random_tensor({B * N, 8, 8, 4}, 19);
    const Tensor ref_lat = random_tensor({B, 8, 8, 4}, 20);
    const Tensor text = random_tensor({B, 5, 12}, 21);
    std::vector<int> cams;
    for (int b = 0; b < B; ++b) cams.insert(cams.end(), {21, 12, 15});
    // CFG's [0, 1] and a batch whose every item reads the reference at its own scale.
    const std::vector<float> scale =
        B == 2 ? std::vector<float>{0.0f, 1.0f} : std::vector<float>{0.7f};
    const RefFeatures ref = net->reference_features(ref_lat, 1, net->learned_text_ref());
    const MultiviewConditions cond = net->conditions(text, ref, scale);
    for (const float t : {999.0f, 261.0f}) {
      const Tensor a = net->forward(lat, nrm, pos, t, text, cams, ref, scale, N);
      const Tensor b = net->forward(lat, nrm, pos, t, cams, cond, N);
      ASSERT_EQ(a.shape(), b.shape());
      EXPECT_EQ(0, std::memcmp(a.data(), b.data(), sizeof(float) * a.numel())) << "t " << t;
    }
  }
  // Conditions for another batch size are refused.
  const Tensor lat = random_tensor({2 * N, 8, 8, 4}, 22);
  const RefFeatures ref1 =
      net->reference_features(random_tensor({1, 8, 8, 4}, 23), 1, net->learned_text_ref());
  const MultiviewConditions one =
      net->conditions(net->learned_text_gen(), ref1, std::vector<float>{1.0f});
  EXPECT_THROW(
      net->forward(lat, lat, lat, 500.0f, std::vector<int>{21, 12, 15, 21, 12, 15}, one, N),
      ModelError);
  EXPECT_THROW(net->conditions(net->learned_text_gen(), ref1, std::vector<float>{0.0f, 1.0f}),
               ModelError);
}

// DeepCache: storing the deep features does not change a pass; reusing them for the same input
// gives the full pass's bits (the shallow layers are wired to the right skips); reusing them for
// another input changes only what the shallow layers see.
TEST(UNetForward, FeatureCacheReusesTheDeepFeatures) {
  const UNetConfig c = UNetConfig::parse(with("layers_per_block", "2"), "tiny2");
  const std::string dir = test::temp_dir("unet_feature_cache");
  const auto w = random_weights(UNet2DCondition::expected_tensors(c), 24);
  const UNet2DCondition unet =
      UNet2DCondition::load(c, SafetensorsFile::open(write_file(dir, "w.safetensors", w)));
  const Tensor x = random_tensor({2, 8, 8, 4}, 25);
  const Tensor x2 = random_tensor({2, 8, 8, 4}, 26);
  const Tensor text = random_tensor({2, 5, 12}, 27);
  const std::vector<float> t = {500.0f, 500.0f}, t2 = {450.0f, 450.0f};
  const Tensor full = unet.forward(x, t, text);
  const Tensor full2 = unet.forward(x2, t2, text);
  for (const int shallow : {1, 2}) {
    SCOPED_TRACE("shallow layers " + std::to_string(shallow));
    UNetFeatureCache cache;
    cache.shallow_layers = shallow;
    UNetCall call;
    call.cache = &cache;
    const Tensor stored = unet.forward(x, t, text, call);
    EXPECT_EQ(0, std::memcmp(full.data(), stored.data(), sizeof(float) * full.numel()));
    EXPECT_EQ(cache.deep.shape(), (Shape{2, 8, 8, shallow == 1 ? 8 : 16}));
    call.reuse_deep = true;
    const Tensor again = unet.forward(x, t, text, call);
    EXPECT_EQ(0, std::memcmp(full.data(), again.data(), sizeof(float) * full.numel()));
    // Another step: the shallow layers see the new input, the deep features are the old ones.
    const Tensor reused = unet.forward(x2, t2, text, call);
    EXPECT_GT(max_abs_diff(reused.data(), full.data(), full.numel()), 1e-4);
    EXPECT_GT(max_abs_diff(reused.data(), full2.data(), full.numel()), 1e-6);
    for (float v : reused.span()) ASSERT_TRUE(std::isfinite(v));
  }
  // The text keys / values projected once give the same bits.
  const std::vector<Tensor> kv = unet.text_kv(text);
  UNetCall with_kv;
  with_kv.text_kv = &kv;
  const Tensor k = unet.forward(x, t, text, with_kv);
  EXPECT_EQ(0, std::memcmp(full.data(), k.data(), sizeof(float) * full.numel()));

  UNetFeatureCache bad;
  UNetCall reuse;
  reuse.cache = &bad;
  reuse.reuse_deep = true;
  EXPECT_THROW(unet.forward(x, t, text, reuse), ModelError);  // nothing stored
  bad.shallow_layers = 3;                                     // past layers_per_block
  reuse.reuse_deep = false;
  EXPECT_THROW(unet.forward(x, t, text, reuse), ModelError);
}

// A UNet loaded for a device refuses, by name, what runs on the CPU only: int8 storage and a
// resnet output scale, at load (before anything runs there, so no GPU is needed to check it).
TEST(UNetDevice, RefusesCpuOnlyFormsByName) {
  const UNetConfig c = tiny();
  const std::string dir = test::temp_dir("unet_device");
  const std::string path =
      write_file(dir, "w.safetensors", random_weights(UNet2DCondition::expected_tensors(c), 41));
  EXPECT_NE(load_error([&] {
              UNet2DCondition::load(c, SafetensorsFile::open(path), WeightStorage::kInt8,
                                    Device::kCuda);
            }).find("int8 runs on the CPU only, not on cuda"),
            std::string::npos);
  const UNetConfig scaled = UNetConfig::parse(with("mid_block_scale_factor", "2"), "scaled");
  EXPECT_NE(load_error([&] {
              UNet2DCondition::load(scaled, SafetensorsFile::open(path), WeightStorage::kBF16,
                                    Device::kCuda);
            }).find("mid_block_scale_factor != 1 runs on the CPU only, not on cuda"),
            std::string::npos);

  const UNet2DCondition cpu = UNet2DCondition::load(c, SafetensorsFile::open(path));
  EXPECT_EQ(cpu.device(), Device::kCpu);
  const UNet2DCondition gpu =
      UNet2DCondition::load(c, SafetensorsFile::open(path), WeightStorage::kBF16, Device::kCuda);
  EXPECT_EQ(gpu.device(), Device::kCuda);
  const Tensor x = random_tensor({1, 8, 8, 4}, 42);
  const Tensor text = random_tensor({1, 5, 12}, 43);
  const std::vector<float> t = {500.0f};
  // On the CPU the hook runs at every transformer site.
  int calls = 0;
  const TransformerHook count = [&](int, const Tensor& h, Tensor&) {
    EXPECT_EQ(h.device(), Device::kCpu);
    ++calls;
  };
  UNetCall counted;
  counted.hook = &count;
  (void)cpu.forward(x, t, text, counted);
  EXPECT_EQ(calls, static_cast<int>(cpu.transformer_sites().size()));
}

}  // namespace
}  // namespace gen3d::models
