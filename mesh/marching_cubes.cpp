#include "mesh/marching_cubes.h"

#include <oneapi/tbb/parallel_for.h>

#include <algorithm>
#include <atomic>
#include <cmath>
#include <limits>
#include <string>
#include <vector>

#include "mesh/cleanup.h"
#include "mesh/error.h"

namespace gen3d::mesh {

namespace {

using i64 = std::int64_t;

// Standard numbering: corner c at (x, y, z) offsets; edge e between two corners.
constexpr int kCorner[8][3] = {{0, 0, 0}, {1, 0, 0}, {1, 1, 0}, {0, 1, 0},
                               {0, 0, 1}, {1, 0, 1}, {1, 1, 1}, {0, 1, 1}};
constexpr int kEdge[12][2] = {{0, 1}, {1, 2}, {2, 3}, {3, 0}, {4, 5}, {5, 6},
                              {6, 7}, {7, 4}, {0, 4}, {1, 5}, {2, 6}, {3, 7}};
// Faces, corners counter-clockwise seen from outside the cube.
constexpr int kFace[6][4] = {{0, 3, 2, 1}, {4, 5, 6, 7}, {0, 1, 5, 4},
                             {3, 7, 6, 2}, {0, 4, 7, 3}, {1, 2, 6, 5}};

int edge_between(int a, int b) {
  for (int e = 0; e < 12; ++e)
    if ((kEdge[e][0] == a && kEdge[e][1] == b) || (kEdge[e][0] == b && kEdge[e][1] == a)) return e;
  return -1;
}

struct CaseTable {
  std::array<std::array<std::array<std::int8_t, 3>, 12>, 256> tris{};
  std::array<std::int8_t, 256> count{};
  // Edge geometry: lower corner offset and axis.
  std::array<std::array<int, 3>, 12> start{};
  std::array<int, 12> axis{};

  bool unresolved = false;  // a loop with no face-safe fan (checked by the tests)

  static bool share_face(int e1, int e2) {
    for (const auto& f : kFace) {
      int hits = 0;
      for (int e : {e1, e2}) {
        const bool a = std::find(f, f + 4, kEdge[e][0]) != f + 4;
        const bool b = std::find(f, f + 4, kEdge[e][1]) != f + 4;
        hits += a && b;
      }
      if (hits == 2) return true;
    }
    return false;
  }

