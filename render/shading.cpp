#include "render/shading.h"

#include <oneapi/tbb/parallel_for.h>

#include <algorithm>
#include <cmath>
#include <numbers>
#include <span>
#include <vector>

#include "mesh/normals.h"
#include "render/interpolate.h"
#include "render/maps.h"

namespace gen3d::render {

namespace {

using mesh::Vec3;

Vec3 normalized(Vec3 v) {
  const float n = std::sqrt(v[0] * v[0] + v[1] * v[1] + v[2] * v[2]);
  return n > 0.0f ? Vec3{v[0] / n, v[1] / n, v[2] / n} : Vec3{0, 0, 1};
}

float dot(const Vec3& a, const Vec3& b) {
  return a[0] * b[0] + a[1] * b[1] + a[2] * b[2];
}

// Metallic and roughness at one surface point of a material.
struct MrSource {
  const image::Image* texture = nullptr;  // glTF layout: G roughness, B metallic
  float metallic = 0.0f;                  // factor (scales the texture's channel)
  float roughness = 1.0f;
};

MrSource mr_source(const mesh::MetallicRoughness& pbr, bool uvs) {
  MrSource s;
  const bool textured = uvs && pbr.texture && !pbr.texture->empty() && pbr.texture->channels >= 3;
  if (textured) s.texture = pbr.texture.get();
  s.metallic = pbr.metallic.value_or(textured ? 1.0f : 0.0f);
  s.roughness = pbr.roughness.value_or(1.0f);
  return s;
}

}  // namespace

image::Image shaded_map(const mesh::Mesh& mesh, const Raster& raster, const Camera& camera,
                        const ShadingOptions& options) {
  // albedo_map checks the mesh against the raster and gives the base colour (with its seam-crack
  // repair), so only lighting is added here.
  image::Image out = albedo_map(mesh, raster, options.background);
  const std::vector<Vec3> normals = mesh.normals.size() == mesh.positions.size()
                                        ? mesh.normals
                                        : mesh::vertex_normals_area_weighted(mesh);
  std::vector<MrSource> sources;
  if (mesh.has_materials())
    for (const mesh::Material& m : mesh.materials)
      sources.push_back(mr_source(m.pbr, mesh.has_uvs()));
  else
    sources.push_back(mr_source(mesh.pbr, mesh.has_uvs()));
  const Mat4 mv = camera.model_view();
  const Vec3 l = normalized(options.light), v{0, 0, 1};  // orthographic: the eye is along +z
  const Vec3 h = normalized({l[0] + v[0], l[1] + v[1], l[2] + v[2]});
  const float pi = std::numbers::pi_v<float>;
  tbb::parallel_for(0, raster.height, [&](int y) {
    for (int x = 0; x < raster.width; ++x) {
      const size_t p = size_t(y) * raster.width + x;
      const int32_t id = raster.face_id[p];
      if (id == 0) continue;
      const size_t face = size_t(id - 1);
      const float* b = &raster.bary[p * 3];
      const Vec3 nw = interpolate_pixel<3>(b, std::span<const Vec3>(normals), mesh.faces[face]);
      // The model-view rotation takes the normal into camera space; a surface seen from behind
      // (an open or thin part) is lit as its visible side.
      Vec3 n = normalized({mv[0] * nw[0] + mv[1] * nw[1] + mv[2] * nw[2],
                           mv[4] * nw[0] + mv[5] * nw[1] + mv[6] * nw[2],
                           mv[8] * nw[0] + mv[9] * nw[1] + mv[10] * nw[2]});
      if (n[2] < 0.0f) n = {-n[0], -n[1], -n[2]};
      const uint32_t material = mesh.has_materials() ? mesh.face_materials[face] : 0;
      const MrSource& src = sources[material < sources.size() ? material : 0];
      float metallic = src.metallic, roughness = src.roughness;
      if (src.texture) {
        const auto uv =
            interpolate_pixel<2>(b, std::span<const mesh::Vec2>(mesh.uvs), mesh.uv_faces[face]);
        const auto wrap = [](float t) { return t >= 0.0f && t <= 1.0f ? t : t - std::floor(t); };
        const image::Image& tex = *src.texture;
        float s[4];
        sample_bilinear(tex, wrap(uv[0]) * (tex.width - 1), wrap(uv[1]) * (tex.height - 1), s);
        roughness *= s[1];
        metallic *= s[2];
      }
      metallic = std::clamp(metallic, 0.0f, 1.0f);
      roughness = std::clamp(roughness, 0.04f, 1.0f);  // a perfect mirror would be one bright dot
      const float nl = std::max(dot(n, l), 0.0f), nv = std::max(dot(n, v), 1e-4f);
      const float nh = std::max(dot(n, h), 0.0f), vh = std::max(dot(v, h), 0.0f);
      const float a2 = roughness * roughness * roughness * roughness;
      const float dd = nh * nh * (a2 - 1.0f) + 1.0f;
      const float d = a2 / (pi * dd * dd);
      const float k = (roughness + 1.0f) * (roughness + 1.0f) / 8.0f;
      const float g = (nl / (nl * (1.0f - k) + k)) * (nv / (nv * (1.0f - k) + k));
      const float fw = std::pow(1.0f - vh, 5.0f);
      float* px = out.pixels.data() + p * 3;
      for (int c = 0; c < 3; ++c) {
        const float base = px[c];
        const float f0 = 0.04f * (1.0f - metallic) + base * metallic;
        const float f = f0 + (1.0f - f0) * fw;
        const float specular = d * g * f / std::max(4.0f * nl * nv, 1e-4f);
        const float diffuse = (1.0f - f) * (1.0f - metallic) * base / pi;
        const float ambient = options.ambient * (base * (1.0f - metallic) + f0 * metallic);
        px[c] = std::clamp((diffuse + specular) * options.intensity * nl + ambient, 0.0f, 1.0f);
      }
    }
  });
  return out;
}

}  // namespace gen3d::render
