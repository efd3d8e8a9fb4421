// Packing: each chart's conservative texel footprint (in four orientations) is placed on a
// skyline, or in a hole under it, at a bounded number of candidate positions; the scale (texels
// per 3D unit) is searched so the layout just fits the square. When nothing fits, density goes
// down, then the gutter, then a uniform grid takes over: packing never fails.
#include <bit>
#include <numeric>
#include <queue>

#include <spdlog/spdlog.h>
#include <tbb/enumerable_thread_specific.h>
#include <tbb/parallel_for.h>
#include <tbb/parallel_reduce.h>

#include "mesh/uv_unwrap_internal.h"

namespace gen3d::mesh::unwrap_detail {
namespace {

// Rows [lo, hi] of one column.
struct Span {
  int lo, hi;
};

// One orientation of a chart's conservative footprint, as column profiles for skyline packing
// and the covered runs of each column for filling holes: the inside of a ring stays free.
struct Profile {
  int w = 0;                     // raw width in texels
  int top_max = 0;               // highest covered row
  std::vector<int> bottom, top;  // per raw column: lowest / highest covered row (-1 if empty)
  std::vector<int> dbottom;      // per dilated column (w + 2 gutter): lowest row of the footprint
                                 // grown by the gutter (kNoneRow if empty)
  // Covered runs per raw column and gutter-grown runs per dilated column, as offset lists.
  std::vector<uint32_t> run_at, drun_at;
  std::vector<Span> runs, druns;
};

constexpr int kNoneRow = std::numeric_limits<int>::max();

// A chart's footprint at one scale in the four 90-degree orientations (all keep UV winding).
struct Footprint {
  bool too_big = false;  // larger than the atlas at this scale (nothing else is set)
  int w0 = 0, h0 = 0;    // bitmap size in orientation 0
  Profile orient[4];
};

// Texel-space position of chart point q (orientation-0 texel coordinates) in orientation r.
D2 orient_point(D2 q, int r, int w0, int h0) {
  switch (r) {
    case 1:
      return {h0 - q.y, q.x};
    case 2:
      return {w0 - q.x, h0 - q.y};
    case 3:
      return {q.y, w0 - q.x};
    default:
      return q;
  }
}

// Does the triangle (texel units) overlap the unit square [x, x+1] x [y, y+1]? Separating axes:
// the square's axes (caller's bounding box) and the triangle's three edge normals.
bool tri_overlaps_texel(const D2 p[3], double orient, int x, int y) {
  for (int e = 0; e < 3; ++e) {
    const D2& a = p[e];
    const D2& b = p[(e + 1) % 3];
    // Inside of edge a->b is where orient * cross(b - a, q - a) >= 0; the square is outside if
    // its most-inside corner is still outside.
    const double nx = -(b.y - a.y) * orient, ny = (b.x - a.x) * orient;
    const double cx = nx > 0 ? x + 1 : x, cy = ny > 0 ? y + 1 : y;
    if (nx * (cx - a.x) + ny * (cy - a.y) < -1e-9) return false;
  }
  return true;
}

// Covered runs of each row of a w x h bitmap, as offset lists.
void row_runs(const std::vector<uint8_t>& bits, int w, int h, std::vector<uint32_t>& at,
              std::vector<Span>& runs) {
  at.assign(h + 1, 0);
  runs.clear();
  for (int y = 0; y < h; ++y) {
    at[y] = uint32_t(runs.size());
    const uint8_t* row = &bits[size_t(y) * w];
    for (int x = 0; x < w;) {
      if (!row[x]) {
        ++x;
        continue;
      }
      const int lo = x;
      while (x < w && row[x]) ++x;
      runs.push_back({lo, x - 1});
    }
  }
  at[h] = uint32_t(runs.size());
}

// Covered runs of each column of a w x h bitmap, as offset lists, read row by row (the bitmap's
// memory order): runs are closed per column as rows go up, then bucketed by column.
void column_runs(const std::vector<uint8_t>& bits, int w, int h, std::vector<int>& open,
                 std::vector<std::pair<int, Span>>& found, std::vector<uint32_t>& at,
                 std::vector<Span>& runs) {
  open.assign(w, -1);
  found.clear();
  for (int y = 0; y <= h; ++y) {
    const uint8_t* row = y < h ? &bits[size_t(y) * w] : nullptr;
    for (int x = 0; x < w; ++x) {
      const bool on = row && row[x];
      if (on && open[x] < 0) open[x] = y;
      if (!on && open[x] >= 0) found.push_back({x, {open[x], y - 1}}), open[x] = -1;
    }
  }
  at.assign(w + 1, 0);
  for (const auto& [x, r] : found) ++at[x + 1];
  for (int x = 0; x < w; ++x) at[x + 1] += at[x];
  runs.resize(found.size());
  std::vector<uint32_t> next(at.begin(), at.end() - 1);
  for (const auto& [x, r] : found) runs[next[x]++] = r;  // rows ascend within each column
}

// Appends column `from` of a run list.
void append_runs(const std::vector<uint32_t>& at, const std::vector<Span>& runs, int from,
                 std::vector<Span>& out) {
  out.insert(out.end(), runs.begin() + at[from], runs.begin() + at[from + 1]);
}

// One offset list turned half round: columns in reverse, rows flipped within [0, rows).
void half_turn_runs(const std::vector<uint32_t>& at, const std::vector<Span>& runs, int rows,
                    std::vector<uint32_t>& out_at, std::vector<Span>& out) {
  const int cols = int(at.size()) - 1;
  out_at.assign(cols + 1, 0);
  out.clear();
  for (int X = 0; X < cols; ++X) {
    out_at[X] = uint32_t(out.size());
    const int from = cols - 1 - X;
    for (uint32_t k = at[from + 1]; k-- > at[from];)
      out.push_back({rows - 1 - runs[k].hi, rows - 1 - runs[k].lo});
  }
  out_at[cols] = uint32_t(out.size());
}

// Profile `src` (`rows` rows high) turned half round; finish_profile completes it.
void half_turn(const Profile& src, int rows, Profile& dst) {
  dst.w = src.w;
  half_turn_runs(src.run_at, src.runs, rows, dst.run_at, dst.runs);
  half_turn_runs(src.drun_at, src.druns, rows, dst.drun_at, dst.druns);
}

// The runs of every dilated column: the runs of the raw columns within `gutter` of it, grown by
// `gutter` up and down and merged (a square of side 2 gutter + 1 around every covered texel).
void grow_runs(Profile& p, int gutter, std::vector<Span>& scratch) {
  const int dw = p.w + 2 * gutter;
  p.drun_at.assign(dw + 1, 0);
  p.druns.clear();
  for (int d = 0; d < dw; ++d) {
    p.drun_at[d] = uint32_t(p.druns.size());
    scratch.clear();
    for (int x = std::max(0, d - 2 * gutter); x <= std::min(p.w - 1, d); ++x)
      for (uint32_t k = p.run_at[x]; k < p.run_at[x + 1]; ++k)
        scratch.push_back({p.runs[k].lo - gutter, p.runs[k].hi + gutter});
    std::sort(scratch.begin(), scratch.end(),
              [](const Span& a, const Span& b) { return a.lo < b.lo; });
    for (const Span& r : scratch) {
      if (p.druns.size() > p.drun_at[d] && r.lo <= p.druns.back().hi + 1)
        p.druns.back().hi = std::max(p.druns.back().hi, r.hi);
      else
        p.druns.push_back(r);
    }
  }
  p.drun_at[dw] = uint32_t(p.druns.size());
}

void finish_profile(Profile& p) {
  p.bottom.assign(p.w, -1);
  p.top.assign(p.w, -1);
  p.top_max = -1;
  for (int x = 0; x < p.w; ++x)
    if (p.run_at[x] < p.run_at[x + 1]) {
      p.bottom[x] = p.runs[p.run_at[x]].lo;
      p.top[x] = p.runs[p.run_at[x + 1] - 1].hi;
      p.top_max = std::max(p.top_max, p.top[x]);
    }
  const int dw = int(p.drun_at.size()) - 1;
  p.dbottom.assign(dw, kNoneRow);
  for (int d = 0; d < dw; ++d)
    if (p.drun_at[d] < p.drun_at[d + 1]) p.dbottom[d] = p.druns[p.drun_at[d]].lo;
}

// Chart texel coordinates: uv * scale + 0.5, so the chart starts half a texel into its box.
// A chart wider or taller than `max_side` texels cannot be placed: it is reported as too_big
// without allocating anything, so memory stays bounded by the atlas size.
// Per-thread buffers of rasterize_footprint.
struct FootprintScratch {
  std::vector<uint8_t> bitmap;
  std::vector<int> open;
  std::vector<std::pair<int, Span>> found;
  std::vector<uint32_t> row_at, col_at;
  std::vector<Span> row_runs, col_runs, spans;
};

Footprint rasterize_footprint(const Chart& c, double scale, int gutter, int orientations,
                              int max_side, FootprintScratch& sc) {
  double umax = 0, vmax = 0;
  for (const D2& p : c.uv) umax = std::max(umax, p.x), vmax = std::max(vmax, p.y);
  Footprint fp;
  const double wd = std::ceil(umax * scale + 1.0), hd = std::ceil(vmax * scale + 1.0);
  if (!(wd <= max_side && hd <= max_side)) {  // the atlas is square: no rotation helps
    fp.too_big = true;
    return fp;
  }
  const int w = fp.w0 = int(wd);
  const int h = fp.h0 = int(hd);
  std::vector<uint8_t>& bitmap = sc.bitmap;
  bitmap.assign(size_t(w) * h, 0);
  for (const auto& tr : c.tris) {
    D2 p[3];
    for (int k = 0; k < 3; ++k) p[k] = {c.uv[tr[k]].x * scale + 0.5, c.uv[tr[k]].y * scale + 0.5};
    const double orient = cross2(p[0], p[1], p[2]) >= 0 ? 1.0 : -1.0;
    const int x0 = std::max(0, int(std::floor(std::min({p[0].x, p[1].x, p[2].x}))));
    const int x1 = std::min(w - 1, int(std::floor(std::max({p[0].x, p[1].x, p[2].x}))));
    const int y0 = std::max(0, int(std::floor(std::min({p[0].y, p[1].y, p[2].y}))));
    const int y1 = std::min(h - 1, int(std::floor(std::max({p[0].y, p[1].y, p[2].y}))));
    for (int y = y0; y <= y1; ++y)
      for (int x = x0; x <= x1; ++x) {
        uint8_t& b = bitmap[size_t(y) * w + x];
        if (!b && tri_overlaps_texel(p, orient, x, y)) b = 1;
      }
  }
  // Runs along the bitmap's rows and along its columns; each orientation's columns are one of
  // the two, possibly mirrored.
  row_runs(bitmap, w, h, sc.row_at, sc.row_runs);
  column_runs(bitmap, w, h, sc.open, sc.found, sc.col_at, sc.col_runs);
  // Orientations 0 and 1 read the bitmap's columns and rows; 2 and 3 are their half turns.
  for (int r = 0; r < std::min(orientations, 2); ++r) {
    Profile& p = fp.orient[r];
    p.w = r ? h : w;
    p.run_at.assign(p.w + 1, 0);
    p.runs.clear();
    for (int X = 0; X < p.w; ++X) {
      p.run_at[X] = uint32_t(p.runs.size());
      if (r == 0)  // column X of the bitmap
        append_runs(sc.col_at, sc.col_runs, X, p.runs);
      else  // (x, y) -> (h-1-y, x): bitmap row h-1-X, rows along x
        append_runs(sc.row_at, sc.row_runs, h - 1 - X, p.runs);
    }
    p.run_at[p.w] = uint32_t(p.runs.size());
    grow_runs(p, gutter, sc.spans);
    finish_profile(p);
  }
  for (int r = 2; r < orientations; ++r) {
    half_turn(fp.orient[r - 2], r == 2 ? h : w, fp.orient[r]);
    finish_profile(fp.orient[r]);
  }
  return fp;
}

// Texels taken by placed charts, per atlas column as a bitset over rows (each chart column is
// recorded as its [bottom, top] interval), plus the free runs ("holes") under the skyline per
// column, so hole searches can start at the first hole large enough or be skipped.
class Occupancy {
 public:
  // Rows below 0 are free (a chart's gutter may hang off the strip), so a run starting at row 0
  // counts `below` extra rows: the deepest a gutter can reach.
  Occupancy(int width, int rows, int below)
      : below_(below),
        words_((rows + 63) / 64),
        bits_(size_t(width) * words_, 0),
        max_hole_(width, 0),
        sky_(width, 0),
        runs_(width) {}
  int rows() const { return words_ * 64; }

