// Config files in YAML (the official config.yaml): typed by the YAML 1.2 core schema, equal to
// their JSON twins through every shape network's config reader, and refused with the file and
// line when malformed.

#include <gtest/gtest.h>

#include <filesystem>
#include <fstream>
#include <functional>
#include <string>

#include <nlohmann/json.hpp>

#include "models/core/error.h"
#include "models/nn/config_reader.h"
#include "models/shape/dinov2.h"
#include "models/shape/dit_config.h"
#include "models/shape/shape_vae.h"
#include "support/paths.h"
#include "support/tiny_models.h"

namespace gen3d::models::nn {
namespace {

using nlohmann::json;

std::string error_of(const std::function<void()>& f) {
  try {
    f();
  } catch (const ModelError& e) {
    return e.what();
  }
  return "no error";
}

std::string write(const std::string& dir, const std::string& name, const std::string& text) {
  const std::string path = dir + "/" + name;
  std::ofstream(path, std::ios::binary) << text;
  return path;
}

// Same values and the same JSON types (an integer is not a float here; signed or unsigned as
// nlohmann's JSON parser stores it).
void expect_same_typed(const json& a, const json& b, const std::string& where) {
  ASSERT_EQ(a.type(), b.type()) << where << ": " << a.dump() << " vs " << b.dump();
  if (a.is_object()) {
    ASSERT_EQ(a.size(), b.size()) << where;
    for (auto it = a.begin(); it != a.end(); ++it) {
      ASSERT_TRUE(b.contains(it.key())) << where << "/" << it.key();
      expect_same_typed(it.value(), b.at(it.key()), where + "/" + it.key());
    }
  } else if (a.is_array()) {
    ASSERT_EQ(a.size(), b.size()) << where;
    for (std::size_t i = 0; i < a.size(); ++i)
      expect_same_typed(a[i], b[i], where + "/" + std::to_string(i));
  } else {
    EXPECT_EQ(a, b) << where;
  }
}

TEST(YamlConfig, OfficialStyleConfigEqualsItsJsonTwin) {
  const json yaml = parse_yaml_config(test::tiny_model_config_yaml(), "config.yaml");
  const json twin = json::parse(test::tiny_model_config_json());
  expect_same_typed(yaml, twin, "");
}

TEST(YamlConfig, EveryShapeNetworkReadsTheYamlFileLikeTheJsonFile) {
  const std::string dir = test::temp_dir("yaml_config_twins");
  const std::string yaml = write(dir, "config.yaml", test::tiny_model_config_yaml());
  const std::string json_path = write(dir, "config.json", test::tiny_model_config_json());

  const DiTConfig dy = DiTConfig::from_file(yaml, "model");
  const DiTConfig dj = DiTConfig::from_file(json_path, "model");
  EXPECT_EQ(dy.in_channels, dj.in_channels);
  EXPECT_EQ(dy.context_in_dim, dj.context_in_dim);
  EXPECT_EQ(dy.hidden_size, dj.hidden_size);
  EXPECT_EQ(dy.mlp_ratio, dj.mlp_ratio);
  EXPECT_EQ(dy.num_heads, dj.num_heads);
  EXPECT_EQ(dy.depth, dj.depth);
  EXPECT_EQ(dy.depth_single_blocks, dj.depth_single_blocks);
  EXPECT_EQ(dy.axes_dim, dj.axes_dim);
  EXPECT_EQ(dy.theta, dj.theta);
  EXPECT_EQ(dy.qkv_bias, dj.qkv_bias);
  EXPECT_EQ(dy.guidance_embed, dj.guidance_embed);
  EXPECT_EQ(dy.hidden_size, 32);  // not the defaults

  const ShapeVAEConfig vy = ShapeVAEConfig::from_file(yaml, "vae");
  const ShapeVAEConfig vj = ShapeVAEConfig::from_file(json_path, "vae");
  EXPECT_EQ(vy.num_latents, vj.num_latents);
  EXPECT_EQ(vy.embed_dim, vj.embed_dim);
  EXPECT_EQ(vy.num_freqs, vj.num_freqs);
  EXPECT_EQ(vy.heads, vj.heads);
  EXPECT_EQ(vy.width, vj.width);
  EXPECT_EQ(vy.num_decoder_layers, vj.num_decoder_layers);
  EXPECT_EQ(vy.qkv_bias, vj.qkv_bias);
  EXPECT_EQ(vy.qk_norm, vj.qk_norm);
  EXPECT_EQ(vy.scale_factor, vj.scale_factor);
  EXPECT_EQ(vy.num_latents, 32);

  const ImageEncoderConfig cy = ImageEncoderConfig::from_file(yaml, "conditioner");
  const ImageEncoderConfig cj = ImageEncoderConfig::from_file(json_path, "conditioner");
  EXPECT_EQ(cy.image_size, cj.image_size);
  EXPECT_EQ(cy.use_cls_token, cj.use_cls_token);
  EXPECT_EQ(cy.model.hidden_size, cj.model.hidden_size);
  EXPECT_EQ(cy.model.num_hidden_layers, cj.model.num_hidden_layers);
  EXPECT_EQ(cy.model.num_attention_heads, cj.model.num_attention_heads);
  EXPECT_EQ(cy.model.layer_norm_eps, cj.model.layer_norm_eps);
  EXPECT_EQ(cy.model.layer_norm_eps, 1e-6);
  EXPECT_EQ(cy.model.use_swiglu_ffn, cj.model.use_swiglu_ffn);
  EXPECT_EQ(cy.model.hidden_act, cj.model.hidden_act);
}

// Hunyuan3D-2.1's config.yaml (sizes of ../golden/hunyuan3d-2.1/ARCHITECTURE.md): the VAE and
// conditioner sections read as in 2.0; the DiT section is HunYuanDiTPlain, which the 2.0 DiT
// reader refuses by key rather than misreading.
TEST(YamlConfig, Hunyuan3D21ConfigSectionsAreRead) {
  const std::string dir = test::temp_dir("yaml_config_21");
  const std::string path = write(dir, "config.yaml", R"(model:
  target: hy3dshape.models.denoisers.hunyuandit.HunYuanDiTPlain
  params:
    input_size: &num_latents 4096
    in_channels: 64
    hidden_size: 2048
    context_dim: 1024
    depth: 21
    num_heads: 16
    qk_norm: true
    text_len: 1370
    with_decoupled_ca: false
    use_attention_pooling: false
    qk_norm_type: 'rms'
    qkv_bias: false
    use_pos_emb: false
    num_moe_layers: 6
    num_experts: 8
    moe_top_k: 2

vae:
  target: hy3dshape.models.autoencoders.ShapeVAE
  params:
    num_latents: *num_latents
    embed_dim: 64
    num_freqs: 8
    include_pi: false
    heads: 16
    width: 1024
    num_encoder_layers: 8
    num_decoder_layers: 16
    qkv_bias: false
    qk_norm: true
    scale_factor: 1.0039506158752403
    geo_decoder_mlp_expand_ratio: 4
    geo_decoder_downsample_ratio: 1
    geo_decoder_ln_post: true
    point_feats: 4
    pc_size: 81920
    pc_sharpedge_size: 0

conditioner:
  target: hy3dshape.models.conditioner.SingleImageEncoder
  params:
    main_image_encoder:
      type: DinoImageEncoder
      kwargs:
        config:
          attention_probs_dropout_prob: 0.0
          drop_path_rate: 0.0
          hidden_act: gelu
          hidden_dropout_prob: 0.0
          hidden_size: 1024
          image_size: 518
          initializer_range: 0.02
          layer_norm_eps: 1.e-6
          layerscale_value: 1.0
          mlp_ratio: 4
          model_type: dinov2
          num_attention_heads: 16
          num_channels: 3
          num_hidden_layers: 24
          patch_size: 14
          qkv_bias: true
          torch_dtype: float32
          use_swiglu_ffn: false
        image_size: 518
        use_cls_token: true

scheduler:
  target: hy3dshape.schedulers.FlowMatchEulerDiscreteScheduler
  params:
    num_train_timesteps: 1000

image_processor:
  target: hy3dshape.preprocessors.ImageProcessorV2
  params:
    size: 512
    border_ratio: 0.15
)");
  const ShapeVAEConfig vae = ShapeVAEConfig::from_file(path, "vae");
  EXPECT_EQ(vae.num_latents, 4096);
  EXPECT_EQ(vae.width, 1024);
  EXPECT_EQ(vae.scale_factor, 1.0039506158752403);
  const ImageEncoderConfig cond = ImageEncoderConfig::from_file(path, "conditioner");
  EXPECT_EQ(cond.tokens(), 1370);
  EXPECT_EQ(cond.model.hidden_size, 1024);
  EXPECT_FALSE(cond.model.use_swiglu_ffn);
  const json scheduler = read_config_file(path, "scheduler/params");
  EXPECT_EQ(scheduler, json::parse(R"({"num_train_timesteps": 1000})"));
  EXPECT_EQ(read_config_file(path, "image_processor/params")["border_ratio"], 0.15);
  const std::string m = error_of([&] { DiTConfig::from_file(path, "model"); });
  EXPECT_NE(m.find("unknown key 'moe_top_k'"), std::string::npos) << m;
  EXPECT_NE(m.find("config.yaml"), std::string::npos) << m;
}

TEST(YamlConfig, PlainScalarsAreTypedByTheCoreSchema) {
  const json j = parse_yaml_config(R"(
ints: [0, -3, +7, 0o17, 0x1F, 18446744073709551615, -9223372036854775808]
floats: [1e-6, 1.e-6, -2.5, .5, 3., 1E3, +0.25]
bools: [true, True, TRUE, false, False, FALSE]
nulls: [~, null, Null, NULL]
empty:
strings: [yes, no, on, gelu, 1_000, 0x, 1e, "12", '3.5', "true", "null", 2021-01-01]
block: |
  two
  lines
nested: {a: {b: [1, {c: d}]}}
unicode: "café ✓ 𝑥"
tagged: [!!str 12, !!float 2, !!int "5"]
)",
                                   "t.yaml");
  EXPECT_EQ(j["ints"],
            json::parse("[0, -3, 7, 15, 31, 18446744073709551615, -9223372036854775808]"));
  for (const json& v : j["ints"]) EXPECT_TRUE(v.is_number_integer()) << v;
  const std::vector<double> floats{1e-6, 1e-6, -2.5, 0.5, 3.0, 1000.0, 0.25};
  ASSERT_EQ(j["floats"].size(), floats.size());
  for (std::size_t i = 0; i < floats.size(); ++i) {
    EXPECT_TRUE(j["floats"][i].is_number_float()) << i;
    EXPECT_EQ(j["floats"][i].get<double>(), floats[i]) << i;
  }
  EXPECT_EQ(j["bools"], json::parse("[true, true, true, false, false, false]"));
  EXPECT_EQ(j["nulls"], json::parse("[null, null, null, null]"));
  EXPECT_TRUE(j.contains("empty") && j["empty"].is_null());
  EXPECT_EQ(j["strings"], json::parse(R"(["yes", "no", "on", "gelu", "1_000", "0x", "1e", "12",
                                         "3.5", "true", "null", "2021-01-01"])"));
  EXPECT_EQ(j["block"], "two\nlines\n");
  EXPECT_EQ(j["nested"], json::parse(R"({"a": {"b": [1, {"c": "d"}]}})"));
  EXPECT_EQ(j["unicode"], "caf\u00e9 \u2713 \U0001d465");
  EXPECT_EQ(j["tagged"][0], "12");
  EXPECT_TRUE(j["tagged"][1].is_number_float());
  EXPECT_EQ(j["tagged"][2], 5);
}

TEST(YamlConfig, KeyOrderDoesNotMatter) {
  EXPECT_EQ(parse_yaml_config("b: 1\na: {y: 2, x: 3}\n", "a.yaml"),
            parse_yaml_config("a: {x: 3, y: 2}\nb: 1\n", "b.yaml"));
}

TEST(YamlConfig, UnknownKeysAndWrongTypesAreReportedByKey) {
  const std::string dir = test::temp_dir("yaml_config_keys");
  std::string text = test::tiny_model_config_yaml();
  const std::string unknown =
      write(dir, "unknown.yaml",
            std::string(text).replace(text.find("    theta: 10000"), 0, "    use_magic: true\n"));
  std::string m = error_of([&] { DiTConfig::from_file(unknown, "model"); });
  EXPECT_NE(m.find("unknown key 'use_magic'"), std::string::npos) << m;
  EXPECT_NE(m.find("unknown.yaml"), std::string::npos) << m;

  const std::string wrong =
      write(dir, "wrong.yaml",
            std::string(text).replace(text.find("num_latents: 32"), 15, "num_latents: \"32\""));
  m = error_of([&] { ShapeVAEConfig::from_file(wrong, "vae"); });
  EXPECT_NE(m.find("num_latents: expected an integer, got \"32\""), std::string::npos) << m;
  EXPECT_NE(m.find("wrong.yaml"), std::string::npos) << m;

  const std::string huge =
      write(dir, "huge.yaml",
            std::string(text).replace(text.find("hidden_size: 32"), 15, "hidden_size: 4294967328"));
  m = error_of([&] { DiTConfig::from_file(huge, "model"); });
  EXPECT_NE(m.find("hidden_size: expected an integer, got 4294967328"), std::string::npos) << m;
}

TEST(YamlConfig, MalformedYamlNamesTheFileAndLine) {
  const std::string dir = test::temp_dir("yaml_config_bad");
  struct Case {
    const char* name;
    const char* text;
    const char* needle;
  };
  for (const Case& c : {
           Case{"unclosed.yaml", "model:\n  params:\n    axes_dim: [8, 16\n", "line "},
           Case{"indent.yaml", "model:\n  params: 1\n   depth: 2\n", "line 3"},
           Case{"duplicate.yaml", "model:\n  a: 1\n  a: 2\n",
                "line 3, column 3: duplicate key 'a'"},
           Case{"merge.yaml", "base: &b {x: 1}\nmodel:\n  <<: *b\n",
                "line 3, column 3: merge keys"},
           Case{"tag.yaml", "model: !!python/object/apply:os.system [ls]\n",
                "line 1, column 8: the tag tag:yaml.org,2002:python/object/apply:os.system"},
           Case{"inf.yaml", "model:\n  eps: .inf\n", "line 2, column 8: '.inf' is not a finite"},
           Case{"big.yaml", "model:\n  n: 99999999999999999999\n", "line 2, column 6: integer"},
           Case{"small.yaml", "model:\n  n: -9223372036854775809\n", "line 2, column 6: integer"},
           Case{"list.yaml", "- 1\n- 2\n", "not a YAML mapping"},
           Case{"empty.yaml", "", "not a YAML mapping"},
           Case{"two.yaml", "a: 1\n---\nb: 2\n", "more than one YAML document"},
           Case{"comma.yaml", "\t,\n", "not a YAML mapping"},
           Case{"comma_after.yaml", "a: 1\n---\n,\n", "more than one YAML document"},
           Case{"latin1.yaml", "model:\n  name: \"caf\xe9\"\n",
                "line 2, column 9: a value is not valid UTF-8"},
       }) {
    SCOPED_TRACE(c.name);
    const std::string path = write(dir, c.name, c.text);
    const std::string m = error_of([&] { read_config_file(path, "model"); });
    EXPECT_EQ(m.rfind(path + ":", 0), 0u) << m;
    EXPECT_NE(m.find(c.needle), std::string::npos) << m;
  }
}

TEST(YamlConfig, AliasesCannotMultiplyWithoutBound) {
  // a_k holds four a_(k-1): 8 * 4^9 (two million) values once the aliases are expanded.
  std::string text = "a0: &a0 [0, 0, 0, 0, 0, 0, 0, 0]\n";
  for (int k = 1; k < 10; ++k) {
    const std::string self = std::to_string(k), prev = "*a" + std::to_string(k - 1);
    text.append("a").append(self).append(": &a").append(self).append(" [");
    for (int r = 0; r < 4; ++r) text.append(r ? ", " : "").append(prev);
    text.append("]\n");
  }
  const std::string m = error_of([&] { parse_yaml_config(text, "bomb.yaml"); });
  EXPECT_NE(m.find("more than a million values"), std::string::npos) << m;
  // A small alias is fine.
  EXPECT_EQ(parse_yaml_config("a: &x [1, 2]\nb: *x\n", "ok.yaml")["b"], json::parse("[1, 2]"));
}

}  // namespace
}  // namespace gen3d::models::nn
