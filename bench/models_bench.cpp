// Benchmarks of the models/ library (Google Benchmark; --benchmark_format=json for machine output).
// Every family pairs a baseline with the fast path in the same run:
//   Linear/*        ref:: triple loop  vs  TBB-tiled cblas_sgemm (serial BLAS) vs F16-weight GEMM
//   Attention/*     ref:: per-query attention  vs  blocked online-softmax attention
//   LnModulate, GatedResidual, QkRmsNorm, BiasGelu: ref:: / unfused passes vs the fused kernel
//   DiTForward/*    fp32 weights vs fp16-stored weights; 1 TBB thread vs all
//   Threads/*       one big GEMM: serial BLAS (1 core) vs OpenBLAS-threaded single call vs
//                   TBB tiles over serial BLAS vs TBB tiles over threaded BLAS (oversubscribed)
// Every benchmark reports wall time ("Time") and process CPU time ("CPU", all threads): CPU / Time
// is the number of cores kept busy (2.0 = both cores of the 2-core dev box). GFLOPS where defined.

#include <benchmark/benchmark.h>
#include <tbb/global_control.h>
#include <tbb/info.h>

#include <cmath>
#include <memory>
#include <random>
#include <vector>

#include "models/core/blas_threads.h"
#include "models/core/dtype.h"
#include "models/kernels/attention.h"
#include "models/kernels/fused.h"
#include "models/kernels/linear.h"
#include "models/kernels/norms.h"
#include "models/shape/dit.h"

