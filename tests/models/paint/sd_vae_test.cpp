// Unit tests of the texture-stage configs and loaders: AutoencoderKL config parsing and its
// errors, strict VAE weight loading (missing / mis-shaped / unexpected tensors, deprecated
// attention names), properties of a tiny random VAE (shapes, batch independence, probes), and
// the scheduler config / argument errors.

#include <gtest/gtest.h>

#include <algorithm>
#include <cmath>
#include <filesystem>
#include <fstream>
#include <random>
#include <set>
#include <string>
#include <vector>

#include "models/core/error.h"
#include "models/core/safetensors.h"
#include "models/paint/diffusion_scheduler.h"
#include "models/paint/sd_vae.h"
#include "support/paths.h"

namespace gen3d::models {
namespace {

using i64 = std::int64_t;

// The Stable Diffusion 2 vae/config.json as shipped (scaling_factor absent: default 0.18215).
const char* kSd2Config = R"({
  "_class_name": "AutoencoderKL", "_diffusers_version": "0.8.0", "act_fn": "silu",
  "block_out_channels": [128, 256, 512, 512],
  "down_block_types": ["DownEncoderBlock2D", "DownEncoderBlock2D", "DownEncoderBlock2D",
                       "DownEncoderBlock2D"],
  "in_channels": 3, "latent_channels": 4, "layers_per_block": 2, "norm_num_groups": 32,
  "out_channels": 3, "sample_size": 768,
  "up_block_types": ["UpDecoderBlock2D", "UpDecoderBlock2D", "UpDecoderBlock2D",
                     "UpDecoderBlock2D"]
})";

const char* kTinyConfig = R"({
  "_class_name": "AutoencoderKL", "act_fn": "silu", "block_out_channels": [4, 8],
  "down_block_types": ["DownEncoderBlock2D", "DownEncoderBlock2D"],
  "up_block_types": ["UpDecoderBlock2D", "UpDecoderBlock2D"],
  "in_channels": 3, "out_channels": 3, "latent_channels": 2, "layers_per_block": 1,
  "norm_num_groups": 2, "scaling_factor": 0.5
})";

std::string with_key(const std::string& key, const std::string& value) {
  std::string s = kTinyConfig;
  const std::string needle = "\"" + key + "\":";
  const auto at = s.find(needle);
  if (at == std::string::npos) return s.substr(0, s.size() - 1) + ", " + needle + value + "}";
  const auto start = at + needle.size();
  // The value ends at the next top-level comma / closing brace (values here have no commas
  // outside brackets).
  int depth = 0;
  std::size_t end = start;
  for (; end < s.size(); ++end) {
    if (s[end] == '[') ++depth;
    if (s[end] == ']') --depth;
    if (depth == 0 && (s[end] == ',' || s[end] == '}')) break;
  }
  return s.substr(0, start) + " " + value + s.substr(end);
}

void expect_config_error(const std::string& text, const std::string& must_mention) {
  try {
    SdVaeConfig::parse(text, "vae/config.json");
    FAIL() << "expected ModelError mentioning " << must_mention;
  } catch (const ModelError& e) {
    const std::string msg = e.what();
    EXPECT_NE(msg.find("vae/config.json"), std::string::npos) << msg;
    EXPECT_NE(msg.find(must_mention), std::string::npos) << msg;
  }
}

TEST(SdVaeConfig, ParsesTheSd2Config) {
  const SdVaeConfig c = SdVaeConfig::parse(kSd2Config, "sd2");
  EXPECT_EQ(c.block_out_channels, (std::vector<int>{128, 256, 512, 512}));
  EXPECT_EQ(c.levels(), 4);
  EXPECT_EQ(c.downscale(), 8);
  EXPECT_EQ(c.norm_num_groups, 32);
  EXPECT_EQ(c.latent_channels, 4);
  EXPECT_DOUBLE_EQ(c.scaling_factor, 0.18215);
  EXPECT_TRUE(c.mid_block_add_attention);
  const SdVaeConfig t = SdVaeConfig::parse(kTinyConfig, "tiny");
  EXPECT_DOUBLE_EQ(t.scaling_factor, 0.5);
  EXPECT_EQ(t.layers_per_block, 1);
}

