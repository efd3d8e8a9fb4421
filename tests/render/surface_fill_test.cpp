// The single-image helpers: silhouette registration of a reference image, symmetry detection and
// the surface fill (mirror, harmonic) of texels no view painted.

#include <gtest/gtest.h>

#include <algorithm>
#include <array>
#include <cmath>
#include <string>

#include "../mesh/test_meshes.h"  // the textured cube
#include "mesh/seams.h"
#include "render/camera.h"
#include "render/error.h"
#include "render/rasterizer.h"
#include "render/surface_fill.h"
#include "render/texture_inpaint.h"
#include "render/view_images.h"
#include "test_meshes.h"

namespace gen3d::render {
namespace {

// An ellipsoid with semi-axes (a, b, c), optionally skewed so that no plane mirrors it.
mesh::Mesh ellipsoid(float a, float b, float c, bool skewed = false) {
  mesh::Mesh m = testing::bumpy_sphere(24, 48);
  for (auto& p : m.positions) {
    const float n = std::sqrt(p[0] * p[0] + p[1] * p[1] + p[2] * p[2]);
    float x = p[0] / n * a, y = p[1] / n * b, z = p[2] / n * c;
    if (skewed) {
      x *= x > 0 ? 1.6f : 1.0f;
      y += 0.4f * x * x;
      z += 0.5f * x * y + (z > 0 ? 0.2f * z : 0.0f);
    }
    // Snapped, so the UV seam's two copies of a point are equal and weld.
    const auto snap = [](float v) { return std::round(v * 1e5f) / 1e5f; };
    p = {snap(x), snap(y), snap(z)};
  }
  return m;
}

TEST(Symmetry, FindsAMirrorPlaneOfASymmetricMesh) {
  // Mirror-symmetric across x = 0 and y = 0 only: the top half (z > 0) is stretched.
  mesh::Mesh m = ellipsoid(0.6f, 0.45f, 0.35f);
  for (auto& p : m.positions)
    if (p[2] > 0) p[2] *= 1.5f;
  const SymmetryPlane plane = detect_symmetry(m);
  ASSERT_TRUE(plane.found) << "error " << plane.error;
  EXPECT_LT(plane.error, 0.002);
  EXPECT_LT(std::fabs(plane.normal[2]), 0.01f) << "z = 0 is not a mirror plane of this mesh";
}

TEST(Symmetry, FindsNoPlaneOnASkewedMesh) {
  const SymmetryPlane plane = detect_symmetry(ellipsoid(0.6f, 0.45f, 0.35f, true));
  EXPECT_FALSE(plane.found) << "error " << plane.error;
  EXPECT_GT(plane.error, 0.01);
}

TEST(Symmetry, FindsTheMirrorPlaneOfADiagonalPipeOfSlivers) {
  // 512 slivers from end to end along the diagonal: each triangle's box is most of the mesh's, so
  // the surface grids list a triangle by points on it, not by its box. They must still find it.
  mesh::Mesh m;
  const int n = 256;
  const double s3 = 1 / std::sqrt(3.0), s2 = 1 / std::sqrt(2.0);
  const double axis[3] = {s3, s3, s3}, u[3] = {s2, -s2, 0}, v[3] = {s3 * s2, s3 * s2, -2 * s3 * s2};
  for (int end = 0; end < 2; ++end)
    for (int i = 0; i < n; ++i) {
      const double a = 2 * M_PI * i / n;
      mesh::Vec3 p;
      for (int k = 0; k < 3; ++k)
        p[k] =
            float((end - 0.5) * 2.0 * axis[k] + 0.05 * (std::cos(a) * u[k] + std::sin(a) * v[k]));
      m.positions.push_back(p);
    }
  for (uint32_t i = 0; i < n; ++i) {
    const uint32_t j = (i + 1) % n;
    m.faces.push_back({i, j, n + j});
    m.faces.push_back({i, n + j, n + i});
  }
  const SymmetryPlane plane = detect_symmetry(m);
  ASSERT_TRUE(plane.found) << "error " << plane.error;
  EXPECT_LT(plane.error, 0.001);
}

// Texel positions of the UV raster of `m`.
mesh::Vec3 texel_position(const mesh::Mesh& m, const Raster& uv, size_t i) {
  const mesh::Tri& f = m.faces[static_cast<size_t>(uv.face_id[i] - 1)];
  mesh::Vec3 p{0, 0, 0};
  for (int k = 0; k < 3; ++k)
    for (int c = 0; c < 3; ++c) p[c] += uv.bary[i * 3 + k] * m.positions[f[k]][c];
  return p;
}

TEST(SurfaceFill, HarmonicFillIsSmoothBoundedAndContinuousAcrossTheSeam) {
  const mesh::Mesh m = ellipsoid(0.5f, 0.5f, 0.5f);
  const int size = 128;
  const Raster uv = rasterize_uv(m, size, size);
  image::Image tex(size, size, 3, 0.0f);
  std::vector<uint8_t> known(uv.pixel_count(), 0), source(uv.pixel_count(), 0);
  // Seen: a red cap (z > 0.25) and a blue cap (z < -0.25), with a few black specks in the red.
  size_t specks = 0;
  for (size_t i = 0; i < known.size(); ++i) {
    if (!uv.face_id[i]) continue;
    const mesh::Vec3 p = texel_position(m, uv, i);
    if (std::fabs(p[2]) < 0.25f) continue;
    known[i] = 1;
    const bool speck = p[2] > 0 && (i % 97) == 0;
    specks += speck;
    tex.pixels[i * 3 + (p[2] > 0 ? 0 : 2)] = speck ? 0.0f : 1.0f;
  }
  ASSERT_GT(specks, 0u);
  SurfaceFillOptions options;
  options.symmetry = false;
  SurfaceFillReport report;
  fill_surface(m, tex, known, uv, source, options, &report);
  EXPECT_TRUE(report.converged);
  EXPECT_GT(report.filled_texels, 0u);
  EXPECT_EQ(report.mirrored_texels, 0u);
  double red_up = 0, red_down = 0, n_up = 0, n_down = 0;
  for (size_t i = 0; i < known.size(); ++i) {
    if (!uv.face_id[i]) continue;
    ASSERT_TRUE(known[i]) << "chart texel " << i << " left unfilled";
    const float* c = tex.pixels.data() + i * 3;
    if (source[i] != static_cast<uint8_t>(TexelSource::filled)) continue;
    // Between the caps' colours: no green, red + blue about one.
    EXPECT_NEAR(c[1], 0.0f, 1e-4f);
    EXPECT_NEAR(c[0] + c[2], 1.0f, 0.08f);
    const float z = texel_position(m, uv, i)[2];
    (z > 0 ? red_up : red_down) += c[0];
    (z > 0 ? n_up : n_down) += 1;
  }
  ASSERT_GT(n_up, 0);
  ASSERT_GT(n_down, 0);
  EXPECT_GT(red_up / n_up, red_down / n_down + 0.2) << "red grows towards the red cap";
  // Continuity: filled texels at nearly the same point of the surface (across the UV seam too)
  // have nearly the same colour.
  std::vector<size_t> filled;
  for (size_t i = 0; i < known.size(); ++i)
    if (source[i] == static_cast<uint8_t>(TexelSource::filled)) filled.push_back(i);
  size_t seam_pairs = 0;
  for (size_t a = 0; a < filled.size(); a += 7)
    for (size_t b = 0; b < filled.size(); ++b) {
      const mesh::Vec3 p = texel_position(m, uv, filled[a]), q = texel_position(m, uv, filled[b]);
      const float d = std::hypot(p[0] - q[0], p[1] - q[1], p[2] - q[2]);
      if (d > 0.03f) continue;  // about a texel apart
      const int xa = static_cast<int>(filled[a] % size), xb = static_cast<int>(filled[b] % size);
      seam_pairs += std::abs(xa - xb) > size / 2;
      EXPECT_NEAR(tex.pixels[filled[a] * 3], tex.pixels[filled[b] * 3], 0.1f);
    }
  EXPECT_GT(seam_pairs, 0u) << "the test should compare texels across the UV seam";
}

TEST(SurfaceFill, UnseenTexelsTakeTheColourSeenAtTheirMirrorImage) {
  const mesh::Mesh m = ellipsoid(0.6f, 0.45f, 0.35f);
  const int size = 128;
  const Raster uv = rasterize_uv(m, size, size);
  image::Image tex(size, size, 3, 0.0f);
  std::vector<uint8_t> known(uv.pixel_count(), 0), source(uv.pixel_count(), 0);
  const auto colour_at = [](const mesh::Vec3& p, float* c) {
    c[0] = 0.5f + p[1], c[1] = 0.5f + p[2], c[2] = 0.3f;
  };
  for (size_t i = 0; i < known.size(); ++i) {
    if (!uv.face_id[i]) continue;
    const mesh::Vec3 p = texel_position(m, uv, i);
    if (p[0] > -0.05f) continue;
    known[i] = 1;
    colour_at(p, tex.pixels.data() + i * 3);
  }
  SurfaceFillReport report;
  fill_surface(m, tex, known, uv, source, {}, &report);
  ASSERT_TRUE(report.plane.found);
  EXPECT_GT(std::fabs(report.plane.normal[0]), 0.99f) << "the plane that recovers the most";
  size_t mirrored = 0, right = 0, close = 0;
  for (size_t i = 0; i < known.size(); ++i) {
    if (!uv.face_id[i]) continue;
    const mesh::Vec3 p = texel_position(m, uv, i);
    if (p[0] < 0.1f) continue;
    ++right;
    if (source[i] != static_cast<uint8_t>(TexelSource::mirrored)) continue;
    ++mirrored;
    float want[3];
    colour_at(p, want);
    const float* got = tex.pixels.data() + i * 3;
    close += std::fabs(got[0] - want[0]) < 0.05f && std::fabs(got[1] - want[1]) < 0.05f;
  }
  EXPECT_EQ(report.mirrored_texels >= mirrored, true);
  EXPECT_GT(mirrored, right * 9 / 10);
  EXPECT_GT(close, mirrored * 95 / 100);
}

TEST(SurfaceFill, UnseenVerticesTakeTheSmoothedColourAtTheirMirrorImage) {
  // Seen: the left half (x < 0), brighter towards its pole. The right half is 2.5 % longer above
  // z = 0 and 2.5 % shorter below, so the mirror images of most of its texels lie farther off the
  // surface than the texel mirror reaches at 512 x 512 (a texel spacing, about 0.005), but within
  // the vertex mirror's reach (diag / 64, about 0.022).
  mesh::Mesh m = ellipsoid(0.6f, 0.45f, 0.35f);
  for (auto& p : m.positions)
    if (p[0] > 0) p[0] *= p[2] > 0 ? 1.025f : 0.975f;
  const int size = 512;
  const Raster uv = rasterize_uv(m, size, size);
  image::Image tex(size, size, 3, 0.0f);
  std::vector<uint8_t> known(uv.pixel_count(), 0), source(uv.pixel_count(), 0);
  for (size_t i = 0; i < known.size(); ++i) {
    if (!uv.face_id[i]) continue;
    const mesh::Vec3 p = texel_position(m, uv, i);
    if (p[0] > -0.05f) continue;
    known[i] = 1;
    for (int c = 0; c < 3; ++c) tex.pixels[i * 3 + c] = 0.2f - p[0];  // 0.25 .. 0.8
  }
  SurfaceFillReport report;
  fill_surface(m, tex, known, uv, source, {}, &report);
  ASSERT_TRUE(report.plane.found) << "error " << report.plane.error;
  EXPECT_GT(report.mirrored_vertices, 0u);
  // The right half (x > 0.1): the colour seen at the mirror image (0.2 + x before the stretch),
  // not the 0.25 of the rim that a fill from the boundary spreads where the texel mirror does not
  // reach. Those texels count as mirrored in the source map.
  double error = 0;
  size_t n = 0, mirrored = 0;
  for (size_t i = 0; i < known.size(); ++i) {
    if (!uv.face_id[i]) continue;
    const mesh::Vec3 p = texel_position(m, uv, i);
    if (p[0] < 0.1f) continue;
    error += std::fabs(tex.pixels[i * 3] - (0.2f + p[0] / (p[2] > 0 ? 1.025f : 0.975f)));
    ++n;
    mirrored += source[i] == static_cast<uint8_t>(TexelSource::mirrored);
  }
  ASSERT_GT(n, 10000u);
  EXPECT_LT(error / static_cast<double>(n), 0.03);  // 0.019 measured, 0.044 with no vertex mirror
  EXPECT_GT(mirrored, report.mirrored_texels) << "texels of mirrored vertices count as mirrored";
}

TEST(SurfaceFill, ColourDoesNotCrossAMaterialBoundary) {
  // Two materials: the top (z > 0) and the bottom. Seen: the top's left half, red, and the
  // bottom's right half, blue. The top's right half is filled red and the bottom's left half blue,
  // though each touches the other colour's seen half along the equator.
  mesh::Mesh m = ellipsoid(0.5f, 0.5f, 0.5f);
  m.materials = {mesh::Material{"top", nullptr, {1, 1, 1, 1}},
                 mesh::Material{"bottom", nullptr, {1, 1, 1, 1}}};
  m.face_materials.resize(m.faces.size());
  for (size_t f = 0; f < m.faces.size(); ++f) {
    float z = 0;
    for (int k = 0; k < 3; ++k) z += m.positions[m.faces[f][k]][2];
    m.face_materials[f] = z > 0 ? 0 : 1;
  }
  const int size = 128;
  m.shared_atlas = true;  // one atlas for both materials, as uv_unwrap gives it
  const Raster uv = rasterize_uv(m, size, size);
  image::Image tex(size, size, 3, 0.0f);
  std::vector<uint8_t> known(uv.pixel_count(), 0), source(uv.pixel_count(), 0);
  const auto top = [&](size_t i) { return m.face_materials[uv.face_id[i] - 1] == 0; };
  for (size_t i = 0; i < known.size(); ++i) {
    if (!uv.face_id[i]) continue;
    const mesh::Vec3 p = texel_position(m, uv, i);
    if (top(i) ? p[0] > -0.1f : p[0] < 0.1f) continue;
    known[i] = 1;
    tex.pixels[i * 3 + (top(i) ? 0 : 2)] = 1.0f;
  }
  SurfaceFillOptions options;
  options.symmetry = false;  // the fill alone
  fill_surface(m, tex, known, uv, source, options);
  size_t filled = 0, right = 0;
  for (size_t i = 0; i < known.size(); ++i) {
    if (!uv.face_id[i] || source[i] != static_cast<uint8_t>(TexelSource::filled)) continue;
    ++filled;
    const float* c = tex.pixels.data() + i * 3;
    right += top(i) ? c[0] > 0.9f && c[2] < 0.1f : c[2] > 0.9f && c[0] < 0.1f;
  }
  ASSERT_GT(filled, 500u);
  EXPECT_GT(right, filled * 95 / 100);
}

// The textured cube's six charts as the new atlas (one texture space for all its materials, as
// uv_unwrap leaves it); as authored, every face maps onto the whole texture (as box models are
// often made), `materials` per quad.
struct AuthoredBox {
  mesh::Mesh mesh = mesh::testing::textured_cube();
  mesh::Mesh authored;
  AuthoredBox(const std::vector<uint32_t>& materials = {}) {
    mesh.texture.reset();
    authored = mesh;
    authored.uvs.clear();
    authored.uv_faces.clear();
    for (uint32_t q = 0; q < 6; ++q) {
      authored.uvs.insert(authored.uvs.end(), {{0, 0}, {1, 0}, {1, 1}, {0, 1}});
      authored.uv_faces.push_back({4 * q, 4 * q + 1, 4 * q + 2});
      authored.uv_faces.push_back({4 * q, 4 * q + 2, 4 * q + 3});
    }
    if (materials.empty()) return;
    mesh.materials.resize(*std::max_element(materials.begin(), materials.end()) + 1);
    for (uint32_t q = 0; q < 6; ++q)
      mesh.face_materials.insert(mesh.face_materials.end(), 2, materials[q]);
    mesh.shared_atlas = true;
    authored.materials = mesh.materials;
    authored.face_materials = mesh.face_materials;
  }
  // The authored UV of texel i of the new atlas.
  std::array<float, 2> authored_uv(const Raster& uv, size_t i) const {
    const mesh::Tri& t = authored.uv_faces[static_cast<size_t>(uv.face_id[i] - 1)];
    std::array<float, 2> p{0, 0};
    for (int k = 0; k < 3; ++k)
      for (int c = 0; c < 2; ++c) p[c] += uv.bary[i * 3 + k] * authored.uvs[t[k]][c];
    return p;
  }
  static size_t quad(const Raster& uv, size_t i) {
    return static_cast<size_t>(uv.face_id[i] - 1) / 2;
  }
};

// A smooth picture over the texture square.
void pattern(std::array<float, 2> p, float* c) {
  c[0] = 0.2f + 0.6f * p[0], c[1] = 0.2f + 0.6f * p[1];
  c[2] = 0.5f + 0.3f * std::sin(6.0f * p[0]) * std::cos(4.0f * p[1]);
}

TEST(SurfaceFill, UnseenTexelsTakeTheColourSeenWhereTheMeshsOwnUvsMapTheSameTexel) {
  const AuthoredBox box;
  const int size = 256;
  const Raster uv = rasterize_uv(box.mesh, size, size);
  // Seen: the top (quad 1) only, painted through the authored UVs.
  const auto seen_top = [&](image::Image& tex, std::vector<uint8_t>& known) {
    for (size_t i = 0; i < known.size(); ++i)
      if (uv.face_id[i] && AuthoredBox::quad(uv, i) == 1) {
        known[i] = 1;
        pattern(box.authored_uv(uv, i), tex.pixels.data() + i * 3);
      }
  };
  const auto error_elsewhere = [&](const image::Image& tex, const std::vector<uint8_t>& source,
                                   size_t* shared) {
    double sum = 0;
    size_t n = 0;
    *shared = 0;
    for (size_t i = 0; i < source.size(); ++i) {
      if (!uv.face_id[i] || AuthoredBox::quad(uv, i) == 1) continue;
      float want[3];
      pattern(box.authored_uv(uv, i), want);
      for (int c = 0; c < 3; ++c) sum += std::fabs(tex.pixels[i * 3 + c] - want[c]) / 3;
      ++n;
      *shared += source[i] == static_cast<uint8_t>(TexelSource::shared);
    }
    return std::pair<double, size_t>{sum / n, n};
  };
  image::Image tex(size, size, 3, 0.0f);
  std::vector<uint8_t> known(uv.pixel_count(), 0), source(uv.pixel_count(), 0);
  seen_top(tex, known);
  const size_t filled = fill_from_authored_uvs(box.mesh, box.authored, tex, known, uv, source);
  fill_surface(box.mesh, tex, known, uv, source);
  size_t shared = 0;
  const auto [error, unseen] = error_elsewhere(tex, source, &shared);
  EXPECT_LT(error, 0.01);
  EXPECT_GT(shared, unseen * 98 / 100);
  EXPECT_EQ(filled, shared);
  // Without the authored UVs, the five other faces are a fill from the top's rim.
  image::Image plain(size, size, 3, 0.0f);
  std::vector<uint8_t> plain_known(uv.pixel_count(), 0), plain_source(uv.pixel_count(), 0);
  seen_top(plain, plain_known);
  fill_surface(box.mesh, plain, plain_known, uv, plain_source);
  size_t none = 0;
  EXPECT_GT(error_elsewhere(plain, plain_source, &none).first, 4 * error);
  EXPECT_EQ(none, 0u);
}

TEST(SurfaceFill, TheMeshsOwnUvsShareColourWithinAMaterialOnly) {
  // Top and bottom (quads 0, 1) are material 0, the sides material 1: the same UV square holds
  // two textures. Seen: the top (the pattern) and one side (red).
  const AuthoredBox box({0, 0, 1, 1, 1, 1});
  const int size = 256;
  const Raster uv = rasterize_uv(box.mesh, size, size);
  image::Image tex(size, size, 3, 0.0f);
  std::vector<uint8_t> known(uv.pixel_count(), 0), source(uv.pixel_count(), 0);
  for (size_t i = 0; i < known.size(); ++i) {
    if (!uv.face_id[i]) continue;
    const size_t q = AuthoredBox::quad(uv, i);
    if (q != 1 && q != 2) continue;
    known[i] = 1;
    if (q == 1) pattern(box.authored_uv(uv, i), tex.pixels.data() + i * 3);
    if (q == 2) tex.pixels[i * 3] = 1.0f;
  }
  fill_from_authored_uvs(box.mesh, box.authored, tex, known, uv, source);
  fill_surface(box.mesh, tex, known, uv, source);
  double bottom = 0, sides = 0;
  size_t n_bottom = 0, n_sides = 0;
  for (size_t i = 0; i < known.size(); ++i) {
    if (!uv.face_id[i]) continue;
    const size_t q = AuthoredBox::quad(uv, i);
    if (q == 0) {
      float want[3];
      pattern(box.authored_uv(uv, i), want);
      for (int c = 0; c < 3; ++c) bottom += std::fabs(tex.pixels[i * 3 + c] - want[c]) / 3;
      ++n_bottom;
    } else if (q > 2) {
      const float want[3] = {1, 0, 0};
      for (int c = 0; c < 3; ++c) sides += std::fabs(tex.pixels[i * 3 + c] - want[c]) / 3;
      ++n_sides;
    }
  }
  EXPECT_LT(bottom / n_bottom, 0.01) << "the bottom takes the top's texture, not the red";
  EXPECT_LT(sides / n_sides, 0.01) << "the sides take the red, not the top's texture";
}

TEST(SurfaceFill, TheAuthoredMeshMustHaveTheSameFaces) {
  const AuthoredBox box;
  // Splitting UV seams renumbers the vertices but keeps the faces: they still correspond.
  const mesh::Mesh split = mesh::split_uv_seams(box.mesh);
  EXPECT_TRUE(faces_correspond(split, box.authored));
  mesh::Mesh turned = box.authored;
  std::swap(turned.faces[0], turned.faces[5]);
  EXPECT_FALSE(faces_correspond(split, turned));
  mesh::Mesh fewer = box.authored;
  fewer.faces.pop_back();
  fewer.uv_faces.pop_back();
  EXPECT_FALSE(faces_correspond(split, fewer));
  const Raster uv = rasterize_uv(split, 64, 64);
  image::Image tex(64, 64, 3, 0.0f);
  std::vector<uint8_t> known(uv.pixel_count(), 0), source(uv.pixel_count(), 0);
  EXPECT_THROW(fill_from_authored_uvs(split, turned, tex, known, uv, source), RenderError);
  // The atlas is the authored layout (the UVs were kept, v flipped): nothing is shared.
  for (size_t i = 0; i < known.size(); i += 2) known[i] = uv.face_id[i] != 0;
  mesh::Mesh flipped = split;
  for (auto& t : flipped.uvs) t[1] = 1.0f - t[1];
  EXPECT_EQ(fill_from_authored_uvs(split, flipped, tex, known, uv, source), 0u);
  EXPECT_EQ(fill_from_authored_uvs(split, split, tex, known, uv, source), 0u);
  EXPECT_GT(fill_from_authored_uvs(split, box.authored, tex, known, uv, source), 0u);
}

TEST(SurfaceFill, InpaintTextureSelectsTheFillAndReportsSources) {
  const mesh::Mesh m = ellipsoid(0.5f, 0.5f, 0.5f);
  const int size = 64;
  const Raster uv = rasterize_uv(m, size, size);
  image::Image tex(size, size, 3, 0.0f);
  std::vector<uint8_t> trust(uv.pixel_count(), 0);
  for (size_t i = 0; i < trust.size(); ++i)
    if (uv.face_id[i] && texel_position(m, uv, i)[2] > 0.2f) {
      trust[i] = 1;
      tex.pixels[i * 3] = 1.0f;
    }
  InpaintOptions options;
  options.fill = "harmonic";
  InpaintReport report;
  const image::Image out = inpaint_texture(m, tex, trust, &uv, options, &report);
  ASSERT_EQ(report.sources.size(), trust.size());
  size_t filled = 0;
  for (size_t i = 0; i < trust.size(); ++i) {
    if (trust[i]) {
      EXPECT_EQ(report.sources[i], static_cast<uint8_t>(TexelSource::view));
    }
    filled += report.sources[i] == static_cast<uint8_t>(TexelSource::filled);
  }
  EXPECT_GT(filled, 0u);
  for (float v : out.pixels) ASSERT_TRUE(std::isfinite(v) && v >= 0.0f && v <= 1.0f);
  options.fill = "nearest";
  EXPECT_THROW(inpaint_texture(m, tex, trust, &uv, options), RenderError);
}

TEST(SurfaceFill, AFillDoneBeforehandFinishesToTheSameTexture) {
  const mesh::Mesh m = ellipsoid(0.5f, 0.4f, 0.3f);
  const int size = 64;
  const Raster uv = rasterize_uv(m, size, size);
  image::Image tex(size, size, 3, 0.0f);
  std::vector<uint8_t> trust(uv.pixel_count(), 0);
  for (size_t i = 0; i < trust.size(); ++i) {
    if (!uv.face_id[i]) continue;
    const auto p = texel_position(m, uv, i);
    if (p[2] > 0.1f) {
      trust[i] = 1;
      tex.pixels[i * 3] = 0.5f + p[0];
      tex.pixels[i * 3 + 1] = 0.5f + p[1];
    }
  }
  for (const char* fill : {"harmonic", "propagate", "none"}) {
    SCOPED_TRACE(fill);
    InpaintOptions options;
    options.fill = fill;
    InpaintReport one, two;
    const image::Image whole = inpaint_texture(m, tex, trust, &uv, options, &one);
    const SurfaceFillResult filled = fill_unseen_surface(m, tex, trust, uv, options);
    EXPECT_EQ(filled.texels.size() > 0, std::string(fill) != "none");
    options.fill = "none";  // not read by the finishing overload
    const image::Image split = inpaint_texture(tex, trust, filled, options, &two);
    EXPECT_EQ(whole.pixels, split.pixels);
    EXPECT_EQ(one.sources, two.sources);
    EXPECT_EQ(one.vertex_texels, two.vertex_texels);
    EXPECT_EQ(one.image_texels, two.image_texels);
    EXPECT_EQ(one.chart_texels, two.chart_texels);
  }
  // A fill that does not belong to this texture is refused, never half applied.
  SurfaceFillResult bad = fill_unseen_surface(m, tex, trust, uv, {});
  ASSERT_FALSE(bad.texels.empty());
  const auto painted = std::find(trust.begin(), trust.end(), uint8_t{1}) - trust.begin();
  bad.texels[0] = static_cast<uint32_t>(painted);
  EXPECT_THROW(inpaint_texture(tex, trust, bad, {}), RenderError);
  bad = fill_unseen_surface(m, tex, trust, uv, {});
  bad.chart_runs.pop_back();
  EXPECT_THROW(inpaint_texture(tex, trust, bad, {}), RenderError);
  InpaintOptions reference;
  reference.method = "reference";
  EXPECT_THROW(inpaint_texture(tex, trust, fill_unseen_surface(m, tex, trust, uv, {}), reference),
               RenderError);
}

// A reference image made from the raster's silhouette: scaled by `scale` about the silhouette's
// centre, rotated by `degrees`, shifted by (dx, dy); left half of the object red, right half blue.
image::Image reference_from(const Raster& r, double scale, double degrees, double dx, double dy,
                            int w, int h) {
  double cx = 0, cy = 0, n = 0;
  for (int y = 0; y < r.height; ++y)
    for (int x = 0; x < r.width; ++x)
      if (r.face_id[static_cast<size_t>(y) * r.width + x]) cx += x, cy += y, n += 1;
  cx /= n, cy /= n;
  const double t = degrees * M_PI / 180.0;
  image::Image out(w, h, 4, 1.0f);
  for (int y = 0; y < h; ++y)
    for (int x = 0; x < w; ++x) {
      // Reference pixel -> raster pixel (the inverse of the placement).
      const double ux = (x - w / 2.0 - dx) / scale, uy = (y - h / 2.0 - dy) / scale;
      const double rx = cx + std::cos(t) * ux + std::sin(t) * uy;
      const double ry = cy - std::sin(t) * ux + std::cos(t) * uy;
      const int ix = static_cast<int>(std::lround(rx)), iy = static_cast<int>(std::lround(ry));
      const bool inside = ix >= 0 && iy >= 0 && ix < r.width && iy < r.height &&
                          r.face_id[static_cast<size_t>(iy) * r.width + ix];
      float* p = out.at(x, y);
      p[3] = inside ? 1.0f : 0.0f;
      if (inside) p[0] = rx < cx ? 1.0f : 0.0f, p[1] = 0.0f, p[2] = rx < cx ? 0.0f : 1.0f;
    }
  return out;
}

Raster ellipsoid_raster(int size) {
  Camera camera;
  mesh::Mesh m = ellipsoid(0.5f, 0.3f, 0.3f);
  for (auto& p : m.positions) p[0] += p[1] > 0 ? 0.25f * p[1] : 0.0f;  // lean: no box symmetry
  return rasterize(m, camera, size, size);
}

TEST(RegisterToSilhouette, RecoversScaleShiftAndRotationToSubPixel) {
  const Raster r = ellipsoid_raster(128);
  const image::Image reference = reference_from(r, 1.7, 4.0, 6.3, -3.6, 300, 260);
  SilhouetteFit fit;
  const image::Image out = register_to_silhouette(reference, r, false, {}, &fit);
  EXPECT_GT(fit.iou, 0.97);
  EXPECT_FALSE(fit.box_fit_kept);
  EXPECT_NEAR(fit.scale, 1.0 / 1.7, 0.01);
  EXPECT_NEAR(std::fabs(fit.rotation_deg), 4.0, 0.7);
  // Silhouette pixels left of its centre are red, right of it blue (away from the middle).
  size_t right = 0, wrong = 0;
  for (int y = 0; y < r.height; ++y)
    for (int x = 0; x < r.width; ++x) {
      if (!r.face_id[static_cast<size_t>(y) * r.width + x]) continue;
      const float* p = out.at(x, y);
      if (x < 56) (p[0] > 0.8f && p[2] < 0.2f ? right : wrong)++;
      if (x > 72) (p[2] > 0.8f && p[0] < 0.2f ? right : wrong)++;
    }
  EXPECT_GT(right, 20 * wrong + 100);
}

TEST(RegisterToSilhouette, BeatsTheBoundingBoxWhenAStrayMarkWidensTheBox) {
  const Raster r = ellipsoid_raster(128);
  image::Image reference = reference_from(r, 1.0, 0.0, 0.0, 0.0, 200, 200);
  for (int y = 190; y < 192; ++y)
    for (int x = 2; x < 198; ++x) reference.at(x, y)[3] = 1.0f;  // a thin line far below
  SilhouetteFit fit;
  register_to_silhouette(reference, r, false, {}, &fit);
  EXPECT_GT(fit.iou, fit.bbox_iou + 0.2);
  EXPECT_GT(fit.iou, 0.9);
  EXPECT_NEAR(fit.scale, 1.0, 0.02);
}

TEST(RegisterToSilhouette, RefusesAnEmptyReference) {
  const Raster r = ellipsoid_raster(64);
  EXPECT_THROW(register_to_silhouette(image::Image(8, 8, 4, 0.0f), r, false), RenderError);
}

}  // namespace
}  // namespace gen3d::render
