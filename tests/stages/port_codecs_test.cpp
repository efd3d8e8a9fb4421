// The stage cache's binary form of every port type: a value saved and loaded back is equal to the
// original field by field (floats bit for bit), and any cut-short byte stream is refused.

#include <cmath>
#include <cstring>

#include <gtest/gtest.h>

#include "stages/register.h"
#include "stages/types.h"

namespace gen3d::test {
namespace {

using pipeline::ByteReader;
using pipeline::ByteWriter;

const pipeline::Registry& codecs() {
  static const pipeline::Registry reg = [] {
    pipeline::Registry r;
    stages::register_port_codecs(r);
    return r;
  }();
  return reg;
}

template <class T>
std::string save(const T& value, bool borrow = false) {
  const pipeline::PortCodec* codec = codecs().codec(pipeline::port_type<T>());
  EXPECT_NE(codec, nullptr);
  std::string out;
  std::vector<ByteWriter::Borrowed> borrowed;
  ByteWriter w(out, borrow ? &borrowed : nullptr);
  codec->save(&value, w);
  EXPECT_EQ(
      w.size(), out.size() + [&] {
        size_t n = 0;
        for (const auto& b : borrowed) n += b.bytes.size();
        return n;
      }());
  if (!borrow) {  // the size estimate (images' is sampled) is close to what is written
    EXPECT_LE(out.size(), codec->bytes(&value) * 5 / 4 + 1024);
  }
  return out;
}

template <class T>
T load(const std::string& bytes) {
  ByteReader r(bytes);
  auto v = codecs().codec(pipeline::port_type<T>())->load(r);
  r.expect_end();
  return *std::static_pointer_cast<const T>(v);
}

template <class T>
void expect_truncations_refused(const std::string& bytes) {
  for (size_t cut : {size_t{0}, size_t{1}, bytes.size() / 2, bytes.size() - 1}) {
    if (cut >= bytes.size()) continue;
    ByteReader r(std::string_view(bytes).substr(0, cut));
    EXPECT_THROW(
        {
          auto v = codecs().codec(pipeline::port_type<T>())->load(r);
          r.expect_end();
        },
        pipeline::CacheFormatError)
        << "cut at " << cut << " of " << bytes.size();
  }
}

image::Image ramp(int w, int h, int c) {
  image::Image im(w, h, c);
  for (size_t i = 0; i < im.pixels.size(); ++i) im.pixels[i] = static_cast<float>(i) / 7.0f;
  return im;
}

bool same(const image::Image& a, const image::Image& b) {
  return a.width == b.width && a.height == b.height && a.channels == b.channels &&
         a.pixels.size() == b.pixels.size() &&
         std::memcmp(a.pixels.data(), b.pixels.data(), a.pixels.size() * sizeof(float)) == 0;
}

TEST(PortCodecs, EveryPortTypeHasOne) {
  for (const pipeline::PortType& t :
       {pipeline::port_type<mesh::Mesh>(), pipeline::port_type<image::Image>(),
        pipeline::port_type<mesh::NormalizeTransform>(), pipeline::port_type<render::ViewSet>(),
        pipeline::port_type<stages::ImageList>(), pipeline::port_type<stages::BakeList>(),
        pipeline::port_type<render::MergeResult>(), pipeline::port_type<render::InpaintReport>(),
        pipeline::port_type<render::SurfaceFillResult>(), pipeline::port_type<stages::TextReport>(),
        pipeline::port_type<stages::ReferenceFit>(), pipeline::port_type<models::Tensor>(),
        pipeline::port_type<models::VolumeGrid>()})
    EXPECT_NE(codecs().codec(t), nullptr) << t.name;
}

TEST(PortCodecs, MeshRoundTripsWithTextureAndMaterials) {
  mesh::Mesh m;
  m.positions = {{0, 0, 0}, {1, 0, 0}, {0, 1, 0.5f}};
  m.faces = {{0, 1, 2}};
  m.normals = {{0, 0, 1}, {0, 0, 1}, {0, 0, 1}};
  m.uvs = {{0, 0}, {1, 0}, {0, 1}};
  m.uv_faces = {{0, 1, 2}};
  m.colors = {{1, 0, 0, 1}, {0, 1, 0, 1}, {0, 0, 1, 0.5f}};
  m.texture = std::make_shared<const image::Image>(ramp(4, 3, 3));
  m.materials.push_back(
      {"wood", std::make_shared<const image::Image>(ramp(2, 2, 4)), {0.5f, 0.25f, 1, 1}});
  m.face_materials = {0};
  m.pbr.texture = std::make_shared<const image::Image>(ramp(4, 4, 3));
  m.pbr.roughness = 0.5f;
  m.materials[0].pbr.metallic = 0.25f;
  m.shared_atlas = true;
  const std::string bytes = save(m);
  const mesh::Mesh back = load<mesh::Mesh>(bytes);
  EXPECT_TRUE(back.shared_atlas);
  ASSERT_TRUE(back.pbr.texture);
  EXPECT_TRUE(same(*back.pbr.texture, *m.pbr.texture));
  EXPECT_FALSE(back.pbr.metallic);
  EXPECT_EQ(back.pbr.roughness, 0.5f);
  EXPECT_FALSE(back.materials[0].pbr.texture);
  EXPECT_EQ(back.materials[0].pbr.metallic, 0.25f);
  EXPECT_FALSE(back.materials[0].pbr.roughness);
  EXPECT_EQ(back.positions, m.positions);
  EXPECT_EQ(back.faces, m.faces);
  EXPECT_EQ(back.normals, m.normals);
  EXPECT_EQ(back.uvs, m.uvs);
  EXPECT_EQ(back.uv_faces, m.uv_faces);
  EXPECT_EQ(back.colors, m.colors);
  ASSERT_TRUE(back.texture);
  EXPECT_TRUE(same(*back.texture, *m.texture));
  ASSERT_EQ(back.materials.size(), 1u);
  EXPECT_EQ(back.materials[0].name, "wood");
  EXPECT_EQ(back.materials[0].base_color, m.materials[0].base_color);
  ASSERT_TRUE(back.materials[0].texture);
  EXPECT_TRUE(same(*back.materials[0].texture, *m.materials[0].texture));
  EXPECT_EQ(back.face_materials, m.face_materials);
  EXPECT_EQ(back.fingerprint(), m.fingerprint());
  expect_truncations_refused<mesh::Mesh>(bytes);
}

TEST(PortCodecs, TexturesViewsAndReportsRoundTrip) {
  render::MergeResult merged;
  merged.texture = ramp(8, 8, 3);
  merged.weight = ramp(8, 8, 1);
  merged.trust_mask.assign(64, 255);
  merged.views = {{10, 2, 0.2f, false}, {5, 5, 1.0f, true}};
  const render::MergeResult mb = load<render::MergeResult>(save(merged));
  EXPECT_TRUE(same(mb.texture, merged.texture));
  EXPECT_TRUE(same(mb.weight, merged.weight));
  EXPECT_EQ(mb.trust_mask, merged.trust_mask);
  ASSERT_EQ(mb.views.size(), 2u);
  EXPECT_EQ(mb.views[1].already_painted, 5u);
  EXPECT_TRUE(mb.views[1].skipped);
  expect_truncations_refused<render::MergeResult>(save(merged));

  const render::ViewSet views = render::ViewSet::hunyuan6();
  const render::ViewSet vb = load<render::ViewSet>(save(views));
  ASSERT_EQ(vb.size(), 6u);
  for (size_t i = 0; i < 6; ++i) {
    EXPECT_EQ(vb[i].camera.azim, views[i].camera.azim);
    EXPECT_EQ(vb[i].camera.elev, views[i].camera.elev);
    EXPECT_EQ(vb[i].weight, views[i].weight);
  }

  const stages::ImageList list = {ramp(3, 2, 3), image::Image(), ramp(1, 1, 4)};
  const auto lb = load<stages::ImageList>(save(list));
  ASSERT_EQ(lb.size(), 3u);
  for (size_t i = 0; i < 3; ++i) EXPECT_TRUE(same(lb[i], list[i])) << i;

  stages::BakeList bakes(2);
  bakes[0].texture = ramp(4, 4, 3);
  bakes[0].cos = ramp(4, 4, 1);
  const auto bb = load<stages::BakeList>(save(bakes));
  ASSERT_EQ(bb.size(), 2u);
  EXPECT_TRUE(same(bb[0].texture, bakes[0].texture));
  EXPECT_TRUE(same(bb[0].cos, bakes[0].cos));
  EXPECT_TRUE(bb[1].texture.empty());

  render::InpaintReport rep;
  rep.chart_texels = 7;
  rep.vertices_unreached = 3;
  rep.mirrored_texels = 5;
  rep.mirrored_vertices = 6;
  rep.shared_texels = 8;
  rep.symmetry_found = true;
  rep.symmetry_error = 0.125;
  rep.fill_iterations = 42;
  rep.sources = {0, 1, 2, 3};
  const auto rb = load<render::InpaintReport>(save(rep));
  EXPECT_EQ(rb.chart_texels, 7u);
  EXPECT_EQ(rb.vertices_unreached, 3u);
  EXPECT_EQ(rb.mirrored_texels, 5u);
  EXPECT_EQ(rb.mirrored_vertices, 6u);
  EXPECT_EQ(rb.shared_texels, 8u);
  EXPECT_TRUE(rb.symmetry_found);
  EXPECT_EQ(rb.symmetry_error, 0.125);
  EXPECT_EQ(rb.fill_iterations, 42);
  EXPECT_EQ(rb.sources, rep.sources);

  mesh::NormalizeTransform t;
  t.center = {1, 2, 3};
  t.scale = 0.25f;
  t.multiplier_f64 = 1.0 / 3.0;
  const auto tb = load<mesh::NormalizeTransform>(save(t));
  EXPECT_EQ(tb.center, t.center);
  EXPECT_EQ(tb.scale, t.scale);
  EXPECT_EQ(tb.multiplier_f64, t.multiplier_f64);

  EXPECT_EQ(load<stages::TextReport>(save(stages::TextReport{"a table\n"})).text, "a table\n");
  EXPECT_EQ(load<stages::ReferenceFit>(save(stages::ReferenceFit{0.9857})).iou, 0.9857);
}

// Mostly empty images (a view's bake, a merge) are stored as their runs of non-zero pixels: small,
// and loaded back bit for bit (-0.0 and NaN are non-zero bits and keep theirs). A merge whose trust
// mask follows from its weight does not store the mask.
TEST(PortCodecs, SparseImagesAndDerivedTrustMasksRoundTripBitForBit) {
  render::MergeResult merged;
  merged.texture = image::Image(64, 64, 4, 0.0f);
  merged.weight = image::Image(64, 64, 1, 0.0f);
  for (int y = 10; y < 20; ++y)
    for (int x = 5; x < 40; ++x) {
      float* p = merged.texture.at(x, y);
      p[0] = 0.5f;
      p[3] = 1.0f;
      merged.weight.at(x, y)[0] = 0.25f;
    }
  merged.texture.at(63, 63)[1] = -0.0f;
  merged.texture.at(0, 0)[2] = std::nanf("");
  merged.weight.at(1, 1)[0] = 1e-9f;  // weight without trust
  merged.trust_mask.assign(64 * 64, 0);
  for (size_t t = 0; t < merged.trust_mask.size(); ++t)
    merged.trust_mask[t] = merged.weight.pixels[t] > 1e-8f ? 255 : 0;
  const std::string bytes = save(merged);
  EXPECT_LT(bytes.size(), 64u * 64u * 5u * 4u / 10u);  // a tenth of the dense floats
  const render::MergeResult back = load<render::MergeResult>(bytes);
  EXPECT_TRUE(same(back.texture, merged.texture));
  EXPECT_TRUE(same(back.weight, merged.weight));
  EXPECT_EQ(back.trust_mask, merged.trust_mask);
  expect_truncations_refused<render::MergeResult>(bytes);

  merged.trust_mask[5] = 255;  // a mask that does not follow from the weight is stored
  EXPECT_EQ(load<render::MergeResult>(save(merged)).trust_mask, merged.trust_mask);

  // Runs that overlap or leave the image are refused.
  image::Image im(4, 1, 1, 0.0f);
  im.pixels = {1.0f, 0.0f, 2.0f, 0.0f};
  std::string raw = save(im);
  uint32_t run_end = 9;  // the first run [0, 1) now ends past the image
  std::memcpy(raw.data() + 12 + 8 + 4, &run_end, 4);
  ByteReader r(raw);
  EXPECT_THROW(codecs().codec(pipeline::port_type<image::Image>())->load(r),
               pipeline::CacheFormatError);
}

TEST(PortCodecs, SurfaceFillRoundTripsBitForBit) {
  render::SurfaceFillResult f;
  f.size = 16;
  f.texels = {3, 17, 250};
  f.colors = {0.1f, 0.2f, 0.3f, 1.0f / 3.0f, 0.0f, 1.0f, -0.0f, 0.5f, 0.25f};
  f.sources = {2, 3, 6};
  f.chart_runs = {0, 5, 17, 251};
  f.vertices_unreached = 9;
  f.mirrored_texels = 1;
  f.mirrored_vertices = 2;
  f.shared_texels = 4;
  f.symmetry_found = true;
  f.symmetry_error = 0.0625;
  f.fill_iterations = 82;
  const std::string bytes = save(f);
  const auto back = load<render::SurfaceFillResult>(bytes);
  EXPECT_EQ(back.size, 16);
  EXPECT_EQ(back.texels, f.texels);
  EXPECT_EQ(std::memcmp(back.colors.data(), f.colors.data(), sizeof(float) * 9), 0);
  EXPECT_EQ(back.sources, f.sources);
  EXPECT_EQ(back.chart_runs, f.chart_runs);
  EXPECT_EQ(back.vertices_unreached, 9u);
  EXPECT_EQ(back.mirrored_texels, 1u);
  EXPECT_EQ(back.mirrored_vertices, 2u);
  EXPECT_EQ(back.shared_texels, 4u);
  EXPECT_TRUE(back.symmetry_found);
  EXPECT_EQ(back.symmetry_error, 0.0625);
  EXPECT_EQ(back.fill_iterations, 82);
  expect_truncations_refused<render::SurfaceFillResult>(bytes);
  // Lists of different lengths are refused, not read past.
  render::SurfaceFillResult bad = f;
  bad.sources.pop_back();
  const std::string bad_bytes = save(bad);  // the reader only views the bytes: keep them alive
  ByteReader r(bad_bytes);
  EXPECT_THROW(codecs().codec(pipeline::port_type<render::SurfaceFillResult>())->load(r),
               pipeline::CacheFormatError);
}

TEST(PortCodecs, TensorsAndGridsRoundTrip) {
  models::Tensor x({2, 3, 4});
  for (int64_t i = 0; i < x.numel(); ++i) x.data()[i] = static_cast<float>(i) * 0.5f - 3.0f;
  const models::Tensor xb = load<models::Tensor>(save(x));
  EXPECT_EQ(xb.shape(), x.shape());
  EXPECT_EQ(std::memcmp(xb.data(), x.data(), sizeof(float) * 24), 0);
  expect_truncations_refused<models::Tensor>(save(x));
  EXPECT_TRUE(load<models::Tensor>(save(models::Tensor())).empty());

  models::VolumeGrid g;
  g.resolution = 2;
  g.bbox_min = {-1, -1, -1};
  g.bbox_max = {1, 1, 1};
  g.values.assign(27, 0.5f);
  g.values[4] = std::numeric_limits<float>::quiet_NaN();
  const auto gb = load<models::VolumeGrid>(save(g));
  EXPECT_EQ(gb.resolution, 2);
  EXPECT_EQ(gb.bbox_max, g.bbox_max);
  EXPECT_EQ(std::memcmp(gb.values.data(), g.values.data(), 27 * sizeof(float)), 0);
}

TEST(PortCodecs, LargeArraysAreReferencedNotCopiedWhenBorrowing) {
  const image::Image big = ramp(256, 256, 3);  // 768 KiB of pixels
  const std::string owned = save(big, true);
  EXPECT_LT(owned.size(), 64u);  // only the header fields; the pixels stay where they are
}

// What a codec makes on the fly (an image's runs) is copied even when large, so the stream put
// together from the borrowed ranges afterwards loads back.
TEST(PortCodecs, BorrowedStreamsOfSparseImagesLoadBack) {
  image::Image checker(512, 512, 1, 0.0f);  // 131072 runs: 1 MiB of run bounds
  for (size_t i = 0; i < checker.pixels.size(); i += 2) checker.pixels[i] = 1.0f + float(i);
  const pipeline::PortCodec* codec = codecs().codec(pipeline::port_type<image::Image>());
  std::string out;
  std::vector<ByteWriter::Borrowed> borrowed;
  {
    ByteWriter w(out, &borrowed);
    codec->save(&checker, w);
  }
  std::string stream;
  size_t at = 0;
  for (const ByteWriter::Borrowed& b : borrowed) {
    stream.append(out, at, b.at - at);
    stream.append(b.bytes);
    at = b.at;
  }
  stream.append(out, at, std::string::npos);
  EXPECT_TRUE(same(load<image::Image>(stream), checker));
}

}  // namespace
}  // namespace gen3d::test
