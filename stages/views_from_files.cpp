// views_from_files: the view images read from disk (e.g. made by a multiview model elsewhere).

#include <filesystem>

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
        .input<render::ViewSet>("views")
        .output<ImageList>("images", "RGB, one per view")
        .param<int>("resolution", 2048, Range{16, 16384}, "view image size")
        .param<std::vector<std::string>>("files", std::vector<std::string>{},
                                         "one image per view, in view order")
        .param<std::string>("dir", "", "a directory of images, one per view, sorted by name")
        .reads_files("files")
        .reads_files("dir");
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
  }
  void run(StageContext& ctx) const override {
    auto views = ctx.in<render::ViewSet>("views");
    const int size = ctx.param<int>("resolution");
    auto files = ctx.param<std::vector<std::string>>("files");
    if (files.empty()) files = render::list_view_images(ctx.param<std::string>("dir"));
    if (files.size() != views->size())
      throw std::runtime_error(
          fmt::format("{} view images for {} views", files.size(), views->size()));
    auto images = std::make_shared<ImageList>(files.size());
    tbb::parallel_for(size_t{0}, files.size(), [&](size_t v) {
      (*images)[v] = render::view_image_rgb(image::load_image(files[v]), size);
    });
    report_view_images(ctx, *images);
    ctx.out("images", std::move(images));
  }
};

}  // namespace

void register_views_from_files(pipeline::Registry& registry) {
  registry.add<ViewsFromFiles>();
}

}  // namespace gen3d::stages