TEST(SdVaeConfig, RejectsBadValuesNamingTheKey) {
  expect_config_error(
      with_key("down_block_types", R"(["DownEncoderBlock2D", "AttnDownEncoderBlock2D"])"),
      "AttnDownEncoderBlock2D");
  expect_config_error(with_key("up_block_types", R"(["UpDecoderBlock2D"])"), "up_block_types");
  expect_config_error(with_key("block_out_channels", "[4, 7]"), "block_out_channels");
  expect_config_error(with_key("layers_per_block", "\"2\""), "layers_per_block");
  expect_config_error(with_key("layers_per_block", "0"), "layers_per_block");
  expect_config_error(with_key("act_fn", "\"gelu\""), "act_fn");
  expect_config_error(with_key("scaling_factor", "-1"), "scaling_factor");
  expect_config_error(with_key("shift_factor", "0.1159"), "shift_factor");
  expect_config_error(with_key("use_quant_conv", "1"), "use_quant_conv");
  expect_config_error("[1, 2]", "JSON object");
  EXPECT_THROW(SdVaeConfig::read("/nonexistent/vae/config.json"), ModelError);
}

// A tiny random VAE written as a diffusers folder.
class TinyVae : public ::testing::Test {
 protected:
  void SetUp() override {
    cfg_ = SdVaeConfig::parse(kTinyConfig, "tiny");
    expected_ = SdVae::expected_tensors(cfg_);
    std::mt19937 rng(7);
    std::normal_distribution<float> d(0.0f, 0.3f);
    for (const auto& [name, shape] : expected_) {
      Tensor t(shape);
      const bool norm_weight = name.find("norm") != std::string::npos && name.size() > 7 &&
                               name.substr(name.size() - 7) == ".weight";
      for (i64 i = 0; i < t.numel(); ++i) t.data()[i] = norm_weight ? 1.0f + d(rng) : d(rng);
      tensors_.emplace_back(name, std::move(t));
    }
  }

  // Writes config.json and the weights (after `edit`) into a fresh folder; returns the folder.
  std::string write_folder(const std::string& tag,
                           std::vector<std::pair<std::string, Tensor>> tensors) const {
    const std::string dir = test::temp_dir("sd_vae_" + tag);
    std::ofstream(dir + "/config.json") << kTinyConfig;
    std::vector<std::pair<std::string, const Tensor*>> refs;
    for (const auto& [name, t] : tensors) refs.emplace_back(name, &t);
    write_safetensors(dir + "/diffusion_pytorch_model.safetensors", refs);
    return dir;
  }
  std::string write_folder(const std::string& tag) const { return write_folder(tag, tensors_); }

  static Tensor random_images(i64 b, i64 h, i64 w, i64 c, unsigned seed) {
    std::mt19937 rng(seed);
    std::uniform_real_distribution<float> u(0.0f, 1.0f);
    Tensor t(Shape{b, h, w, c});
    for (i64 i = 0; i < t.numel(); ++i) t.data()[i] = u(rng);
    return t;
  }

  std::string load_error(const std::vector<std::pair<std::string, Tensor>>& tensors,
                         const std::string& tag) const {
    const std::string dir = write_folder(tag, tensors);
    try {
      SdVae::load_folder(dir);
    } catch (const ModelError& e) {
      return e.what();
    }
    return "";
  }

  SdVaeConfig cfg_;
  std::vector<std::pair<std::string, Shape>> expected_;
  std::vector<std::pair<std::string, Tensor>> tensors_;
};

TEST_F(TinyVae, ExpectedTensorsUseDiffusersNames) {
  std::set<std::string> names;
  i64 params = 0;
  for (const auto& [n, s] : expected_) {
    names.insert(n);
    params += s.numel();
  }
  EXPECT_EQ(names.size(), expected_.size()) << "duplicate names";
  for (const char* n :
       {"encoder.conv_in.weight", "encoder.down_blocks.0.resnets.0.norm1.weight",
        "encoder.down_blocks.0.downsamplers.0.conv.weight",
        "encoder.down_blocks.1.resnets.0.conv_shortcut.weight",
        "encoder.mid_block.attentions.0.group_norm.weight",
        "encoder.mid_block.attentions.0.to_q.weight",
        "encoder.mid_block.attentions.0.to_out.0.bias", "encoder.conv_out.weight",
        "quant_conv.weight", "post_quant_conv.bias", "decoder.mid_block.resnets.1.conv2.weight",
        "decoder.up_blocks.0.resnets.1.norm2.bias", "decoder.up_blocks.0.upsamplers.0.conv.weight",
        "decoder.up_blocks.1.resnets.0.conv_shortcut.weight",
        "decoder.up_blocks.1.resnets.1.conv1.weight", "decoder.conv_norm_out.bias"})
    EXPECT_TRUE(names.count(n)) << n;
  EXPECT_FALSE(names.count("encoder.down_blocks.1.downsamplers.0.conv.weight"));
  EXPECT_FALSE(names.count("decoder.up_blocks.1.upsamplers.0.conv.weight"));
  EXPECT_FALSE(names.count("decoder.up_blocks.1.resnets.2.conv1.weight"));
  const auto vae = SdVae::load_folder(write_folder("names"));
  EXPECT_EQ(vae->num_parameters(), params);
}