  // Longest free run under the skyline in column c.
  int max_hole(int c) const { return max_hole_[c]; }

  // Highest occupied row of column c within [lo, hi], or -1.
  int highest(int c, int lo, int hi) const {
    lo = std::max(lo, 0);
    hi = std::min(hi, rows() - 1);
    if (lo > hi) return -1;
    const uint64_t* col = &bits_[size_t(c) * words_];
    for (int w = hi >> 6; w >= (lo >> 6); --w) {
      uint64_t m = col[w];
      if (w == (hi >> 6) && (hi & 63) != 63) m &= (uint64_t(1) << ((hi & 63) + 1)) - 1;
      if (w == (lo >> 6)) m &= ~uint64_t(0) << (lo & 63);
      if (m) return w * 64 + 63 - std::countl_zero(m);
    }
    return -1;
  }

  // Start of the lowest free run of column c at least `len` rows long: a hole under the skyline
  // or else the open space above it.
  int lowest_run(int c, int len) const {
    for (const Run& r : runs_[c])
      if (r.len >= len) return r.from;
    return sky_[c] == 0 ? -below_ : sky_[c];
  }

  void fill(int c, int lo, int hi) {
    uint64_t* col = &bits_[size_t(c) * words_];
    for (int r = lo; r <= hi; ++r) col[r >> 6] |= uint64_t(1) << (r & 63);
  }

