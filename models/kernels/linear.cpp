#include "models/kernels/linear.h"

#include <cblas.h>
#include <tbb/blocked_range2d.h>
#include <tbb/enumerable_thread_specific.h>
#include <tbb/parallel_for.h>
#include <tbb/task_arena.h>

#include <algorithm>
#include <atomic>
#include <vector>

#include "models/core/blas_threads.h"
#include "models/core/dtype.h"
#include "models/kernels/flops.h"

namespace gen3d::models::kernels {

namespace {

std::atomic<GemmThreading> g_threading{GemmThreading::kTbbTiles};

// Below this many multiply-adds a single BLAS call beats task overhead.
constexpr std::int64_t kParallelFlops = 1 << 20;
// Output tiles start large (per-tile packing overhead of OpenBLAS is ~18% of serial CPU time at
// 512x1024, ~35% at 128x256, measured on a 2048x1024x4096 GEMM) and shrink only until there are
// about 4 tiles per worker thread.
constexpr std::int64_t kTileM = 512;
constexpr std::int64_t kTileN = 1024;
constexpr std::int64_t kMinTileM = 64;
constexpr std::int64_t kMinTileN = 128;

void choose_tiles(std::int64_t M, std::int64_t N, std::int64_t* tm, std::int64_t* tn) {
  const std::int64_t want = 4 * static_cast<std::int64_t>(tbb::this_task_arena::max_concurrency());
  std::int64_t a = kTileM, b = kTileN;
  auto tiles = [&] { return ((M + a - 1) / a) * ((N + b - 1) / b); };
  while (tiles() < want && (a > kMinTileM || b > kMinTileN)) {
    if (b > kMinTileN && (b >= 2 * a || a <= kMinTileM)) {
      b /= 2;
    } else {
      a /= 2;
    }
  }
  *tm = a;
  *tn = b;
}

void epilogue(float* y, std::int64_t ldy, const float* b, std::int64_t m, std::int64_t n, Act act) {
  if (!b && act == Act::kNone) return;
  for (std::int64_t i = 0; i < m; ++i) {
    float* row = y + i * ldy;
    if (b) {
      for (std::int64_t j = 0; j < n; ++j) row[j] += b[j];
    }
    if (act != Act::kNone) {
      for (std::int64_t j = 0; j < n; ++j) row[j] = apply_act(act, row[j]);
    }
  }
}

void sgemm_tile(float* y, std::int64_t ldy, const float* x, std::int64_t ldx, const float* w,
                std::int64_t ldw, std::int64_t m, std::int64_t K, std::int64_t n) {
  cblas_sgemm(CblasRowMajor, CblasNoTrans, CblasTrans, static_cast<int>(m), static_cast<int>(n),
              static_cast<int>(K), 1.0f, x, static_cast<int>(ldx), w, static_cast<int>(ldw), 0.0f,
              y, static_cast<int>(ldy));
}

}  // namespace

void set_gemm_threading(GemmThreading t) {
  g_threading.store(t);
}

void linear(float* y, std::int64_t ldy, const float* x, std::int64_t ldx, const float* w,
            const float* b, std::int64_t M, std::int64_t K, std::int64_t N, Act act) {
  if (M <= 0 || N <= 0) return;
  count_flops(2.0 * static_cast<double>(M) * K * N);
  ensure_serial_blas();
  if (K == 0) {  // BLAS may reject K = 0; the product is zero
    for (std::int64_t i = 0; i < M; ++i) std::fill(y + i * ldy, y + i * ldy + N, 0.0f);
    epilogue(y, ldy, b, M, N, act);
    return;
  }
  if (M * N * K < kParallelFlops || g_threading.load() == GemmThreading::kSingleCall) {
    sgemm_tile(y, ldy, x, ldx, w, K, M, K, N);
    epilogue(y, ldy, b, M, N, act);
    return;
  }
  std::int64_t tm, tn;
  choose_tiles(M, N, &tm, &tn);
  tbb::parallel_for(tbb::blocked_range2d<std::int64_t>(0, M, tm, 0, N, tn),
                    [&](const tbb::blocked_range2d<std::int64_t>& r) {
                      const std::int64_t i0 = r.rows().begin(), m = r.rows().size();
                      const std::int64_t j0 = r.cols().begin(), n = r.cols().size();
                      float* yt = y + i0 * ldy + j0;
                      sgemm_tile(yt, ldy, x + i0 * ldx, ldx, w + j0 * K, K, m, K, n);
                      epilogue(yt, ldy, b ? b + j0 : nullptr, m, n, act);
                    });
}

void linear_f16w(float* y, std::int64_t ldy, const float* x, std::int64_t ldx,
                 const std::uint16_t* w, const float* b, std::int64_t M, std::int64_t K,
                 std::int64_t N, Act act) {
  if (M <= 0 || N <= 0) return;
  count_flops(2.0 * static_cast<double>(M) * K * N);
  ensure_serial_blas();
  // Tasks own a panel of output columns (and a slab of rows when M is large); each widens its
  // weight panel once into thread-local scratch and runs one GEMM over its rows.
  constexpr std::int64_t kPanelN = 64;
  const std::int64_t slab_m = std::max<std::int64_t>(512, M / 4 + 1);
  static tbb::enumerable_thread_specific<std::vector<float>> scratch;
  auto run = [&](std::int64_t i0, std::int64_t m, std::int64_t j0, std::int64_t n) {
    std::vector<float>& buf = scratch.local();
    if (buf.size() < static_cast<std::size_t>(n * K)) buf.resize(static_cast<std::size_t>(n * K));
    widen_f16(w + j0 * K, static_cast<std::size_t>(n * K), buf.data());
    float* yt = y + i0 * ldy + j0;
    if (K == 0) {
      for (std::int64_t i = 0; i < m; ++i) std::fill(yt + i * ldy, yt + i * ldy + n, 0.0f);
    } else {
      sgemm_tile(yt, ldy, x + i0 * ldx, ldx, buf.data(), K, m, K, n);
    }
    epilogue(yt, ldy, b ? b + j0 : nullptr, m, n, act);
  };
  if (M * N * K < kParallelFlops) {
    for (std::int64_t j0 = 0; j0 < N; j0 += kPanelN) run(0, M, j0, std::min(kPanelN, N - j0));
    return;
  }
  tbb::parallel_for(tbb::blocked_range2d<std::int64_t>(0, M, slab_m, 0, N, kPanelN),
                    [&](const tbb::blocked_range2d<std::int64_t>& r) {
                      run(r.rows().begin(), r.rows().size(), r.cols().begin(), r.cols().size());
                    });
}

namespace ref {

void linear(float* y, std::int64_t ldy, const float* x, std::int64_t ldx, const float* w,
            const float* b, std::int64_t M, std::int64_t K, std::int64_t N, Act act) {
  for (std::int64_t i = 0; i < M; ++i) {
    for (std::int64_t j = 0; j < N; ++j) {
      double acc = b ? b[j] : 0.0;
      for (std::int64_t k = 0; k < K; ++k)
        acc += static_cast<double>(x[i * ldx + k]) * static_cast<double>(w[j * K + k]);
      y[i * ldy + j] = apply_act(act, static_cast<float>(acc));
    }
  }
}

}  // namespace ref

}  // namespace gen3d::models::kernels