  CaseTable() {
    for (int e = 0; e < 12; ++e) {
      const int* a = kCorner[kEdge[e][0]];
      const int* b = kCorner[kEdge[e][1]];
      for (int d = 0; d < 3; ++d) {
        start[e][d] = std::min(a[d], b[d]);
        if (a[d] != b[d]) axis[e] = d;
      }
    }
    for (int cfg = 0; cfg < 256; ++cfg) {
      auto inside = [&](int c) { return (cfg >> c) & 1; };
      // succ[e]: the face segment that enters the inside region through edge e leaves via succ[e].
      int succ[12];
      std::fill(succ, succ + 12, -1);
      for (const auto& f : kFace) {
        for (int s = 0; s < 4; ++s) {
          const int a = f[s], b = f[(s + 1) % 4];
          if (inside(a) || !inside(b)) continue;  // entry: outside -> inside
          int t = (s + 1) % 4;
          while (inside(f[(t + 1) % 4])) t = (t + 1) % 4;  // walk the inside run
          succ[edge_between(a, b)] = edge_between(f[t], f[(t + 1) % 4]);
        }
      }
      bool seen[12] = {};
      int n = 0;
      for (int e0 = 0; e0 < 12; ++e0) {
        if (succ[e0] < 0 || seen[e0]) continue;
        int loop[12], len = 0;
        for (int e = e0; !seen[e]; e = succ[e]) {
          seen[e] = true;
          loop[len++] = e;
        }
        // Fan from a loop vertex whose diagonals never join two vertices of one cube face: the
        // neighbour cube across that face could draw the same chord, which would make the edge
        // non-manifold.
        int r0 = -1;
        for (int r = 0; r < len && r0 < 0; ++r) {
          bool ok = true;
          for (int t = 2; t + 1 < len && ok; ++t) ok = !share_face(loop[r], loop[(r + t) % len]);
          if (ok) r0 = r;
        }
        if (r0 < 0) {
          unresolved = true;
          r0 = 0;
        }
        for (int t = 1; t + 1 < len; ++t)  // fan
          tris[cfg][n++] = {static_cast<std::int8_t>(loop[r0]),
                            static_cast<std::int8_t>(loop[(r0 + t) % len]),
                            static_cast<std::int8_t>(loop[(r0 + t + 1) % len])};
      }
      count[cfg] = static_cast<std::int8_t>(n);
    }
  }
};

const CaseTable& table() {
  static const CaseTable t;
  return t;
}

}  // namespace

int marching_cubes_case(int config, std::array<std::array<std::int8_t, 3>, 12>& tris) {
  if (config < 0 || config > 255) throw MeshError("marching_cubes_case: config outside 0..255");
  if (table().unresolved) throw MeshError("marching_cubes_case: case table has an unsafe fan");
  tris = table().tris[static_cast<std::size_t>(config)];
  return table().count[static_cast<std::size_t>(config)];
}

double signed_volume(const Mesh& mesh) {
  double v = 0.0;
  for (const Tri& f : mesh.faces) {
    const Vec3& a = mesh.positions[f[0]];
    const Vec3& b = mesh.positions[f[1]];
    const Vec3& c = mesh.positions[f[2]];
    v += (static_cast<double>(a[0]) *
              (static_cast<double>(b[1]) * c[2] - static_cast<double>(b[2]) * c[1]) -
          static_cast<double>(a[1]) *
              (static_cast<double>(b[0]) * c[2] - static_cast<double>(b[2]) * c[0]) +
          static_cast<double>(a[2]) *
              (static_cast<double>(b[0]) * c[1] - static_cast<double>(b[1]) * c[0])) /
         6.0;
  }
  return v;
}

Mesh marching_cubes(const GridView& g, const MarchingCubesOptions& o, MarchingCubesReport* report) {
  if (!g.values || g.nx < 2 || g.ny < 2 || g.nz < 2)
    throw MeshError("marching_cubes: grid needs at least 2 vertices per axis (got " +
                    std::to_string(g.nx) + " x " + std::to_string(g.ny) + " x " +
                    std::to_string(g.nz) + ")");
  if (!std::isfinite(o.level)) throw MeshError("marching_cubes: level must be finite");
  for (int a = 0; a < 3; ++a)
    if (!(o.bbox_max[a] > o.bbox_min[a]))
      throw MeshError("marching_cubes: bbox_max must exceed bbox_min on every axis");
  if (o.mapping == VertexMapping::kReferenceRequest && o.requested_resolution < 1)
    throw MeshError("marching_cubes: reference_request mapping needs requested_resolution >= 1");
  MarchingCubesReport local;
  MarchingCubesReport& rep = report ? *report : local;
  rep = MarchingCubesReport{};
  const CaseTable& T = table();
  const i64 nx = g.nx, ny = g.ny, nz = g.nz;
  const float* V = g.values;
  const float level = o.level;

  // World scale per axis.
  const i64 n_axis[3] = {nx, ny, nz};
  double scale[3];
  for (int a = 0; a < 3; ++a) {
    const double r = static_cast<double>(n_axis[a] - 1);
    const double div = o.mapping == VertexMapping::kExact           ? r
                       : o.mapping == VertexMapping::kReferenceGrid ? r + 1.0
                                                                    : o.requested_resolution + 1.0;
    scale[a] = (static_cast<double>(o.bbox_max[a]) - o.bbox_min[a]) / div;
  }

  // Corner classes: 0 outside, 1 inside (value - level > 0), 2 NaN (unqueried); and per k-row
  // (i, j) its one class, or kMixed. Most rows of a grid are all outside, all inside or (after a
  // banded decode) all unqueried, and whole rows of vertices and cubes are skipped by them.
  constexpr std::uint8_t kMixed = 3;
  std::vector<std::uint8_t> cls(static_cast<std::size_t>(nx * ny * nz));
  std::vector<std::uint8_t> row_cls(static_cast<std::size_t>(nx * ny));
  tbb::parallel_for(i64{0}, nx, [&](i64 i) {
    for (i64 j = 0; j < ny; ++j) {
      const i64 r = i * ny + j;
      const float* in = V + r * nz;
      std::uint8_t* out = cls.data() + r * nz;
      for (i64 k = 0; k < nz; ++k)
        out[k] = std::isnan(in[k]) ? 2 : static_cast<std::uint8_t>(in[k] - level > 0.0f);
      std::uint8_t any = 0, all = 3;
      for (i64 k = 0; k < nz; ++k) {
        any |= out[k];
        all &= out[k];
      }
      row_cls[static_cast<std::size_t>(r)] = any == all ? any : kMixed;
    }
  });
  const std::uint8_t* C = cls.data();
  const auto row = [&](i64 i, i64 j) { return row_cls[static_cast<std::size_t>(i * ny + j)]; };
  // No edge from row (i, j) to a neighbour row crosses the level: either end unqueried, or both
  // rows one same class.
  const auto quiet = [&](std::uint8_t a, std::uint8_t b) {
    return a == 2 || b == 2 || (a != kMixed && a == b);
  };

  // Pass 1: one vertex per crossed edge whose two ends are finite, grouped by the plane i of the
  // edge's lower end; key = (j * nz + k) * 3 + axis, increasing within a plane.
  std::vector<std::vector<i64>> keys(static_cast<std::size_t>(nx));
  std::vector<std::vector<Vec3>> pos(static_cast<std::size_t>(nx));
  // Where each row's keys start in its plane's list (row j of plane i: [i * (ny + 1) + j]), so a
  // cube finds an edge's vertex among its row's few keys instead of the whole plane's.
  std::vector<i64> row_keys(static_cast<std::size_t>(nx * (ny + 1)), 0);
  std::atomic<bool> exact_hits{false};
  // Rows are scanned as bytes first (vectorised): flags[k] bit a is set when the edge from (i, j,
  // k) along axis a crosses; then only the flagged vertices are visited, in the same order.
  const std::vector<std::uint8_t> unqueried(static_cast<std::size_t>(nz), 2);
  tbb::parallel_for(i64{0}, nx, [&](i64 i) {
    auto& K = keys[static_cast<std::size_t>(i)];
    auto& P = pos[static_cast<std::size_t>(i)];
    const i64 step[3] = {ny * nz, nz, 1};
    std::vector<std::uint8_t> flags(static_cast<std::size_t>(nz));
    i64* row_start = row_keys.data() + i * (ny + 1);
    for (i64 j = 0; j < ny; ++j) {
      row_start[j] = static_cast<i64>(K.size());
      const std::uint8_t rc = row(i, j);
      if (rc != kMixed && (i + 1 == nx || quiet(rc, row(i + 1, j))) &&
          (j + 1 == ny || quiet(rc, row(i, j + 1))))
        continue;  // no crossed edge starts in this row
      const std::uint8_t* c0 = C + (i * ny + j) * nz;
      const std::uint8_t* ci = i + 1 < nx ? c0 + step[0] : unqueried.data();
      const std::uint8_t* cj = j + 1 < ny ? c0 + step[1] : unqueried.data();
      const auto crosses = [](std::uint8_t a, std::uint8_t b) {
        return static_cast<std::uint8_t>(a != 2 && b != 2 && a != b);
      };
      for (i64 k = 0; k + 1 < nz; ++k)
        flags[static_cast<std::size_t>(k)] = static_cast<std::uint8_t>(
            crosses(c0[k], ci[k]) | crosses(c0[k], cj[k]) << 1 | crosses(c0[k], c0[k + 1]) << 2);
      flags[static_cast<std::size_t>(nz - 1)] = static_cast<std::uint8_t>(
          crosses(c0[nz - 1], ci[nz - 1]) | crosses(c0[nz - 1], cj[nz - 1]) << 1);
      for (i64 k = 0; k < nz; ++k) {
        if (flags[static_cast<std::size_t>(k)] == 0) continue;
        const i64 idx = (i * ny + j) * nz + k;
        for (int a = 0; a < 3; ++a) {
          if (!(flags[static_cast<std::size_t>(k)] >> a & 1)) continue;
          const float v0 = V[idx], v1 = V[idx + step[a]];
          const double t = (static_cast<double>(level) - v0) / (static_cast<double>(v1) - v0);
          if (t == 0.0) exact_hits = true;  // a corner exactly at the level: shared position
          double u[3] = {static_cast<double>(i), static_cast<double>(j), static_cast<double>(k)};
          u[a] += t;
          K.push_back((j * nz + k) * 3 + a);
          P.push_back({static_cast<float>(o.bbox_min[0] + u[0] * scale[0]),
                       static_cast<float>(o.bbox_min[1] + u[1] * scale[1]),
                       static_cast<float>(o.bbox_min[2] + u[2] * scale[2])});
        }
      }
    }
    row_start[ny] = static_cast<i64>(K.size());
  });
  std::vector<i64> base(static_cast<std::size_t>(nx) + 1, 0);
  for (i64 i = 0; i < nx; ++i)
    base[static_cast<std::size_t>(i + 1)] =
        base[static_cast<std::size_t>(i)] +
        static_cast<i64>(keys[static_cast<std::size_t>(i)].size());

  // Pass 2: triangles per slab of cubes.
  std::vector<std::vector<Tri>> slab_faces(static_cast<std::size_t>(nx - 1));
  std::vector<std::size_t> slab_skipped(static_cast<std::size_t>(nx - 1), 0);
  tbb::parallel_for(i64{0}, nx - 1, [&](i64 i) {
    auto& F = slab_faces[static_cast<std::size_t>(i)];
    std::size_t skipped = 0;
    std::vector<std::uint8_t> flags(static_cast<std::size_t>(nz));
    for (i64 j = 0; j + 1 < ny; ++j) {
      const std::uint8_t q00 = row(i, j), q10 = row(i + 1, j), q01 = row(i, j + 1),
                         q11 = row(i + 1, j + 1);
      if (q00 == 2 || q10 == 2 || q01 == 2 || q11 == 2) {  // every cube has an unqueried corner
        skipped += static_cast<std::size_t>(nz - 1);
        continue;
      }
      if (q00 != kMixed && q00 == q10 && q00 == q01 && q00 == q11) continue;  // no crossing
      // Rows of the four cube edges along k: r[y][x] for corner offsets (x, y).
      const std::uint8_t* r00 = C + (i * ny + j) * nz;
      const std::uint8_t* r10 = C + ((i + 1) * ny + j) * nz;
      const std::uint8_t* r01 = C + (i * ny + j + 1) * nz;
      const std::uint8_t* r11 = C + ((i + 1) * ny + j + 1) * nz;
      // Per cube, as bytes (vectorised): 2 an unqueried corner, 1 crossed, 0 neither.
      for (i64 k = 0; k + 1 < nz; ++k) {
        const int any =
            r00[k] | r10[k] | r11[k] | r01[k] | r00[k + 1] | r10[k + 1] | r11[k + 1] | r01[k + 1];
        const int all =
            r00[k] & r10[k] & r11[k] & r01[k] & r00[k + 1] & r10[k + 1] & r11[k + 1] & r01[k + 1];
        flags[static_cast<std::size_t>(k)] =
            static_cast<std::uint8_t>((any & 2) ? 2 : static_cast<int>(any != all));
      }
      skipped += static_cast<std::size_t>(
          std::count(flags.begin(), flags.begin() + (nz - 1), std::uint8_t{2}));
      for (i64 k = 0; k + 1 < nz; ++k) {
        if (flags[static_cast<std::size_t>(k)] != 1) continue;
        // Standard corner order: (0,0,0) (1,0,0) (1,1,0) (0,1,0), then the same at z + 1.
        const std::uint8_t c[8] = {r00[k],     r10[k],     r11[k],     r01[k],
                                   r00[k + 1], r10[k + 1], r11[k + 1], r01[k + 1]};
        int cfg = 0;
        for (int q = 0; q < 8; ++q) cfg |= c[q] << q;
        const int nt = T.count[static_cast<std::size_t>(cfg)];
        for (int t = 0; t < nt; ++t) {
          Tri tri{};
          for (int s = 0; s < 3; ++s) {
            const int e = T.tris[static_cast<std::size_t>(cfg)][static_cast<std::size_t>(t)]
                                [static_cast<std::size_t>(s)];
            const auto& st = T.start[static_cast<std::size_t>(e)];
            const i64 pi = i + st[0], pj = j + st[1];
            const i64 key = (pj * nz + (k + st[2])) * 3 + T.axis[static_cast<std::size_t>(e)];
            const auto& K = keys[static_cast<std::size_t>(pi)];
            const i64* rs = row_keys.data() + pi * (ny + 1) + pj;
            const auto it = std::lower_bound(K.begin() + rs[0], K.begin() + rs[1], key);
            tri[static_cast<std::size_t>(s)] =
                static_cast<std::uint32_t>(base[static_cast<std::size_t>(pi)] + (it - K.begin()));
          }
          F.push_back(tri);
        }
      }
    }
    slab_skipped[static_cast<std::size_t>(i)] = skipped;
  });

  Mesh m;
  const i64 nv = base.back();
  std::size_t nf = 0;
  for (const auto& F : slab_faces) nf += F.size();
  for (std::size_t s : slab_skipped) rep.skipped_cubes += s;
  if (nf == 0) {
    rep.no_surface = true;
    return m;
  }
  m.positions.resize(static_cast<std::size_t>(nv));
  tbb::parallel_for(i64{0}, nx, [&](i64 i) {
    std::copy(pos[static_cast<std::size_t>(i)].begin(), pos[static_cast<std::size_t>(i)].end(),
              m.positions.begin() + base[static_cast<std::size_t>(i)]);
  });
  m.faces.reserve(nf);
  for (const auto& F : slab_faces) m.faces.insert(m.faces.end(), F.begin(), F.end());
  if (rep.skipped_cubes > 0) {
    // Vertices of edges whose every cube was skipped: drop them.
    std::vector<std::uint32_t> remap(static_cast<std::size_t>(nv), 0);
    for (const Tri& f : m.faces)
      for (std::uint32_t v : f) remap[v] = 1;
    std::uint32_t next = 0;
    for (std::size_t v = 0; v < remap.size(); ++v) {
      if (!remap[v]) continue;
      m.positions[next] = m.positions[v];
      remap[v] = next++;
    }
    m.positions.resize(next);
    for (Tri& f : m.faces)
      for (std::uint32_t& v : f) v = remap[v];
  }
  if (exact_hits) {
    // Corners exactly at the level put one position on several edges: merge identical positions
    // (the reference's export does the same); faces that collapse stay, as in the reference.
    CleanupOptions c;
    c.merge_distance = 0.0f;
    c.remove_degenerate = false;
    c.remove_duplicates = false;
    CleanupReport cr;
    m = cleanup(m, c, &cr);
    rep.merged_vertices = cr.merged_vertices;
  }
  return m;
}

}  // namespace gen3d::mesh