  // Recomputes the free runs of column c below its skyline `sky`, a 64-row word at a time.
  void update_holes(int c, int sky) {
    const uint64_t* col = &bits_[size_t(c) * words_];
    sky_[c] = sky;
    runs_[c].clear();
    int best = 0;
    int r = 0;
    while (r < sky) {
      // Skip occupied rows.
      while (r < sky) {
        const uint64_t free_bits = ~col[r >> 6] >> (r & 63);
        if (free_bits == 0) {
          r = (r | 63) + 1;
          continue;
        }
        r += std::countr_zero(free_bits);
        break;
      }
      if (r >= sky) break;
      const int from = r;
      // Advance over free rows.
      while (r < sky) {
        const uint64_t occupied = col[r >> 6] >> (r & 63);
        if (occupied == 0) {
          r = (r | 63) + 1;
          continue;
        }
        r += std::countr_zero(occupied);
        break;
      }
      if (r >= sky) break;  // a run still open at `sky` is the open space above, not a hole
      const int start = from == 0 ? -below_ : from;  // the run at row 0 extends below the strip
      runs_[c].push_back({start, r - start});
      best = std::max(best, r - start);
    }
    max_hole_[c] = best;
  }

 private:
  struct Run {
    int from, len;
  };
  int below_;
  int words_;
  std::vector<uint64_t> bits_;
  std::vector<int> max_hole_;           // longest free run under the skyline, per column
  std::vector<int> sky_;                // skyline per column, as last given to update_holes
  std::vector<std::vector<Run>> runs_;  // free runs under the skyline, bottom to top
};

// Placement score = resulting top + kWasteWeight * mean free texels left under the chart: mostly
// bottom-left, but a slightly higher spot that leaves no hole wins (measured on 1.glb: +1-2%).
constexpr double kWasteWeight = 0.5;
// Candidate x positions per chart and orientation: an even spread over the strip plus the
// lowest valleys of the skyline. Bounded, so placing n charts costs O(n log n) whatever the
// atlas width (the old exhaustive scan cost O(n * width) and crawled on 10k-chart CAD meshes).
// 128 (a position every 16 texels of a 2048 atlas) finds the insides of rings that 48 missed:
// 2CylinderEngine packed 6% denser for about 50% more placement time.
constexpr int kSpreadCandidates = 128;
constexpr int kCandidateBudget = 16384;  // spread positions per pass over all charts
constexpr int kValleyCandidates = 16;
constexpr int kValleyPops = 128;
// Most charts for which the half turns are tried too.
constexpr size_t kHalfTurnCharts = 100;
// Sweeps of the hole search per candidate position (each climbs past at least one blocker).
constexpr int kHoleSweeps = 16;

// Minimum of the skyline over column ranges; lists the lowest columns best-first.
class SkylineIndex {
 public:
  explicit SkylineIndex(int width) : n_(std::bit_ceil(unsigned(std::max(width, 1)))), min_(2 * n_) {
    std::fill(min_.begin(), min_.end(), std::numeric_limits<int>::max());
    for (int c = 0; c < width; ++c) min_[n_ + c] = 0;
    for (int i = n_ - 1; i >= 1; --i) min_[i] = std::min(min_[2 * i], min_[2 * i + 1]);
  }
  void set(int c, int v) {
    int i = n_ + c;
    min_[i] = v;
    for (i >>= 1; i >= 1; i >>= 1) min_[i] = std::min(min_[2 * i], min_[2 * i + 1]);
  }
  // Up to `count` columns, lowest skyline first (ties: leftmost), at least `spacing` apart.
  void lowest(int count, int spacing, std::vector<int>& out) const {
    out.clear();
    using Node = std::pair<int, int>;  // (min, node), a min-heap via greater
    std::priority_queue<Node, std::vector<Node>, std::greater<Node>> heap;
    heap.push({min_[1], 1});
    int pops = 0;
    while (!heap.empty() && int(out.size()) < count && pops < kValleyPops) {
      const auto [v, i] = heap.top();
      heap.pop();
      if (v == std::numeric_limits<int>::max()) break;
      if (i >= n_) {
        ++pops;
        const int c = i - n_;
        bool near = false;
        for (int o : out) near |= std::abs(o - c) < spacing;
        if (!near) out.push_back(c);
        continue;
      }
      heap.push({min_[2 * i], 2 * i});
      heap.push({min_[2 * i + 1], 2 * i + 1});
    }
  }