TEST_F(TinyVae, ShapesBatchIndependenceAndProbes) {
  const auto vae = SdVae::load_folder(write_folder("forward"));
  const Tensor img = random_images(2, 12, 8, 3, 3);
  std::set<std::string> probed;
  VaeProbe probe = [&](const std::string& name, const Tensor& t) {
    probed.insert(name);
    EXPECT_EQ(t.dim(0), 2) << name;
  };
  const SdVae::Posterior post = vae->encode(img, probe);
  EXPECT_EQ(post.mean.shape(), (Shape{2, 6, 4, 2}));
  EXPECT_EQ(post.std.shape(), post.mean.shape());
  for (i64 i = 0; i < post.std.numel(); ++i) {
    ASSERT_GT(post.std.data()[i], 0.0f);
    ASSERT_TRUE(std::isfinite(post.mean.data()[i]));
  }
  // One image alone gives the same numbers as its row of the batch.
  Tensor second(Shape{1, 12, 8, 3});
  std::copy(img.data() + 12 * 8 * 3, img.data() + 2 * 12 * 8 * 3, second.data());
  const SdVae::Posterior p1 = vae->encode(second);
  for (i64 i = 0; i < p1.mean.numel(); ++i)
    ASSERT_EQ(p1.mean.data()[i], post.mean.data()[p1.mean.numel() + i]) << i;

  const Tensor dec = vae->decode(post.mean, probe);
  EXPECT_EQ(dec.shape(), (Shape{2, 12, 8, 3}));
  for (const char* n : {"enc.conv_in", "enc.down_blocks.0", "enc.down_blocks.1", "enc.mid_block",
                        "enc.conv_out", "quant_conv", "post_quant_conv", "dec.conv_in",
                        "dec.mid_block", "dec.up_blocks.0", "dec.up_blocks.1", "dec.conv_out"})
    EXPECT_TRUE(probed.count(n)) << n;

  // encode_scaled / decode_to_image follow the pipeline convention.
  const Tensor zs = vae->encode_scaled(img, nullptr);
  for (i64 i = 0; i < zs.numel(); ++i) ASSERT_FLOAT_EQ(zs.data()[i], post.mean.data()[i] * 0.5f);
  Tensor eps(post.mean.shape());
  for (i64 i = 0; i < eps.numel(); ++i) eps.data()[i] = (i % 3) - 1.0f;
  const Tensor zn = vae->encode_scaled(img, &eps);
  for (i64 i = 0; i < zn.numel(); ++i)
    ASSERT_FLOAT_EQ(zn.data()[i],
                    (post.mean.data()[i] + post.std.data()[i] * eps.data()[i]) * 0.5f);
  const Tensor im = vae->decode_to_image(zs);
  for (i64 i = 0; i < im.numel(); ++i) {
    ASSERT_GE(im.data()[i], 0.0f);
    ASSERT_LE(im.data()[i], 1.0f);
    ASSERT_NEAR(im.data()[i], std::clamp(dec.data()[i] / 2.0f + 0.5f, 0.0f, 1.0f), 1e-5f);
  }
  Tensor wrong_eps(Shape{2, 6, 4, 3});
  EXPECT_THROW(vae->encode_scaled(img, &wrong_eps), ModelError);
  EXPECT_THROW(vae->encode(random_images(1, 8, 8, 4, 1)), ModelError);  // 4 channels
  EXPECT_THROW(vae->decode(random_images(1, 4, 4, 3, 1)), ModelError);  // 3 latent channels
}

