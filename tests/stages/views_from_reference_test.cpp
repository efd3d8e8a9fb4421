// views_from_reference run alone through StageRunner: a two-colour reference fitted onto a sphere's
// silhouette, mirrored onto the back view, and an extra image on a side view.

#include <gtest/gtest.h>

#include <cmath>
#include <memory>
#include <sstream>

#include <spdlog/sinks/ostream_sink.h>
#include <spdlog/spdlog.h>

#include "pipeline/error.h"
#include "stage_test_helpers.h"
#include "support/paths.h"

namespace gen3d::test {
namespace {

using nlohmann::json;

constexpr int kSize = 32;

// The message of the ConfigError `f` throws, "" when it throws none.
template <class F>
std::string config_error_of(F&& f) {
  try {
    f();
  } catch (const pipeline::ConfigError& e) {
    return e.what();
  }
  return "";
}

// Left half red, right half blue, 16 × 8; RGB, so all of it is the object.
Image red_blue() {
  Image img(16, 8, 3);
  for (int y = 0; y < img.height; ++y)
    for (int x = 0; x < img.width; ++x) img.at(x, y)[x < 8 ? 0 : 2] = 1.0f;
  return img;
}

// The reference on a sphere seen from level views at these azimuths.
void reference_on(pipeline::StageRunner& r, const std::vector<double>& azimuths) {
  r.input<render::ViewSet>("views", level_views(azimuths));
  r.input<mesh::Mesh>("mesh", smooth_sphere()).input<Image>("image", red_blue());
  r.param("resolution", kSize);
}

TEST(ViewsFromReference, FitsTheReferenceOntoTheSilhouetteAndMirrorsItOntoTheBack) {
  const std::string dir = temp_dir("views_from_reference");
  pipeline::StageRunner save = runner("save_images");
  save.input<stages::ImageList>("images", stages::ImageList{solid(4, kGreen)});
  save.param("dir", dir).param("prefix", "green_").run();

  pipeline::StageRunner r = runner("views_from_reference");
  reference_on(r, {0, 90, 180, 270});
  r.param("mirror_back", true);
  r.param("extra_images", json::array({dir + "/green_0.png"}))
      .param("extra_views", json::array({3}));
  r.run();
  const auto images = r.output<stages::ImageList>("images");
  ASSERT_TRUE(images);
  ASSERT_EQ(images->size(), 4u);
  const Image& front = (*images)[0];
  ASSERT_EQ(front.width, kSize);
  ASSERT_EQ(front.channels, 3);
  // The sphere covers the middle of the view; outside its silhouette's box stays white.
  const int left = kSize / 2 - 6, right = kSize / 2 + 6, mid = kSize / 2;
  EXPECT_TRUE(near_rgb(front.at(0, 0), kWhite));
  EXPECT_TRUE(near_rgb(front.at(left, mid), kRed, 0.02f));
  EXPECT_TRUE(near_rgb(front.at(right, mid), kBlue, 0.02f));
  const Image& back = (*images)[2];
  EXPECT_TRUE(near_rgb(back.at(left, mid), kBlue, 0.02f)) << "mirrored";
  EXPECT_TRUE(near_rgb(back.at(right, mid), kRed, 0.02f));
  EXPECT_TRUE((*images)[1].empty()) << "no reference for the right view";
  EXPECT_TRUE(near_rgb((*images)[3].at(mid, mid), kGreen, 0.02f));
  const auto counters = r.profiler().counter_totals();
  EXPECT_EQ(counters.at("multiview.views_with_images"), 3.0);
  EXPECT_EQ(counters.at("raster_cache.rasterizations"), 3.0) << "one raster per placed view";
}

TEST(ViewsFromReference, MissingViewAndBadExtrasAreRefused) {
  pipeline::StageRunner r = runner("views_from_reference");
  reference_on(r, {0, 180});
  r.param("reference_view", 5);
  EXPECT_NE(error_of([&] { r.run(); }).find("view 5 does not exist (2 views)"), std::string::npos);

  pipeline::StageRunner lengths = runner("views_from_reference");
  reference_on(lengths, {0});
  lengths.param("extra_views", json::array({1, 2}));
  EXPECT_NE(config_error_of([&] { lengths.run(); }).find("same length"), std::string::npos);

  pipeline::StageRunner missing = runner("views_from_reference");
  reference_on(missing, {0});
  missing.param("extra_images", json::array({"no/such.png"}));
  missing.param("extra_views", json::array({0}));
  EXPECT_NE(config_error_of([&] { missing.run(); }).find("reference image not found: no/such.png"),
            std::string::npos);
}

// An RGBA reference: a disc (the sphere's silhouette, drawn smaller and off-centre) left half red,
// right half blue, plus a thin stray line that widens its bounding box.
Image disc_with_stray_line() {
  Image img(64, 64, 4, 1.0f);
  for (int y = 0; y < img.height; ++y)
    for (int x = 0; x < img.width; ++x) {
      float* p = img.at(x, y);
      const bool disc = std::hypot(x - 24.5, y - 30.5) < 12.0;
      p[3] = disc || (y == 60 && x > 2) ? 1.0f : 0.0f;
      if (disc) p[0] = x < 24 ? 1.0f : 0.0f, p[1] = 0.0f, p[2] = x < 24 ? 0.0f : 1.0f;
    }
  return img;
}

TEST(ViewsFromReference, SilhouetteFitBeatsTheBoundingBoxAndReportsTheFit) {
  pipeline::StageRunner r = runner("views_from_reference");
  reference_on(r, {0});
  r.input<Image>("image", disc_with_stray_line()).param("fit", "silhouette");
  r.run();
  const auto counters = r.profiler().counter_totals();
  // The line stays outside the silhouette: it bounds the agreement at about 0.88.
  EXPECT_GT(counters.at("multiview.fit_view0.iou"), 0.8);
  EXPECT_GT(counters.at("multiview.fit_view0.iou"),
            counters.at("multiview.fit_view0.bbox_iou") + 0.1);
  const Image& front = (*r.output<stages::ImageList>("images"))[0];
  const int mid = kSize / 2;
  EXPECT_TRUE(near_rgb(front.at(mid - 5, mid), kRed, 0.05f));
  EXPECT_TRUE(near_rgb(front.at(mid + 5, mid), kBlue, 0.05f));

  pipeline::StageRunner box = runner("views_from_reference");
  reference_on(box, {0});
  box.input<Image>("image", disc_with_stray_line());
  box.run();
  EXPECT_EQ(box.profiler().counter_totals().count("multiview.fit_view0.iou"), 0u)
      << "the bounding-box fit (the default) reports no fit";
}

TEST(ViewsFromReference, APoorFitIsWarnedAbout) {
  // Only the disc's left half is the object, as when background removal takes a white object's
  // white half for the white background: no placement covers the silhouette.
  Image half = disc_with_stray_line();
  for (int y = 0; y < half.height; ++y)
    for (int x = 24; x < half.width; ++x) half.at(x, y)[3] = 0.0f;
  std::ostringstream log;
  const auto previous = spdlog::default_logger();
  auto logger = std::make_shared<spdlog::logger>(
      "capture", std::make_shared<spdlog::sinks::ostream_sink_mt>(log));
  spdlog::set_default_logger(logger);
  pipeline::StageRunner r = runner("views_from_reference");
  reference_on(r, {0});
  r.input<Image>("image", half).param("fit", "silhouette");
  r.run();
  spdlog::set_default_logger(previous);
  EXPECT_LT(r.profiler().counter_totals().at("multiview.fit_view0.iou"), 0.8);
  EXPECT_NE(log.str().find("agrees poorly with the mesh's silhouette on view 0"), std::string::npos)
      << log.str();

  std::ostringstream quiet;
  spdlog::set_default_logger(std::make_shared<spdlog::logger>(
      "capture", std::make_shared<spdlog::sinks::ostream_sink_mt>(quiet)));
  pipeline::StageRunner whole = runner("views_from_reference");
  reference_on(whole, {0});
  whole.input<Image>("image", disc_with_stray_line()).param("fit", "silhouette");
  whole.run();
  spdlog::set_default_logger(previous);
  EXPECT_EQ(quiet.str().find("agrees poorly"), std::string::npos) << quiet.str();
}

TEST(ViewsFromReference, AMeshOutsideTheViewIsAnError) {
  mesh::Mesh far = *smooth_sphere();
  for (auto& p : far.positions)
    for (int k = 0; k < 3; ++k) p[k] += 10.0f;
  pipeline::StageRunner r = runner("views_from_reference");
  reference_on(r, {0});
  r.input<mesh::Mesh>("mesh", std::move(far));
  EXPECT_NE(error_of([&] { r.run(); }).find("not visible from the reference view"),
            std::string::npos);
}

}  // namespace
}  // namespace gen3d::test
