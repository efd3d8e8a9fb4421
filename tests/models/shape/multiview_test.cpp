// Unit tests of Hunyuan3D-2mv's multiview condition (models/shape/multiview.h) and the
// DinoImageEncoderMV side of the conditioner (dinov2.h): view names, the sinusoidal view
// embedding, the concatenation, the config, and the errors of each.

#include <gtest/gtest.h>

#include <cmath>
#include <memory>
#include <vector>

#include "models/core/error.h"
#include "models/shape/dinov2.h"
#include "models/shape/multiview.h"

namespace gen3d::models {
namespace {

TEST(Multiview, ViewNamesInTheProcessorsOrder) {
  EXPECT_EQ(multiview_index("front"), 0);
  EXPECT_EQ(multiview_index("left"), 1);
  EXPECT_EQ(multiview_index("back"), 2);
  EXPECT_EQ(multiview_index("right"), 3);
  EXPECT_FALSE(multiview_index("top"));
  EXPECT_FALSE(multiview_index("Front"));
}

TEST(Multiview, EmbeddingIsSinThenCos) {
  const Tensor e = multiview_embedding(6, 4);  // [4, 6]
  ASSERT_EQ(e.shape(), Shape({4, 6}));
  for (int v = 0; v < 4; ++v)
    for (int i = 0; i < 3; ++i) {
      const double w = std::pow(10000.0, -i / 3.0);
      EXPECT_FLOAT_EQ(e.data()[v * 6 + i], static_cast<float>(std::sin(v * w)));
      EXPECT_FLOAT_EQ(e.data()[v * 6 + 3 + i], static_cast<float>(std::cos(v * w)));
    }
  EXPECT_THROW(multiview_embedding(7, 4), ModelError);  // odd width
  EXPECT_THROW(multiview_embedding(8, 0), ModelError);
}

TEST(Multiview, EachViewGetsItsIndexsRowThenTheViewsAreConcatenated) {
  const Tensor embed = multiview_embedding(4, 4);
  Tensor hidden({2, 3, 4});  // two views, three tokens
  for (std::int64_t i = 0; i < hidden.numel(); ++i) hidden.data()[i] = 0.5f * static_cast<float>(i);
  const std::vector<int> idx = {0, 3};  // front and right: rows 0 and 3, not 0 and 1
  const Tensor out = add_multiview_embedding(hidden, idx, embed);
  ASSERT_EQ(out.shape(), Shape({1, 6, 4}));
  for (int v = 0; v < 2; ++v)
    for (int t = 0; t < 3; ++t)
      for (int c = 0; c < 4; ++c)
        EXPECT_EQ(out.data()[(v * 3 + t) * 4 + c],
                  hidden.data()[(v * 3 + t) * 4 + c] + embed.data()[idx[v] * 4 + c]);
}

TEST(Multiview, BadIndicesAndShapesAreErrors) {
  const Tensor embed = multiview_embedding(4, 4);
  const Tensor hidden({2, 3, 4});
  EXPECT_THROW(add_multiview_embedding(hidden, std::vector<int>{0, 4}, embed), ModelError);
  EXPECT_THROW(add_multiview_embedding(hidden, std::vector<int>{-1, 2}, embed), ModelError);
  EXPECT_THROW(add_multiview_embedding(hidden, std::vector<int>{2, 2}, embed), ModelError);
  EXPECT_THROW(add_multiview_embedding(hidden, std::vector<int>{2, 1}, embed), ModelError);
  EXPECT_THROW(add_multiview_embedding(hidden, std::vector<int>{0}, embed), ModelError);
  EXPECT_THROW(add_multiview_embedding(Tensor({2, 3, 6}), std::vector<int>{0, 1}, embed),
               ModelError);
}

constexpr const char* kEncoderBlock = R"({
  "target": "hy3dgen.shapegen.models.SingleImageEncoder",
  "params": {"main_image_encoder": {"type": "%TYPE%", "kwargs": {
    "config": {"hidden_size": 8, "num_hidden_layers": 1, "num_attention_heads": 2,
               "image_size": 28, "patch_size": 14, "model_type": "dinov2",
               "use_swiglu_ffn": false}, "image_size": 28 %EXTRA%}}}})";

std::string block(const std::string& type, const std::string& extra = "") {
  std::string s = kEncoderBlock;
  s.replace(s.find("%TYPE%"), 6, type);
  s.replace(s.find("%EXTRA%"), 7, extra);
  return s;
}

TEST(Multiview, ConfigNamesTheMultiviewEncoder) {
  const ImageEncoderConfig single = ImageEncoderConfig::from_json(block("DinoImageEncoder"));
  EXPECT_FALSE(single.multiview);
  const ImageEncoderConfig mv = ImageEncoderConfig::from_json(block("DinoImageEncoderMV"));
  EXPECT_TRUE(mv.multiview);
  EXPECT_EQ(mv.view_num, 4);
  EXPECT_EQ(mv.tokens(), 5);  // per view
  EXPECT_EQ(
      ImageEncoderConfig::from_json(block("DinoImageEncoderMV", ", \"view_num\": 6")).view_num, 6);
  EXPECT_THROW(ImageEncoderConfig::from_json(block("DinoImageEncoderMV", ", \"view_num\": 0")),
               ModelError);
  EXPECT_THROW(
      ImageEncoderConfig::from_json(block("DinoImageEncoderMV", ", \"use_cls_token\": false")),
      ModelError);
  EXPECT_THROW(ImageEncoderConfig::from_json(block("CLIPImageEncoder")), ModelError);
}

TEST(Multiview, EncodersRefuseTheOtherKindOfInput) {
  const ImageEncoderConfig sc = ImageEncoderConfig::from_json(block("DinoImageEncoder"));
  const ImageEncoderConfig mc = ImageEncoderConfig::from_json(block("DinoImageEncoderMV"));
  auto model = std::make_shared<const Dinov2Model>(Dinov2Model::random(sc.model, 7));
  const DinoImageEncoder single(sc, model), mv(mc, model);
  Tensor views({2, 3, 28, 28});
  for (std::int64_t i = 0; i < views.numel(); ++i)
    views.data()[i] = std::sin(0.01f * static_cast<float>(i));
  const std::vector<int> idx = {1, 2};
  EXPECT_THROW(single.encode_views(views, idx), ModelError);
  EXPECT_THROW(mv.encode(views), ModelError);
  EXPECT_THROW(mv.encode_views(views, std::vector<int>{1}), ModelError);  // count mismatch
  // The multiview condition is the single encoder's tokens per view plus the view rows.
  Tensor hidden;
  const Tensor cond = mv.encode_views(views, idx, &hidden);
  ASSERT_EQ(cond.shape(), Shape({1, 10, 8}));
  const Tensor per_view = single.encode(views);  // [2, 5, 8]
  const Tensor embed = multiview_embedding(8, 4);
  for (int v = 0; v < 2; ++v)
    for (int t = 0; t < 5; ++t)
      for (int c = 0; c < 8; ++c) {
        const std::int64_t at = (v * 5 + t) * 8 + c;
        EXPECT_EQ(hidden.data()[at], per_view.data()[at]);
        EXPECT_EQ(cond.data()[at], per_view.data()[at] + embed.data()[idx[v] * 8 + c]);
      }
}

}  // namespace
}  // namespace gen3d::models
