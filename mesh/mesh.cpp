#include "mesh/mesh.h"

#include <cmath>
#include <cstring>

namespace gen3d::mesh {
namespace {

// FNV-1a over raw bytes, 64-bit: fast enough for a few MB and stable across runs.
uint64_t fnv1a(uint64_t h, const void* data, size_t bytes) {
  const auto* p = static_cast<const unsigned char*>(data);
  for (size_t i = 0; i < bytes; ++i) {
    h ^= p[i];
    h *= 0x100000001b3ull;
  }
  return h;
}

template <class T>
uint64_t hash_vector(uint64_t h, const std::vector<T>& v) {
  const uint64_t n = v.size();
  h = fnv1a(h, &n, sizeof n);
  return fnv1a(h, v.data(), v.size() * sizeof(T));
}

}  // namespace

uint64_t Mesh::fingerprint() const {
  // Over the triangle soup, corner positions in face order: vertex numbering (welded, or split at
  // UV seams) does not change what a camera sees. Word-wise multiply-xorshift, as fast as memory.
  uint64_t h = 0x9e3779b97f4a7c15ull ^ faces.size();
  const auto mix = [&h](uint64_t w) {
    h = (h ^ w) * 0xbf58476d1ce4e5b9ull;
    h ^= h >> 29;
  };
  for (const Tri& f : faces) {
    float corners[10] = {};
    for (int k = 0; k < 3; ++k) {
      const Vec3& p = f[k] < positions.size() ? positions[f[k]] : Vec3{NAN, NAN, NAN};
      std::memcpy(corners + 3 * k, p.data(), sizeof p);
    }
    uint64_t words[5];
    std::memcpy(words, corners, sizeof words);
    for (uint64_t w : words) mix(w);
  }
  return h;
}

uint64_t Mesh::uv_fingerprint() const {
  uint64_t h = 0xcbf29ce484222325ull;
  h = hash_vector(h, uvs);
  h = hash_vector(h, uv_faces);
  // Each material is a texture space of its own: which face uses which one places it.
  if (!face_materials.empty() && !shared_atlas) h = hash_vector(h, face_materials);
  return h;
}

}  // namespace gen3d::mesh