TEST_F(TinyVae, MissingMisShapedAndUnexpectedTensorsAreNamed) {
  {
    auto t = tensors_;
    t.erase(std::find_if(t.begin(), t.end(), [](const auto& p) {
      return p.first == "decoder.up_blocks.1.resnets.0.conv1.weight";
    }));
    const std::string msg = load_error(t, "missing");
    EXPECT_NE(msg.find("decoder.up_blocks.1.resnets.0.conv1.weight"), std::string::npos) << msg;
    EXPECT_NE(msg.find("diffusion_pytorch_model.safetensors"), std::string::npos) << msg;
  }
  {
    auto t = tensors_;
    for (auto& [name, ten] : t)
      if (name == "encoder.conv_in.weight") ten = Tensor(Shape{4, 3, 1, 1});
    const std::string msg = load_error(t, "misshaped");
    EXPECT_NE(msg.find("encoder.conv_in.weight"), std::string::npos) << msg;
  }
  {
    auto t = tensors_;
    t.emplace_back("encoder.down_blocks.0.attentions.0.to_q.weight", Tensor(Shape{4, 4}));
    const std::string msg = load_error(t, "unexpected");
    EXPECT_NE(msg.find("encoder.down_blocks.0.attentions.0.to_q.weight"), std::string::npos) << msg;
  }
  // A config that disagrees with the file (one more layer per block) names what is missing.
  {
    const std::string dir = write_folder("config_mismatch");
    SdVaeConfig c = cfg_;
    c.layers_per_block = 2;
    WeightMap wm(SafetensorsFile::open(dir + "/diffusion_pytorch_model.safetensors"), "");
    SdVae::load(c, wm);
    try {
      wm.finish("SD VAE");
      FAIL() << "expected ModelError";
    } catch (const ModelError& e) {
      EXPECT_NE(std::string(e.what()).find("encoder.down_blocks.0.resnets.1.conv1.weight"),
                std::string::npos)
          << e.what();
    }
  }
  EXPECT_THROW(SdVae::load_folder(test::temp_dir("sd_vae_empty")), ModelError);
}

TEST_F(TinyVae, DeprecatedAttentionNamesGiveTheSameNetwork) {
  auto renamed = tensors_;
  for (auto& [name, t] : renamed) {
    for (const auto& [from, to] :
         std::vector<std::pair<std::string, std::string>>{{".to_q.", ".query."},
                                                          {".to_k.", ".key."},
                                                          {".to_v.", ".value."},
                                                          {".to_out.0.", ".proj_attn."}}) {
      const auto at = name.find(from);
      if (at != std::string::npos) name = name.substr(0, at) + to + name.substr(at + from.size());
    }
  }
  const auto a = SdVae::load_folder(write_folder("new_names"));
  const auto b = SdVae::load_folder(write_folder("old_names", renamed));
  const Tensor img = random_images(1, 8, 8, 3, 11);
  const Tensor za = a->encode(img).mean, zb = b->encode(img).mean;
  for (i64 i = 0; i < za.numel(); ++i) ASSERT_EQ(za.data()[i], zb.data()[i]);
}

// A device runs the bf16 layers: other storages are refused there, naming the storage; the CPU
// takes every storage, and a bf16 VAE may be moved to a device and back.
TEST_F(TinyVae, DeviceNeedsBf16Storage) {
  const std::string dir = write_folder("device");
  for (WeightStorage s : {WeightStorage::kF32, WeightStorage::kF16, WeightStorage::kInt8}) {
    const auto vae = SdVae::load_folder(dir, s);
    try {
      vae->set_device(Device::kCuda);
      ADD_FAILURE() << "storage " << storage_name(s) << " accepted on cuda";
    } catch (const ModelError& e) {
      const std::string msg = e.what();
      EXPECT_NE(msg.find("storage " + std::string(storage_name(s))), std::string::npos) << msg;
      EXPECT_NE(msg.find("bf16"), std::string::npos) << msg;
    }
    EXPECT_EQ(vae->device(), Device::kCpu);
    vae->set_device(Device::kCpu);
  }
  const auto vae = SdVae::load_folder(dir, WeightStorage::kBF16);
  vae->set_device(Device::kCuda);
  EXPECT_EQ(vae->device(), Device::kCuda);
  vae->set_device(Device::kCpu);
  const Tensor img = random_images(1, 8, 8, 3, 12);
  EXPECT_EQ(vae->encode(img).mean.device(), Device::kCpu);
}

// ---------------------------------------------------------------------------------------------
// Scheduler config and arguments