namespace {

using namespace gen3d::models;
using i64 = std::int64_t;

std::vector<float> rnd(std::size_t n, std::uint64_t seed, float scale = 1.0f) {
  std::mt19937_64 rng(seed);
  std::normal_distribution<float> d(0.0f, scale);
  std::vector<float> v(n);
  for (auto& x : v) x = d(rng);
  return v;
}

void set_flops(benchmark::State& st, double flops_per_iter) {
  st.counters["GFLOPS"] = benchmark::Counter(
      flops_per_iter * static_cast<double>(st.iterations()) * 1e-9, benchmark::Counter::kIsRate);
}

// ---------------- Linear ----------------
// Args: M, K, N, variant (0 ref, 1 fast, 2 fast with F16 weights)
void BM_Linear(benchmark::State& st) {
  const i64 M = st.range(0), K = st.range(1), N = st.range(2);
  const int variant = static_cast<int>(st.range(3));
  auto x = rnd(static_cast<std::size_t>(M * K), 1),
       w = rnd(static_cast<std::size_t>(N * K), 2, 0.05f);
  auto b = rnd(static_cast<std::size_t>(N), 3);
  std::vector<std::uint16_t> w16(w.size());
  for (std::size_t i = 0; i < w.size(); ++i) w16[i] = float_to_half(w[i]);
  std::vector<float> y(static_cast<std::size_t>(M * N));
  for (auto _ : st) {
    if (variant == 0) kernels::ref::linear(y.data(), N, x.data(), K, w.data(), b.data(), M, K, N);
    if (variant == 1) kernels::linear(y.data(), N, x.data(), K, w.data(), b.data(), M, K, N);
    if (variant == 2) kernels::linear_f16w(y.data(), N, x.data(), K, w16.data(), b.data(), M, K, N);
    benchmark::DoNotOptimize(y.data());
  }
  set_flops(st, 2.0 * M * N * K);
  st.SetLabel(variant == 0 ? "ref" : variant == 1 ? "fast_f32" : "fast_f16w");
}
BENCHMARK(BM_Linear)
    ->ArgNames({"M", "K", "N", "variant"})
    ->Args({256, 1024, 1024, 0})
    ->Args({256, 1024, 1024, 1})
    ->Args({256, 1024, 1024, 2})
    ->Args({2, 1024, 6144, 1})  // modulation GEMV shape (B rows)
    ->Args({2, 1024, 6144, 2})
    ->Args({1024, 1024, 4096, 1})
    ->Args({1024, 1024, 4096, 2})
    ->Unit(benchmark::kMillisecond)
    ->UseRealTime()
    ->MeasureProcessCPUTime();

// ---------------- Attention ----------------
// Args: batch, heads, L, D, variant (0 ref, 1 fast float32, 2 fast bf16). Packed DiT qkv layout,
// self-attention.
void BM_Attention(benchmark::State& st) {
  const i64 B = st.range(0), nh = st.range(1), L = st.range(2), D = st.range(3);
  const bool fast = st.range(4) >= 1;
  const i64 H = nh * D;
  auto qkv = rnd(static_cast<std::size_t>(B * L * 3 * H), 4);
  std::vector<float> o(static_cast<std::size_t>(B * L * H));
  const kernels::HeadsView q{qkv.data(), L * 3 * H, 3 * H, D},
      k{qkv.data() + H, L * 3 * H, 3 * H, D}, v{qkv.data() + 2 * H, L * 3 * H, 3 * H, D};
  const kernels::HeadsOut out{o.data(), L * H, H, D};
  const kernels::AttentionShape s{B, nh, L, L, D, 0.0f, st.range(4) == 2};
  for (auto _ : st) {
    if (fast) {
      kernels::attention(out, q, k, v, s);
    } else {
      kernels::ref::attention(out, q, k, v, s);
    }
    benchmark::DoNotOptimize(o.data());
  }
  set_flops(st, 4.0 * B * nh * L * L * D);
  st.SetLabel(st.range(4) == 2 ? "fast_online_softmax_bf16" : fast ? "fast_online_softmax" : "ref");
}
BENCHMARK(BM_Attention)
    ->ArgNames({"B", "heads", "L", "D", "variant"})
    ->Args({1, 16, 512, 64, 0})
    ->Args({1, 16, 512, 64, 1})
    ->Args({1, 16, 512, 64, 2})
    ->Args({2, 16, 2048, 64, 1})
    ->Args({2, 16, 2048, 64, 2})
    ->Args({1, 5, 6144, 64, 1})  // a texture UNet's multiview attention (one view row, 512 px)
    ->Args({1, 5, 6144, 64, 2})
    ->Args({1, 16, 4442, 64, 2})  // the 2.0 DiT's joint attention: 3072 latents + 1370 tokens
    ->Unit(benchmark::kMillisecond)
    ->UseRealTime()
    ->MeasureProcessCPUTime();

// ---------------- Fused ops ----------------
// Args: variant (0 ref, 1 unfused fast passes, 2 fused). Shape: B = 2, T = 4442, H = 1024.
constexpr i64 kFB = 2, kFT = 4442, kFH = 1024, kHeads = 16, kD = 64;

void BM_LnModulate(benchmark::State& st) {
  const int variant = static_cast<int>(st.range(0));
  auto x = rnd(static_cast<std::size_t>(kFB * kFT * kFH), 5);
  auto mod = rnd(static_cast<std::size_t>(kFB * 6 * kFH), 6, 0.3f);
  std::vector<float> y(x.size());
  for (auto _ : st) {
    if (variant == 0) {
      kernels::ref::ln_modulate(y.data(), kFT * kFH, x.data(), kFT * kFH, kFB, kFT, kFH, mod.data(),
                                mod.data() + kFH, 6 * kFH, 1e-6f);
    } else if (variant == 1) {  // LayerNorm pass, then a modulation pass
      kernels::layer_norm(y.data(), kFH, x.data(), kFH, kFB * kFT, kFH, 1e-6f);
      for (i64 b = 0; b < kFB; ++b)
        for (i64 t = 0; t < kFT; ++t) {
          float* r = y.data() + (b * kFT + t) * kFH;
          const float* sh = mod.data() + b * 6 * kFH;
          const float* sc = sh + kFH;
          for (i64 i = 0; i < kFH; ++i) r[i] = (1.0f + sc[i]) * r[i] + sh[i];
        }
    } else {
      kernels::ln_modulate(y.data(), kFT * kFH, x.data(), kFT * kFH, kFB, kFT, kFH, mod.data(),
                           mod.data() + kFH, 6 * kFH, 1e-6f);
    }
    benchmark::DoNotOptimize(y.data());
  }
  st.SetLabel(variant == 0 ? "ref" : variant == 1 ? "unfused_fast" : "fused");
}
BENCHMARK(BM_LnModulate)
    ->Arg(0)
    ->Arg(1)
    ->Arg(2)
    ->Unit(benchmark::kMillisecond)
    ->UseRealTime()
    ->MeasureProcessCPUTime();

void BM_GatedResidual(benchmark::State& st) {
  const int variant = static_cast<int>(st.range(0));
  auto h = rnd(static_cast<std::size_t>(kFB * kFT * kFH), 7);
  auto y = rnd(h.size(), 8, 1e-3f);
  auto gate = rnd(static_cast<std::size_t>(kFB * 3 * kFH), 9, 1e-3f);
  std::vector<float> tmp(h.size());
  for (auto _ : st) {
    if (variant == 0) {
      kernels::ref::gated_residual(h.data(), kFT * kFH, y.data(), kFT * kFH, kFB, kFT, kFH,
                                   gate.data(), 3 * kFH);
    } else if (variant == 1) {  // gate multiply into a temporary, then an add pass
      for (i64 b = 0; b < kFB; ++b)
        for (i64 i = 0; i < kFT * kFH; ++i)
          tmp[static_cast<std::size_t>(b * kFT * kFH + i)] =
              gate[static_cast<std::size_t>(b * 3 * kFH + i % kFH)] *
              y[static_cast<std::size_t>(b * kFT * kFH + i)];
      for (std::size_t i = 0; i < h.size(); ++i) h[i] += tmp[i];
    } else {
      kernels::gated_residual(h.data(), kFT * kFH, y.data(), kFT * kFH, kFB, kFT, kFH, gate.data(),
                              3 * kFH);
    }
    benchmark::DoNotOptimize(h.data());
  }
  st.SetLabel(variant == 0 ? "ref" : variant == 1 ? "unfused_serial" : "fused");
}
BENCHMARK(BM_GatedResidual)
    ->Arg(0)
    ->Arg(1)
    ->Arg(2)
    ->Unit(benchmark::kMillisecond)
    ->UseRealTime()
    ->MeasureProcessCPUTime();

void BM_QkRmsNorm(benchmark::State& st) {
  const int variant = static_cast<int>(st.range(0));
  const i64 rows = kFB * kFT, ld = 3 * kFH;
  auto qkv0 = rnd(static_cast<std::size_t>(rows * ld), 10);
  auto qs = rnd(kD, 11, 0.1f), ks = rnd(kD, 12, 0.1f);
  for (auto& s : qs) s += 1.0f;
  for (auto& s : ks) s += 1.0f;
  auto qkv = qkv0;
  for (auto _ : st) {
    if (variant == 0) {
      kernels::ref::qk_rmsnorm(qkv.data(), rows, ld, kHeads, kD, kD, 0, kFH, qs.data(), ks.data(),
                               1e-6f);
    } else if (variant == 1) {  // two strided RMSNorm passes (q heads, then k heads)
      kernels::rms_norm(qkv.data(), kD, qkv.data(), kD, 0, kD, 1e-6f, qs.data());  // no-op warmup
      for (i64 n = 0; n < kHeads; ++n) {
        kernels::rms_norm(qkv.data() + n * kD, ld, qkv.data() + n * kD, ld, rows, kD, 1e-6f,
                          qs.data());
      }
      for (i64 n = 0; n < kHeads; ++n) {
        kernels::rms_norm(qkv.data() + kFH + n * kD, ld, qkv.data() + kFH + n * kD, ld, rows, kD,
                          1e-6f, ks.data());
      }
    } else {
      kernels::qk_rmsnorm(qkv.data(), rows, ld, kHeads, kD, kD, 0, kFH, qs.data(), ks.data(),
                          1e-6f);
    }
    benchmark::DoNotOptimize(qkv.data());
    st.PauseTiming();
    qkv = qkv0;  // keep values in range
    st.ResumeTiming();
  }
  st.SetLabel(variant == 0 ? "ref" : variant == 1 ? "per_head_passes" : "fused");
}
BENCHMARK(BM_QkRmsNorm)
    ->Arg(0)
    ->Arg(1)
    ->Arg(2)
    ->Unit(benchmark::kMillisecond)
    ->UseRealTime()
    ->MeasureProcessCPUTime();

void BM_BiasGelu(benchmark::State& st) {
  // GEMM + bias + GELU: separate passes (variant 0) vs the fused GEMM epilogue (variant 1).
  const int variant = static_cast<int>(st.range(0));
  const i64 M = 1024, K = 1024, N = 4096;
  auto x = rnd(static_cast<std::size_t>(M * K), 13),
       w = rnd(static_cast<std::size_t>(N * K), 14, 0.03f);
  auto b = rnd(static_cast<std::size_t>(N), 15);
  std::vector<float> y(static_cast<std::size_t>(M * N));
  for (auto _ : st) {
    if (variant == 0) {
      kernels::linear(y.data(), N, x.data(), K, w.data(), nullptr, M, K, N);
      kernels::bias_act(y.data(), M, N, N, b.data(), kernels::Act::kGeluTanh);
    } else {
      kernels::linear(y.data(), N, x.data(), K, w.data(), b.data(), M, K, N,
                      kernels::Act::kGeluTanh);
    }
    benchmark::DoNotOptimize(y.data());
  }
  st.SetLabel(variant == 0 ? "gemm_then_bias_gelu_pass" : "fused_epilogue");
}
BENCHMARK(BM_BiasGelu)
    ->Arg(0)
    ->Arg(1)
    ->Unit(benchmark::kMillisecond)
    ->UseRealTime()
    ->MeasureProcessCPUTime();

// ---------------- DiT forward ----------------
// Full-width blocks (H 1024, 16 heads, MLP 4096, context 1536, 64 channels) at reduced depth and
// token count so one iteration stays around a second on 2 cores.
// Args: storage (0 f32, 1 f16), threads (0 = all), latent tokens, context tokens
void BM_DiTForward(benchmark::State& st) {
  DiTConfig cfg;  // official full-size widths
  cfg.depth = 1;
  cfg.depth_single_blocks = 2;
  const auto storage = st.range(0) == 1 ? WeightStorage::kF16 : WeightStorage::kF32;
  const int threads = static_cast<int>(st.range(1));
  const i64 B = 2, L = st.range(2), Lc = st.range(3);
  std::unique_ptr<tbb::global_control> limit;
  if (threads > 0)
    limit = std::make_unique<tbb::global_control>(tbb::global_control::max_allowed_parallelism,
                                                  static_cast<std::size_t>(threads));
  static std::unique_ptr<Hunyuan3DDiT> models[2];
  auto& model = models[st.range(0)];
  if (!model) model = std::make_unique<Hunyuan3DDiT>(Hunyuan3DDiT::random(cfg, 42, {storage}));
  Tensor x({B, L, cfg.in_channels}), t({B}), ctx({B, Lc, cfg.context_in_dim});
  auto xv = rnd(static_cast<std::size_t>(x.numel()), 16),
       cv = rnd(static_cast<std::size_t>(ctx.numel()), 17);
  std::copy(xv.begin(), xv.end(), x.data());
  std::copy(cv.begin(), cv.end(), ctx.data());
  t.data()[0] = 0.3f;
  t.data()[1] = 0.7f;
  for (auto _ : st) {
    Tensor out = model->forward(x, t, ctx);
    benchmark::DoNotOptimize(out.data());
  }
  st.counters["weight_MiB"] = static_cast<double>(model->weight_bytes()) / (1 << 20);
  st.SetLabel(std::string(storage == WeightStorage::kF16 ? "f16_weights" : "f32_weights") +
              (threads > 0 ? " threads=" + std::to_string(threads) : " threads=all"));
}
BENCHMARK(BM_DiTForward)
    ->ArgNames({"f16", "threads", "L", "Lc"})
    ->Args({0, 1, 512, 257})
    ->Args({0, 0, 512, 257})
    ->Args({1, 0, 512, 257})
    ->Args({0, 0, 8, 6})  // tiny token count: weight-streaming (GEMV-like) regime
    ->Args({1, 0, 8, 6})
    ->Unit(benchmark::kMillisecond)
    ->UseRealTime()
    ->MeasureProcessCPUTime()
    ->Iterations(3);

// ---------------- Threads experiment ----------------
// One GEMM 2048 x 1024 x 4096 (17 GFLOP). Args: mode
//   0: serial BLAS, one call (1 core: the baseline)
//   1: OpenBLAS threaded (N = hardware threads), one call, no TBB
//   2: TBB tiles over serial BLAS (the library default)
//   3: TBB tiles over threaded BLAS (oversubscription: TBB threads x BLAS threads)
void BM_ThreadsGemm(benchmark::State& st) {
  const int mode = static_cast<int>(st.range(0));
  const i64 M = 2048, K = 1024, N = 4096;
  auto x = rnd(static_cast<std::size_t>(M * K), 18),
       w = rnd(static_cast<std::size_t>(N * K), 19, 0.03f);
  std::vector<float> y(static_cast<std::size_t>(M * N));
  const int hw = tbb::info::default_concurrency();
  ensure_serial_blas();
  const bool blas_threads_ok = set_blas_threads(mode == 1 || mode == 3 ? hw : 1);
  kernels::set_gemm_threading(mode == 0 || mode == 1 ? kernels::GemmThreading::kSingleCall
                                                     : kernels::GemmThreading::kTbbTiles);
  for (auto _ : st) {
    kernels::linear(y.data(), N, x.data(), K, w.data(), nullptr, M, K, N);
    benchmark::DoNotOptimize(y.data());
  }
  set_blas_threads(1);
  kernels::set_gemm_threading(kernels::GemmThreading::kTbbTiles);
  set_flops(st, 2.0 * M * N * K);
  static const char* names[] = {"serial_blas_1core", "openblas_threaded", "tbb_tiles_serial_blas",
                                "tbb_tiles_threaded_blas_oversubscribed"};
  st.SetLabel(std::string(names[mode]) + (blas_threads_ok ? "" : " (no BLAS thread API)") +
              " hw=" + std::to_string(hw));
}
BENCHMARK(BM_ThreadsGemm)
    ->DenseRange(0, 3)
    ->Unit(benchmark::kMillisecond)
    ->UseRealTime()
    ->MeasureProcessCPUTime();

// Many small GEMMs inside parallel TBB tasks (attention-like), where oversubscription hurts most.
// Args: BLAS threads inside the tasks (1 = library default, 0 = hardware threads)
void BM_ThreadsNested(benchmark::State& st) {
  const int hw = tbb::info::default_concurrency();
  const int bt = st.range(0) == 0 ? hw : static_cast<int>(st.range(0));
  auto qkv = rnd(static_cast<std::size_t>(2 * 1024 * 3 * 1024), 20);
  std::vector<float> o(static_cast<std::size_t>(2 * 1024 * 1024));
  const i64 H = 1024, D = 64, L = 1024;
  const kernels::HeadsView q{qkv.data(), L * 3 * H, 3 * H, D},
      k{qkv.data() + H, L * 3 * H, 3 * H, D}, v{qkv.data() + 2 * H, L * 3 * H, 3 * H, D};
  ensure_serial_blas();
  set_blas_threads(bt);
  for (auto _ : st) {
    kernels::attention({o.data(), L * H, H, D}, q, k, v, {2, 16, L, L, D, 0.0f});
    benchmark::DoNotOptimize(o.data());
  }
  set_blas_threads(1);
  st.SetLabel("attention B2 h16 L1024 D64, BLAS threads in tasks=" + std::to_string(bt));
}
BENCHMARK(BM_ThreadsNested)
    ->Arg(1)
    ->Arg(0)
    ->Unit(benchmark::kMillisecond)
    ->UseRealTime()
    ->MeasureProcessCPUTime();

}  // namespace

BENCHMARK_MAIN();
