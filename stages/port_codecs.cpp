// The stage cache's binary form of every port type in types.h. Each codec writes the value's
// fields in a fixed order (floats as their bits, so a loaded value is bit-identical) and reads
// them back with every length checked; a codec's version is bumped whenever its layout changes.

#include <optional>
#include <type_traits>

#include "stages/register.h"
#include "stages/types.h"

namespace gen3d::stages {

namespace {

using pipeline::ByteReader;
using pipeline::ByteWriter;
using pipeline::CacheFormatError;

template <class T, class A>
uint64_t vec_bytes(const std::vector<T, A>& v) {
  return 8 + v.size() * sizeof(T);
}

// ---- Image
// ---------------------------------------------------------------------------------------

// Pixels are stored as runs of pixels with any non-zero bit, so the mostly empty textures of bakes
// and merges (a view sees a fraction of the atlas) cost what they hold; loading restores every
// bit (the pixels between runs are +0.0).
std::vector<uint32_t> nonzero_runs(const image::Image& im) {
  const size_t c = static_cast<size_t>(im.channels);
  const size_t n = im.pixels.size() / (c ? c : 1);
  const auto* bits = reinterpret_cast<const uint32_t*>(im.pixels.data());
  std::vector<uint32_t> runs;  // [begin, end) pixel indices
  bool open = false;
  for (size_t p = 0; p < n; ++p) {
    bool any = false;
    for (size_t k = 0; k < c; ++k) any |= bits[p * c + k] != 0;
    if (any != open) {
      runs.push_back(static_cast<uint32_t>(p));
      open = any;
    }
  }
  if (open) runs.push_back(static_cast<uint32_t>(n));
  return runs;
}

uint64_t run_pixels(const std::vector<uint32_t>& runs) {
  uint64_t total = 0;
  for (size_t k = 0; k + 1 < runs.size(); k += 2) total += runs[k + 1] - runs[k];
  return total;
}

void save_image(const image::Image& im, ByteWriter& w) {
  w.u32(static_cast<uint32_t>(im.width));
  w.u32(static_cast<uint32_t>(im.height));
  w.u32(static_cast<uint32_t>(im.channels));
  const std::vector<uint32_t> runs = nonzero_runs(im);
  w.vec_copied(runs);
  const size_t c = static_cast<size_t>(im.channels);
  w.u64(run_pixels(runs) * c);
  for (size_t k = 0; k + 1 < runs.size(); k += 2)
    w.raw(im.pixels.data() + runs[k] * c, (runs[k + 1] - runs[k]) * c * sizeof(float));
}

image::Image load_image(ByteReader& r) {
  image::Image im;
  im.width = static_cast<int>(r.u32());
  im.height = static_cast<int>(r.u32());
  im.channels = static_cast<int>(r.u32());
  const size_t c = static_cast<size_t>(im.channels);
  const uint64_t pixels =
      static_cast<uint64_t>(static_cast<uint32_t>(im.width)) * static_cast<uint32_t>(im.height);
  const std::vector<uint32_t> runs = r.vec<uint32_t>();
  const uint64_t floats = r.u64();
  if (runs.size() % 2 || floats != run_pixels(runs) * c || floats > r.remaining() / sizeof(float))
    throw CacheFormatError("image runs do not match its pixels");
  uint32_t last = 0;
  for (size_t k = 0; k < runs.size(); k += 2) {
    if (runs[k] < last || runs[k] >= runs[k + 1] || runs[k + 1] > pixels)
      throw CacheFormatError("image runs out of order or outside the image");
    last = runs[k + 1];
  }
  im.pixels.assign(static_cast<size_t>(pixels * c), 0.0f);
  for (size_t k = 0; k < runs.size(); k += 2)
    r.raw(im.pixels.data() + runs[k] * c, (runs[k + 1] - runs[k]) * c * sizeof(float));
  return im;
}

// An estimate from every 16th pixel, cheap enough to ask of every node that ran (the exact runs
// are found only when the image is stored, off the graph's path).
uint64_t image_bytes(const image::Image& im) {
  const size_t c = static_cast<size_t>(im.channels);
  const size_t n = im.pixels.size() / (c ? c : 1);
  const auto* bits = reinterpret_cast<const uint32_t*>(im.pixels.data());
  constexpr size_t kStride = 16;
  size_t sampled = 0, nonzero = 0, changes = 0;
  bool last = false;
  for (size_t p = 0; p < n; p += kStride, ++sampled) {
    bool any = false;
    for (size_t k = 0; k < c; ++k) any |= bits[p * c + k] != 0;
    nonzero += any;
    changes += any != last;
    last = any;
  }
  const double share = sampled ? static_cast<double>(nonzero) / static_cast<double>(sampled) : 0.0;
  return 28 + 4 * changes + static_cast<uint64_t>(share * static_cast<double>(n)) * c * 4;
}

void save_optional_image(const std::shared_ptr<const image::Image>& im, ByteWriter& w) {
  w.boolean(im != nullptr);
  if (im) save_image(*im, w);
}

std::shared_ptr<const image::Image> load_optional_image(ByteReader& r) {
  if (!r.boolean()) return nullptr;
  return std::make_shared<const image::Image>(load_image(r));
}

// ---- Mesh
// ----------------------------------------------------------------------------------------

// An optional factor: a presence byte, then the value.
void save_factor(const std::optional<float>& f, ByteWriter& w) {
  w.boolean(f.has_value());
  w.pod(f.value_or(0.0f));
}

std::optional<float> load_factor(ByteReader& r) {
  const bool present = r.boolean();
  const float v = r.pod<float>();
  return present ? std::optional<float>(v) : std::nullopt;
}

void save_pbr(const mesh::MetallicRoughness& p, ByteWriter& w) {
  save_optional_image(p.texture, w);
  save_factor(p.metallic, w);
  save_factor(p.roughness, w);
}

mesh::MetallicRoughness load_pbr(ByteReader& r) {
  mesh::MetallicRoughness p;
  p.texture = load_optional_image(r);
  p.metallic = load_factor(r);
  p.roughness = load_factor(r);
  return p;
}

uint64_t pbr_bytes(const mesh::MetallicRoughness& p) {
  return 1 + (p.texture ? image_bytes(*p.texture) : 0) + 10;
}

// Materials are written when the mesh type has them (a multi-material Mesh); the templates keep
// this file independent of which fields a Mesh has.
template <class M>
void save_materials(const M& m, ByteWriter& w) {
  if constexpr (requires {
                  m.materials;
                  m.face_materials;
                }) {
    w.u64(m.materials.size());
    for (const auto& mat : m.materials) {
      w.str(mat.name);
      save_optional_image(mat.texture, w);
      w.pod(mat.base_color);
      save_pbr(mat.pbr, w);
    }
    w.vec(m.face_materials);
  } else {
    w.u64(0);
    w.u64(0);
  }
}

template <class M>
void load_materials(M& m, ByteReader& r) {
  if constexpr (requires {
                  m.materials;
                  m.face_materials;
                }) {
    const uint64_t n = r.u64();
    if (n > r.remaining()) throw CacheFormatError("truncated materials");
    m.materials.resize(static_cast<size_t>(n));
    for (auto& mat : m.materials) {
      mat.name = r.str();
      mat.texture = load_optional_image(r);
      mat.base_color = r.pod<std::decay_t<decltype(mat.base_color)>>();
      mat.pbr = load_pbr(r);
    }
    m.face_materials = r.vec<uint32_t>();
  } else {
    if (r.u64() != 0 || r.u64() != 0)
      throw CacheFormatError("materials this build's meshes cannot hold");
  }
}

void save_mesh(const mesh::Mesh& m, ByteWriter& w) {
  w.vec(m.positions);
  w.vec(m.faces);
  w.vec(m.normals);
  w.vec(m.uvs);
  w.vec(m.uv_faces);
  w.vec(m.colors);
  save_optional_image(m.texture, w);
  save_pbr(m.pbr, w);
  save_materials(m, w);
  w.boolean(m.shared_atlas);
}

mesh::Mesh load_mesh(ByteReader& r) {
  mesh::Mesh m;
  m.positions = r.vec<mesh::Vec3>();
  m.faces = r.vec<mesh::Tri>();
  m.normals = r.vec<mesh::Vec3>();
  m.uvs = r.vec<mesh::Vec2>();
  m.uv_faces = r.vec<mesh::Tri>();
  m.colors = r.vec<mesh::Vec4>();
  m.texture = load_optional_image(r);
  m.pbr = load_pbr(r);
  load_materials(m, r);
  m.shared_atlas = r.boolean();
  return m;
}

template <class M>
uint64_t material_bytes(const M& m) {
  uint64_t b = 16;
  if constexpr (requires {
                  m.materials;
                  m.face_materials;
                }) {
    for (const auto& mat : m.materials)
      b += 8 + mat.name.size() + 1 + (mat.texture ? image_bytes(*mat.texture) : 0) +
           sizeof(mat.base_color) + pbr_bytes(mat.pbr);
    b += vec_bytes(m.face_materials) - 8;
  }
  return b;
}

uint64_t mesh_bytes(const mesh::Mesh& m) {
  return vec_bytes(m.positions) + vec_bytes(m.faces) + vec_bytes(m.normals) + vec_bytes(m.uvs) +
         vec_bytes(m.uv_faces) + vec_bytes(m.colors) + 1 +
         (m.texture ? image_bytes(*m.texture) : 0) + pbr_bytes(m.pbr) + material_bytes(m) + 1;
}

// ---- Small values
// ----------------------------------------------------------------------------------

void save_transform(const mesh::NormalizeTransform& t, ByteWriter& w) {
  w.boolean(t.texgen_axes);
  w.boolean(t.flip_v);
  w.pod(t.center);
  w.pod(t.scale);
  w.pod(t.multiplier);
  w.f64(t.multiplier_f64);
}

mesh::NormalizeTransform load_transform(ByteReader& r) {
  mesh::NormalizeTransform t;
  t.texgen_axes = r.boolean();
  t.flip_v = r.boolean();
  t.center = r.pod<mesh::Vec3>();
  t.scale = r.pod<float>();
  t.multiplier = r.pod<float>();
  t.multiplier_f64 = r.f64();
  return t;
}

void save_views(const render::ViewSet& vs, ByteWriter& w) {
  w.u64(vs.views.size());
  for (const render::View& v : vs.views) {
    const render::Camera& c = v.camera;
    for (double x :
         {c.elev, c.azim, c.distance, c.ortho_scale, c.near_plane, c.far_plane, v.weight})
      w.f64(x);
  }
}

render::ViewSet load_views(ByteReader& r) {
  render::ViewSet vs;
  const uint64_t n = r.u64();
  if (n > r.remaining() / 56) throw CacheFormatError("truncated view set");
  vs.views.resize(static_cast<size_t>(n));
  for (render::View& v : vs.views) {
    render::Camera& c = v.camera;
    for (double* x :
         {&c.elev, &c.azim, &c.distance, &c.ortho_scale, &c.near_plane, &c.far_plane, &v.weight})
      *x = r.f64();
  }
  return vs;
}

void save_images(const ImageList& list, ByteWriter& w) {
  w.u64(list.size());
  for (const image::Image& im : list) save_image(im, w);
}

ImageList load_images(ByteReader& r) {
  const uint64_t n = r.u64();
  if (n > r.remaining() / 20) throw CacheFormatError("truncated image list");
  ImageList list(static_cast<size_t>(n));
  for (image::Image& im : list) im = load_image(r);
  return list;
}

uint64_t images_bytes(const ImageList& list) {
  uint64_t b = 8;
  for (const image::Image& im : list) b += image_bytes(im);
  return b;
}

void save_bakes(const BakeList& list, ByteWriter& w) {
  w.u64(list.size());
  for (const render::BackProjection& b : list) {
    save_image(b.texture, w);
    save_image(b.cos, w);
    save_image(b.boundary, w);
  }
}

BakeList load_bakes(ByteReader& r) {
  const uint64_t n = r.u64();
  if (n > r.remaining() / 60) throw CacheFormatError("truncated bake list");
  BakeList list(static_cast<size_t>(n));
  for (render::BackProjection& b : list) {
    b.texture = load_image(r);
    b.cos = load_image(r);
    b.boundary = load_image(r);
  }
  return list;
}

uint64_t bakes_bytes(const BakeList& list) {
  uint64_t b = 8;
  for (const render::BackProjection& p : list)
    b += image_bytes(p.texture) + image_bytes(p.cos) + image_bytes(p.boundary);
  return b;
}

// The trust mask as merging derives it from the weight; stored only where it differs.
std::vector<uint8_t> trust_from_weight(const image::Image& weight) {
  std::vector<uint8_t> mask(weight.pixels.size());
  for (size_t t = 0; t < mask.size(); ++t) mask[t] = weight.pixels[t] > 1e-8f ? 255 : 0;
  return mask;
}

void save_merged(const render::MergeResult& m, ByteWriter& w) {
  save_image(m.texture, w);
  save_image(m.weight, w);
  const bool derived = m.weight.channels == 1 && m.trust_mask == trust_from_weight(m.weight);
  w.boolean(derived);
  if (!derived) w.vec(m.trust_mask);
  w.u64(m.views.size());
  for (const render::MergeViewStat& s : m.views) {
    w.u64(s.texels_with_weight);
    w.u64(s.already_painted);
    w.pod(s.ratio);
    w.boolean(s.skipped);
  }
}

render::MergeResult load_merged(ByteReader& r) {
  render::MergeResult m;
  m.texture = load_image(r);
  m.weight = load_image(r);
  m.trust_mask = r.boolean() ? trust_from_weight(m.weight) : r.vec<uint8_t>();
  const uint64_t n = r.u64();
  if (n > r.remaining() / 21) throw CacheFormatError("truncated merge statistics");
  m.views.resize(static_cast<size_t>(n));
  for (render::MergeViewStat& s : m.views) {
    s.texels_with_weight = r.u64();
    s.already_painted = r.u64();
    s.ratio = r.pod<float>();
    s.skipped = r.boolean();
  }
  return m;
}

void save_inpaint_report(const render::InpaintReport& rep, ByteWriter& w) {
  for (size_t v :
       {rep.chart_texels, rep.view_texels, rep.vertex_texels, rep.image_texels, rep.gutter_texels,
        rep.vertices_unreached, rep.mirrored_texels, rep.mirrored_vertices, rep.shared_texels})
    w.u64(v);
  w.boolean(rep.symmetry_found);
  w.f64(rep.symmetry_error);
  w.i64(rep.fill_iterations);
  w.vec(rep.sources);
}

render::InpaintReport load_inpaint_report(ByteReader& r) {
  render::InpaintReport rep;
  for (size_t* v : {&rep.chart_texels, &rep.view_texels, &rep.vertex_texels, &rep.image_texels,
                    &rep.gutter_texels, &rep.vertices_unreached, &rep.mirrored_texels,
                    &rep.mirrored_vertices, &rep.shared_texels})
    *v = static_cast<size_t>(r.u64());
  rep.symmetry_found = r.boolean();
  rep.symmetry_error = r.f64();
  rep.fill_iterations = static_cast<int>(r.i64());
  rep.sources = r.vec<uint8_t>();
  return rep;
}

void save_surface_fill(const render::SurfaceFillResult& f, ByteWriter& w) {
  w.i64(f.size);
  w.vec(f.texels);
  w.vec(f.colors);
  w.vec(f.sources);
  w.vec(f.chart_runs);
  w.u64(f.vertices_unreached);
  w.u64(f.mirrored_texels);
  w.u64(f.mirrored_vertices);
  w.u64(f.shared_texels);
  w.boolean(f.symmetry_found);
  w.f64(f.symmetry_error);
  w.i64(f.fill_iterations);
}

render::SurfaceFillResult load_surface_fill(ByteReader& r) {
  render::SurfaceFillResult f;
  f.size = static_cast<int>(r.i64());
  f.texels = r.vec<uint32_t>();
  f.colors = r.vec<float>();
  f.sources = r.vec<uint8_t>();
  f.chart_runs = r.vec<uint32_t>();
  if (f.size < 0 || f.colors.size() != f.texels.size() * 3 || f.sources.size() != f.texels.size())
    throw CacheFormatError("surface fill lists of different lengths");
  f.vertices_unreached = static_cast<size_t>(r.u64());
  f.mirrored_texels = static_cast<size_t>(r.u64());
  f.mirrored_vertices = static_cast<size_t>(r.u64());
  f.shared_texels = static_cast<size_t>(r.u64());
  f.symmetry_found = r.boolean();
  f.symmetry_error = r.f64();
  f.fill_iterations = static_cast<int>(r.i64());
  return f;
}

void save_tensor(const models::Tensor& t, ByteWriter& w) {
  w.boolean(!t.empty());
  if (t.empty()) return;
  w.u32(static_cast<uint32_t>(t.rank()));
  for (int64_t d : t.shape().dims()) w.i64(d);
  const auto span = t.span();
  w.u64(span.size());
  w.raw(span.data(), span.size_bytes());
}

models::Tensor load_tensor(ByteReader& r) {
  if (!r.boolean()) return models::Tensor();
  const uint32_t rank = r.u32();
  if (rank > static_cast<uint32_t>(models::Shape::kMaxRank)) throw CacheFormatError("bad rank");
  std::vector<int64_t> dims(rank);
  for (int64_t& d : dims) {
    d = r.i64();
    if (d < 0) throw CacheFormatError("negative dimension");
  }
  const models::Shape shape = models::Shape::from(dims);
  const uint64_t n = r.u64();
  if (n != static_cast<uint64_t>(shape.numel()) || n > r.remaining() / 4)
    throw CacheFormatError("tensor size does not match its shape");
  models::Tensor t(shape);
  r.raw(t.data(), static_cast<size_t>(n) * sizeof(float));
  return t;
}

void save_grid(const models::VolumeGrid& g, ByteWriter& w) {
  w.i64(g.resolution);
  w.pod(g.bbox_min);
  w.pod(g.bbox_max);
  w.vec(g.values);
}

models::VolumeGrid load_grid(ByteReader& r) {
  models::VolumeGrid g;
  g.resolution = static_cast<int>(r.i64());
  g.bbox_min = r.pod<std::array<double, 3>>();
  g.bbox_max = r.pod<std::array<double, 3>>();
  g.values = r.vec<float, models::GridValues::allocator_type>();
  return g;
}

}  // namespace

void register_port_codecs(pipeline::Registry& registry) {
  registry.add_codec<mesh::Mesh>(4, save_mesh, load_mesh, mesh_bytes);  // 4: shared_atlas
  registry.add_codec<image::Image>(2, save_image, load_image, image_bytes);
  registry.add_codec<mesh::NormalizeTransform>(1, save_transform, load_transform,
                                               [](const mesh::NormalizeTransform&) { return 48; });
  registry.add_codec<render::ViewSet>(1, save_views, load_views, [](const render::ViewSet& v) {
    return 8 + 56 * static_cast<uint64_t>(v.views.size());
  });
  registry.add_codec<ImageList>(2, save_images, load_images, images_bytes);
  registry.add_codec<BakeList>(2, save_bakes, load_bakes, bakes_bytes);
  registry.add_codec<render::MergeResult>(
      2, save_merged, load_merged, [](const render::MergeResult& m) {
        // Whether the trust mask follows from the weight, compared in place (no mask is built:
        // this runs on the graph's path).
        bool derived = m.weight.channels == 1 && m.trust_mask.size() == m.weight.pixels.size();
        for (size_t t = 0; derived && t < m.trust_mask.size(); ++t)
          derived = m.trust_mask[t] == (m.weight.pixels[t] > 1e-8f ? 255 : 0);
        return image_bytes(m.texture) + image_bytes(m.weight) + 9 +
               (derived ? 0 : vec_bytes(m.trust_mask)) + 21 * m.views.size();
      });
  registry.add_codec<render::InpaintReport>(
      3, save_inpaint_report, load_inpaint_report,
      [](const render::InpaintReport& rep) { return 88 + rep.sources.size(); });
  registry.add_codec<render::SurfaceFillResult>(
      3, save_surface_fill, load_surface_fill, [](const render::SurfaceFillResult& f) {
        return 49 + vec_bytes(f.texels) + vec_bytes(f.colors) + vec_bytes(f.sources) +
               vec_bytes(f.chart_runs);
      });
  registry.add_codec<TextReport>(
      1, [](const TextReport& t, ByteWriter& w) { w.str(t.text); },
      [](ByteReader& r) { return TextReport{r.str()}; },
      [](const TextReport& t) { return 8 + t.text.size(); });
  registry.add_codec<ReferenceFit>(
      1, [](const ReferenceFit& f, ByteWriter& w) { w.f64(f.iou); },
      [](ByteReader& r) { return ReferenceFit{r.f64()}; },
      [](const ReferenceFit&) { return size_t{8}; });
  registry.add_codec<models::Tensor>(1, save_tensor, load_tensor, [](const models::Tensor& t) {
    return 48 + 4 * static_cast<uint64_t>(t.numel());
  });
  registry.add_codec<models::VolumeGrid>(1, save_grid, load_grid, [](const models::VolumeGrid& g) {
    return 64 + vec_bytes(g.values);
  });
}

}  // namespace gen3d::stages