void expect_scheduler_error(const std::string& text, const std::string& key) {
  try {
    SchedulerConfig::parse(text, "scheduler_config.json");
    FAIL() << "expected ModelError naming " << key;
  } catch (const ModelError& e) {
    const std::string msg = e.what();
    EXPECT_NE(msg.find("scheduler_config.json"), std::string::npos) << msg;
    EXPECT_NE(msg.find(key), std::string::npos) << msg;
  }
}

TEST(SchedulerConfig, ParsesDiffusersConfigAndRejectsUnsupportedValues) {
  const SchedulerConfig c = SchedulerConfig::parse(
      R"({"_class_name": "DDIMScheduler", "beta_end": 0.012, "beta_schedule": "scaled_linear",
          "beta_start": 0.00085, "clip_sample": false, "num_train_timesteps": 1000,
          "prediction_type": "v_prediction", "set_alpha_to_one": false, "skip_prk_steps": true,
          "steps_offset": 1, "trained_betas": null})",
      "sd2");
  EXPECT_EQ(c.prediction_type, "v_prediction");
  EXPECT_EQ(c.timestep_spacing, "leading");
  EXPECT_EQ(c.steps_offset, 1);
  expect_scheduler_error(R"({"rescale_betas_zero_snr": true})", "rescale_betas_zero_snr");
  expect_scheduler_error(R"({"prediction_type": "sample"})", "prediction_type");
  expect_scheduler_error(R"({"timestep_spacing": "karras"})", "timestep_spacing");
  expect_scheduler_error(R"({"beta_schedule": "squaredcos_cap_v2"})", "beta_schedule");
  expect_scheduler_error(R"({"trained_betas": [0.1, 0.2]})", "trained_betas");
  expect_scheduler_error(R"({"steps_offset": "1"})", "steps_offset");
  expect_scheduler_error(R"({"clip_sample": true})", "clip_sample");
  expect_scheduler_error("3", "JSON object");
}

TEST(Schedulers, TimestepGridsAndArgumentChecks) {
  SchedulerConfig c;
  c.timestep_spacing = "trailing";
  EulerAncestralScheduler e(c);
  e.set_timesteps(30);
  ASSERT_EQ(e.size(), 30);
  EXPECT_EQ(e.timesteps().front(), 999.0f);
  EXPECT_EQ(e.timesteps()[1], 966.0f);
  EXPECT_EQ(e.timesteps().back(), 32.0f);
  EXPECT_EQ(e.sigmas().size(), 31u);
  EXPECT_GT(e.init_noise_sigma(), 14.0f);
  std::vector<float> x(4, 1.0f), mo(4, 0.5f), noise(4, 0.0f);
  EXPECT_THROW(e.step(x.data(), mo.data(), noise.data(), 4, 30), ModelError);
  EXPECT_THROW(e.step(x.data(), mo.data(), nullptr, 4, 0), ModelError);  // ancestral noise needed
  e.step(x.data(), mo.data(), nullptr, 4, 29);  // last step: sigma_up = 0, no noise used
  EXPECT_THROW(e.set_timesteps(0), ModelError);

  c.timestep_spacing = "leading";
  EulerAncestralScheduler lead(c);
  lead.set_timesteps(50);
  EXPECT_EQ(lead.timesteps().front(), 981.0f);
  EXPECT_EQ(lead.timesteps().back(), 1.0f);

  EXPECT_EQ(LcmScheduler::turbo_timesteps(),
            (std::vector<int>{989, 890, 791, 692, 593, 494, 395, 296, 197, 98}));
  LcmScheduler l(c);
  EXPECT_THROW(l.set_timesteps({100, 200}), ModelError);
  EXPECT_THROW(l.set_timesteps({1000, 10}), ModelError);
  EXPECT_THROW(l.set_timesteps({}), ModelError);
  l.set_timesteps({999, 499});
  EXPECT_EQ(l.timesteps(), (std::vector<float>{999.0f, 499.0f}));
  EXPECT_NEAR(l.c_skip(0) + l.c_out(0) * l.c_out(0), 1.0, 1e-12);  // c_skip + c_out² = 1
  EXPECT_THROW(l.step(x.data(), mo.data(), nullptr, 4, 0, nullptr), ModelError);
  l.step(x.data(), mo.data(), nullptr, 4, 1, nullptr);  // last step: no noise
  EXPECT_THROW(LcmScheduler::turbo_timesteps(0), ModelError);
}

}  // namespace
}  // namespace gen3d::models
