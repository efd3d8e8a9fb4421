// The Hunyuan3D-Paint 2.0 path on the GPU (golden/texmodels/README.md §3, §4b): the UNet2.5D's
// reference features, stored intermediates and output against the official float32 values under
// the bf16 tolerance the CPU's bf16 path meets (bf16_golden.h: kUNetNmse); the GPU against the
// CPU's bf16 path and against itself; the per-generation conditions (projected on the GPU) against
// the per-step path; the tiny paint run's recorded tensors; the delight loop, and the
// views_from_model and delight stages on `device: cuda`. Golden files from $GEN3D_GOLDEN_DIR
// (default tests/data/golden); a test skips when they are absent.

#include <gtest/gtest.h>

#include <cmath>
#include <cstdio>
#include <cstring>
#include <filesystem>
#include <fstream>
#include <map>
#include <memory>
#include <string>
#include <vector>

#include <nlohmann/json.hpp>

#include "cuda_fixture.h"
#include "image/image.h"
#include "models/bf16_golden.h"
#include "models/core/device.h"
#include "models/core/error.h"
#include "models/core/safetensors.h"
#include "models/paint/delight_model.h"
#include "models/paint/multiview_diffusion.h"
#include "models/paint/mvunet.h"
#include "models/paint/sd_vae.h"
#include "models/paint/texmodels_golden.h"
#include "models/paint/unet.h"
#include "pipeline/error.h"
#include "pipeline/stage_runner.h"
#include "render/camera.h"
#include "stages/register.h"
#include "stages/types.h"
#include "support/paths.h"

