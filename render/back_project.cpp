#include "render/back_project.h"

#include <oneapi/tbb/blocked_range.h>
#include <oneapi/tbb/parallel_for.h>
#include <oneapi/tbb/parallel_reduce.h>

#include <algorithm>
#include <cmath>
#include <limits>
#include <numbers>
#include <opencv2/core.hpp>
#include <opencv2/imgproc.hpp>
#include <string>

#include "mesh/normals.h"
#include "render/error.h"
#include "render/interpolate.h"
#include "render/maps.h"

namespace gen3d::render {
namespace {

using Vec1 = std::array<float, 1>;

template <class F>
void parallel_rows(int height, F&& body) {
  tbb::parallel_for(tbb::blocked_range<int>(0, height, 8), [&](const tbb::blocked_range<int>& r) {
    for (int y = r.begin(); y < r.end(); ++y) body(y);
  });
}

// cosine_similarity((0, 0, -1), n) as torch 1.13 computes it: w12 / sqrt(max(w1 * w2, eps^2))
// with w12 = -n_z, w1 = 1, w2 = (n_x^2 + n_y^2) + n_z^2, eps = 1e-8. Bit-exact against the golden
// vK_bpdbg_cos_view.npy.
inline float view_cosine(const mesh::Vec3& n) {
  const float sq = (n[0] * n[0] + n[1] * n[1]) + n[2] * n[2];
  return -n[2] / std::sqrt(std::max(sq, 1e-16f));
}

float cos_threshold(double degrees) {
  return static_cast<float>(std::cos(degrees / 180.0 * std::numbers::pi));
}

void check_view_inputs(const char* fn, const mesh::Mesh& mesh, const Raster& raster,
                       const mesh::Image& view) {
  if (!mesh.has_uvs() || mesh.uv_faces.size() != mesh.faces.size()) {
    throw RenderError(std::string(fn) + ": the mesh has no UVs (uv_faces per face)");
  }
  if (view.width != raster.width || view.height != raster.height || view.channels < 1 ||
      view.pixels.size() != static_cast<size_t>(view.width) * view.height * view.channels) {
    throw RenderError(std::string(fn) + ": view image is " + std::to_string(view.width) + "x" +
                      std::to_string(view.height) + "x" + std::to_string(view.channels) +
                      " but the raster is " + std::to_string(raster.width) + "x" +
                      std::to_string(raster.height));
  }
  int32_t max_id = 0;
  for (int32_t id : raster.face_id) max_id = std::max(max_id, id);
  if (static_cast<size_t>(max_id) > mesh.faces.size()) {
    throw RenderError(std::string(fn) + ": raster refers to face " + std::to_string(max_id) +
                      " but the mesh has " + std::to_string(mesh.faces.size()));
  }
}

std::vector<mesh::Vec3> camera_positions(const mesh::Mesh& mesh, const Camera& camera) {
  const std::vector<mesh::Vec4> h = transform_points(camera.model_view(), mesh.positions);
  std::vector<mesh::Vec3> out(h.size());
  for (size_t i = 0; i < h.size(); ++i) out[i] = {h[i][0] / h[i][3], h[i][1] / h[i][3], h[i][2] / h[i][3]};
  return out;
}

// Eroded coverage AND NOT dilated edges, with a (2k+1)^2 box window. Outside the image counts as
// covered for the erosion and as no edge for the dilation (OpenCV's default morphology borders,
// the same as the reference's zero-padded convolutions).
void splat_mask(const cv::Mat& covered, const cv::Mat& edges, int k, cv::Mat& eroded,
                cv::Mat& dilated, cv::Mat& mask) {
  if (k > 0) {
    const cv::Mat kernel = cv::getStructuringElement(cv::MORPH_RECT, cv::Size(2 * k + 1, 2 * k + 1));
    cv::erode(covered, eroded, kernel);
    cv::dilate(edges, dilated, kernel);
  } else {
    eroded = covered.clone();
    dilated = edges.clone();
  }
  cv::Mat not_edge;
  cv::bitwise_not(dilated, not_edge);
  cv::bitwise_and(eroded, not_edge, mask);
}

std::vector<uint8_t> to_vector(const cv::Mat& m) {
  return std::vector<uint8_t>(m.data, m.data + m.total());
}

}  // namespace

int bake_kernel_half_size(int render_size) {
  return static_cast<int>((2.0 / 512.0) * static_cast<double>(render_size));
}

std::vector<mesh::Vec3> camera_space_normals(const mesh::Mesh& mesh, const Camera& camera) {
  mesh::Mesh cam;
  cam.positions = camera_positions(mesh, camera);
  cam.faces = mesh.faces;
  return mesh::vertex_normals_face_mean(cam);
}

BackProjection back_project(const mesh::Mesh& mesh, const Raster& raster, const Camera& camera,
                            const mesh::Image& view, const BakeOptions& options,
                            BackProjectDebug* debug) {
  check_view_inputs("back_project", mesh, raster, view);
  const int T = options.texture_size;
  if (T < 2 || T > 65536) {
    throw RenderError("back_project: texture_size " + std::to_string(T) + " out of range 2..65536");
  }
  const int W = raster.width, H = raster.height, C = view.channels;
  const size_t N = raster.pixel_count();

  // 1. Camera-space positions and unweighted vertex normals (inward, like the reference's).
  mesh::Mesh cam;
  cam.positions = camera_positions(mesh, camera);
  cam.faces = mesh.faces;
  const std::vector<mesh::Vec3> normals = mesh::vertex_normals_face_mean(cam);

  // 2. Per pixel: camera z, cosine and UV of the visible surface.
  std::vector<float> z(N, 0.0f), cosv(N, 0.0f), uv(N * 2, 0.0f);
  std::vector<Vec1> zattr(cam.positions.size());
  for (size_t i = 0; i < zattr.size(); ++i) zattr[i] = {cam.positions[i][2]};
  parallel_rows(H, [&](int y) {
    for (int x = 0; x < W; ++x) {
      const size_t p = static_cast<size_t>(y) * W + x;
      const int32_t id = raster.face_id[p];
      if (id == 0) continue;
      const float* b = &raster.bary[p * 3];
      z[p] = interpolate_pixel<1>(b, std::span<const Vec1>(zattr), mesh.faces[id - 1])[0];
      cosv[p] = view_cosine(interpolate_pixel<3>(b, std::span<const mesh::Vec3>(normals), mesh.faces[id - 1]));
      const mesh::Vec2 t = interpolate_pixel<2>(b, std::span<const mesh::Vec2>(mesh.uvs), mesh.uv_faces[id - 1]);
      uv[p * 2] = t[0];
      uv[p * 2 + 1] = t[1];
    }
  });

  // 3. Depth normalized over covered pixels (nearest 1, farthest 0), 8-bit, Canny 30/80.
  float zmin = std::numeric_limits<float>::infinity(), zmax = -zmin;
  for (size_t p = 0; p < N; ++p) {
    if (raster.face_id[p] == 0) continue;
    zmin = std::min(zmin, z[p]);
    zmax = std::max(zmax, z[p]);
  }
  cv::Mat depth8(H, W, CV_8U), covered(H, W, CV_8U);
  const float range = zmax - zmin;
  parallel_rows(H, [&](int y) {
    for (int x = 0; x < W; ++x) {
      const size_t p = static_cast<size_t>(y) * W + x;
      const bool cov = raster.face_id[p] != 0;
      covered.data[p] = cov ? 255 : 0;
      uint8_t d = 0;
      if (cov && range > 0.0f) {
        const float v = (z[p] - zmin) / range * 255.0f;
        d = v <= 0.0f ? 0 : (v >= 255.0f ? 255 : static_cast<uint8_t>(v));
      }
      depth8.data[p] = d;
    }
  });
  cv::Mat edges;
  cv::Canny(depth8, edges, 30.0, 80.0, 3, false);

  // 4-5. Angle threshold, erosion/dilation window from the configured render size.
  cv::Mat eroded, dilated, mask;
  splat_mask(covered, edges, bake_kernel_half_size(options.render_size), eroded, dilated, mask);
  const float thr = cos_threshold(options.angle_threshold);
  if (debug) {
    debug->canny_input = to_vector(depth8);
    debug->canny_edges = to_vector(edges);
    debug->mask_eroded = to_vector(eroded);
    debug->edges_dilated = to_vector(dilated);
    debug->splat_mask = to_vector(mask);
    debug->cos_view = cosv;
  }

  // 6. Linear grid put: four passes (corner 00, 01, 10, 11), each in pixel order, as the
  // reference's scatter_add calls accumulate; then divide by the weight sum.
  struct Splat {
    uint32_t pixel;
    int32_t r0, c0;
    float h, w;
  };
  std::vector<Splat> splats;
  const float tm1 = static_cast<float>(T - 1);
  for (size_t p = 0; p < N; ++p) {
    if (!mask.data[p]) continue;
    const float rf = uv[p * 2 + 1] * tm1, cf = uv[p * 2] * tm1;
    const int32_t r0 = std::clamp(static_cast<int32_t>(std::floor(rf)), 0, T - 2);
    const int32_t c0 = std::clamp(static_cast<int32_t>(std::floor(cf)), 0, T - 2);
    splats.push_back({static_cast<uint32_t>(p), r0, c0, rf - static_cast<float>(r0),
                      cf - static_cast<float>(c0)});
  }
  BackProjection out;
  out.texture = mesh::Image(T, T, C, 0.0f);
  out.cos = mesh::Image(T, T, 1, 0.0f);
  std::vector<float> count(static_cast<size_t>(T) * T, 0.0f);
  for (int corner = 0; corner < 4; ++corner) {
    const int dr = corner >> 1, dc = corner & 1;
    for (const Splat& s : splats) {
      const float wr = dr ? s.h : 1.0f - s.h;
      const float wc = dc ? s.w : 1.0f - s.w;
      const float wt = wr * wc;
      const size_t t = static_cast<size_t>(s.r0 + dr) * T + (s.c0 + dc);
      const float* src = view.pixels.data() + static_cast<size_t>(s.pixel) * C;
      float* dst = out.texture.pixels.data() + t * C;
      for (int c = 0; c < C; ++c) dst[c] += src[c] * wt;
      const float cs = cosv[s.pixel] < thr ? 0.0f : cosv[s.pixel];  // Q3: rejected pixels splat 0
      out.cos.pixels[t] += cs * wt;
      count[t] += wt;
    }
  }
  tbb::parallel_for(tbb::blocked_range<size_t>(0, count.size(), 4096), [&](const tbb::blocked_range<size_t>& r) {
    for (size_t t = r.begin(); t < r.end(); ++t) {
      if (!(count[t] > 0.0f)) continue;
      for (int c = 0; c < C; ++c) out.texture.pixels[t * C + c] /= count[t];
      out.cos.pixels[t] /= count[t];
    }
  });
  // Q1: only pixels outside the dilated edges splat, so the boundary map is identically zero.
  if (options.boundary_map) out.boundary = mesh::Image(T, T, 1, 0.0f);
  return out;
}

BackProjection gather(const mesh::Mesh& mesh, const Raster& uv_raster, const Raster& view_raster,
                      const Camera& camera, const mesh::Image& view, const GatherOptions& options) {
  check_view_inputs("gather", mesh, view_raster, view);
  const int W = view_raster.width, H = view_raster.height, C = view.channels;
  if (uv_raster.pixel_count() == 0) throw RenderError("gather: empty uv raster");
  const int TW = uv_raster.width, TH = uv_raster.height;
  int32_t max_uv_id = 0;
  for (int32_t id : uv_raster.face_id) max_uv_id = std::max(max_uv_id, id);
  if (static_cast<size_t>(max_uv_id) > mesh.faces.size()) {
    throw RenderError("gather: uv raster refers to face " + std::to_string(max_uv_id) +
                      " but the mesh has " + std::to_string(mesh.faces.size()));
  }
  // Screen position (pixel units, like the rasterizer) and depth of every vertex in this view.
  const std::vector<mesh::Vec4> clip = clip_positions(mesh.positions, camera);
  std::vector<mesh::Vec3> screen(clip.size());
  const float wm1 = static_cast<float>(W - 1), hm1 = static_cast<float>(H - 1);
  for (size_t i = 0; i < clip.size(); ++i) {
    const mesh::Vec4& c = clip[i];
    screen[i] = {(c[0] / c[3] * 0.5f + 0.5f) * wm1 + 0.5f, (0.5f + 0.5f * c[1] / c[3]) * hm1 + 0.5f,
                 c[2] / c[3] * 0.49999f + 0.5f};
  }
  const std::vector<mesh::Vec3> normals = camera_space_normals(mesh, camera);
  // Same view-space reliability mask as back_project (eroded coverage, no depth edges).
  BackProjectDebug dbg;
  BakeOptions bo;
  bo.texture_size = 2;
  bo.render_size = options.render_size;
  bo.angle_threshold = options.angle_threshold;
  (void)back_project(mesh, view_raster, camera, view, bo, &dbg);
  const float thr = cos_threshold(options.angle_threshold);

  BackProjection out;
  out.texture = mesh::Image(TW, TH, C, 0.0f);
  out.cos = mesh::Image(TW, TH, 1, 0.0f);
  parallel_rows(TH, [&](int ty) {
    for (int tx = 0; tx < TW; ++tx) {
      const size_t t = static_cast<size_t>(ty) * TW + tx;
      const int32_t id = uv_raster.face_id[t];
      if (id == 0) continue;
      const mesh::Tri& f = mesh.faces[id - 1];
      const float* b = &uv_raster.bary[t * 3];
      const mesh::Vec3 s = interpolate_pixel<3>(b, std::span<const mesh::Vec3>(screen), f);
      const int px = static_cast<int>(std::floor(s[0])), py = static_cast<int>(std::floor(s[1]));
      if (px < 0 || py < 0 || px >= W || py >= H) continue;
      const size_t p = static_cast<size_t>(py) * W + px;
      if (!dbg.splat_mask[p]) continue;
      const bool same_face = view_raster.face_id[p] == id;
      if (!same_face && !(std::abs(view_raster.depth[p] - s[2]) <= options.depth_tolerance)) continue;
      const float cs = view_cosine(interpolate_pixel<3>(b, std::span<const mesh::Vec3>(normals), f));
      if (!(cs >= thr)) continue;
      // Pixel (col, row) centres sit at (col + 0.5, row + 0.5).
      sample_bilinear(view, s[0] - 0.5f, s[1] - 0.5f, out.texture.pixels.data() + t * C);
      out.cos.pixels[t] = cs;
    }
  });
  return out;
}

}  // namespace gen3d::render
