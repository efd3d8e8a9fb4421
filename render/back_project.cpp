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
#include <utility>

#include "mesh/normals.h"
#include "render/buffer.h"
#include "render/error.h"
#include "render/interpolate.h"
#include "render/maps.h"
#include "render/texture_tiles.h"

namespace gen3d::render {
namespace {

using Vec1 = std::array<float, 1>;

// floor() to int for |v| < 2^30 without a libm call (baseline x86-64 has no SSE4.1 round); values
// outside (and NaN) map to the range ends, which the callers clamp anyway.
inline int32_t floor_int(float v) {
  if (!(v > -1073741824.0f)) return -1073741824;
  if (!(v < 1073741824.0f)) return 1073741824;
  const int32_t i = static_cast<int32_t>(v);
  return i - (static_cast<float>(i) > v ? 1 : 0);
}

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
                       const image::Image& view) {
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
  check_face_tiles(fn, mesh);
  const size_t max_id = raster.max_face_id();
  if (max_id > mesh.faces.size()) {
    throw RenderError(std::string(fn) + ": raster refers to face " + std::to_string(max_id) +
                      " but the mesh has " + std::to_string(mesh.faces.size()));
  }
}

std::vector<mesh::Vec3> camera_positions(const mesh::Mesh& mesh, const Camera& camera) {
  const std::vector<mesh::Vec4> h = transform_points(camera.model_view(), mesh.positions);
  std::vector<mesh::Vec3> out(h.size());
  for (size_t i = 0; i < h.size(); ++i)
    out[i] = {h[i][0] / h[i][3], h[i][1] / h[i][3], h[i][2] / h[i][3]};
  return out;
}

// Eroded coverage AND NOT dilated edges, with a (2k+1)^2 box window. Outside the image counts as
// covered for the erosion and as no edge for the dilation (OpenCV's default morphology borders,
// the same as the reference's zero-padded convolutions).
void splat_mask(const cv::Mat& covered, const cv::Mat& edges, int k, cv::Mat& eroded,
                cv::Mat& dilated, cv::Mat& mask) {
  if (k > 0) {
    const cv::Mat kernel =
        cv::getStructuringElement(cv::MORPH_RECT, cv::Size(2 * k + 1, 2 * k + 1));
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

// View-space masks of the reference's back-projection (README §8 steps 3-5).
struct ViewMasks {
  cv::Mat depth8;   // trunc(255 * normalized camera z), 0 on background
  cv::Mat edges;    // Canny(depth8, 30, 80)
  cv::Mat eroded;   // eroded coverage
  cv::Mat dilated;  // dilated edges
  cv::Mat mask;     // eroded AND NOT dilated: the pixels that splat
};

// close_cracks: first fill single-pixel cracks in the depth (pixels whose centres lie exactly on an
// edge shared by two triangles belong to neither in the reference's float test, so the surface
// behind shows through, and Canny would call the seam of a flat face a depth edge).
ViewMasks view_masks(const mesh::Mesh& mesh, const Raster& raster, const std::vector<Vec1>& zattr,
                     int window, bool close_cracks) {
  const int W = raster.width, H = raster.height;
  const auto z_at = [&](size_t p) {
    return interpolate_pixel<1>(&raster.bary[p * 3], std::span<const Vec1>(zattr),
                                mesh.faces[raster.face_id[p] - 1])[0];
  };
  // 2-3. Depth normalized over covered pixels (nearest 1, farthest 0), 8-bit, Canny 30/80.
  using MinMax = std::pair<float, float>;
  const float inf = std::numeric_limits<float>::infinity();
  const MinMax zr = tbb::parallel_reduce(
      tbb::blocked_range<int>(0, H, 8), MinMax{inf, -inf},
      [&](const tbb::blocked_range<int>& rows, MinMax m) {
        for (int y = rows.begin(); y < rows.end(); ++y) {
          for (size_t p = static_cast<size_t>(y) * W, e = p + W; p < e; ++p) {
            if (raster.face_id[p] == 0) continue;
            const float zv = z_at(p);
            m.first = std::min(m.first, zv);
            m.second = std::max(m.second, zv);
          }
        }
        return m;
      },
      [](MinMax a, MinMax b) {
        return MinMax{std::min(a.first, b.first), std::max(a.second, b.second)};
      });
  const float zmin = zr.first;
  // A view that sees only a plane head-on (a box's top from above) has a depth range of float
  // noise; normalizing it would turn that noise into Canny edges all over the plane. Below 1e-5
  // (camera units; meshes span about 1.15) the depth counts as flat: no edges inside. The
  // reference has no such guard; its views of curved meshes are never this flat.
  const float range = zr.second - zr.first > 1e-5f ? zr.second - zr.first : 0.0f;
  ViewMasks m;
  m.depth8 = cv::Mat(H, W, CV_8U);
  cv::Mat covered(H, W, CV_8U);
  cv::Mat& depth8 = m.depth8;
  parallel_rows(H, [&](int y) {
    for (size_t p = static_cast<size_t>(y) * W, e = p + W; p < e; ++p) {
      const bool cov = raster.face_id[p] != 0;
      covered.data[p] = cov ? 255 : 0;
      uint8_t d = 0;
      if (cov && range > 0.0f) {
        const float v = (z_at(p) - zmin) / range * 255.0f;
        d = v <= 0.0f ? 0 : (v >= 255.0f ? 255 : static_cast<uint8_t>(v));
      }
      depth8.data[p] = d;
    }
  });
  if (close_cracks) {
    // A closing with a 3 x 3 square: a far pixel between near ones on both sides becomes near; a
    // step from a near to a far surface stays where it is.
    const cv::Mat square = cv::getStructuringElement(cv::MORPH_RECT, cv::Size(3, 3));
    cv::morphologyEx(depth8, depth8, cv::MORPH_CLOSE, square);
  }
  cv::Canny(depth8, m.edges, 30.0, 80.0, 3, false);
  const cv::Mat& edges = m.edges;

  // 4-5. Erosion/dilation with the (2 window + 1)^2 box.
  splat_mask(covered, edges, window, m.eroded, m.dilated, m.mask);
  return m;
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

namespace {

void check_texture_size(const char* fn, int T) {
  if (T < 2 || T > 65536) {
    throw RenderError(std::string(fn) + ": texture_size " + std::to_string(T) +
                      " out of range 2..65536");
  }
}

// Steps 1-6 of the reference back-projection up to the weight sums: adds value * w, cos * w and w
// of every splatted pixel into acc, T x T texels per tile (render/texture_tiles.h) of C + 2 floats
// (colour sums, cos sum, weight sum; interleaved so one scatter touches one cache line), which the
// caller provides zeroed. Inputs are checked by the caller.
void splat_view(const mesh::Mesh& mesh, const Raster& raster, const Camera& camera,
                const image::Image& view, const BakeOptions& options, BackProjectDebug* debug,
                float* acc) {
  const int T = options.texture_size;
  const int W = raster.width, H = raster.height, C = view.channels;
  const size_t N = raster.pixel_count();

  // 1. Camera-space positions and unweighted vertex normals (inward, like the reference's).
  mesh::Mesh cam;
  cam.positions = camera_positions(mesh, camera);
  cam.faces = mesh.faces;
  const std::vector<mesh::Vec3> normals = mesh::vertex_normals_face_mean(cam);
  std::vector<Vec1> zattr(cam.positions.size());
  for (size_t i = 0; i < zattr.size(); ++i) zattr[i] = {cam.positions[i][2]};
  // Interpolated cosine / UV of the surface seen at a covered pixel.
  const auto cos_at = [&](size_t p) {
    return view_cosine(interpolate_pixel<3>(&raster.bary[p * 3],
                                            std::span<const mesh::Vec3>(normals),
                                            mesh.faces[raster.face_id[p] - 1]));
  };
  const auto uv_at = [&](size_t p) {
    return interpolate_pixel<2>(&raster.bary[p * 3], std::span<const mesh::Vec2>(mesh.uvs),
                                mesh.uv_faces[raster.face_id[p] - 1]);
  };

  // 2-5. Depth edges and eroded coverage: which pixels may splat.
  const ViewMasks vm =
      view_masks(mesh, raster, zattr, bake_edge_window(options.render_size, options.edge_window),
                 /*close_cracks=*/false);
  const cv::Mat &depth8 = vm.depth8, &edges = vm.edges, &eroded = vm.eroded, &dilated = vm.dilated,
                &mask = vm.mask;
  const float thr = cos_threshold(options.angle_threshold);
  if (debug) {
    debug->canny_input = to_vector(depth8);
    debug->canny_edges = to_vector(edges);
    debug->mask_eroded = to_vector(eroded);
    debug->edges_dilated = to_vector(dilated);
    debug->splat_mask = to_vector(mask);
    debug->cos_view.assign(N, 0.0f);
    parallel_rows(H, [&](int y) {
      for (size_t p = static_cast<size_t>(y) * W, e = p + W; p < e; ++p) {
        if (raster.face_id[p] != 0) debug->cos_view[p] = cos_at(p);
      }
    });
  }

  // 6. Linear grid put: four passes (corner 00, 01, 10, 11), each in pixel order, as the
  // reference's scatter_add calls accumulate; then divide by the weight sum. The splat list is
  // built per row block in parallel and concatenated in row order (deterministic).
  struct Splat {
    uint32_t pixel;
    int32_t r0, c0;
    float h, w, cos;
  };
  const float tm1 = static_cast<float>(T - 1);
  constexpr int kRowsPerBlock = 32;
  const int blocks = (H + kRowsPerBlock - 1) / kRowsPerBlock;
  std::vector<std::vector<Splat>> block_splats(blocks);
  tbb::parallel_for(0, blocks, [&](int b) {
    std::vector<Splat>& out = block_splats[b];
    const int y1 = std::min(H, (b + 1) * kRowsPerBlock);
    for (int y = b * kRowsPerBlock; y < y1; ++y) {
      for (size_t p = static_cast<size_t>(y) * W, e = p + W; p < e; ++p) {
        if (!mask.data[p]) continue;
        // UVs outside [0, 1] repeat (the reference clamps the index but not the fraction, Q15).
        const mesh::Vec2 t = uv_at(p);
        const float rf = wrap_uv(t[1]) * tm1, cf = wrap_uv(t[0]) * tm1;
        const int32_t r0 = std::clamp(floor_int(rf), 0, T - 2);
        const int32_t c0 = std::clamp(floor_int(cf), 0, T - 2);
        const float cs = cos_at(p);
        const int32_t tile = static_cast<int32_t>(face_tile(mesh, raster.face_id[p] - 1)) * T;
        out.push_back({static_cast<uint32_t>(p), tile + r0, c0, rf - static_cast<float>(r0),
                       cf - static_cast<float>(c0), cs < thr ? 0.0f : cs});  // Q3: still splat
      }
    }
  });
  for (int corner = 0; corner < 4; ++corner) {
    const int dr = corner >> 1, dc = corner & 1;
    for (const std::vector<Splat>& list : block_splats) {
      for (const Splat& s : list) {
        const float wt = (dr ? s.h : 1.0f - s.h) * (dc ? s.w : 1.0f - s.w);
        const size_t t = static_cast<size_t>(s.r0 + dr) * T + (s.c0 + dc);
        const float* src = view.pixels.data() + static_cast<size_t>(s.pixel) * C;
        float* dst = acc + t * (C + 2);
        for (int c = 0; c < C; ++c) dst[c] += src[c] * wt;
        dst[C] += s.cos * wt;
        dst[C + 1] += wt;
      }
    }
  }
}

}  // namespace

BackProjection back_project(const mesh::Mesh& mesh, const Raster& raster, const Camera& camera,
                            const image::Image& view, const BakeOptions& options,
                            BackProjectDebug* debug) {
  check_view_inputs("back_project", mesh, raster, view);
  check_texture_size("back_project", options.texture_size);
  const int T = options.texture_size, C = view.channels, TH = T * texture_tiles(mesh);
  const size_t n = static_cast<size_t>(T) * TH, S = static_cast<size_t>(C) + 2;
  Buffer<float> acc;  // from the buffer pool: no fresh pages once warm
  resize_zeroed(acc, n * S);
  splat_view(mesh, raster, camera, view, options, debug, acc.data());
  // Divide by the weight sums where positive (elsewhere the sums stay: 0 unless UVs leave [0,1]).
  BackProjection out;
  out.texture = image::Image(T, TH, C, 0.0f);
  out.cos = image::Image(T, TH, 1, 0.0f);
  tbb::parallel_for(tbb::blocked_range<size_t>(0, n, 4096),
                    [&](const tbb::blocked_range<size_t>& r) {
                      for (size_t t = r.begin(); t < r.end(); ++t) {
                        const float* a = &acc[t * S];
                        const float count = a[C + 1];
                        const bool divide = count > 0.0f;
                        for (int c = 0; c < C; ++c)
                          out.texture.pixels[t * C + c] = divide ? a[c] / count : a[c];
                        out.cos.pixels[t] = divide ? a[C] / count : a[C];
                      }
                    });
  // Q1: only pixels outside the dilated edges splat, so the boundary map is identically zero.
  if (options.boundary_map) out.boundary = image::Image(T, TH, 1, 0.0f);
  return out;
}

SparseBackProjection back_project_sparse(const mesh::Mesh& mesh, const Raster& raster,
                                         const Camera& camera, const image::Image& view,
                                         const BakeOptions& options) {
  check_view_inputs("back_project_sparse", mesh, raster, view);
  check_texture_size("back_project_sparse", options.texture_size);
  const int T = options.texture_size, C = view.channels, TH = T * texture_tiles(mesh);
  const size_t n = static_cast<size_t>(T) * TH;
  // Dense scratch sums from the buffer pool (no fresh pages once warm), compacted afterwards.
  const size_t S = static_cast<size_t>(C) + 2;
  Buffer<float> acc;
  resize_zeroed(acc, n * S);
  splat_view(mesh, raster, camera, view, options, nullptr, acc.data());
  SparseBackProjection out;
  out.width = T;
  out.height = TH;
  out.channels = C;
  const auto listed = [&](size_t t) {
    return acc[t * S + C + 1] != 0.0f || acc[t * S + C] != 0.0f;
  };
  size_t k = 0;
  for (size_t t = 0; t < n; ++t) k += listed(t);
  out.texel.reserve(k);
  out.texture.reserve(k * C);
  out.cos.reserve(k);
  for (size_t t = 0; t < n; ++t) {
    const float* a = &acc[t * S];
    const float count = a[C + 1];
    // Texels that a dense back_project leaves non-zero (count 0 with sums needs UVs outside [0,1]).
    if (count == 0.0f && a[C] == 0.0f) continue;
    const bool divide = count > 0.0f;
    out.texel.push_back(static_cast<uint32_t>(t));
    for (int c = 0; c < C; ++c) out.texture.push_back(divide ? a[c] / count : a[c]);
    out.cos.push_back(divide ? a[C] / count : a[C]);
  }
  return out;
}

BackProjection gather(const mesh::Mesh& mesh, const Raster& uv_raster, const Raster& view_raster,
                      const Camera& camera, const image::Image& view,
                      const GatherOptions& options) {
  check_view_inputs("gather", mesh, view_raster, view);
  const int W = view_raster.width, H = view_raster.height, C = view.channels;
  if (uv_raster.pixel_count() == 0) throw RenderError("gather: empty uv raster");
  const int TW = uv_raster.width, TH = uv_raster.height;
  const size_t max_uv_id = uv_raster.max_face_id();
  if (max_uv_id > mesh.faces.size()) {
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
  std::vector<Vec1> zattr(mesh.positions.size());
  {
    const std::vector<mesh::Vec3> cam = camera_positions(mesh, camera);
    for (size_t i = 0; i < zattr.size(); ++i) zattr[i] = {cam[i][2]};
  }
  const ViewMasks vm = view_masks(mesh, view_raster, zattr,
                                  bake_edge_window(options.render_size, options.edge_window),
                                  /*close_cracks=*/true);
  const float thr = cos_threshold(options.angle_threshold);

  BackProjection out;
  out.texture = image::Image(TW, TH, C, 0.0f);
  out.cos = image::Image(TW, TH, 1, 0.0f);
  parallel_rows(TH, [&](int ty) {
    for (int tx = 0; tx < TW; ++tx) {
      const size_t t = static_cast<size_t>(ty) * TW + tx;
      const int32_t id = uv_raster.face_id[t];
      if (id == 0) continue;
      const mesh::Tri& f = mesh.faces[id - 1];
      const float* b = &uv_raster.bary[t * 3];
      const mesh::Vec3 s = interpolate_pixel<3>(b, std::span<const mesh::Vec3>(screen), f);
      const int px = floor_int(s[0]), py = floor_int(s[1]);
      if (px < 0 || py < 0 || px >= W || py >= H) continue;
      const size_t p = static_cast<size_t>(py) * W + px;
      if (!vm.mask.data[p]) continue;
      const bool same_face = view_raster.face_id[p] == id;
      if (!same_face && !(std::abs(view_raster.depth[p] - s[2]) <= options.depth_tolerance))
        continue;
      const float cs =
          view_cosine(interpolate_pixel<3>(b, std::span<const mesh::Vec3>(normals), f));
      if (!(cs >= thr)) continue;
      // Pixel (col, row) centres sit at (col + 0.5, row + 0.5).
      float* texel = out.texture.pixels.data() + t * C;
      if (options.bicubic)
        sample_bicubic(view, s[0] - 0.5f, s[1] - 0.5f, texel);
      else
        sample_bilinear(view, s[0] - 0.5f, s[1] - 0.5f, texel);
      out.cos.pixels[t] = cs;
    }
  });
  return out;
}

}  // namespace gen3d::render
