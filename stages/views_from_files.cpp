// views_from_files: the view images read from disk (e.g. made by a multiview model elsewhere).

#include <filesystem>
#include <vector>

#include <fmt/format.h>
#include <tbb/parallel_for.h>

#include "image/io.h"
#include "mesh/io.h"
#include "render/view_images.h"
#include "stages/register.h"
#include "stages/shared.h"
#include "stages/types.h"

namespace gen3d::stages {
namespace {

namespace fs = std::filesystem;
using pipeline::Range;
using pipeline::StageContext;
using pipeline::StageContract;

class ViewsFromFiles final : public pipeline::Stage {
 public:
  StageContract contract() const override {
    return StageContract("views_from_files",
                         "The image of every view read from disk: RGB on white at the render "
                         "size, in view order.")
        .semantics_version(2)  // 2: the target input and the fit output
        .input<render::ViewSet>("views")
        .optional_input<mesh::Mesh>("target",
                                    "the normalized mesh the views will be baked onto: its "
                                    "silhouettes measure how exactly the images land on it")
        .output<ImageList>("images", "RGB, one per view")
        .output<ReferenceFit>("fit",
                              "the lowest IoU over the views of the image's object (its pixels "
                              "that are not white once composited over white) and the target's "
                              "silhouette (0 without a target): how exactly the images land, for "
                              "the bake's edge window")
        .param<int>("resolution", 2048, Range{16, 16384}, "view image size")
        .param<std::vector<std::string>>("files", std::vector<std::string>{},
                                         "one image per view, in view order")
        .param<std::string>("dir", "", "a directory of images, one per view, sorted by name")
        .param<std::string>("match_dir", "",
                            "a directory of images these must match one for one, in number and "
                            "size (the albedo views beside metallic-roughness views); empty: "
                            "none")
        .reads_files("files")
        .reads_files("dir")
        .reads_files("match_dir");
  }
  void check(const pipeline::ParamMap& p, std::vector<std::string>& problems) const override {
    const auto& files = std::get<std::vector<std::string>>(p.at("files"));
    const auto& dir = std::get<std::string>(p.at("dir"));
    if (files.empty() == dir.empty())
      problems.push_back("views_from_files needs exactly one of \"files\" and \"dir\"");
    for (const auto& f : files)
      if (!fs::is_regular_file(f)) problems.push_back("view image not found: " + f);
    if (!dir.empty() && !fs::is_directory(dir))
      problems.push_back("views directory not found: " + dir);
    else if (!dir.empty() && render::list_view_images(dir).empty())
      problems.push_back("views directory has no images: " + dir);
    const auto& match = std::get<std::string>(p.at("match_dir"));
    if (match.empty()) return;
    if (!fs::is_directory(match)) {
      problems.push_back("directory of the images to match not found: " + match);
    } else if (!dir.empty() && fs::is_directory(dir)) {
      const size_t n = render::list_view_images(dir).size();
      const size_t m = render::list_view_images(match).size();
      if (n != m)
        problems.push_back(
            fmt::format("{} has {} images but {} has {}: one per view in each", dir, n, match, m));
    }
  }
  void run(StageContext& ctx) const override {
    auto views = ctx.in<render::ViewSet>("views");
    const int size = ctx.param<int>("resolution");
    auto files = ctx.param<std::vector<std::string>>("files");
    if (files.empty()) files = render::list_view_images(ctx.param<std::string>("dir"));
    if (files.size() != views->size())
      throw std::runtime_error(
          fmt::format("{} view images for {} views", files.size(), views->size()));
    const std::string match = ctx.param<std::string>("match_dir");
    const std::vector<std::string> matched =
        match.empty() ? std::vector<std::string>{} : render::list_view_images(match);
    if (!match.empty() && matched.size() != files.size())
      throw std::runtime_error(fmt::format("{} view images but {} in {}: one per view in each",
                                           files.size(), matched.size(), match));
    const mesh::Mesh* target =
        ctx.has_input("target") ? ctx.in<mesh::Mesh>("target").get() : nullptr;
    const uint64_t fingerprint = target ? target->fingerprint() : 0;
    auto images = std::make_shared<ImageList>(files.size());
    std::vector<double> iou(files.size(), 0.0);
    std::vector<std::string> mismatch(files.size());
    tbb::parallel_for(size_t{0}, files.size(), [&](size_t v) {
      const image::Image loaded = image::load_image(files[v]);
      if (!matched.empty()) {
        // Resizing would hide it: images of different sizes were not made for the same views.
        const image::Image other = image::load_image(matched[v]);
        if (other.width != loaded.width || other.height != loaded.height)
          mismatch[v] = fmt::format("{} is {}x{} but {} is {}x{}", files[v], loaded.width,
                                    loaded.height, matched[v], other.width, other.height);
      }
      (*images)[v] = render::view_image_rgb(loaded, size);
      if (target) {
        // The raster the bake will look up for this view (same pose and size).
        auto raster = raster_cache(ctx).get(fingerprint, *target, (*views)[v].camera, size, size);
        iou[v] = render::mask_iou(render::non_white_mask((*images)[v]),
                                  render::silhouette_mask(*raster));
      }
    });
    for (const std::string& m : mismatch)
      if (!m.empty()) throw std::runtime_error(m + ": the images must match one for one");
    auto fit = target ? view_fit(ctx, iou) : std::make_shared<ReferenceFit>();
    report_view_images(ctx, *images);
    ctx.out("images", std::move(images));
    ctx.out("fit", std::move(fit));
  }
};

}  // namespace

void register_views_from_files(pipeline::Registry& registry) {
  registry.add<ViewsFromFiles>();
}

}  // namespace gen3d::stages
