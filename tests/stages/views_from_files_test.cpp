// views_from_files run alone through StageRunner on images the save_images stage wrote.

#include <fstream>

#include <gtest/gtest.h>

#include "mesh/normalize.h"
#include "pipeline/error.h"
#include "stage_test_helpers.h"
#include "support/paths.h"

namespace gen3d::test {
namespace {

using nlohmann::json;

// A 16 × 16 image of one value per channel.
Image filled(int channels, std::initializer_list<float> value) {
  Image img(16, 16, channels);
  for (size_t i = 0; i < img.pixels.size(); ++i) img.pixels[i] = value.begin()[i % channels];
  return img;
}

void save(const Image& image, const std::string& dir, const std::string& prefix) {
  pipeline::StageRunner r = runner("save_images");
  r.input<stages::ImageList>("images", stages::ImageList{image}).param("dir", dir);
  r.param("prefix", prefix).run();
}

// Two views' images in a folder: a_0.png (transparent red) sorts before b_0.png (grey).
std::string views_dir(const std::string& name) {
  const std::string dir = temp_dir(name);
  save(filled(4, {1, 0, 0, 0}), dir, "a_");
  save(filled(3, {0.5f, 0.5f, 0.5f}), dir, "b_");
  std::ofstream(dir + "/notes.txt") << "not an image";
  return dir;
}

// A front and a back view.
void two_views(pipeline::StageRunner& r) {
  r.input<render::ViewSet>("views", level_views({0, 180}));
}

TEST(ViewsFromFiles, DirectoryImagesBecomeRgbOnWhiteAtTheRenderSize) {
  pipeline::StageRunner r = runner("views_from_files");
  two_views(r);
  r.param("dir", views_dir("views_from_files_dir")).param("resolution", 32);
  r.run();
  const auto images = r.output<stages::ImageList>("images");
  ASSERT_TRUE(images);
  ASSERT_EQ(images->size(), 2u);
  for (const auto& img : *images) {
    EXPECT_EQ(img.width, 32);
    EXPECT_EQ(img.height, 32);
    EXPECT_EQ(img.channels, 3);
  }
  EXPECT_TRUE(near_rgb((*images)[0].at(5, 5), kWhite)) << "transparent: white behind it";
  EXPECT_TRUE(near_rgb((*images)[1].at(7, 9), {0.5f, 0.5f, 0.5f}, 0.01f));
  EXPECT_EQ(r.profiler().counter_totals().at("multiview.views_with_images"), 2.0);
}

TEST(ViewsFromFiles, ExplicitFilesKeepTheirOrder) {
  const std::string dir = views_dir("views_from_files_list");
  pipeline::StageRunner r = runner("views_from_files");
  two_views(r);
  r.param("files", json::array({dir + "/b_0.png", dir + "/a_0.png"})).param("resolution", 16);
  r.run();
  const auto images = r.output<stages::ImageList>("images");
  EXPECT_TRUE(near_rgb((*images)[0].at(0, 0), {0.5f, 0.5f, 0.5f}, 0.01f));
  EXPECT_TRUE(near_rgb((*images)[1].at(0, 0), kWhite));
}

// Renders of a red sphere saved as files land exactly on the sphere's silhouettes (the fit the
// bake narrows its edge window for); the same files on a smaller sphere do not.
TEST(ViewsFromFiles, FitMeasuresHowTheImagesCoverTheTarget) {
  mesh::Mesh red = *smooth_sphere();
  red.texture = std::make_shared<const Image>(solid(4, kRed));
  mesh::normalize_mesh(red);
  pipeline::StageRunner render = runner("views_from_mesh");
  two_views(render);
  render.input<mesh::Mesh>("mesh", red).param("resolution", 64).run();
  const std::string dir = temp_dir("views_from_files_fit");
  pipeline::StageRunner saver = runner("save_images");
  saver.input<stages::ImageList>("images", *render.output<stages::ImageList>("images"));
  saver.param("dir", dir).run();
  const auto fit_on = [&](const mesh::Mesh* target) {
    pipeline::StageRunner r = runner("views_from_files");
    two_views(r);
    r.param("dir", dir).param("resolution", 64);
    if (target) r.input<mesh::Mesh>("target", *target);
    r.run();
    return r.output<stages::ReferenceFit>("fit")->iou;
  };
  EXPECT_GT(fit_on(&red), 0.99);
  mesh::Mesh smaller = red;
  for (auto& p : smaller.positions)
    for (int k = 0; k < 3; ++k) p[k] *= 0.9f;
  const double off = fit_on(&smaller);
  EXPECT_GT(off, 0.6);
  EXPECT_LT(off, 0.97);
  EXPECT_EQ(fit_on(nullptr), 0.0);
}

TEST(ViewsFromFiles, WrongCountFailsAndBadParamsAreConfigErrors) {
  const std::string dir = views_dir("views_from_files_bad");
  pipeline::StageRunner one = runner("views_from_files");
  two_views(one);
  one.param("files", json::array({dir + "/b_0.png"}));
  EXPECT_NE(error_of([&] { one.run(); }).find("1 view images for 2 views"), std::string::npos);

  const auto problem = [&](const json& files, const std::string& views) {
    pipeline::StageRunner r = runner("views_from_files");
    two_views(r);
    r.param("files", files).param("dir", views);
    try {
      r.run();
    } catch (const pipeline::ConfigError& e) {
      return std::string(e.what());
    }
    return std::string();
  };
  EXPECT_NE(problem(json::array(), "").find("exactly one of"), std::string::npos);
  EXPECT_NE(problem(json::array({dir + "/b_0.png"}), dir).find("exactly one of"),
            std::string::npos);
  EXPECT_NE(problem(json::array({dir + "/none.png"}), "").find("view image not found"),
            std::string::npos);
  EXPECT_NE(problem(json::array(), dir + "/none").find("directory not found"), std::string::npos);
  EXPECT_NE(problem(json::array(), temp_dir("views_from_files_empty")).find("has no images"),
            std::string::npos);
}

// match_dir: a second set of views (metallic-roughness beside albedo) must pair one for one.
TEST(ViewsFromFiles, MatchDirRefusesAnotherCountOrSize) {
  const std::string albedo = views_dir("views_from_files_match_albedo");
  const auto run_with = [&](const std::string& dir) {
    pipeline::StageRunner r = runner("views_from_files");
    two_views(r);
    r.param("dir", dir).param("match_dir", albedo).param("resolution", 32);
    return error_of([&] { r.run(); });
  };
  EXPECT_EQ(run_with(views_dir("views_from_files_match_same")), "");

  const std::string one = temp_dir("views_from_files_match_one");
  save(filled(3, {0.5f, 0.5f, 0.5f}), one, "a_");
  EXPECT_NE(run_with(one).find("has 1 images but"), std::string::npos) << run_with(one);

  const std::string big = temp_dir("views_from_files_match_big");
  save(filled(3, {0.5f, 0.5f, 0.5f}), big, "a_");
  save(Image(20, 16, 3), big, "b_");
  const std::string e = run_with(big);
  EXPECT_NE(e.find("is 20x16 but"), std::string::npos) << e;
  EXPECT_NE(e.find("must match one for one"), std::string::npos) << e;

  EXPECT_NE(run_with(albedo + "/none").find("directory not found"), std::string::npos);
}

}  // namespace
}  // namespace gen3d::test