namespace gen3d::models {
namespace {

using json = nlohmann::json;
using namespace texmodels_golden;

Tensor host(const Tensor& t) {
  return t.device() == Device::kCpu ? t.clone() : t.to(Device::kCpu);
}

double nmse(const Tensor& a, const Tensor& g) {
  EXPECT_EQ(a.numel(), g.numel());
  return bf16test::nmse(a.data(), g.data(), g.numel());
}

// The mvunet.forward.safetensors CFG call.
struct MvCall {
  UNetConfig base;
  std::shared_ptr<const SafetensorsFile> fwd;
  Tensor latents, normals, positions, ref_latents, text;
  float timestep = 0;
  std::vector<float> ref_scale;
  std::vector<int> cams;
  int N = 0, n_ref = 0;
};

// A rank-5 (B, N, C, H, W) golden tensor as NHWC (B·N, H, W, C); also returns N.
Tensor views_nhwc(const SafetensorsFile& f, const std::string& name, int* n = nullptr) {
  const TensorInfo* info = f.find(name);
  if (!info || info->shape.size() != 5) throw std::runtime_error(name + " is not (B, N, C, H, W)");
  const auto& s = info->shape;
  if (n) *n = static_cast<int>(s[1]);
  return to_nhwc(f.to_f32_as(name, {s[0] * s[1], s[2], s[3], s[4]}));
}

bool have_mvunet() {
  return std::filesystem::exists(golden_file("config.json")) &&
         std::filesystem::exists(golden_file("mvunet.forward.safetensors")) &&
         std::filesystem::exists(golden_file("mvunet.weights.fp32.safetensors"));
}

MvCall mv_call() {
  MvCall c;
  const json cfg = load_config();
  c.base = UNetConfig::parse(cfg.at("mv").at("cfg").dump(), "mv");
  c.fwd = SafetensorsFile::open(golden_file("mvunet.forward.safetensors"));
  c.latents = views_nhwc(*c.fwd, "in.sample", &c.N);
  c.normals = views_nhwc(*c.fwd, "in.normal_imgs");
  c.positions = views_nhwc(*c.fwd, "in.position_imgs");
  c.ref_latents = views_nhwc(*c.fwd, "in.ref_latents", &c.n_ref);
  c.text = c.fwd->to_f32("in.encoder_hidden_states");
  c.timestep = c.fwd->to_f32("in.timestep").data()[0];
  const Tensor rs = c.fwd->to_f32("in.ref_scale");
  c.ref_scale.assign(rs.data(), rs.data() + rs.numel());
  const TensorInfo* info = c.fwd->find("in.camera_info_gen");
  const auto bytes = c.fwd->bytes(*info);
  std::vector<std::int64_t> ids(bytes.size() / 8);
  std::memcpy(ids.data(), bytes.data(), bytes.size());
  for (std::int64_t id : ids) c.cams.push_back(static_cast<int>(id));
  return c;
}

std::unique_ptr<MultiviewUNet> load_mv(const MvCall& c, WeightStorage storage, Device device) {
  return MultiviewUNet::load(c.base,
                             SafetensorsFile::open(golden_file("mvunet.weights.fp32.safetensors")),
                             storage, device);
}

TEST(MvUNetCudaGolden, EveryStoredTensorWithinTheBf16Tolerance) {
  GEN3D_REQUIRE_GPU();
  if (!have_mvunet()) GTEST_SKIP() << "golden data absent: " << golden_dir();
  const MvCall c = mv_call();
  const auto gpu = load_mv(c, WeightStorage::kBF16, Device::kCuda);
  ASSERT_EQ(gpu->device(), Device::kCuda);
  ASSERT_EQ(gpu->reference_unet().device(), Device::kCuda);
  bf16test::NmseCheck check("mvunet on the GPU", bf16test::kUNetNmse);

  const RefFeatures ref = gpu->reference_features(c.ref_latents, c.n_ref, gpu->learned_text_ref());
  int ref_stored = 0;
  for (const TensorInfo& info : c.fwd->tensors()) {
    if (info.name.rfind("ref_feat.", 0) != 0) continue;
    ++ref_stored;
    const std::string layer = info.name.substr(9);
    ASSERT_TRUE(ref.layers.count(layer)) << "no reference features for " << layer;
    const Tensor& t = ref.layers.at(layer);
    EXPECT_EQ(t.device(), Device::kCuda) << layer;  // recorded where the UNet runs
    const Tensor got = host(t), want = c.fwd->to_f32(info.name);
    ASSERT_EQ(got.numel(), want.numel()) << layer;
    check.add(info.name, got.data(), want.data(), want.numel());
  }
  EXPECT_GT(ref_stored, 0);
  EXPECT_EQ(static_cast<std::size_t>(ref_stored), ref.layers.size());

  std::map<std::string, Tensor> probes;
  const Tensor out =
      gpu->forward(c.latents, c.normals, c.positions, c.timestep, c.text, c.cams, ref, c.ref_scale,
                   c.N, [&](const std::string& name, const Tensor& v) {
                     EXPECT_EQ(v.device(), Device::kCpu) << name;
                     probes[name] = v.rank() == 4 ? to_nchw(v) : v.clone();
                   });
  ASSERT_EQ(out.device(), Device::kCpu);
  for (const TensorInfo& info : c.fwd->tensors()) {
    if (info.name.rfind("inter.", 0) != 0) continue;
    const std::string name = info.name.substr(6);
    ASSERT_TRUE(probes.count(name)) << "no probe " << name;
    const Tensor want = c.fwd->to_f32(info.name);
    ASSERT_EQ(probes.at(name).numel(), want.numel()) << name;
    check.add(info.name, probes.at(name).data(), want.data(), want.numel());
  }
  const Tensor want = c.fwd->to_f32("out.sample"), o = to_nchw(out);
  ASSERT_EQ(o.numel(), want.numel());
  check.add("out.sample", o.data(), want.data(), want.numel());
  check.report();
}

TEST(MvUNetCudaGolden, GpuAgreesWithTheCpuBf16PathAndTheConditionsPath) {
  GEN3D_REQUIRE_GPU();
  if (!have_mvunet()) GTEST_SKIP() << "golden data absent: " << golden_dir();
  const MvCall c = mv_call();
  const auto gpu = load_mv(c, WeightStorage::kBF16, Device::kCuda);
  const auto cpu = load_mv(c, WeightStorage::kBF16, Device::kCpu);
  const RefFeatures gref = gpu->reference_features(c.ref_latents, c.n_ref, gpu->learned_text_ref());
  const RefFeatures cref = cpu->reference_features(c.ref_latents, c.n_ref, cpu->learned_text_ref());
  ASSERT_EQ(gref.layers.size(), cref.layers.size());
  for (const auto& [name, t] : cref.layers) {
    const double e = nmse(host(gref.layers.at(name)), t);
    EXPECT_LE(e, bf16test::kUNetNmse) << name;
  }

  // Twice on the GPU (weights stay uploaded): the same output, and near the CPU's.
  const auto run = [&](const MultiviewUNet& net, const RefFeatures& ref) {
    return net.forward(c.latents, c.normals, c.positions, c.timestep, c.text, c.cams, ref,
                       c.ref_scale, c.N);
  };
  const Tensor a = run(*gpu, gref), b = run(*gpu, gref), cc = run(*cpu, cref);
  ASSERT_EQ(a.shape(), cc.shape());
  for (std::int64_t i = 0; i < a.numel(); ++i) ASSERT_EQ(a.data()[i], b.data()[i]) << i;
  const double e = nmse(a, cc);
  std::printf("[ info ] mvunet GPU vs CPU bf16 output: nmse %.3g\n", e);
  EXPECT_LE(e, bf16test::kUNetNmse);

  // Reference features handed over on the host are accepted (copied to the GPU).
  {
    RefFeatures href = gref;
    for (auto& [name, t] : href.layers) t = host(t);
    const double eh = nmse(run(*gpu, href), a);
    std::printf("[ info ] mvunet GPU with host reference features vs device: nmse %.3g\n", eh);
    EXPECT_LE(eh, 1e-10);
  }

  // The per-generation conditions, projected on the GPU: the same GEMMs on the same rows as the
  // per-step path.
  const MultiviewConditions cond = gpu->conditions(c.text, gref, c.ref_scale);
  for (const Tensor& t : cond.text_kv) EXPECT_EQ(t.device(), Device::kCuda);
  int projected = 0;
  for (const auto& site : cond.ref_kv)
    for (const Tensor& t : site)
      if (!t.empty()) {
        EXPECT_EQ(t.device(), Device::kCuda);
        ++projected;
      }
  EXPECT_GT(projected, 0);
  const Tensor k = gpu->forward(c.latents, c.normals, c.positions, c.timestep, c.cams, cond, c.N);
  ASSERT_EQ(k.device(), Device::kCpu);
  const double ek = nmse(k, a);
  std::printf("[ info ] mvunet GPU conditions path vs per-step path: nmse %.3g\n", ek);
  EXPECT_LE(ek, 1e-10);
  const MultiviewConditions ccond = cpu->conditions(c.text, cref, c.ref_scale);
  const Tensor kc = cpu->forward(c.latents, c.normals, c.positions, c.timestep, c.cams, ccond, c.N);
  EXPECT_LE(nmse(k, kc), bf16test::kUNetNmse);

  // DeepCache through the wrapper: a full pass stores the deep features on the GPU, a shallow
  // pass reuses them; both near the CPU's.
  UNetFeatureCache gc, cch;
  const Tensor gfull =
      gpu->forward(c.latents, c.normals, c.positions, c.timestep, c.cams, cond, c.N, &gc, false);
  const Tensor cfull =
      cpu->forward(c.latents, c.normals, c.positions, c.timestep, c.cams, ccond, c.N, &cch, false);
  ASSERT_EQ(gc.deep.device(), Device::kCuda);
  EXPECT_LE(nmse(gfull, cfull), bf16test::kUNetNmse);
  const float t2 = c.timestep * 0.5f;
  const Tensor gs =
      gpu->forward(c.latents, c.normals, c.positions, t2, c.cams, cond, c.N, &gc, true);
  const Tensor cs =
      cpu->forward(c.latents, c.normals, c.positions, t2, c.cams, ccond, c.N, &cch, true);
  const double es = nmse(gs, cs);
  std::printf("[ info ] mvunet GPU vs CPU bf16 DeepCache pass: nmse %.3g\n", es);
  EXPECT_LE(es, bf16test::kUNetNmse);
}

// fp32 storage on the GPU runs as UNet2DCondition does there (weights rounded to bf16 on
// upload); int8 is refused, naming the device.
TEST(MvUNetCudaGolden, StorageOnTheGpu) {
  GEN3D_REQUIRE_GPU();
  if (!have_mvunet()) GTEST_SKIP() << "golden data absent: " << golden_dir();
  const MvCall c = mv_call();
  try {
    load_mv(c, WeightStorage::kInt8, Device::kCuda);
    ADD_FAILURE() << "int8 on the GPU was accepted";
  } catch (const ModelError& e) {
    EXPECT_NE(std::string(e.what()).find("cuda"), std::string::npos) << e.what();
  }
  // As the plain UNet's GPU golden test runs it: against the official float32 output.
  const auto f32 = load_mv(c, WeightStorage::kF32, Device::kCuda);
  const RefFeatures ref = f32->reference_features(c.ref_latents, c.n_ref, f32->learned_text_ref());
  const Tensor out = to_nchw(f32->forward(c.latents, c.normals, c.positions, c.timestep, c.text,
                                          c.cams, ref, c.ref_scale, c.N));
  const double e = nmse(out, c.fwd->to_f32("out.sample"));
  std::printf("[ info ] mvunet GPU (fp32 storage) vs the golden output: nmse %.3g\n", e);
  EXPECT_LE(e, bf16test::kUNetNmse);
}

// ---- The tiny paint run (§4b) on the GPU ---------------------------------------------------

bool have_sampler() {
  return have_mvunet() && std::filesystem::exists(golden_file("sampler.safetensors")) &&
         std::filesystem::exists(golden_file("vae.weights.fp32.safetensors"));
}

PaintModel paint_model(Device device) {
  const json cfg = load_config();
  PaintModel model;
  model.unet =
      MultiviewUNet::load(UNetConfig::parse(cfg["mv"]["cfg"].dump(), "config.json mv"),
                          SafetensorsFile::open(golden_file("mvunet.weights.fp32.safetensors")),
                          WeightStorage::kBF16, device);
  WeightMap wm(SafetensorsFile::open(golden_file("vae.weights.fp32.safetensors")), "");
  std::unique_ptr<SdVae> vae = SdVae::load(
      SdVaeConfig::parse(cfg["vae"]["cfg"].dump(), "config.json vae"), wm, WeightStorage::kBF16);
  wm.finish("SD VAE");
  vae->set_device(device);
  model.vae = std::move(vae);
  model.scheduler = SchedulerConfig::parse(cfg["scheduler_config"].dump(), "config.json");
  return model;
}

TEST(PaintCudaGolden, SamplerRunWithinTheBf16Tolerance) {
  GEN3D_REQUIRE_GPU();
  if (!have_sampler()) GTEST_SKIP() << "golden files absent in " << golden_dir();
  const json cfg = load_config();
  const json& mv = cfg["mv"];
  const PaintModel model = paint_model(Device::kCuda);
  const auto rec = SafetensorsFile::open(golden_file("sampler.safetensors"));
  const PaintRun run = read_paint_run(*rec, mv);
  const PaintInputs& in = run.in;
  const PaintNoise& noise = run.noise;
  const int steps = mv["steps"].get<int>();
  bf16test::NmseCheck check("paint run on the GPU", bf16test::kUNetNmse);
  const auto add = [&](const std::string& name, const Tensor& a, const Tensor& g) {
    ASSERT_EQ(a.numel(), g.numel()) << name;
    check.add(name, a.data(), g.data(), g.numel());
  };
  PaintOptions opt;
  opt.steps = steps;
  opt.guidance = mv["guidance"].get<float>();
  int seen = 0;
  const auto observer = [&](const PaintStep& s) {
    const std::string p = "rec.step" + std::to_string(s.index);
    add(p + ".noise_pred_raw", *s.noise_pred_raw, read_nhwc(*rec, p + ".noise_pred_raw"));
    add(p + ".noise_pred_cfg", *s.noise_pred, read_nhwc(*rec, p + ".noise_pred_cfg"));
    add(p + ".latents", *s.latents, read_nhwc(*rec, p + ".latents"));
    ++seen;
  };
  PaintLatents latents;
  Tensor decoded;
  const Tensor image = paint_views(model, in, opt, &noise, observer, &latents, &decoded);
  EXPECT_EQ(seen, steps);
  ASSERT_EQ(image.device(), Device::kCpu);
  add("rec.ref_latents", latents.ref, read_nhwc(*rec, "rec.ref_latents"));
  add("rec.normal_latents", latents.normals, read_nhwc(*rec, "rec.normal_latents"));
  add("rec.position_latents", latents.positions, read_nhwc(*rec, "rec.position_latents"));
  add("rec.decoded", decoded, read_nhwc(*rec, "rec.decoded"));
  add("rec.image", image, read_nhwc(*rec, "rec.image"));
  check.report();
}

// ---- The delight loop (the 8-channel unet_b and the SD VAE) --------------------------------

TEST(DelightCuda, LoopNearTheCpuBf16Loop) {
  GEN3D_REQUIRE_GPU();
  if (!std::filesystem::exists(golden_file("unet_b.weights.fp32.safetensors")) ||
      !std::filesystem::exists(golden_file("vae.weights.fp32.safetensors")))
    GTEST_SKIP() << "golden weights absent in " << golden_dir();
  const json cfg = load_config();
  const auto model = [&](Device device) {
    auto m = std::make_shared<DelightModel>();
    m->unet = std::make_shared<const UNet2DCondition>(
        UNet2DCondition::load(UNetConfig::parse(cfg["unet_b"]["cfg"].dump(), "unet_b"),
                              SafetensorsFile::open(golden_file("unet_b.weights.fp32.safetensors")),
                              WeightStorage::kBF16, device));
    WeightMap wm(SafetensorsFile::open(golden_file("vae.weights.fp32.safetensors")), "");
    std::unique_ptr<SdVae> vae =
        SdVae::load(SdVaeConfig::parse(cfg["vae"]["cfg"].dump(), "vae"), wm, WeightStorage::kBF16);
    wm.finish("SD VAE");
    vae->set_device(device);
    m->vae = std::move(vae);
    m->scheduler = SchedulerConfig::parse(cfg["scheduler_config"].dump(), "scheduler");
    m->empty_prompt = Tensor(Shape{1, 7, m->unet->config().cross_attention_dim});
    for (std::int64_t i = 0; i < m->empty_prompt.numel(); ++i)
      m->empty_prompt.data()[i] = std::sin(0.37f * static_cast<float>(i));
    return m;
  };
  Tensor image(Shape{1, 32, 32, 3});
  for (std::int64_t i = 0; i < image.numel(); ++i)
    image.data()[i] = static_cast<float>((i * 37) % 256) / 255.0f;
  const auto gpu = model(Device::kCuda), cpu = model(Device::kCpu);
  for (float guidance : {1.0f, 2.0f}) {  // one conditional pass / the three-branch batch
    DelightModelOptions o;
    o.steps = 3;
    o.guidance = guidance;
    const Tensor g = delight_network(*gpu, image, o), c = delight_network(*cpu, image, o);
    ASSERT_EQ(g.shape(), c.shape());
    ASSERT_EQ(g.device(), Device::kCpu);
    const double e = nmse(g, c);
    std::printf("[ info ] delight (guidance %g) GPU vs CPU bf16: nmse %.3g\n", guidance, e);
    EXPECT_LE(e, bf16test::kUNetNmse);
  }
}

// ---- The stages on device: cuda --------------------------------------------------------------

void write_json(const std::filesystem::path& path, const json& value) {
  std::filesystem::create_directories(path.parent_path());
  std::ofstream(path) << value.dump(2);
}

// unet/ (the UNet2.5D), vae/ and scheduler/ of hunyuan3d-paint-v2-0, from the golden files.
std::string paint_folder() {
  namespace fs = std::filesystem;
  const fs::path dir = test::temp_dir("mvunet_cuda_paint_folder");
  const json cfg = load_config();
  write_json(dir / "unet" / "config.json", cfg["mv"]["cfg"]);
  fs::copy_file(golden_file("mvunet.weights.fp32.safetensors"),
                dir / "unet" / "diffusion_pytorch_model.safetensors",
                fs::copy_options::overwrite_existing);
  write_json(dir / "vae" / "config.json", cfg["vae"]["cfg"]);
  fs::copy_file(golden_file("vae.weights.fp32.safetensors"),
                dir / "vae" / "diffusion_pytorch_model.safetensors",
                fs::copy_options::overwrite_existing);
  write_json(dir / "scheduler" / "scheduler_config.json", cfg["scheduler_config"]);
  return dir.string();
}

TEST(PaintCudaStage, ViewsFromModelOnTheGpuNearTheCpuBf16Run) {
  GEN3D_REQUIRE_GPU();
  if (!have_sampler()) GTEST_SKIP() << "golden files absent in " << golden_dir();
  register_device_installer(Device::kCuda, &cuda::install);
  const std::string folder = paint_folder();
  // The loader keeps bf16 for a device whatever the request, and keys the shared model by device.
  const auto shared = shared_paint_model(folder, WeightStorage::kF32, Device::kCuda);
  EXPECT_EQ(shared->unet->device(), Device::kCuda);
  EXPECT_EQ(shared->vae->device(), Device::kCuda);
  EXPECT_EQ(shared, shared_paint_model(folder, WeightStorage::kBF16, Device::kCuda));
  EXPECT_NE(shared, shared_paint_model(folder, WeightStorage::kBF16, Device::kCpu));

  pipeline::Registry registry;
  stages::register_views_from_model(registry);
  const auto paint = [&](const char* device) {
    pipeline::StageRunner r(*registry.find("views_from_model"));
    r.profiler().set_device_timelines(true);
    r.input<render::ViewSet>("views", render::ViewSet::hunyuan6());
    r.input<image::Image>("image", image::Image(24, 24, 4, 0.6f));
    r.input<stages::ImageList>("normals", stages::ImageList(6, image::Image(40, 40, 3, 0.5f)));
    r.input<stages::ImageList>("positions", stages::ImageList(6, image::Image(40, 40, 3, 0.4f)));
    r.param("model", folder).param("view_size", 32).param("steps", 2).param("resolution", 32);
    r.param("precision", "bf16").param("device", device);
    r.run();
    if (std::string(device) == "cuda") {
      bool gpu_spans = false;
      const int track = r.profiler().track("cuda:0");
      for (const auto& s : r.profiler().spans()) gpu_spans = gpu_spans || s.thread == track;
      EXPECT_TRUE(gpu_spans) << "no GPU work in the trace";
    }
    return r.output<stages::ImageList>("images");
  };
  const auto g = paint("cuda"), c = paint("cpu");
  ASSERT_EQ(g->size(), 6u);
  ASSERT_EQ(c->size(), 6u);
  double num = 0, den = 0;
  for (std::size_t v = 0; v < g->size(); ++v) {
    ASSERT_EQ((*g)[v].pixels.size(), (*c)[v].pixels.size());
    for (std::size_t i = 0; i < (*g)[v].pixels.size(); ++i) {
      const double d = (*g)[v].pixels[i] - (*c)[v].pixels[i];
      num += d * d;
      den += double((*c)[v].pixels[i]) * (*c)[v].pixels[i];
    }
  }
  const double e = den > 0 ? num / den : num;
  std::printf("[ info ] views_from_model cuda vs cpu bf16 images: nmse %.3g\n", e);
  EXPECT_LE(e, bf16test::kUNetNmse);
}

}  // namespace
}  // namespace gen3d::models
