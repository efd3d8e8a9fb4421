// Golden tests of Hunyuan3D-2mv's multiview condition (multiview/README.md) against the official
// pipeline run on a dict of view images: MVImageProcessorV2 on each view PNG, the views sorted by
// index, DinoImageEncoderMV's fixed view embedding and the concatenated condition. Data-driven:
// every sub-folder of $GEN3D_GOLDEN_MV_DIR (default tests/data/golden/multiview) holding a
// golden.safetensors is one variant (its view subset, sizes and settings come from the files).
// The sampling and decoding of the same runs are checked by fast_models_golden_test.cpp, which
// reads these folders too.

#include <gtest/gtest.h>

#include <algorithm>
#include <cmath>
#include <filesystem>

#include <nlohmann/json.hpp>

#include "image/convert.h"
#include "image/io.h"
#include "models/core/error.h"
#include "models/core/safetensors.h"
#include "models/shape/checkpoints.h"
#include "models/shape/dinov2.h"
#include "models/shape/image_preprocess.h"
#include "models/shape/multiview.h"
#include "support/paths.h"

namespace gen3d::models {
namespace {

namespace fs = std::filesystem;

// Fixed before the comparison: |got - golden| <= atol element-wise.
constexpr double kEmbedTol = 1e-7;    // the view embedding (double sinusoid rounded to float)
constexpr double kConcatTol = 1e-6;   // golden hidden states + our embedding (one float add)
constexpr double kPixelTol = 1e-4;    // encoder transform (DINOv2 golden: tf.pixel_values)
constexpr double kEncoderTol = 5e-5;  // DINOv2 output and the condition (DINOv2 golden)

fs::path root() {
  return test::env_or("GEN3D_GOLDEN_MV_DIR", test::source_dir() + "/tests/data/golden/multiview");
}

std::vector<fs::path> variants() {
  std::vector<fs::path> out;
  std::error_code ec;
  for (const auto& e : fs::directory_iterator(root(), ec))
    if (fs::is_regular_file(e.path() / "golden.safetensors")) out.push_back(e.path());
  std::sort(out.begin(), out.end());
  return out;
}

::testing::AssertionResult close(const Tensor& got, const Tensor& want, double atol) {
  if (!(got.shape() == want.shape()))
    return ::testing::AssertionFailure()
           << "shape " << got.shape().str() << " != " << want.shape().str();
  double worst = 0.0;
  for (std::int64_t i = 0; i < want.numel(); ++i) {
    const double d = std::abs(double(got.data()[i]) - want.data()[i]);
    if (!(d <= atol))
      return ::testing::AssertionFailure() << "|diff| " << d << " > " << atol << " at " << i;
    worst = std::max(worst, d);
  }
  return ::testing::AssertionSuccess() << "max |diff| " << worst;
}

struct Variant {
  fs::path dir;
  std::shared_ptr<const SafetensorsFile> golden;
  nlohmann::json run;
  explicit Variant(const fs::path& d)
      : dir(d), golden(SafetensorsFile::open((d / "golden.safetensors").string())) {
    run = nlohmann::json::parse(golden->metadata().at("run"));
  }
  Tensor g(const std::string& name) const { return golden->to_f32(name); }
  std::vector<int> view_idxs() const { return run["view_idxs"].get<std::vector<int>>(); }
  std::string dit_dir() const { return (dir / run["dit_folder"].get<std::string>()).string(); }
};

TEST(MultiviewGolden, VariantsPresent) {
  if (variants().empty()) GTEST_SKIP() << "no multiview golden set";
  bool subset = false, gap = false;
  for (const fs::path& d : variants()) {
    const Variant v(d);
    const auto idx = v.view_idxs();
    subset = subset || idx.size() < kMultiviewNames.size();
    for (std::size_t i = 1; i < idx.size(); ++i) gap = gap || idx[i] != idx[i - 1] + 1;
  }
  EXPECT_TRUE(subset) << "one variant runs a subset of the views";
  EXPECT_TRUE(gap) << "one variant's views are not neighbours in the view order";
}

// The processor's order: the views as given, sorted by MVImageProcessorV2.view2idx.
TEST(MultiviewGolden, ViewOrderIsTheProcessors) {
  for (const fs::path& d : variants()) {
    const Variant v(d);
    std::vector<int> want;
    for (const auto& name : v.run["views_given"]) {
      const auto i = multiview_index(name.get<std::string>());
      ASSERT_TRUE(i) << name;
      want.push_back(*i);
    }
    std::sort(want.begin(), want.end());
    EXPECT_EQ(want, v.view_idxs()) << d;
  }
}

TEST(MultiviewGolden, ViewEmbedding) {
  for (const fs::path& d : variants()) {
    const Variant v(d);
    const Tensor want = v.g("cond.view_embed");  // [view_num, C]
    EXPECT_TRUE(
        close(multiview_embedding(static_cast<int>(want.dim(1)), static_cast<int>(want.dim(0))),
              want, kEmbedTol))
        << d;
  }
}

// MVImageProcessorV2 on each view PNG: the same tensors, exactly.
TEST(MultiviewGolden, EachViewPreprocessedExactly) {
  for (const fs::path& d : variants()) {
    const Variant v(d);
    const Tensor want = v.g("views.images");  // [V, 3, S, S]
    const auto idx = v.view_idxs();
    ASSERT_EQ(want.dim(0), static_cast<std::int64_t>(idx.size()));
    ImagePreprocessOptions opt;
    opt.size = v.run["processor_size"].get<int>();
    opt.border_ratio = v.run["border_ratio"].get<double>();
    const std::int64_t n = want.numel() / want.dim(0);
    for (std::size_t i = 0; i < idx.size(); ++i) {
      const std::string name(kMultiviewNames[idx[i]]);
      const image::Image img =
          image::load_image((d / v.run["view_images"][name].get<std::string>()).string());
      ASSERT_EQ(img.channels, 4);
      const Tensor got =
          preprocess_image(image::image_u8_from_unit(img.pixels.data(), img.width, img.height, 4),
                           opt)
              .image;
      Tensor w({1, 3, opt.size, opt.size});
      std::copy_n(want.data() + i * n, n, w.data());
      EXPECT_TRUE(close(got, w, 0.0)) << d.filename() << " " << name;
    }
  }
}

// DinoImageEncoderMV.forward after the encoder, on the reference's own hidden states.
TEST(MultiviewGolden, ConditionFromTheHiddenStates) {
  for (const fs::path& d : variants()) {
    const Variant v(d);
    const Tensor hidden = v.g("cond.hidden");  // [V, T, C]
    const auto idx = v.view_idxs();
    const Tensor embed = multiview_embedding(static_cast<int>(hidden.dim(2)), 4);
    EXPECT_TRUE(close(add_multiview_embedding(hidden, idx, embed), v.g("cond.main"), kConcatTol))
        << d;
  }
}

// The whole conditioner from the folder (config.yaml's DinoImageEncoderMV and the checkpoint's
// conditioner weights) on the processed views.
TEST(MultiviewGolden, ConditionerFromTheFolder) {
  for (const fs::path& d : variants()) {
    const Variant v(d);
    SCOPED_TRACE(d.filename().string());
    const CheckpointSource src = resolve_checkpoint(v.dit_dir());
    const auto enc =
        shared_image_encoder(src.weights, src.config, "conditioner", WeightStorage::kF32);
    ASSERT_TRUE(enc->config().multiview);
    EXPECT_EQ(enc->config().view_num, 4);
    EXPECT_EQ(enc->config().tokens(), v.run["tokens_per_view"].get<int>());
    const Tensor views = v.g("views.images");  // [V, 3, S, S]
    EXPECT_TRUE(close(encoder_transform(views, enc->config().image_size), v.g("views.pixel_values"),
                      kPixelTol));
    Tensor hidden;
    const Tensor cond = enc->encode_views(views, v.view_idxs(), &hidden);
    EXPECT_TRUE(close(hidden, v.g("cond.hidden"), kEncoderTol)) << "hidden";
    EXPECT_TRUE(close(cond, v.g("cond.main"), kEncoderTol)) << "cond";
    EXPECT_TRUE(close(v.g("in.cond"), v.g("cond.main"), 0.0)) << "the sampler's condition";
    if (v.golden->find("cond.uncond")) {  // CFG: zeros of the condition's shape
      EXPECT_TRUE(close(v.g("cond.uncond"), Tensor(cond.shape()), 0.0));
    }
    // The single-image entry point refuses a multiview encoder.
    EXPECT_THROW(enc->encode(views), ModelError);
  }
}

}  // namespace
}  // namespace gen3d::models
