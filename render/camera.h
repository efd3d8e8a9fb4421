#pragma once
// Cameras of the Hunyuan3D-2 texgen renderer: orbit poses given by elevation/azimuth around the
// origin of the renderer's internal frame, orthographic projection, and the official view set.
//
// Internal frame = the mesh after loading/normalization (see shared/golden/texgen/README.md §1-2):
// Z is "up" for the orbit, and elev/azim are in degrees. elev +90 looks down from input +Y;
// azim turns the camera from input +Z toward input +X.

#include <array>
#include <cstddef>
#include <span>
#include <vector>

#include "mesh/mesh.h"

namespace gen3d::render {

// Row-major 4x4 float32 matrix: m[r * 4 + c].
using Mat4 = std::array<float, 16>;

struct Camera {
  double elev = 0.0;         // elevation in degrees (+90 = above the object)
  double azim = 0.0;         // azimuth in degrees (0 = front, 90 = right side)
  double distance = 1.45;    // orbit radius (camera distance from the origin)
  double ortho_scale = 1.2;  // full width/height of the orthographic view volume
  double near_plane = 0.1;   // near clipping distance of the projection matrix
  double far_plane = 100.0;  // far clipping distance of the projection matrix

  // World (internal frame) -> camera matrix, computed in float64 and rounded to float32, exactly
  // like the reference's get_mv_matrix (right-handed OpenGL camera looking down -z).
  Mat4 model_view() const;
  // OpenGL orthographic projection, computed in float64 and rounded to float32.
  Mat4 projection() const;
};

// One pose of a multi-view set with its merge weight.
struct View {
  Camera camera;        // pose and projection
  double weight = 1.0;  // merge weight of this view's back-projection
};

struct ViewSet {
  std::vector<View> views;

  size_t size() const { return views.size(); }
  const View& operator[](size_t i) const { return views[i]; }

  // The official six Hunyuan3D-2 views: azim 0/90/180/270/0/180, elev 0/0/0/0/90/-90,
  // weights 1/0.1/0.5/0.1/0.05/0.05.
  static ViewSet hunyuan6(double distance = 1.45, double ortho_scale = 1.2);
};

// out[i] = M * [p_i, 1] in float32, summed left to right (x, y, z, then w).   positions: V x 3
std::vector<mesh::Vec4> transform_points(const Mat4& m, std::span<const mesh::Vec3> positions);
// out[i] = M * p_i for homogeneous points.                                       points: V x 4
std::vector<mesh::Vec4> transform_points(const Mat4& m, std::span<const mesh::Vec4> points);

// Clip coordinates P * (MV * [p, 1]) as the reference computes them (two float32 products).
std::vector<mesh::Vec4> clip_positions(std::span<const mesh::Vec3> positions, const Camera& camera);

}  // namespace gen3d::render
