// uv_unwrap: segmentation (uv_segment.cpp, sequential, deterministic) -> per-chart
// parameterization (uv_parameterize.cpp, parallel, each chart independent) -> packing
// (uv_pack.cpp, sequential placement, parallel search) -> output UVs and metrics. Parallel parts
// write only to their own chart's slot and reductions break ties by index, so results do not
// depend on the thread count.
#include "mesh/uv_unwrap.h"

#include <algorithm>
#include <chrono>
#include <cmath>
#include <numeric>
#include <string>

#include <spdlog/spdlog.h>
#include <tbb/enumerable_thread_specific.h>
#include <tbb/parallel_for.h>

#include "mesh/error.h"
#include "mesh/uv_unwrap_internal.h"
#include "progress/progress.h"

namespace gen3d::mesh {

using namespace unwrap_detail;
using Clock = std::chrono::steady_clock;

namespace {

// Charts narrower than this many gutters are strips to join to a neighbour (merge_strips).
constexpr double kStripWidth = 1.5;

// A chart that joined strips and still folds or overlaps itself is taken back apart into the
// charts it joined (each then split on its own if need be). False when it joined none.
bool unjoin_strips(const std::vector<uint32_t>& faces, const Topology& t,
                   std::vector<uint32_t>& strip_group, std::vector<uint32_t>& chart_of,
                   uint32_t& nchart) {
  std::vector<std::pair<uint32_t, uint32_t>> ids;  // (strip group, new chart), first seen first
  auto chart_for = [&](uint32_t g) {
    for (const auto& [group, chart] : ids)
      if (group == g) return chart;
    ids.push_back({g, nchart++});
    return ids.back().second;
  };
  uint32_t first = kNone;  // zero-area faces go with the first piece that has area
  bool several = false;
  for (uint32_t f : faces)
    if (t.area[f] > 0) {
      if (first == kNone) first = strip_group[f];
      several |= strip_group[f] != first;
    }
  if (!several) return false;
  for (uint32_t f : faces) {
    if (!(t.area[f] > 0)) strip_group[f] = first;
    chart_of[f] = chart_for(strip_group[f]);
  }
  return true;
}

}  // namespace

UnwrapResult uv_unwrap(const Mesh& mesh, const UnwrapOptions& opt) {
  const auto t0 = Clock::now();
  auto elapsed = [&] { return std::chrono::duration<double>(Clock::now() - t0).count(); };
  if (mesh.faces.empty()) throw MeshError("uv_unwrap: the mesh has no faces");
  if (opt.texture_size < 16 || opt.texture_size > 65536) {
    throw MeshError("uv_unwrap: texture_size must be in [16, 65536], got " +
                    std::to_string(opt.texture_size));
  }
  if (opt.gutter < 0 || opt.gutter > opt.texture_size / 4) {
    throw MeshError("uv_unwrap: gutter must be in [0, texture_size/4], got " +
                    std::to_string(opt.gutter));
  }
  for (const Tri& f : mesh.faces)
    for (uint32_t v : f)
      if (v >= mesh.positions.size()) throw MeshError("uv_unwrap: a face index is out of range");
  for (const Vec3& p : mesh.positions)
    if (!std::isfinite(p[0]) || !std::isfinite(p[1]) || !std::isfinite(p[2]))
      throw MeshError("uv_unwrap: the mesh has non-finite positions");

  const size_t nf = mesh.faces.size();
  // A million faces take seconds: the phases (topology, charts, packing) as steps.
  progress::Steps phases("unwrap phase", 3);
  const Topology topo = build_topology(mesh, std::clamp(opt.normal_smoothing, 0, 100));
  spdlog::debug("uv_unwrap: topology {:.3f} s", elapsed());
  phases.next();

  // 1. Segmentation, then parameterization. A chart that folds or overlaps itself in every
  // parameterization is split in two across its principal axis, repeatedly; after 16 rounds the
  // remaining faces become single-face charts, which cannot fold, so this always ends.
  std::vector<uint32_t> chart_of(nf, kNone);
  uint32_t nchart = 0;
  std::vector<char> in_set(nf, 1);
  const double cos_max =
      std::cos(std::clamp(double(opt.max_chart_angle_deg), 1.0, 89.0) * M_PI / 180.0);
  std::vector<Chart> charts;
  tbb::enumerable_thread_specific<std::vector<uint32_t>> local_index(
      [&] { return std::vector<uint32_t>(mesh.positions.size(), kNone); });
  // Self-overlap is judged at about the final texel size, the only scale where it matters.
  double total_area = 0;
  for (double a : topo.area) total_area += a;
  if (!(total_area > 0)) throw MeshError("uv_unwrap: the mesh has zero surface area");
  const double est_scale =
      opt.texels_per_unit > 0
          ? opt.texels_per_unit
          : std::sqrt(0.85 * double(opt.texture_size) * opt.texture_size / total_area);
  tbb::enumerable_thread_specific<std::vector<uint8_t>> overlap_buf;
  std::vector<std::vector<uint32_t>> pending = {std::vector<uint32_t>(nf)};  // face groups to grow
  std::iota(pending[0].begin(), pending[0].end(), 0u);
  size_t merged = 0, strips = 0, unjoined = 0;
  std::vector<uint32_t> strip_group;  // per face: its chart before strips were joined
  for (int round = 0; !pending.empty(); ++round) {
    const uint32_t first = nchart;
    if (round == 0) {
      grow_charts(topo, pending[0], in_set, cos_max, opt.max_chart_faces, opt, chart_of, nchart);
      std::fill(in_set.begin(), in_set.end(), 0);
      smooth_chart_borders(topo, cos_max, 4, chart_of, nchart);
      nchart = split_disconnected(topo, chart_of);
      if (opt.merge_charts) {
        // Under 12 x 12 texels a chart's 4-texel gutter takes more atlas than the chart.
        const double small_side = 12.0 / est_scale;
        merged = merge_charts(mesh, topo, cos_max, small_side * small_side, opt, chart_of, nchart);
      }
      strip_group = chart_of;
      if (opt.merge_charts && opt.gutter > 0) {
        strips = merge_strips(topo, kStripWidth * opt.gutter / est_scale, opt, chart_of);
      }
      nchart = attach_degenerate_faces(mesh, topo, chart_of);
      spdlog::debug("uv_unwrap: segmentation {} charts ({} merged, {} strips joined), {:.3f} s",
                    nchart, merged, strips, elapsed());
      merged += strips;
    } else {
      for (const auto& group : pending) {
        if (round >= 16) {
          for (uint32_t f : group) chart_of[f] = nchart++;
        } else if (unjoin_strips(group, topo, strip_group, chart_of, nchart)) {
          ++unjoined;
        } else {
          split_chart(mesh, topo, group, in_set, chart_of, nchart);
        }
      }
    }
    charts.resize(nchart);
    for (const auto& group : pending)
      for (uint32_t f : group) charts[chart_of[f]].faces.push_back(f);
    pending.clear();
    const bool lscm_allowed = opt.use_lscm && elapsed() < 0.5 * opt.max_seconds;
    tbb::parallel_for(first, nchart, [&](uint32_t ci) {
      parameterize_chart(charts[ci], mesh, topo, opt, lscm_allowed, est_scale, local_index.local(),
                         overlap_buf.local());
    });
    size_t split = 0;
    for (uint32_t ci = first; ci < nchart; ++ci) {
      Chart& c = charts[ci];
      if (!c.needs_split || c.faces.size() < 2) continue;  // a lone face is final
      ++split;
      for (uint32_t f : c.faces) chart_of[f] = kNone;
      pending.push_back(std::move(c.faces));
      c = Chart{};
    }
    spdlog::debug(
        "uv_unwrap: round {}: charts {}..{}, {} to split, {} gave back their strips so "
        "far, {:.3f} s",
        round, first, nchart, split, unjoined, elapsed());
  }
  // Drop emptied charts and renumber densely, keeping order.
  {
    std::vector<Chart> kept;
    std::vector<uint32_t> renum(charts.size(), kNone);
    for (uint32_t ci = 0; ci < charts.size(); ++ci)
      if (!charts[ci].faces.empty())
        renum[ci] = uint32_t(kept.size()), kept.push_back(std::move(charts[ci]));
    charts = std::move(kept);
    for (uint32_t f = 0; f < nf; ++f) chart_of[f] = renum[chart_of[f]];
  }

  phases.next();

  // 2. Packing.
  const int W = opt.texture_size;
  const PackResult pack = pack_atlas(charts, total_area, opt, elapsed);
  // Without a requested density, "reduced" means under half of what the surface area alone would
  // allow (the gutters of many small charts took the room).
  const bool reduced = pack.grid_fallback || pack.gutter < opt.gutter ||
                       (opt.texels_per_unit > 0 ? pack.scale < opt.texels_per_unit
                                                : pack.scale < 0.5 * pack.requested_scale);
  if (reduced) {
    spdlog::warn(
        "uv_unwrap: {} charts do not fit a {} texture at {:.4g} texels/unit with gutter {}: packed "
        "at {:.4g} texels/unit, gutter {}{}",
        charts.size(), W, pack.requested_scale, opt.gutter, pack.scale, pack.gutter,
        pack.grid_fallback ? " (uniform grid)" : "");
  }
  spdlog::debug("uv_unwrap: packing {:.3f} s", elapsed());
  phases.next();

  // 3. Output UVs: one per (chart, vertex), in chart order then local vertex order.
  UnwrapResult res;
  res.mesh = mesh;
  res.mesh.texture = nullptr;  // textures of the old UVs mean nothing on the new atlas
  res.mesh.pbr.texture = nullptr;
  for (Material& m : res.mesh.materials) {
    m.texture = nullptr;
    m.pbr.texture = nullptr;
  }
  // One texture space for every face, where materials otherwise each read their own (mesh.h).
  res.mesh.shared_atlas = true;
  res.mesh.uvs.clear();
  res.mesh.uv_faces.assign(nf, {});
  std::vector<uint32_t> uv_base(charts.size() + 1, 0);
  for (size_t ci = 0; ci < charts.size(); ++ci)
    uv_base[ci + 1] = uv_base[ci] + uint32_t(charts[ci].verts.size());
  res.mesh.uvs.resize(uv_base.back());
  tbb::parallel_for(size_t(0), charts.size(), [&](size_t ci) {
    const Chart& c = charts[ci];
    write_chart_uvs(c, pack, ci, W, &res.mesh.uvs[uv_base[ci]]);
    for (size_t i = 0; i < c.faces.size(); ++i)
      for (int k = 0; k < 3; ++k) res.mesh.uv_faces[c.faces[i]][k] = uv_base[ci] + c.tris[i][k];
  });
  res.face_chart = chart_of;

  // 4. Metrics.
  UnwrapMetrics& mt = res.metrics;
  mt.charts = charts.size();
  for (const Chart& c : charts) mt.lscm_charts += c.lscm;
  mt.texels_per_unit = pack.scale;
  mt.requested_texels_per_unit = pack.requested_scale;
  mt.density_reduced = reduced;
  mt.gutter = pack.grid_fallback ? 0 : pack.gutter;
  mt.merged_charts = merged;
  mt.pack_passes = pack.passes;
  double uv_total = 0, area_dist = 0, angle_dist = 0;
  for (size_t f = 0; f < nf; ++f) {
    const Vec2& a = res.mesh.uvs[res.mesh.uv_faces[f][0]];
    const Vec2& b = res.mesh.uvs[res.mesh.uv_faces[f][1]];
    const Vec2& c = res.mesh.uvs[res.mesh.uv_faces[f][2]];
    uv_total += 0.5 * std::abs(cross2({a[0], a[1]}, {b[0], b[1]}, {c[0], c[1]}));
  }
  for (size_t f = 0; f < nf; ++f) {
    const double A = topo.area[f];
    if (!(A > 0)) continue;
    const Tri& tr = mesh.faces[f];
    const D3 p0 = to_d3(mesh.positions[tr[0]]);
    const D3 e1 = sub(to_d3(mesh.positions[tr[1]]), p0), e2 = sub(to_d3(mesh.positions[tr[2]]), p0);
    const double l1 = norm(e1);
    const D3 x = {e1.x / l1, e1.y / l1, e1.z / l1};
    const D3 y = cross(topo.normal[f], x);
    const double q1x = l1, q2x = dot(e2, x), q2y = dot(e2, y);  // 3D triangle in its plane
    const Vec2& u0 = res.mesh.uvs[res.mesh.uv_faces[f][0]];
    const Vec2& u1 = res.mesh.uvs[res.mesh.uv_faces[f][1]];
    const Vec2& u2 = res.mesh.uvs[res.mesh.uv_faces[f][2]];
    const double du1 = (u1[0] - u0[0]) * W, dv1 = (u1[1] - u0[1]) * W;
    const double du2 = (u2[0] - u0[0]) * W, dv2 = (u2[1] - u0[1]) * W;
    // Jacobian J = [du1 du2; dv1 dv2] * inv([q1x q2x; 0 q2y]), in texels per unit.
    const double inv00 = 1 / q1x, inv01 = -q2x / (q1x * q2y), inv11 = 1 / q2y;
    const double j00 = du1 * inv00, j01 = du1 * inv01 + du2 * inv11;
    const double j10 = dv1 * inv00, j11 = dv1 * inv01 + dv2 * inv11;
    const double fro = j00 * j00 + j01 * j01 + j10 * j10 + j11 * j11;
    const double det = j00 * j11 - j01 * j10;
    const double disc = std::sqrt(std::max(0.0, fro * fro - 4 * det * det));
    const double s1 = std::sqrt(0.5 * (fro + disc)),
                 s2 = std::sqrt(std::max(0.0, 0.5 * (fro - disc)));
    const double w = A / total_area;
    angle_dist += w * (s2 > 0 ? s1 / s2 - 1 : 1e3);
    const double share = std::abs(det) * A / (uv_total * W * W);  // this face's UV area share
    area_dist += w * (share > 0 ? std::abs(std::log(share / w)) : 10.0);
  }
  mt.utilization = uv_total;
  mt.area_distortion = area_dist;
  mt.angle_distortion = angle_dist;
  for (size_t f = 0; f < nf; ++f)
    for (int k = 0; k < 3; ++k) {
      const uint32_t gnb = topo.nb[f][k];
      if (gnb != kNone && gnb > f && chart_of[gnb] != chart_of[f])
        mt.seam_length += topo.edge_len[f][k];
    }
  mt.seconds = elapsed();
  if (mt.seconds > opt.max_seconds) {
    spdlog::warn("uv_unwrap: took {:.2f} s, over the {:.2f} s budget", mt.seconds, opt.max_seconds);
  }
  return res;
}

// ---- check_uvs ----

UvCheckResult check_uvs(const Mesh& mesh, int texture_size, double stop_above) {
  if (texture_size < 1 || texture_size > 65536) {
    throw MeshError("check_uvs: texture_size must be in [1, 65536]");
  }
  UvCheckResult r;
  if (!mesh.has_uvs()) return r;
  if (mesh.uv_faces.size() != mesh.faces.size()) {
    throw MeshError("check_uvs: uv_faces and faces differ in length");
  }
  const bool materials = mesh.has_materials() && !mesh.shared_atlas;
  if (materials && mesh.face_materials.size() != mesh.faces.size())
    throw MeshError("check_uvs: face_materials and faces differ in length");
  const size_t nm = materials ? std::max<size_t>(1, mesh.materials.size()) : 1;
  for (const Vec2& t : mesh.uvs)
    for (float x : t) {
      r.non_finite += !std::isfinite(x);
      r.out_of_range += !(x >= 0.0f && x <= 1.0f);
    }
  std::vector<std::vector<uint32_t>> faces_of(nm);
  for (size_t f = 0; f < mesh.uv_faces.size(); ++f) {
    for (uint32_t k : mesh.uv_faces[f])
      if (k >= mesh.uvs.size()) throw MeshError("check_uvs: a uv index is out of range");
    const uint32_t m = materials ? mesh.face_materials[f] : 0u;
    if (m >= nm) throw MeshError("check_uvs: a face's material is out of range");
    faces_of[m].push_back(static_cast<uint32_t>(f));
  }
  const int T = texture_size;
  std::vector<uint8_t> count(size_t(T) * T);
  r.materials.resize(nm);
  for (size_t m = 0; m < nm; ++m) r.materials[m].faces = faces_of[m].size();
  for (size_t m = 0; m < nm; ++m) {
    UvMaterialCheck& mc = r.materials[m];
    if (faces_of[m].empty()) continue;
    std::fill(count.begin(), count.end(), uint8_t{0});
    for (uint32_t f : faces_of[m]) {
      const Tri& t = mesh.uv_faces[f];
      double lo[2] = {INFINITY, INFINITY}, hi[2] = {-INFINITY, -INFINITY};
      bool finite = true;
      for (uint32_t c : t)
        for (int a = 0; a < 2; ++a) {
          const double x = mesh.uvs[c][a];
          finite = finite && std::isfinite(x);
          lo[a] = std::min(lo[a], x);
          hi[a] = std::max(hi[a], x);
        }
      if (!finite) continue;
      if (hi[0] - lo[0] > 1.0 || hi[1] - lo[1] > 1.0) {
        ++r.wide_faces;
        continue;
      }
      // Whole repeats moved away: the face starts in [0, 1) and reaches below 2.
      const double su = std::floor(lo[0]), sv = std::floor(lo[1]);
      D2 p[3];
      for (int k = 0; k < 3; ++k)
        p[k] = {(mesh.uvs[t[k]][0] - su) * T, (mesh.uvs[t[k]][1] - sv) * T};
      if (cross2(p[0], p[1], p[2]) == 0) {
        ++r.degenerate_faces;
        continue;
      }
      // The face, and once more moved back by a repeat along each axis it crosses the edge of.
      const int nu = hi[0] - su > 1.0 ? 2 : 1, nv = hi[1] - sv > 1.0 ? 2 : 1;
      for (int j = 0; j < nv; ++j)
        for (int i = 0; i < nu; ++i) {
          const D2 d = {double(i) * T, double(j) * T};
          const D2 q0 = {p[0].x - d.x, p[0].y - d.y}, q1 = {p[1].x - d.x, p[1].y - d.y},
                   q2 = {p[2].x - d.x, p[2].y - d.y};
          raster_texel_centres(q0, q1, q2, T, T, [&](int x, int y) {
            uint8_t& n = count[size_t(y) * T + x];
            if (n < 255) ++n;
          });
        }
    }
    for (uint8_t n : count) {
      mc.covered_texels += n > 0;
      mc.overlapping_texels += n > 1;
    }
    mc.overlap_fraction =
        mc.covered_texels ? double(mc.overlapping_texels) / mc.covered_texels : 0.0;
    r.covered_texels += mc.covered_texels;
    r.overlapping_texels += mc.overlapping_texels;
    if (mc.covered_texels > 0 &&
        (r.worst_material < 0 ||
         mc.overlap_fraction > r.materials[r.worst_material].overlap_fraction))
      r.worst_material = static_cast<int>(m);
    if (mc.overlap_fraction > stop_above) {
      r.stopped = true;
      break;
    }
  }
  r.overlap_fraction = r.covered_texels ? double(r.overlapping_texels) / r.covered_texels : 0.0;
  return r;
}

}  // namespace gen3d::mesh
