#include "app/cli/bench_dit.h"

#include <sys/resource.h>
#include <tbb/blocked_range.h>
#include <tbb/flow_graph.h>
#include <tbb/parallel_reduce.h>
#include <tbb/task_arena.h>

#include <chrono>
#include <cmath>
#include <cstdio>
#include <functional>
#include <memory>
#include <nlohmann/json.hpp>
#include <random>
#include <sstream>
#include <tuple>
#include <vector>

#include "app/cli/device_option.h"
#include "models/core/precision.h"
#include "models/kernels/dnnl_matmul.h"
#include "models/kernels/flops.h"
#include "models/kernels/linear.h"
#include "models/shape/dit.h"
#include "models/shape/dit21.h"
#include "pipeline/error.h"

namespace gen3d::app::cli {

namespace {

using models::Precision;
using models::Tensor;

struct Usage {
  double cpu_s = 0;
  long involuntary = 0;
};

Usage usage_now() {
  rusage ru{};
  getrusage(RUSAGE_SELF, &ru);
  Usage u;
  u.cpu_s = static_cast<double>(ru.ru_utime.tv_sec + ru.ru_stime.tv_sec) +
            1e-6 * static_cast<double>(ru.ru_utime.tv_usec + ru.ru_stime.tv_usec);
  u.involuntary = ru.ru_nivcsw;
  return u;
}

void fill(Tensor& t, std::uint64_t seed) {
  std::mt19937_64 rng(seed);
  std::normal_distribution<float> d(0.0f, 1.0f);
  for (float& v : t.span()) v = d(rng);
}

struct Run {
  Precision precision = Precision::kFp32;
  std::shared_ptr<const void> model;  // the DiT of either architecture
  std::function<Tensor()> forward;
  std::size_t weight_bytes = 0;
  models::MoEUsage moe0;  // 2.1: routing counts before the timed forwards
  std::function<models::MoEUsage()> moe_usage;
  std::vector<double> ms;
  std::function<void()> gemm;  // --roof: the widest Linear alone
  std::vector<double> roof_gflops;
  double flops = 0, cpu_s = 0;
  long involuntary = 0;
  nlohmann::json alongside;
};

// A CPU-bound TBB workload standing in for the flow graph's image stages: `units` independent
// blocks of dependent square roots, spread over the arena.
double cpu_work(size_t units) {
  return tbb::parallel_reduce(
      tbb::blocked_range<size_t>(0, units, 1), 0.0,
      [](const tbb::blocked_range<size_t>& r, double acc) {
        for (size_t u = r.begin(); u < r.end(); ++u) {
          double x = static_cast<double>(u);
          for (int i = 0; i < 100000; ++i) x = std::sqrt(x + i);
          acc += x;
        }
        return acc;
      },
      std::plus<double>());
}

// Times `f` (wall ms, CPU s, involuntary context switches).
template <typename F>
std::tuple<double, double, long> timed(F&& f) {
  const Usage u0 = usage_now();
  const auto t0 = std::chrono::steady_clock::now();
  f();
  const auto t1 = std::chrono::steady_clock::now();
  const Usage u1 = usage_now();
  return {std::chrono::duration<double, std::milli>(t1 - t0).count(), u1.cpu_s - u0.cpu_s,
          u1.involuntary - u0.involuntary};
}

}  // namespace

void passive_omp_wait(char** argv) {
  models::kernels::passive_omp_wait(argv);
}

void add_bench_dit(CLI::App& bench, BenchDitOptions& opt) {
  auto* c = bench.add_subcommand(
      "dit",
      "Time the DiT forward with random weights at the given sizes; one JSON line per precision "
      "(ms_per_forward, gflops)");
  c->add_option("--arch", opt.arch,
                "2.0 (double + single-stream blocks) or 2.1 (U-ViT blocks with MoE FFNs)")
      ->check(CLI::IsMember({"2.0", "2.1"}))
      ->capture_default_str();
  c->add_option("--moe-layers", opt.moe_layers, "2.1: the last blocks with MoE FFNs")
      ->capture_default_str();
  c->add_option("--experts", opt.experts, "2.1: routed experts per MoE block")
      ->capture_default_str();
  c->add_option("--top-k", opt.top_k, "2.1: experts per token")->capture_default_str();
  c->add_option("--hidden", opt.hidden, "hidden size H")->capture_default_str();
  c->add_option("--heads", opt.heads, "attention heads")->capture_default_str();
  c->add_option("--depth", opt.depth, "double-stream blocks (2.0) or blocks (2.1)")
      ->capture_default_str();
  c->add_option("--single", opt.single, "2.0: single-stream blocks")->capture_default_str();
  c->add_option("--tokens", opt.tokens, "latent tokens L")->capture_default_str();
  c->add_option("--context-tokens", opt.context_tokens, "context tokens Lc")->capture_default_str();
  c->add_option("--context-dim", opt.context_dim, "context width")->capture_default_str();
  c->add_option("--in-channels", opt.in_channels, "latent channels")->capture_default_str();
  c->add_option("--batch", opt.batch, "batch B")->capture_default_str();
  c->add_option("--threads", opt.threads, "threads (0: all cores)")->capture_default_str();
  c->add_option("--reps", opt.reps, "timed forwards per precision (after one warm-up)")
      ->check(CLI::Range(1, 1000))
      ->capture_default_str();
  c->add_option("--precision", opt.precision,
                "auto, fp32, bf16, int8, or a comma list (interleaved in one run)")
      ->capture_default_str();
  c->add_flag("--alongside", opt.alongside,
              "also time one forward beside a CPU-bound TBB workload of the same length in a flow "
              "graph, against the two alone (together_over_sum near 1: the cores are shared "
              "without loss)");
  c->add_flag("--roof", opt.roof,
              "also time the GEMM roof (the FFN's first product, [B*L, H] x [H, 4H]) interleaved "
              "with the forwards; reports roof_gflops and fraction_of_roof")
      ->capture_default_str();
  c->add_option("--device", opt.device,
                "cpu, or cuda: the DiT in bf16 on the GPU (this build's CUDA backend)")
      ->check(CLI::IsMember({"cpu", "cuda"}))
      ->capture_default_str();
  opt.command = c;
}

int cmd_bench_dit(const BenchDitOptions& opt) {
  if (opt.hidden <= 0 || opt.heads <= 0 || opt.hidden % opt.heads != 0)
    throw pipeline::ConfigError("bench dit: --hidden must be a positive multiple of --heads");
  for (int v : {opt.tokens, opt.context_tokens, opt.context_dim, opt.in_channels, opt.batch})
    if (v <= 0) throw pipeline::ConfigError("bench dit: sizes must be positive");
  if (opt.depth < 0 || opt.single < 0 || opt.threads < 0)
    throw pipeline::ConfigError("bench dit: --depth, --single and --threads must be >= 0");
  models::DiTConfig cfg;
  cfg.hidden_size = opt.hidden;
  cfg.num_heads = opt.heads;
  cfg.depth = opt.depth;
  cfg.depth_single_blocks = opt.single;
  cfg.context_in_dim = opt.context_dim;
  cfg.in_channels = opt.in_channels;
  cfg.axes_dim = {opt.hidden / opt.heads};
  const bool v21 = opt.arch == "2.1";
  models::DiT21Config cfg21;
  cfg21.hidden_size = opt.hidden;
  cfg21.num_heads = opt.heads;
  cfg21.depth = opt.depth;
  cfg21.context_dim = opt.context_dim;
  cfg21.in_channels = opt.in_channels;
  cfg21.input_size = opt.tokens;
  cfg21.num_moe_layers = opt.moe_layers;
  cfg21.num_experts = opt.experts;
  cfg21.moe_top_k = opt.top_k;
  if (v21) {
    try {
      cfg21.validate();
    } catch (const std::exception& e) {
      throw pipeline::ConfigError(std::string("bench dit: ") + e.what());
    }
  }

  const models::Device device = models::parse_device(opt.device);
  if (device != models::Device::kCpu) {
    if (opt.roof || opt.alongside)
      throw pipeline::ConfigError("bench dit: --roof and --alongside time the CPU only");
    use_device(device);
  }

  std::vector<Run> runs;
  {
    std::stringstream ss(opt.precision);
    std::string item;
    while (std::getline(ss, item, ',')) {
      Precision p;
      try {
        p = models::resolve_precision(models::parse_precision(item));
      } catch (const std::exception& e) {
        throw pipeline::ConfigError(std::string("bench dit: --precision: ") + e.what());
      }
      if (device != models::Device::kCpu && p != Precision::kBf16)
        throw pipeline::ConfigError("bench dit: the CUDA backend runs bf16 (--precision bf16)");
      runs.emplace_back().precision = p;
    }
  }
  if (runs.empty()) throw pipeline::ConfigError("bench dit: --precision is empty");

  tbb::task_arena arena(opt.threads > 0 ? opt.threads : tbb::task_arena::automatic);
  const int threads = arena.max_concurrency();
  const std::int64_t B = opt.batch, L = opt.tokens, Lc = opt.context_tokens;
  Tensor x({B, L, opt.in_channels}), t({B}), ctx({B, Lc, opt.context_dim});
  fill(x, 1);
  fill(ctx, 2);
  for (std::int64_t b = 0; b < B; ++b)
    t.data()[b] = static_cast<float>(b + 1) / static_cast<float>(B + 1);

  arena.execute([&] {
    for (Run& r : runs) {
      // On a device the host copy stays float32 (the backend rounds it to bf16 on upload).
      const models::WeightStorage storage = device == models::Device::kCpu
                                                ? models::storage_for(r.precision)
                                                : models::WeightStorage::kF32;
      if (v21) {
        auto m = std::make_shared<const models::HunyuanDiTPlain>(
            models::HunyuanDiTPlain::random(cfg21, 42, {storage, device}));
        r.forward = [&x, &t, &ctx, m = m.get()] { return m->forward(x, t, ctx); };
        r.moe_usage = [m = m.get()] { return m->moe_usage(); };
        r.weight_bytes = m->weight_bytes();
        r.model = m;
      } else {
        auto m = std::make_shared<const models::Hunyuan3DDiT>(
            models::Hunyuan3DDiT::random(cfg, 42, {storage, device}));
        r.forward = [&x, &t, &ctx, m = m.get()] { return m->forward(x, t, ctx); };
        r.weight_bytes = m->weight_bytes();
        r.model = m;
      }
      if (opt.roof) {
        // One Linear of the FFN's shape with random weights, in the run's precision.
        const std::int64_t rows = B * (L + (v21 ? 1 : 0)), K = opt.hidden, N = 4 * opt.hidden;
        auto w = std::make_shared<Tensor>(Tensor({N, K}));
        fill(*w, 3);
        auto xin = std::make_shared<Tensor>(Tensor({rows, K}));
        fill(*xin, 4);
        auto y = std::make_shared<Tensor>(Tensor({rows, N}));
        std::shared_ptr<models::kernels::Bf16Weight> wb;
        std::shared_ptr<models::kernels::Int8Weight> wq;
        if (r.precision == Precision::kBf16)
          wb = std::make_shared<models::kernels::Bf16Weight>(w->data(), N, K);
        if (r.precision == Precision::kInt8)
          wq = std::make_shared<models::kernels::Int8Weight>(w->data(), N, K);
        r.gemm = [w, xin, y, wb, wq, rows, K, N] {
          if (wq)
            models::kernels::linear_int8(y->data(), N, xin->data(), K, *wq, nullptr, rows);
          else if (wb)
            models::kernels::linear_bf16(y->data(), N, xin->data(), K, *wb, nullptr, rows);
          else
            models::kernels::linear(y->data(), N, xin->data(), K, w->data(), nullptr, rows, K, N);
        };
        r.gemm();  // warm-up
      }
      (void)r.forward();  // warm-up: packing, primitive creation
      if (r.moe_usage) r.moe0 = r.moe_usage();
    }
    // Interleaved repetitions: rep i of every precision before rep i + 1 of any.
    for (int rep = 0; rep < opt.reps; ++rep) {
      for (Run& r : runs) {
        const auto f0 = models::kernels::flop_counter().load();
        const Usage u0 = usage_now();
        const auto t0 = std::chrono::steady_clock::now();
        Tensor out = r.forward();
        const auto t1 = std::chrono::steady_clock::now();
        const Usage u1 = usage_now();
        r.ms.push_back(std::chrono::duration<double, std::milli>(t1 - t0).count());
        r.flops = static_cast<double>(models::kernels::flop_counter().load() - f0);
        r.cpu_s += u1.cpu_s - u0.cpu_s;
        r.involuntary += u1.involuntary - u0.involuntary;
        if (r.gemm) {
          // Repeated so the roof is timed over at least ~1 s, between the forwards.
          const double gemm_flops =
              2.0 * static_cast<double>(B * (L + (v21 ? 1 : 0))) * opt.hidden * 4.0 * opt.hidden;
          int n = 0;
          const auto g0 = std::chrono::steady_clock::now();
          double s = 0;
          do {
            r.gemm();
            ++n;
            s = std::chrono::duration<double>(std::chrono::steady_clock::now() - g0).count();
          } while (s < 1.0);
          r.roof_gflops.push_back(gemm_flops * n / s * 1e-9);
        }
      }
    }
    if (!opt.alongside) return;
    // The workload alone, sized to last about as long as one forward.
    const double unit_ms = std::get<0>(timed([&] { (void)cpu_work(64); })) / 64.0;
    for (Run& r : runs) {
      std::vector<double> s = r.ms;
      std::sort(s.begin(), s.end());
      const size_t units =
          std::max<size_t>(1, static_cast<size_t>(s[s.size() / 2] / std::max(unit_ms, 1e-3)));
      const auto [model_ms, model_cpu, model_sw] = timed([&] { (void)r.forward(); });
      const auto [work_ms, work_cpu, work_sw] = timed([&] { (void)cpu_work(units); });
      // Both at once, each in its own flow-graph node, as the executor runs stages.
      const auto [both_ms, both_cpu, both_sw] = timed([&] {
        tbb::flow::graph g;
        tbb::flow::function_node<int> model(g, 1, [&](int) { (void)r.forward(); });
        tbb::flow::function_node<int> work(g, 1, [&](int) { (void)cpu_work(units); });
        model.try_put(0);
        work.try_put(0);
        g.wait_for_all();
      });
      const auto per_thread = [&](double cpu, double ms) { return cpu / (ms * 1e-3) / threads; };
      r.alongside = {
          {"model_ms", model_ms},
          {"work_ms", work_ms},
          {"together_ms", both_ms},
          {"together_over_sum", both_ms / (model_ms + work_ms)},
          {"cpu_per_thread_model", per_thread(model_cpu, model_ms)},
          {"cpu_per_thread_work", per_thread(work_cpu, work_ms)},
          {"cpu_per_thread_together", per_thread(both_cpu, both_ms)},
          {"involuntary_switches_per_s_alone",
           static_cast<double>(model_sw + work_sw) / ((model_ms + work_ms) * 1e-3)},
          {"involuntary_switches_per_s_together", static_cast<double>(both_sw) / (both_ms * 1e-3)}};
    }
  });

  for (const Run& r : runs) {
    std::vector<double> s = r.ms;
    std::sort(s.begin(), s.end());
    const double median = s[s.size() / 2];
    double total_ms = 0;
    for (double m : r.ms) total_ms += m;
    nlohmann::json j;
    j["bench"] = "dit";
    j["arch"] = opt.arch;
    if (r.moe_usage) {
      // Rows the routed experts ran against a dense pass of every expert (the shared expert runs
      // every row in both), over the timed forwards.
      const models::MoEUsage u = r.moe_usage();
      const double routed = static_cast<double>(u.routed_rows - r.moe0.routed_rows);
      const double dense = static_cast<double>(u.dense_rows - r.moe0.dense_rows);
      const double tokens = static_cast<double>(u.tokens - r.moe0.tokens);
      j["moe_layers"] = opt.moe_layers;
      j["experts"] = opt.experts;
      j["top_k"] = opt.top_k;
      j["moe_expert_rows_executed_over_dense"] =
          dense > 0 ? (routed + tokens) / (dense + tokens) : 0.0;
    }
    j["precision"] = std::string(models::precision_name(r.precision));
    j["device"] = opt.device;
    if (device != models::Device::kCpu) {
      j["gpu"] = device_description(device);
      // One more forward with every operation bracketed by events: where the time goes.
      nlohmann::json by_op = nlohmann::json::object();
      double total = 0;
      for (const auto& [name, ms] : profile_device(device, [&] { (void)r.forward(); })) {
        by_op[name] = ms;
        total += ms;
      }
      j["gpu_ms_by_op"] = by_op;
      j["gpu_ms_in_ops"] = total;
    }
    j["hidden"] = opt.hidden;
    j["heads"] = opt.heads;
    j["depth"] = opt.depth;
    j["single"] = opt.single;
    j["tokens"] = opt.tokens;
    j["context_tokens"] = opt.context_tokens;
    j["context_dim"] = opt.context_dim;
    j["in_channels"] = opt.in_channels;
    j["batch"] = opt.batch;
    j["threads"] = threads;
    j["reps"] = opt.reps;
    j["ms_per_forward"] = median;
    j["ms_min"] = s.front();
    j["ms_max"] = s.back();
    j["gflop_per_forward"] = r.flops * 1e-9;
    j["gflops"] = r.flops * 1e-9 / (median * 1e-3);
    if (!r.roof_gflops.empty()) {
      std::vector<double> g = r.roof_gflops;
      std::sort(g.begin(), g.end());
      const double roof = g[g.size() / 2];
      j["roof_gflops"] = roof;
      j["roof_gflops_range"] = {g.front(), g.back()};
      j["fraction_of_roof"] = r.flops * 1e-9 / (median * 1e-3) / roof;
    }
    j["weight_mib"] = static_cast<double>(r.weight_bytes) / (1 << 20);
    // CPU seconds per wall second over the timed forwards, per thread: ~1 when every thread is
    // busy, and never above 1 unless more threads ran than the arena allows.
    j["cpu_per_thread"] = r.cpu_s / (total_ms * 1e-3) / threads;
    j["involuntary_switches_per_forward"] =
        static_cast<double>(r.involuntary) / static_cast<double>(opt.reps);
    j["onednn"] = models::kernels::dnnl_description();
    if (opt.alongside) j["alongside"] = r.alongside;
    std::printf("%s\n", j.dump().c_str());
  }
  std::fflush(stdout);
  return 0;
}

}  // namespace gen3d::app::cli
