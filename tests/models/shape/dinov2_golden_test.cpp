// Golden tests of the image conditioner path (golden/dinov2/README.md): ImageProcessorV2
// preprocessing (bit-exact u8 and float32), the DinoImageEncoder transform, the DINOv2 encoder
// with its layer-0 trace, CLS handling and the unconditional context.
// Data-driven: every preprocessing run and encoder run listed in $GEN3D_GOLDEN_DIR/dinov2/
// config.json (default tests/data/golden/dinov2) is checked, with sizes and variants taken from
// the config and the stored shapes; a check skips only when its file is absent.

#include <gtest/gtest.h>

#include <cmath>
#include <cstdio>
#include <cstring>
#include <filesystem>
#include <fstream>
#include <map>
#include <nlohmann/json.hpp>
#include <sstream>
#include <string>
#include <vector>

#include "image/recenter.h"
#include "models/bf16_golden.h"
#include "models/core/error.h"
#include "models/core/safetensors.h"
#include "models/shape/dinov2.h"
#include "models/shape/image_preprocess.h"
#include "support/paths.h"

namespace gen3d::models {
namespace {

using json = nlohmann::json;

std::string golden_dir() {
  return test::env_or("GEN3D_GOLDEN_DIR", test::source_dir() + "/tests/data/golden") + "/dinov2";
}
std::string golden_file(const std::string& name) {
  return golden_dir() + "/" + name;
}

#define REQUIRE_GOLDEN(path)                                                              \
  do {                                                                                    \
    if (!std::filesystem::exists(path)) GTEST_SKIP() << "golden file absent: " << (path); \
  } while (0)

json load_config() {
  std::ifstream in(golden_file("config.json"));
  std::stringstream ss;
  ss << in.rdbuf();
  return json::parse(ss.str());
}

// U8 tensor of a golden file as an image [H, W, C] (rank 2 -> one channel).
image::ImageU8 u8_image(const SafetensorsFile& f, const std::string& name) {
  const TensorInfo* info = f.find(name);
  if (!info) throw ModelError("golden tensor absent: " + name);
  if (info->dtype != DType::kU8) throw ModelError(name + " is not U8");
  const auto& s = info->shape;
  image::ImageU8 img(static_cast<int>(s[1]), static_cast<int>(s[0]),
                     s.size() == 3 ? static_cast<int>(s[2]) : 1);
  const auto bytes = f.bytes(*info);
  std::copy(bytes.begin(), bytes.end(), img.pixels.begin());
  return img;
}

std::vector<std::int32_t> i32_values(const SafetensorsFile& f, const std::string& name) {
  const TensorInfo* info = f.find(name);
  if (!info || info->dtype != DType::kI32) throw ModelError("golden I32 tensor absent: " + name);
  const auto bytes = f.bytes(*info);
  std::vector<std::int32_t> v(bytes.size() / 4);
  std::memcpy(v.data(), bytes.data(), bytes.size());
  return v;
}

// Exact comparison of two u8 images; reports the mismatch count and the first one.
::testing::AssertionResult same_u8(const image::ImageU8& got, const image::ImageU8& want) {
  if (got.width != want.width || got.height != want.height || got.channels != want.channels)
    return ::testing::AssertionFailure()
           << "shape " << got.height << "x" << got.width << "x" << got.channels << ", expected "
           << want.height << "x" << want.width << "x" << want.channels;
  std::size_t bad = 0, first = 0;
  int worst = 0;
  for (std::size_t i = 0; i < want.pixels.size(); ++i) {
    const int d = std::abs(int(got.pixels[i]) - int(want.pixels[i]));
    if (d) {
      if (!bad) first = i;
      ++bad;
      worst = std::max(worst, d);
    }
  }
  if (!bad) return ::testing::AssertionSuccess();
  const std::size_t px = first / want.channels;
  return ::testing::AssertionFailure()
         << bad << " of " << want.pixels.size() << " values differ (max " << worst
         << "); first at row " << px / want.width << " col " << px % want.width << " channel "
         << first % want.channels << ": got " << int(got.pixels[first]) << ", expected "
         << int(want.pixels[first]);
}

// |got - want| <= atol elementwise, same shape.
::testing::AssertionResult close(const Tensor& got, const Tensor& want, double atol) {
  if (!(got.shape() == want.shape()))
    return ::testing::AssertionFailure()
           << "shape " << got.shape().str() << ", expected " << want.shape().str();
  double worst = 0.0;
  std::int64_t at = 0;
  for (std::int64_t i = 0; i < want.numel(); ++i) {
    const double d = std::abs(double(got.data()[i]) - double(want.data()[i]));
    if (!(d <= worst)) {  // NaN-safe
      worst = std::isnan(d) ? INFINITY : d;
      at = i;
    }
  }
  if (worst <= atol) return ::testing::AssertionSuccess() << "max |diff| " << worst;
  return ::testing::AssertionFailure()
         << "max |diff| " << worst << " > " << atol << " at flat " << at << " (got "
         << got.data()[at] << ", expected " << want.data()[at] << ")";
}

double atol_for(const std::string& name) {
  if (name == "tf.resized") return 2e-5;
  if (name == "tf.pixel_values") return 1e-4;
  if (name == "emb.pos") return 5e-6;
  if (name.find("attn_probs") != std::string::npos) return 1e-5;
  if (name == "uncond.main") return 0.0;
  return 5e-5;
}

// The conditioner input of a preprocessing run: the stored R.image, or (large sizes, where it is
// not stored) array_to_tensor of the stored R.resized.rgb.
Tensor run_input(const SafetensorsFile& pre, const std::string& run) {
  if (pre.find(run + ".image")) return pre.to_f32(run + ".image");
  return array_to_tensor(u8_image(pre, run + ".resized.rgb"));
}

Tensor concat_batch(const std::vector<Tensor>& parts) {
  std::int64_t B = 0;
  for (const auto& p : parts) B += p.dim(0);
  const Shape& s = parts.front().shape();
  Tensor out({B, s[1], s[2], s[3]});
  std::int64_t off = 0;
  for (const auto& p : parts) {
    std::copy_n(p.data(), p.numel(), out.data() + off);
    off += p.numel();
  }
  return out;
}

ImageEncoderConfig run_encoder_config(const json& cfg, const json& run) {
  const std::string model = run.at("model");
  ImageEncoderConfig c =
      ImageEncoderConfig::from_json(cfg.at("models").at(model).at("conditioner_config").dump());
  c.image_size = run.at("image_size");  // the run's DinoImageEncoder kwargs
  c.use_cls_token = run.at("use_cls_token");
  return c;
}

// ---- preprocessing ------------------------------------------------------------------------

TEST(Dinov2Golden, PreprocessingIsBitExact) {
  REQUIRE_GOLDEN(golden_file("config.json"));
  REQUIRE_GOLDEN(golden_file("preprocess.safetensors"));
  const json cfg = load_config();
  const auto pre = SafetensorsFile::open(golden_file("preprocess.safetensors"));
  ASSERT_FALSE(cfg.at("preprocess").empty());
  for (const auto& [run, r] : cfg.at("preprocess").items()) {
    SCOPED_TRACE("preprocess run " + run);
    const image::ImageU8 input = u8_image(*pre, "input." + r.at("image").get<std::string>());
    ImagePreprocessOptions opt;
    opt.size = r.at("size");
    opt.border_ratio = r.at("border_ratio");
    const PreprocessedImage out = preprocess_image(input, opt);

    const image::RecenterInfo& i = out.recentered.info;
    const std::vector<std::int32_t> want = i32_values(*pre, run + ".recenter.ints");
    const std::vector<std::int32_t> got = {i.size,    i.row_min, i.row_max,  i.col_min,
                                           i.col_max, i.h,       i.w,        i.desired,
                                           i.h2,      i.w2,      i.row2_min, i.col2_min};
    EXPECT_EQ(got, want);
    EXPECT_DOUBLE_EQ(i.scale, r.at("recenter").at("scale").get<double>());

    EXPECT_TRUE(
        same_u8(out.recentered.crop_resized, u8_image(*pre, run + ".recenter.crop_resized_rgba")))
        << "crop_resized_rgba";
    EXPECT_TRUE(same_u8(out.recentered.rgb, u8_image(*pre, run + ".recenter.rgb")))
        << "recenter.rgb";
    EXPECT_TRUE(same_u8(out.recentered.mask, u8_image(*pre, run + ".recenter.mask")))
        << "recenter.mask";
    EXPECT_TRUE(same_u8(out.rgb, u8_image(*pre, run + ".resized.rgb"))) << "resized.rgb";
    if (pre->find(run + ".resized.mask")) {
      EXPECT_TRUE(same_u8(out.mask, u8_image(*pre, run + ".resized.mask"))) << "resized.mask";
    }
    if (pre->find(run + ".image")) {
      EXPECT_TRUE(close(out.image, pre->to_f32(run + ".image"), 0.0)) << "image";
    }
    if (pre->find(run + ".mask")) {
      EXPECT_TRUE(close(out.mask_tensor, pre->to_f32(run + ".mask"), 0.0)) << "mask";
    }
  }
}

// ---- encoder ------------------------------------------------------------------------------

TEST(Dinov2Golden, EncoderRunsMatchEveryStoredTensor) {
  REQUIRE_GOLDEN(golden_file("config.json"));
  REQUIRE_GOLDEN(golden_file("preprocess.safetensors"));
  const json cfg = load_config();
  const auto pre = SafetensorsFile::open(golden_file("preprocess.safetensors"));
  int ran = 0;
  for (const auto& [run, r] : cfg.at("runs").items()) {
    SCOPED_TRACE("encoder run " + run);
    const std::string model = r.at("model");
    const std::string gfile = golden_file("encoder_" + run + ".safetensors");
    const std::string wfile = golden_file("dinov2_" + model + ".weights.fp32.safetensors");
    if (!std::filesystem::exists(gfile) || !std::filesystem::exists(wfile)) continue;
    const auto gold = SafetensorsFile::open(gfile);
    const ImageEncoderConfig ec = run_encoder_config(cfg, r);
    const DinoImageEncoder enc = DinoImageEncoder::load(ec, wfile);

    std::vector<Tensor> parts;
    for (const auto& in : r.at("inputs")) parts.push_back(run_input(*pre, in.get<std::string>()));
    const Tensor images = concat_batch(parts);
    ASSERT_EQ(images.dim(0), r.at("batch").get<std::int64_t>());

    std::map<std::string, Tensor> trace;
    const Dinov2Model::TraceFn fn = [&](const std::string& n, const Tensor& v) {
      trace[n] = v.clone();
    };
    trace["cond.main"] = enc.encode(images, &fn);
    trace["uncond.main"] = enc.unconditional(images.dim(0));
    EXPECT_EQ(trace["cond.main"].dim(1), r.at("tokens").get<std::int64_t>());
    EXPECT_EQ(trace["uncond.main"].dim(1), ec.tokens());

    int compared = 0;
    double worst_usage = 0.0;  // max |diff| / atol over the tolerance-checked tensors
    std::string worst_name;
    for (const TensorInfo& t : gold->tensors()) {
      auto it = trace.find(t.name);
      if (it == trace.end()) {
        ADD_FAILURE() << "no value produced for golden tensor " << t.name;
        continue;
      }
      const Tensor want = gold->to_f32(t);
      const double atol = atol_for(t.name);
      EXPECT_TRUE(close(it->second, want, atol)) << t.name;
      if (atol > 0 && it->second.shape() == want.shape())
        for (std::int64_t i = 0; i < want.numel(); ++i) {
          const double u = std::abs(double(it->second.data()[i]) - want.data()[i]) / atol;
          if (u > worst_usage) {
            worst_usage = u;
            worst_name = t.name;
          }
        }
      ++compared;
    }
    EXPECT_GE(compared, 20);
    std::printf("[ dinov2  ] %s: %d tensors, worst |diff| / atol = %.3f (%s)\n", run.c_str(),
                compared, worst_usage, worst_name.c_str());
    ++ran;
  }
  if (ran == 0) GTEST_SKIP() << "no encoder run with its files in " << golden_dir();
}

// The traced tensors of one encoder run (`run`, its config entry `r`) with the weights kept as
// `storage`, and cond.main / uncond.main; empty when the run's files are absent.
std::map<std::string, Tensor> encoder_run(const json& cfg, const SafetensorsFile& pre,
                                          const std::string& run, const json& r,
                                          WeightStorage storage,
                                          std::size_t* weight_bytes = nullptr) {
  const std::string model = r.at("model");
  const std::string gfile = golden_file("encoder_" + run + ".safetensors");
  const std::string wfile = golden_file("dinov2_" + model + ".weights.fp32.safetensors");
  if (!std::filesystem::exists(gfile) || !std::filesystem::exists(wfile)) return {};
  const ImageEncoderConfig ec = run_encoder_config(cfg, r);
  const DinoImageEncoder enc = DinoImageEncoder::load(ec, wfile, Dinov2Options{storage});
  if (weight_bytes) *weight_bytes = enc.model().weight_bytes();
  std::vector<Tensor> parts;
  for (const auto& in : r.at("inputs")) parts.push_back(run_input(pre, in.get<std::string>()));
  const Tensor images = concat_batch(parts);
  std::map<std::string, Tensor> trace;
  const Dinov2Model::TraceFn fn = [&](const std::string& n, const Tensor& v) {
    trace[n] = v.clone();
  };
  trace["cond.main"] = enc.encode(images, &fn);
  trace["uncond.main"] = enc.unconditional(images.dim(0));
  return trace;
}

// bf16 mode: every encoder run against the same golden float32 tensors (normalized MSE per tensor;
// README "Precision" states the tolerance). Exactly-zero tensors (uncond) must stay zero.
TEST(Dinov2Golden, EncoderRuns_bf16) {
  REQUIRE_GOLDEN(golden_file("config.json"));
  REQUIRE_GOLDEN(golden_file("preprocess.safetensors"));
  const json cfg = load_config();
  const auto pre = SafetensorsFile::open(golden_file("preprocess.safetensors"));
  int ran = 0;
  for (const auto& [run, r] : cfg.at("runs").items()) {
    SCOPED_TRACE("encoder run " + run);
    const auto trace = encoder_run(cfg, *pre, run, r, WeightStorage::kBF16);
    if (trace.empty()) continue;
    const auto gold = SafetensorsFile::open(golden_file("encoder_" + run + ".safetensors"));
    bf16test::NmseCheck check("DINOv2 bf16 run " + run, bf16test::kNetworkNmse);
    for (const TensorInfo& t : gold->tensors()) {
      auto it = trace.find(t.name);
      if (it == trace.end()) continue;  // the fp32 test requires every tensor
      const Tensor want = gold->to_f32(t);
      ASSERT_EQ(it->second.numel(), want.numel()) << t.name;
      check.add(t.name, it->second.data(), want.data(), want.numel());
    }
    EXPECT_GE(check.count(), 20);
    check.report();
    ++ran;
  }
  if (ran == 0) GTEST_SKIP() << "no encoder run with its files in " << golden_dir();
}

// int8 mode (each layer's query / key / value, attention output and MLP or SwiGLU products W8A8;
// the patch embedding bf16): every encoder run against the golden float32 tensors and against
// the bf16 mode's, both held to bf16_golden.h's int8 bound (fixed before measuring).
TEST(Dinov2Golden, EncoderRuns_int8) {
  REQUIRE_GOLDEN(golden_file("config.json"));
  REQUIRE_GOLDEN(golden_file("preprocess.safetensors"));
  const json cfg = load_config();
  const auto pre = SafetensorsFile::open(golden_file("preprocess.safetensors"));
  int ran = 0;
  for (const auto& [run, r] : cfg.at("runs").items()) {
    SCOPED_TRACE("encoder run " + run);
    std::size_t bytes8 = 0, bytes16 = 0;
    const auto t8 = encoder_run(cfg, *pre, run, r, WeightStorage::kInt8, &bytes8);
    if (t8.empty()) continue;
    const auto t16 = encoder_run(cfg, *pre, run, r, WeightStorage::kBF16, &bytes16);
    EXPECT_LT(bytes8, bytes16) << "no Linear was quantized";
    const auto gold = SafetensorsFile::open(golden_file("encoder_" + run + ".safetensors"));
    bf16test::NmseCheck check("DINOv2 int8 run " + run, bf16test::kInt8NetworkNmse, "int8");
    bf16test::NmseCheck versus("DINOv2 int8 against bf16 run " + run, bf16test::kInt8NetworkNmse,
                               "int8");
    for (const TensorInfo& t : gold->tensors()) {
      auto it = t8.find(t.name);
      if (it == t8.end()) continue;  // the fp32 test requires every tensor
      const Tensor want = gold->to_f32(t);
      ASSERT_EQ(it->second.numel(), want.numel()) << t.name;
      check.add(t.name, it->second.data(), want.data(), want.numel());
      versus.add(t.name, it->second.data(), t16.at(t.name).data(), want.numel());
    }
    EXPECT_GE(check.count(), 20);
    check.report();
    versus.report();
    ++ran;
    if (!gold->find("cond.main")) continue;
    const Tensor want = gold->to_f32("cond.main");
    const float *a8 = t8.at("cond.main").data(), *a16 = t16.at("cond.main").data();
    std::printf(
        "[ info ] DINOv2 run %s cond.main nmse: int8 vs fp32 %.3g, int8 vs bf16 %.3g, "
        "bf16 vs fp32 %.3g\n",
        run.c_str(), bf16test::nmse(a8, want.data(), want.numel()),
        bf16test::nmse(a8, a16, want.numel()), bf16test::nmse(a16, want.data(), want.numel()));
  }
  if (ran == 0) GTEST_SKIP() << "no encoder run with its files in " << golden_dir();
}

// The model alone, from the stored pixel_values (isolates the network from the transform).
TEST(Dinov2Golden, ModelFromStoredPixelValues) {
  REQUIRE_GOLDEN(golden_file("config.json"));
  const json cfg = load_config();
  int ran = 0;
  for (const auto& [run, r] : cfg.at("runs").items()) {
    SCOPED_TRACE("encoder run " + run);
    const std::string model = r.at("model");
    const std::string gfile = golden_file("encoder_" + run + ".safetensors");
    const std::string wfile = golden_file("dinov2_" + model + ".weights.fp32.safetensors");
    if (!std::filesystem::exists(gfile) || !std::filesystem::exists(wfile)) continue;
    const auto gold = SafetensorsFile::open(gfile);
    const ImageEncoderConfig ec = run_encoder_config(cfg, r);
    const Dinov2Model m = Dinov2Model::load(ec.model, wfile);
    const Tensor out = m.forward(gold->to_f32("tf.pixel_values"));
    EXPECT_TRUE(close(out, gold->to_f32("last_hidden_state"), 5e-5));
    EXPECT_EQ(r.at("pos_interpolated").get<bool>(),
              out.dim(1) - 1 != std::int64_t(ec.model.position_grid()) * ec.model.position_grid());
    ++ran;
  }
  if (ran == 0) GTEST_SKIP() << "no encoder run with its files in " << golden_dir();
}

// F16 weights, and the combined-checkpoint prefix, load the same values: identical outputs.
TEST(Dinov2Golden, WeightFileVariantsGiveIdenticalContext) {
  REQUIRE_GOLDEN(golden_file("config.json"));
  REQUIRE_GOLDEN(golden_file("preprocess.safetensors"));
  const json cfg = load_config();
  const auto pre = SafetensorsFile::open(golden_file("preprocess.safetensors"));
  int ran = 0;
  for (const auto& [run, r] : cfg.at("runs").items()) {
    SCOPED_TRACE("encoder run " + run);
    const std::string model = r.at("model");
    const std::string f32 = golden_file("dinov2_" + model + ".weights.fp32.safetensors");
    if (!std::filesystem::exists(f32)) continue;
    const ImageEncoderConfig ec = run_encoder_config(cfg, r);
    std::vector<Tensor> parts;
    for (const auto& in : r.at("inputs")) parts.push_back(run_input(*pre, in.get<std::string>()));
    const Tensor images = concat_batch(parts);
    const Tensor want = DinoImageEncoder::load(ec, f32).encode(images);
    for (const std::string& variant : {"dinov2_" + model + ".weights.fp16.safetensors",
                                       "conditioner_" + model + ".fp16.safetensors"}) {
      const std::string path = golden_file(variant);
      if (!std::filesystem::exists(path)) continue;
      SCOPED_TRACE(variant);
      EXPECT_TRUE(close(DinoImageEncoder::load(ec, path).encode(images), want, 0.0));
      ++ran;
    }
  }
  if (ran == 0) GTEST_SKIP() << "no F16 / conditioner weight file in " << golden_dir();
}

// Strictness against real files: another model's weights are rejected with names.
TEST(Dinov2Golden, LoaderRejectsMismatchedConfig) {
  REQUIRE_GOLDEN(golden_file("config.json"));
  const json cfg = load_config();
  std::vector<std::string> models;
  for (const auto& [name, m] : cfg.at("models").items()) models.push_back(name);
  if (models.size() < 2) GTEST_SKIP() << "need two models";
  const std::string wfile = golden_file("dinov2_" + models[1] + ".weights.fp32.safetensors");
  REQUIRE_GOLDEN(wfile);
  const ImageEncoderConfig other =
      ImageEncoderConfig::from_json(cfg.at("models").at(models[0]).at("conditioner_config").dump());
  try {
    Dinov2Model::load(other.model, wfile);
    FAIL() << "loading " << models[1] << " weights with " << models[0] << "'s config succeeded";
  } catch (const ModelError& e) {
    const std::string msg = e.what();
    EXPECT_NE(msg.find("Dinov2Model"), std::string::npos) << msg;
    EXPECT_NE(msg.find("embeddings."), std::string::npos) << msg;
  }
}

}  // namespace
}  // namespace gen3d::models