 private:
  int n_;
  std::vector<int> min_;
};

// Packs the charts' footprints into a strip `width` wide; returns the strip height used (INT_MAX
// when it overflows) and fills `place`. Charts are placed in `order`. Each goes where its score
// is lowest among its candidate x positions: its top row plus a share of the free texels it
// leaves under it (skyline placement), or its top row when it fits entirely below the skyline,
// in a hole left under earlier charts.
int pack_charts(const std::vector<Footprint>& fp, int orientations,
                const std::vector<uint32_t>& order, int width, int gutter,
                std::vector<Placement>& place) {
  std::vector<int> sky(width, 0);  // first free row above the placed charts, per column
  SkylineIndex sky_index(width);
  Occupancy occ(width, 4 * width, gutter);
  int height = 0;
  place.assign(fp.size(), {});
  struct Best {
    long waste = std::numeric_limits<long>::max();
    int top = std::numeric_limits<int>::max(), x = 0, y = 0, orient = 0;
  };
  auto better = [](const Best& a, const Best& b) {  // total order: thread-count independent
    if (a.top != b.top) return a.top < b.top;       // `top` holds the score
    if (a.waste != b.waste) return a.waste < b.waste;
    if (a.orient != b.orient) return a.orient < b.orient;
    return a.x < b.x;
  };
  std::vector<int> valleys, xs;
  // Few charts can afford more positions each (better packing); the total stays bounded.
  const int spread =
      std::clamp(kCandidateBudget / std::max<int>(1, int(order.size())), kSpreadCandidates, 512);
  for (uint32_t ci : order) {
    Best best;
    for (int r = 0; r < orientations; ++r) {
      const Profile& f = fp[ci].orient[r];
      if (f.w > width) continue;
      const int dw = f.w + 2 * gutter;
      const int span = width - f.w;  // x in [0, span]
      xs.clear();
      const int stride = std::max(1, (span + spread - 1) / spread);
      for (int x = 0; x <= span; x += stride) xs.push_back(x);
      xs.push_back(span);
      sky_index.lowest(kValleyCandidates, std::max(1, f.w / 2), valleys);
      for (int c : valleys)  // the chart's left end, middle or right end in the valley
        for (int x : {c, c - f.w / 2, c - f.w + 1}) xs.push_back(std::clamp(x, 0, span));
      std::sort(xs.begin(), xs.end());
      xs.erase(std::unique(xs.begin(), xs.end()), xs.end());
      const int bound = best.top;  // candidates scoring above the best so far are skipped
      const Best found = tbb::parallel_reduce(
          tbb::blocked_range<size_t>(0, xs.size(), 16), Best{},
          [&](const tbb::blocked_range<size_t>& range, Best acc) {
            for (size_t xi = range.begin(); xi < range.end(); ++xi) {
              const int x = xs[xi];
              // Pruning only drops candidates strictly worse than one already kept, so the result
              // does not depend on how the range is split. Scores are >= y + top_max.
              const int limit = std::min(bound, acc.top) - f.top_max;
              int y = 0, critical = -1;  // dilated column that sets y
              for (int d = 0; d < dw && y <= limit; ++d) {
                const int col = x - gutter + d;
                if (col < 0 || col >= width || f.dbottom[d] == kNoneRow) continue;
                if (sky[col] - f.dbottom[d] > y) y = sky[col] - f.dbottom[d], critical = d;
              }
              if (y <= limit) {
                long waste = 0;  // free texels left between the skyline and the chart bottom
                for (int d = 0; d < f.w; ++d)
                  if (f.bottom[d] >= 0) waste += y + f.bottom[d] - sky[x + d];
                const Best cand{waste, y + f.top_max + int(kWasteWeight * double(waste) / f.w), x,
                                y, r};
                if (better(cand, acc)) acc = cand;
              }
              // Any lower position puts the critical column's lowest run under its skyline, so
              // that column needs a free run at least as long as that run.
              if (critical < 0) continue;
              const int ccol = x - gutter + critical;
              const Span& crun = f.druns[f.drun_at[critical]];
              const int clen = crun.hi - crun.lo + 1;
              if (occ.max_hole(ccol) < clen) continue;
              // Lowest y below the skyline position where the dilated footprint meets no
              // occupied texel: raise y past the highest blocker, column by column, until a full
              // sweep finds none.
              const int stop = std::min(y, std::min(bound, acc.top) - f.top_max + 1);
              // Nothing fits below the critical column's lowest long-enough run.
              int yh = std::max(0, occ.lowest_run(ccol, clen) - f.dbottom[critical]);
              // Bounded sweeps: under a stack of small charts each sweep may only climb past
              // one of them, and an unbounded climb made packing quadratic in the chart count.
              bool moved = true;
              for (int sweep = 0; moved && yh < stop; ++sweep) {
                if (sweep == kHoleSweeps) {
                  yh = stop;
                  break;
                }
                moved = false;
                for (int d = 0; d < dw && yh < stop; ++d) {
                  const int col = x - gutter + d;
                  if (col < 0 || col >= width) continue;
                  for (uint32_t k = f.drun_at[d]; k < f.drun_at[d + 1] && yh < stop; ++k) {
                    const Span& run = f.druns[k];
                    const int o = occ.highest(col, yh + run.lo, yh + run.hi);
                    if (o >= 0) yh = o - run.lo + 1, moved = true;
                  }
                }
              }
              if (!moved && yh < stop) {
                const Best cand{0, yh + f.top_max, x, yh, r};
                if (better(cand, acc)) acc = cand;
              }
            }
            return acc;
          },
          [&](const Best& a, const Best& b) { return better(a, b) ? a : b; });
      if (better(found, best)) best = found;
    }
    if (best.top == std::numeric_limits<int>::max()) return std::numeric_limits<int>::max();
    const Profile& f = fp[ci].orient[best.orient];
    if (best.y + f.top_max >= occ.rows()) return std::numeric_limits<int>::max();
    for (int c = 0; c < f.w; ++c) {
      if (f.bottom[c] < 0) continue;
      const int col = best.x + c;
      for (uint32_t k = f.run_at[c]; k < f.run_at[c + 1]; ++k)
        occ.fill(col, best.y + f.runs[k].lo, best.y + f.runs[k].hi);
      if (best.y + f.top[c] + 1 > sky[col]) {
        sky[col] = best.y + f.top[c] + 1;
        sky_index.set(col, sky[col]);
      }
      occ.update_holes(col, sky[col]);
    }
    height = std::max(height, best.y + f.top_max + 1);
    place[ci] = {best.x, best.y, best.orient};
  }
  return height;
}

// Last resort when even one-texel charts do not fit (more charts than texels): a uniform grid,
// every chart scaled alike into its own cell. Always valid, never dense.
PackResult grid_layout(const std::vector<Chart>& charts, int texture_size) {
  PackResult res;
  res.grid_fallback = true;
  const int cells = int(std::ceil(std::sqrt(double(charts.size()))));
  res.grid_cell = 1.0 / cells;
  double extent = 0;
  for (const Chart& c : charts)
    for (const D2& p : c.uv) extent = std::max({extent, p.x, p.y});
  // 80% of a cell, in texels, over the largest chart extent.
  res.scale = extent > 0 ? 0.8 * res.grid_cell * texture_size / extent : 1.0;
  res.place.resize(charts.size());
  for (size_t i = 0; i < charts.size(); ++i)
    res.place[i] = {int(i % size_t(cells)), int(i / size_t(cells)), 0};
  return res;
}

}  // namespace

PackResult pack_atlas(const std::vector<Chart>& charts, double total_area, const UnwrapOptions& opt,
                      const std::function<double()>& elapsed) {
  const int W = opt.texture_size;
  int g = opt.gutter;
  const bool requested = opt.texels_per_unit > 0;
  // Without a requested density, start from 60% of the square: about what the packer reaches.
  double scale = requested ? double(opt.texels_per_unit)
                           : std::sqrt(0.6 * double(W) * W / std::max(total_area, 1e-300));
  double extent = 0;  // largest chart side (3D units): at scale < 1 / extent every chart is tiny
  for (const Chart& c : charts)
    for (const D2& p : c.uv) extent = std::max({extent, p.x, p.y});
  PackResult res;
  res.requested_scale = scale;
  std::vector<uint32_t> order(charts.size());
  std::vector<Footprint> fp(charts.size());
  // Charts are already turned to their minimum-area box. Half turns help a layout of a few
  // large charts (a 76-chart sphere: 0.57 against 0.52 of the atlas) but double the placement
  // time; past a hundred charts they add about 1% (1.glb, 166 charts: 0.705 against 0.692) for
  // 10% of the whole unwrap, which lies on texgen's critical path.
  const int orientations = !opt.rotate_charts ? 1 : (charts.size() > kHalfTurnCharts ? 2 : 4);
  std::vector<Placement> place;
  double best_scale = 0;
  double lo_fail = std::numeric_limits<double>::infinity();  // smallest scale known not to fit
  int refinements = 0;  // passes since a layout first fit (searching down may take many)
  while (true) {
    ++res.passes;
    const double t_raster = elapsed();
    tbb::enumerable_thread_specific<FootprintScratch> scratch;
    fp.assign(charts.size(), {});
    tbb::parallel_for(size_t(0), charts.size(), [&](size_t ci) {
      fp[ci] = rasterize_footprint(charts[ci], scale, g, orientations, W, scratch.local());
    });
    const bool too_big =
        std::any_of(fp.begin(), fp.end(), [](const Footprint& f) { return f.too_big; });
    // Tallest first (then widest), the classic order for skyline packing; holes left under
    // overhangs are filled by later, smaller charts.
    const double t_pack = elapsed();
    int height = std::numeric_limits<int>::max();
    if (!too_big) {
      std::iota(order.begin(), order.end(), 0u);
      std::sort(order.begin(), order.end(), [&](uint32_t a, uint32_t b) {
        if (fp[a].h0 != fp[b].h0) return fp[a].h0 > fp[b].h0;
        if (fp[a].w0 != fp[b].w0) return fp[a].w0 > fp[b].w0;
        return a < b;
      });
      height = pack_charts(fp, orientations, order, W, g, place);
    }
    spdlog::debug("uv_unwrap: pack pass {} scale {:.3g} gutter {}: height {} ({:.3f} s + {:.3f} s)",
                  res.passes, scale, g, height, t_pack - t_raster, elapsed() - t_pack);
    const bool fits = height <= W;
    if (fits && scale > best_scale) best_scale = scale, res.place = place, res.gutter = g;
    if (!fits) lo_fail = std::min(lo_fail, scale);
    if (best_scale > 0 && elapsed() > opt.max_seconds) break;
    if (res.passes > 60 && best_scale > 0) break;
    if (!fits && best_scale == 0 && scale * extent < 0.25) {
      // Every chart is down to its minimum footprint and they still do not fit: their gutters
      // take the room. Halve the gutter; with none left, fall back to the grid.
      if (g == 0 || res.passes > 120) break;
      g /= 2;
      lo_fail = std::numeric_limits<double>::infinity();
      continue;
    }
    bool converged = false;
    double next = scale;
    if (fits) {
      // Grow towards the square, but stay below a scale that already failed (and at most the
      // requested density).
      const double fill = double(height) / W;
      next = scale * std::min(1.25, std::sqrt(1.0 / std::max(fill, 1e-3)) * 0.995);
      if (next >= lo_fail) next = 0.5 * (scale + lo_fail);
      if (requested) next = std::min(next, res.requested_scale);
      converged = fill > 0.99 || next / scale < 1.01;
    } else {
      const double over = height == std::numeric_limits<int>::max() ? 4.0 : double(height) / W;
      next = scale * std::max(0.25, std::min(0.98, std::sqrt(1.0 / over) * 0.99));
      if (best_scale > 0) next = std::max(next, 0.5 * (best_scale + scale));
      converged = best_scale > 0 && scale / best_scale < 1.01;
    }
    if (best_scale > 0 && (converged || ++refinements >= 8)) break;
    scale = next;
  }
  if (!(best_scale > 0)) {
    const PackResult grid = grid_layout(charts, W);
    PackResult out = grid;
    out.passes = res.passes;
    out.requested_scale = res.requested_scale;
    return out;
  }
  res.scale = best_scale;
  return res;
}

void write_chart_uvs(const Chart& c, const PackResult& pack, size_t chart_index, int texture_size,
                     Vec2* out) {
  const Placement& p = pack.place[chart_index];
  const double W = texture_size;
  if (pack.grid_fallback) {
    const double cell = pack.grid_cell * W;  // texels
    for (size_t i = 0; i < c.uv.size(); ++i)
      out[i] = {float(((p.x + 0.1) * cell + c.uv[i].x * pack.scale) / W),
                float(((p.y + 0.1) * cell + c.uv[i].y * pack.scale) / W)};
    return;
  }
  double umax = 0, vmax = 0;
  for (const D2& q : c.uv) umax = std::max(umax, q.x), vmax = std::max(vmax, q.y);
  const int w0 = int(std::ceil(umax * pack.scale + 1.0)),
            h0 = int(std::ceil(vmax * pack.scale + 1.0));
  for (size_t i = 0; i < c.uv.size(); ++i) {
    const D2 r = orient_point({c.uv[i].x * pack.scale + 0.5, c.uv[i].y * pack.scale + 0.5},
                              p.orient, w0, h0);
    out[i] = {float((p.x + r.x) / W), float((p.y + r.y) / W)};
  }
}

}  // namespace gen3d::mesh::unwrap_detail
