// Image stages: the reference image's path to a delit, centred RGBA picture.

#include <filesystem>

#include <spdlog/spdlog.h>

#include "mesh/io.h"
#include "render/image_ops.h"
#include "stages/register.h"
#include "stages/types.h"

namespace gen3d::stages {
namespace {

using pipeline::Range;
using pipeline::StageContext;
using pipeline::StageContract;

class LoadImage final : public pipeline::Stage {
 public:
  StageContract contract() const override {
    return StageContract("load_image", "Read a PNG/JPEG/WebP image with OpenCV; alpha is kept.")
        .output<mesh::Image>("image", "float RGB(A) in [0, 1]")
        .required<std::string>("path", "image file");
  }
  void check(const pipeline::ParamMap& params, std::vector<std::string>& problems) const override {
    const auto& path = std::get<std::string>(params.at("path"));
    if (!std::filesystem::is_regular_file(path))
      problems.push_back("image file not found: " + path);
  }
  void run(StageContext& ctx) const override {
    const auto path = ctx.param<std::string>("path");
    auto image = std::make_shared<mesh::Image>(mesh::load_image(path));
    if (image->channels == 4) {
      bool any = false;
      for (size_t i = 3; i < image->pixels.size() && !any; i += 4) any = image->pixels[i] > 0.0f;
      if (!any) throw std::runtime_error(path + ": the image is fully transparent");
    }
    spdlog::info("{}: {} ({}x{}, {} channels)", ctx.node_id(), path, image->width, image->height,
                 image->channels);
    ctx.out("image", std::move(image));
  }
};

class RecenterImage final : public pipeline::Stage {
 public:
  StageContract contract() const override {
    return StageContract("recenter_image",
                         "Crop to the alpha bounding box, add a border, centre in a square "
                         "(the reference's recenter); RGB passes through.")
        .input<mesh::Image>("image")
        .output<mesh::Image>("image")
        .param<double>("border_ratio", 0.2, Range{0.0, 2.0}, "border, as a fraction of the crop");
  }
  void run(StageContext& ctx) const override {
    auto in = ctx.in<mesh::Image>("image");
    ctx.out("image", std::make_shared<mesh::Image>(
                         render::recenter_image(*in, ctx.param<float>("border_ratio"))));
  }
};

class RemoveBackground final : public pipeline::Stage {
 public:
  StageContract contract() const override {
    return StageContract("remove_background",
                         "Give an RGB image an alpha mask by a classical method (border-colour "
                         "threshold, optionally refined by GrabCut); not the learned rembg. RGBA "
                         "passes through.")
        .input<mesh::Image>("image")
        .output<mesh::Image>("image", "RGBA")
        .choice("method", "threshold", {"threshold", "grabcut"}, "segmentation method")
        .param<double>("threshold", 0.08, Range{0.0, 1.8},
                       "RGB distance from the background colour");
  }
  void run(StageContext& ctx) const override {
    render::BackgroundOptions options;
    options.method = ctx.param<std::string>("method");
    options.threshold = ctx.param<float>("threshold");
    ctx.out("image", std::make_shared<mesh::Image>(
                         render::remove_background(*ctx.in<mesh::Image>("image"), options)));
  }
};

class Delight final : public pipeline::Stage {
 public:
  StageContract contract() const override {
    return StageContract(
               "delight",
               "Remove shading and highlights from the reference image. method classical: "
               "shading estimate + highlight inpainting + the reference's colour "
               "re-matching (OpenCV; an approximation, not the learned delighter).")
        .input<mesh::Image>("image")
        .output<mesh::Image>("image")
        .choice("method", "classical", {"classical", "none", "model"},
                "classical (OpenCV), none (pass through) or model (the learned network)")
        .param<double>("strength", 0.8, Range{0.0, 1.0}, "how much of the shading to divide out");
  }
  void check(const pipeline::ParamMap& params, std::vector<std::string>& problems) const override {
    if (std::get<std::string>(params.at("method")) == "model")
      problems.push_back(
          "delight method 'model' needs the learned delighting weights: not available in this "
          "build (use classical or none)");
  }
  void run(StageContext& ctx) const override {
    auto in = ctx.in<mesh::Image>("image");
    if (ctx.param<std::string>("method") == "none") {
      ctx.out("image", in);
      return;
    }
    render::DelightOptions options;
    options.strength = ctx.param<float>("strength");
    render::DelightStats stats;
    auto out = std::make_shared<mesh::Image>(render::delight_classical(*in, options, &stats));
    ctx.gauge("delight.highlight_fraction", stats.highlight_fraction);
    ctx.out("image", std::move(out));
  }
};

// Writes images to disk (views, maps) for inspection or as inputs of a later `multiview` files run.
class SaveImages final : public pipeline::Stage {
 public:
  StageContract contract() const override {
    return StageContract("save_images",
                         "Write one PNG per view image as <dir>/<prefix><index>.png (atomically).")
        .input<ImageList>("images")
        .required<std::string>("dir", "output directory; created when missing")
        .param<std::string>("prefix", "view_", "file name prefix");
  }
  void run(StageContext& ctx) const override {
    auto images = ctx.in<ImageList>("images");
    const auto dir = ctx.param<std::string>("dir");
    std::filesystem::create_directories(dir);
    for (size_t v = 0; v < images->size(); ++v)
      if (!(*images)[v].empty())
        mesh::save_image((*images)[v],
                         dir + "/" + ctx.param<std::string>("prefix") + std::to_string(v) + ".png");
  }
};

}  // namespace

void register_image_stages(pipeline::Registry& registry) {
  registry.add<SaveImages>();
  registry.add<LoadImage>();
  registry.add<RecenterImage>();
  registry.add<RemoveBackground>();
  registry.add<Delight>();
}

}  // namespace gen3d::stages
