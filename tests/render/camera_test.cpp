#include "render/camera.h"

#include <gtest/gtest.h>

#include <cmath>

namespace gen3d::render {
namespace {

// Internal frame = (-x, z, -y) of the input (glTF/OBJ) frame.
mesh::Vec3 internal_from_input(float x, float y, float z) {
  return {-x, z, -y};
}

// Pixel-space direction (column, row) in which an input-frame axis moves on screen for `cam`.
std::array<float, 2> screen_direction(const Camera& cam, mesh::Vec3 input_axis) {
  const mesh::Vec3 p = internal_from_input(input_axis[0], input_axis[1], input_axis[2]);
  const std::vector<mesh::Vec3> pts = {{0, 0, 0}, {p[0] * 0.1f, p[1] * 0.1f, p[2] * 0.1f}};
  const auto clip = clip_positions(pts, cam);
  // Rows grow with NDC y (reference layout), columns with NDC x.
  return {clip[1][0] - clip[0][0], clip[1][1] - clip[0][1]};
}

TEST(Camera, Hunyuan6PresetMatchesOfficialViews) {
  const ViewSet set = ViewSet::hunyuan6();
  ASSERT_EQ(set.size(), 6u);
  const double azim[6] = {0, 90, 180, 270, 0, 180};
  const double elev[6] = {0, 0, 0, 0, 90, -90};
  const double weight[6] = {1, 0.1, 0.5, 0.1, 0.05, 0.05};
  for (size_t i = 0; i < 6; ++i) {
    EXPECT_EQ(set[i].camera.azim, azim[i]);
    EXPECT_EQ(set[i].camera.elev, elev[i]);
    EXPECT_EQ(set[i].weight, weight[i]);
    EXPECT_EQ(set[i].camera.distance, 1.45);
    EXPECT_EQ(set[i].camera.ortho_scale, 1.2);
  }
}

TEST(Camera, ModelViewIsRigidAndPlacesCameraAtDistance) {
  for (const View& v : ViewSet::hunyuan6().views) {
    const Mat4 m = v.camera.model_view();
    for (int i = 0; i < 3; ++i) {
      for (int j = 0; j < 3; ++j) {
        double dot = 0;
        for (int k = 0; k < 3; ++k) dot += double(m[i * 4 + k]) * m[j * 4 + k];
        EXPECT_NEAR(dot, i == j ? 1.0 : 0.0, 1e-6);
      }
    }
    // The origin lands at distance 1.45 straight ahead (-z).
    EXPECT_NEAR(m[3], 0.0f, 1e-6f);
    EXPECT_NEAR(m[7], 0.0f, 1e-6f);
    EXPECT_NEAR(m[11], -1.45f, 1e-6f);
    EXPECT_EQ(m[12], 0.0f);
    EXPECT_EQ(m[15], 1.0f);
  }
}

TEST(Camera, ProjectionIsReferenceOrthographic) {
  const Mat4 p = Camera{}.projection();
  EXPECT_EQ(p[0], static_cast<float>(1.0 / 0.6));
  EXPECT_EQ(p[5], static_cast<float>(1.0 / 0.6));
  EXPECT_EQ(p[10], static_cast<float>(-2.0 / 99.9));
  EXPECT_EQ(p[11], static_cast<float>(-100.1 / 99.9));
  EXPECT_EQ(p[15], 1.0f);
  EXPECT_EQ(p[3], 0.0f);
  EXPECT_EQ(p[14], 0.0f);
}

// The image axes of README's view table: every view is an upright, unmirrored photograph.
TEST(Camera, ImageAxesMatchReferenceTable) {
  struct Expect {
    mesh::Vec3 col_axis;  // input-frame axis that moves +column
    mesh::Vec3 row_axis;  // input-frame axis that moves +row (down)
  };
  const Expect table[6] = {
      {{1, 0, 0}, {0, -1, 0}}, {{0, 0, -1}, {0, -1, 0}}, {{-1, 0, 0}, {0, -1, 0}},
      {{0, 0, 1}, {0, -1, 0}}, {{1, 0, 0}, {0, 0, 1}},   {{-1, 0, 0}, {0, 0, 1}},
  };
  const ViewSet set = ViewSet::hunyuan6();
  for (size_t i = 0; i < 6; ++i) {
    const auto dc = screen_direction(set[i].camera, table[i].col_axis);
    const auto dr = screen_direction(set[i].camera, table[i].row_axis);
    EXPECT_GT(dc[0], 0.1f) << "view " << i;
    EXPECT_NEAR(dc[1], 0.0f, 1e-5f) << "view " << i;
    EXPECT_GT(dr[1], 0.1f) << "view " << i;
    EXPECT_NEAR(dr[0], 0.0f, 1e-5f) << "view " << i;
  }
}

TEST(Camera, TransformPointsAddsTranslation) {
  Mat4 m{};
  m[0] = m[5] = m[10] = m[15] = 1.0f;
  m[3] = 1.0f;
  m[7] = -2.0f;
  const std::vector<mesh::Vec3> pts = {{1, 2, 3}};
  const auto out = transform_points(m, pts);
  EXPECT_EQ(out[0], (mesh::Vec4{2, 0, 3, 1}));
}

}  // namespace
}  // namespace gen3d::render
