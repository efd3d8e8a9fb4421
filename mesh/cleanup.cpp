#include "mesh/cleanup.h"

#include <algorithm>
#include <cmath>
#include <numeric>
#include <unordered_map>

#include "mesh/error.h"

namespace gen3d::mesh {
namespace {

struct UnionFind {
  std::vector<uint32_t> parent;
  explicit UnionFind(size_t n) : parent(n) { std::iota(parent.begin(), parent.end(), 0u); }
  uint32_t find(uint32_t x) {
    while (parent[x] != x) x = parent[x] = parent[parent[x]];
    return x;
  }
  void unite(uint32_t a, uint32_t b) {
    a = find(a);
    b = find(b);
    if (a != b) parent[std::max(a, b)] = std::min(a, b);  // smallest index as root: deterministic
  }
};

double face_area(const Mesh& m, const Tri& f) {
  const Vec3& a = m.positions[f[0]];
  const Vec3& b = m.positions[f[1]];
  const Vec3& c = m.positions[f[2]];
  const double e1[3] = {double(b[0]) - a[0], double(b[1]) - a[1], double(b[2]) - a[2]};
  const double e2[3] = {double(c[0]) - a[0], double(c[1]) - a[1], double(c[2]) - a[2]};
  const double x = e1[1] * e2[2] - e1[2] * e2[1];
  const double y = e1[2] * e2[0] - e1[0] * e2[2];
  const double z = e1[0] * e2[1] - e1[1] * e2[0];
  return 0.5 * std::sqrt(x * x + y * y + z * z);
}

// Maps every vertex to the first earlier vertex within `dist` (grid of cell size dist, so only
// the 27 neighbouring cells are searched).
// Vertex -> the smallest index at exactly the same position. Sorting, not the grid below, whose
// unit cells would hold a whole normalized mesh.
std::vector<uint32_t> exact_weld(const std::vector<Vec3>& pos) {
  std::vector<uint32_t> order(pos.size());
  std::iota(order.begin(), order.end(), 0u);
  std::sort(order.begin(), order.end(),
            [&](uint32_t a, uint32_t b) { return pos[a] != pos[b] ? pos[a] < pos[b] : a < b; });
  std::vector<uint32_t> map(pos.size());
  for (size_t i = 0; i < order.size(); ++i)
    map[order[i]] = i > 0 && pos[order[i]] == pos[order[i - 1]] ? map[order[i - 1]] : order[i];
  return map;
}

std::vector<uint32_t> merge_map(const std::vector<Vec3>& pos, float dist) {
  if (!(dist > 0)) return exact_weld(pos);
  std::vector<uint32_t> map(pos.size());
  const double cell = dist > 0 ? double(dist) : 1.0;
  auto key = [](int64_t x, int64_t y, int64_t z) {
    return uint64_t(x * 73856093) ^ uint64_t(y * 19349663) ^ uint64_t(z * 83492791);
  };
  std::unordered_multimap<uint64_t, uint32_t> grid;
  grid.reserve(pos.size());
  const double d2 = double(dist) * dist;
  for (uint32_t v = 0; v < pos.size(); ++v) {
    const Vec3& p = pos[v];
    const int64_t c[3] = {int64_t(std::floor(p[0] / cell)), int64_t(std::floor(p[1] / cell)),
                          int64_t(std::floor(p[2] / cell))};
    uint32_t found = v;
    const int r = dist > 0 ? 1 : 0;
    for (int dx = -r; dx <= r && found == v; ++dx)
      for (int dy = -r; dy <= r && found == v; ++dy)
        for (int dz = -r; dz <= r && found == v; ++dz) {
          auto range = grid.equal_range(key(c[0] + dx, c[1] + dy, c[2] + dz));
          for (auto it = range.first; it != range.second; ++it) {
            const Vec3& q = pos[it->second];
            const double e[3] = {double(p[0]) - q[0], double(p[1]) - q[1], double(p[2]) - q[2]};
            if (e[0] * e[0] + e[1] * e[1] + e[2] * e[2] <= d2 && it->second < found) {
              found = it->second;
            }
          }
        }
    map[v] = found;
    if (found == v) grid.emplace(key(c[0], c[1], c[2]), v);
  }
  return map;
}

// Rewinds the vertex-connected parts that are inside out. A closed, consistently wound part is
// inside out when its enclosed volume is negative; an open part when its faces clearly point at
// its own centre (area-weighted outward share below -1/2), which is what "inside out" means for a
// scan or an unclosed model. Vertices are welded by exact position first, so UV and normal seams
// do not open a surface. Returns the number of faces rewound.
size_t orient_outward(Mesh& m) {
  const std::vector<uint32_t> weld = merge_map(m.positions, 0.0f);
  UnionFind parts(m.positions.size());
  std::unordered_map<uint64_t, int> edges;  // directed welded edges
  edges.reserve(m.faces.size() * 3);
  const auto key = [](uint32_t a, uint32_t b) { return (uint64_t(a) << 32) | b; };
  for (const Tri& f : m.faces)
    for (int k = 0; k < 3; ++k) {
      const uint32_t a = weld[f[k]], b = weld[f[(k + 1) % 3]];
      parts.unite(a, b);
      ++edges[key(a, b)];
    }
  const auto count = [&](uint64_t e) {
    const auto it = edges.find(e);
    return it == edges.end() ? 0 : it->second;
  };
  struct Part {
    bool closed = true;  // every edge met once in each direction
    double volume = 0, area = 0;
    double centre[3] = {0, 0, 0};  // area-weighted
    double outward = 0, spread = 0;
  };
  std::vector<Part> part(m.positions.size());                          // by part root
  const auto geometry = [&](const Tri& f, double c[3], double n[3]) {  // centre, area normal / 2
    const Vec3 &p0 = m.positions[f[0]], &p1 = m.positions[f[1]], &p2 = m.positions[f[2]];
    const double e1[3] = {double(p1[0]) - p0[0], double(p1[1]) - p0[1], double(p1[2]) - p0[2]};
    const double e2[3] = {double(p2[0]) - p0[0], double(p2[1]) - p0[1], double(p2[2]) - p0[2]};
    n[0] = (e1[1] * e2[2] - e1[2] * e2[1]) / 2;
    n[1] = (e1[2] * e2[0] - e1[0] * e2[2]) / 2;
    n[2] = (e1[0] * e2[1] - e1[1] * e2[0]) / 2;
    for (int k = 0; k < 3; ++k) c[k] = (double(p0[k]) + p1[k] + p2[k]) / 3;
  };
  for (const Tri& f : m.faces) {
    Part& p = part[parts.find(weld[f[0]])];
    for (int k = 0; k < 3 && p.closed; ++k) {
      const uint32_t a = weld[f[k]], b = weld[f[(k + 1) % 3]];
      if (count(key(a, b)) != 1 || count(key(b, a)) != 1) p.closed = false;
    }
    double c[3], n[3];
    geometry(f, c, n);
    const double a = std::sqrt(n[0] * n[0] + n[1] * n[1] + n[2] * n[2]);
    p.volume += (c[0] * n[0] + c[1] * n[1] + c[2] * n[2]) / 3;
    p.area += a;
    for (int k = 0; k < 3; ++k) p.centre[k] += c[k] * a;
  }
  for (Part& p : part)
    for (double& x : p.centre) x = p.area > 0 ? x / p.area : 0;
  for (const Tri& f : m.faces) {
    Part& p = part[parts.find(weld[f[0]])];
    double c[3], n[3];
    geometry(f, c, n);
    const double d[3] = {c[0] - p.centre[0], c[1] - p.centre[1], c[2] - p.centre[2]};
    const double len = std::sqrt(d[0] * d[0] + d[1] * d[1] + d[2] * d[2]);
    if (!(len > 0)) continue;
    const double along = (d[0] * n[0] + d[1] * n[1] + d[2] * n[2]) / len;  // area x cosine
    p.outward += along;
    p.spread += std::abs(along);
  }
  const auto inside_out = [](const Part& p) {
    // An open part must face its centre clearly: a flat or nearly flat part has no inside.
    return p.closed ? p.volume < 0.0 : p.spread > 0.1 * p.area && p.outward < -0.5 * p.spread;
  };
  size_t flipped = 0;
  std::vector<char> negate(m.positions.size(), 0);
  for (size_t f = 0; f < m.faces.size(); ++f) {
    if (!inside_out(part[parts.find(weld[m.faces[f][0]])])) continue;
    std::swap(m.faces[f][1], m.faces[f][2]);
    if (!m.uv_faces.empty()) std::swap(m.uv_faces[f][1], m.uv_faces[f][2]);
    for (uint32_t v : m.faces[f]) negate[v] = 1;
    ++flipped;
  }
  if (m.normals.size() == m.positions.size())
    for (size_t v = 0; v < negate.size(); ++v)
      if (negate[v])
        for (float& c : m.normals[v]) c = -c;
  return flipped;
}

}  // namespace

size_t count_components(const Mesh& mesh) {
  UnionFind uf(mesh.positions.size());
  std::vector<char> used(mesh.positions.size(), 0);
  for (const Tri& f : mesh.faces) {
    uf.unite(f[0], f[1]);
    uf.unite(f[0], f[2]);
    used[f[0]] = used[f[1]] = used[f[2]] = 1;
  }
  size_t n = 0;
  for (uint32_t v = 0; v < mesh.positions.size(); ++v) n += used[v] && uf.find(v) == v;
  return n;
}

Mesh cleanup(const Mesh& mesh, const CleanupOptions& options, CleanupReport* report) {
  CleanupReport rep;
  const size_t nv = mesh.positions.size();
  const bool uvs = mesh.has_uvs();
  if (uvs && mesh.uv_faces.size() != mesh.faces.size()) {
    throw MeshError("cleanup: uv_faces and faces differ in length");
  }
  const bool materials = mesh.has_materials();
  if (materials && mesh.face_materials.size() != mesh.faces.size()) {
    throw MeshError("cleanup: face_materials and faces differ in length");
  }
  for (const Tri& f : mesh.faces)
    for (uint32_t v : f)
      if (v >= nv) throw MeshError("cleanup: a face index is out of range");

  Mesh out = mesh;
  if (options.merge_distance >= 0.0f) {
    const std::vector<uint32_t> map = merge_map(mesh.positions, options.merge_distance);
    for (uint32_t v = 0; v < nv; ++v) rep.merged_vertices += map[v] != v;
    for (Tri& f : out.faces)
      for (uint32_t& v : f) v = map[v];
  }

  std::vector<char> keep(out.faces.size(), 1);
  if (options.remove_degenerate) {
    for (size_t f = 0; f < out.faces.size(); ++f) {
      const Tri& t = out.faces[f];
      if (t[0] == t[1] || t[1] == t[2] || t[0] == t[2] ||
          face_area(out, t) <= double(options.degenerate_area)) {
        keep[f] = 0;
        ++rep.degenerate_faces;
      }
    }
  }
  if (options.remove_duplicates) {
    std::unordered_map<uint64_t, std::vector<uint32_t>> seen;  // hash -> faces with that hash
    seen.reserve(out.faces.size());
    for (size_t f = 0; f < out.faces.size(); ++f) {
      if (!keep[f]) continue;
      Tri s = out.faces[f];
      std::sort(s.begin(), s.end());
      const uint64_t h = (uint64_t(s[0]) * 0x9e3779b97f4a7c15ull) ^
                         (uint64_t(s[1]) * 0xc2b2ae3d27d4eb4full) ^ (uint64_t(s[2]) << 1);
      auto& bucket = seen[h];
      bool dup = false;
      for (uint32_t g : bucket) {
        Tri o = out.faces[g];
        std::sort(o.begin(), o.end());
        if (o == s) {
          dup = true;
          break;
        }
      }
      if (dup) {
        keep[f] = 0;
        ++rep.duplicate_faces;
      } else {
        bucket.push_back(uint32_t(f));
      }
    }
  }
  if (options.min_component_faces > 0.0 || options.min_component_area > 0.0) {
    UnionFind uf(nv);
    for (size_t f = 0; f < out.faces.size(); ++f) {
      if (!keep[f]) continue;
      uf.unite(out.faces[f][0], out.faces[f][1]);
      uf.unite(out.faces[f][0], out.faces[f][2]);
    }
    std::vector<size_t> count(nv, 0);
    std::vector<double> area(nv, 0.0);
    size_t total_faces = 0;
    double total_area = 0.0;
    for (size_t f = 0; f < out.faces.size(); ++f) {
      if (!keep[f]) continue;
      const uint32_t root = uf.find(out.faces[f][0]);
      const double a = face_area(out, out.faces[f]);
      ++count[root];
      area[root] += a;
      ++total_faces;
      total_area += a;
    }
    // The component that is largest by the measure in use is never removed, so a mesh made only of
    // small pieces keeps its main piece.
    const uint32_t largest =
        options.min_component_area > 0.0
            ? uint32_t(std::max_element(area.begin(), area.end()) - area.begin())
            : uint32_t(std::max_element(count.begin(), count.end()) - count.begin());
    std::vector<char> drop(nv, 0);
    for (uint32_t r = 0; r < nv; ++r) {
      if (count[r] == 0 || r == largest) continue;
      if (double(count[r]) < options.min_component_faces * double(total_faces) ||
          area[r] < options.min_component_area * total_area) {
        drop[r] = 1;
        ++rep.removed_components;
        rep.component_faces += count[r];
      }
    }
    for (size_t f = 0; f < out.faces.size(); ++f) {
      if (keep[f] && drop[uf.find(out.faces[f][0])]) keep[f] = 0;
    }
  }

  // Compact faces in order.
  size_t w = 0;
  for (size_t f = 0; f < out.faces.size(); ++f) {
    if (!keep[f]) continue;
    out.faces[w] = out.faces[f];
    if (uvs) out.uv_faces[w] = out.uv_faces[f];
    if (materials) out.face_materials[w] = out.face_materials[f];
    ++w;
  }
  out.faces.resize(w);
  if (uvs) out.uv_faces.resize(w);
  if (materials) out.face_materials.resize(w);
  if (options.orient_outward) rep.flipped_faces = orient_outward(out);

  if (options.remove_unreferenced) {
    std::vector<uint32_t> remap(nv, UINT32_MAX);
    uint32_t next = 0;
    for (const Tri& f : out.faces)  // numbered in vertex-index order, not first use: stable
      for (uint32_t v : f) remap[v] = 0;
    for (uint32_t v = 0; v < nv; ++v)
      if (remap[v] == 0) remap[v] = next++;
    rep.unreferenced_vertices = nv - next;
    if (next != nv) {
      for (Tri& f : out.faces)
        for (uint32_t& v : f) v = remap[v];
      auto compact = [&](auto& vec) {
        if (vec.size() != nv) return;
        for (uint32_t v = 0; v < nv; ++v)
          if (remap[v] != UINT32_MAX) vec[remap[v]] = vec[v];
        vec.resize(next);
      };
      compact(out.positions);
      compact(out.normals);
      compact(out.colors);
    }
    if (uvs) {
      const size_t nt = out.uvs.size();
      std::vector<uint32_t> tmap(nt, UINT32_MAX);
      for (const Tri& f : out.uv_faces)
        for (uint32_t t : f) {
          if (t >= nt) throw MeshError("cleanup: a uv index is out of range");
          tmap[t] = 0;
        }
      uint32_t tn = 0;
      for (uint32_t t = 0; t < nt; ++t)
        if (tmap[t] == 0) tmap[t] = tn++;
      rep.unreferenced_uvs = nt - tn;
      for (Tri& f : out.uv_faces)
        for (uint32_t& t : f) t = tmap[t];
      for (uint32_t t = 0; t < nt; ++t)
        if (tmap[t] != UINT32_MAX) out.uvs[tmap[t]] = out.uvs[t];
      out.uvs.resize(tn);
    }
  }
  if (report) *report = rep;
  return out;
}

}  // namespace gen3d::mesh
