#include "mesh/mesh.h"

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
  uint64_t h = 0xcbf29ce484222325ull;
  h = hash_vector(h, positions);
  return hash_vector(h, faces);
}

uint64_t Mesh::uv_fingerprint() const {
  uint64_t h = 0xcbf29ce484222325ull;
  h = hash_vector(h, uvs);
  return hash_vector(h, uv_faces);
}

}  // namespace gen3d::mesh
