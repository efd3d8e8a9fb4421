#include "models/kernels/dnnl_matmul.h"

#include <omp.h>
#include <tbb/parallel_for.h>
#include <tbb/task_arena.h>
#include <unistd.h>

#include <algorithm>
#include <atomic>
#include <cstddef>
#include <cstdlib>
#include <deque>
#include <map>
#include <memory>
#include <mutex>
#include <oneapi/dnnl/dnnl.hpp>
#include <shared_mutex>
#include <string>
#include <tuple>
#include <unordered_map>
#include <utility>

#include "models/core/dtype.h"
#include "models/core/error.h"
#include "models/kernels/flops.h"
#include "models/kernels/quantize.h"

namespace gen3d::models::kernels {

namespace {

using dnnl::memory;
using dt = dnnl::memory::data_type;
using i64 = std::int64_t;

dnnl::engine& engine() {
  static dnnl::engine e(dnnl::engine::kind::cpu, 0);
  return e;
}

dnnl::stream& stream() {
  thread_local dnnl::stream s(engine());
  return s;
}

std::atomic<int> g_in_flight{0};
std::atomic<int> g_last_threads{0};

// One owner of the cores: a call takes the arena's concurrency less the calls already running
// (at least one thread, at most the OpenMP thread limit), and gives it back when done.
// oneDNN splits its work for the thread count it sees when a primitive is created and assumes
// that count when it runs: a primitive is therefore created and executed under the same grant,
// and our primitive caches are keyed by it.
class ThreadGrant {
 public:
  ThreadGrant() {
    const int before = g_in_flight.fetch_add(1);
    const int conc = tbb::this_task_arena::max_concurrency();
    threads_ = std::clamp(conc - before, 1, std::max(1, omp_get_thread_limit()));
    omp_set_num_threads(threads_);
    g_last_threads.store(threads_, std::memory_order_relaxed);
  }
  ~ThreadGrant() { g_in_flight.fetch_sub(1); }
  ThreadGrant(const ThreadGrant&) = delete;
  ThreadGrant& operator=(const ThreadGrant&) = delete;
  int threads() const { return threads_; }

 private:
  int threads_ = 1;
};

// oneDNN's process-wide primitive cache makes concurrent creators of one primitive wait on each
// other inside the library, where ThreadSanitizer cannot see it. Creating primitives one at a time
// (a cache hit costs microseconds) keeps that ordering visible; executions still run side by side.
std::mutex g_create_mu;

template <class Make>
auto create(Make make) {
  std::lock_guard lock(g_create_mu);
  return make();
}

// Debian's oneDNN shares one library-managed scratchpad between primitives, so two calls
// running at once would overwrite each other's temporaries. Every primitive here is therefore
// created with a user scratchpad, and each execution brings its own.
dnnl::primitive_attr user_scratchpad() {
  dnnl::primitive_attr attr;
  attr.set_scratchpad_mode(dnnl::scratchpad_mode::user);
  return attr;
}

// Runs a primitive on this thread's stream with a scratchpad of this thread. The buffer is not
// shared: oneDNN's OpenMP execution never runs another task of ours on this thread meanwhile.
void run(const dnnl::primitive& prim, const memory::desc& scratch_desc,
         std::unordered_map<int, memory> args) {
  thread_local std::vector<std::byte> buffer;
  const std::size_t bytes = scratch_desc.get_size();
  if (buffer.size() < bytes) buffer.resize(bytes);
  args.emplace(DNNL_ARG_SCRATCHPAD, memory(scratch_desc, engine(), buffer.data()));
  prim.execute(stream(), args);
  stream().wait();
}

void reorder(const memory& src, const memory& dst) {
  const auto [pd, prim] = create([&] {
    const dnnl::reorder::primitive_desc d(src, dst, user_scratchpad());
    return std::pair(d, dnnl::reorder(d));
  });
  run(prim, pd.scratchpad_desc(), {{DNNL_ARG_FROM, src}, {DNNL_ARG_TO, dst}});
}

// Rounds rows x cols floats (row stride ld) into a contiguous bf16 buffer.
void round_rows(std::uint16_t* dst, const float* src, i64 rows, i64 cols, i64 ld) {
  auto row = [&](i64 r) {
    round_to_bf16(src + r * ld, static_cast<std::size_t>(cols), dst + r * cols);
  };
  if (rows * cols < (i64{1} << 16)) {
    for (i64 r = 0; r < rows; ++r) row(r);
    return;
  }
  tbb::parallel_for(i64{0}, rows, [&](i64 r) { row(r); });
}

// Operands rounded to bf16 live in per-call buffers: a thread-local one could be reused by a
// call that this thread steals while it waits inside the rounding's parallel loop.
std::unique_ptr<std::uint16_t[]> bf16_buffer(i64 n) {
  return std::make_unique_for_overwrite<std::uint16_t[]>(static_cast<std::size_t>(n));
}

dnnl::algorithm act_alg(Act a) {
  switch (a) {
    case Act::kGeluTanh:
      return dnnl::algorithm::eltwise_gelu_tanh;
    case Act::kGeluErf:
      return dnnl::algorithm::eltwise_gelu_erf;
    case Act::kSilu:
      return dnnl::algorithm::eltwise_swish;
    case Act::kNone:
      break;
  }
  return dnnl::algorithm::undef;
}

// Matmul primitives of the linear layers, by shape.
using LinearKey =
    std::tuple<i64, i64, i64, i64, bool, int, int>;  // M, K, N, ldy, bias, act, threads
struct LinearPrim {
  dnnl::matmul::primitive_desc pd;
  dnnl::matmul prim;
};

std::shared_mutex g_prim_mu;
std::map<LinearKey, std::shared_ptr<LinearPrim>> g_prims;

dnnl::matmul::primitive_desc make_linear_pd(i64 M, i64 K, i64 N, i64 ldy, bool bias, Act act) {
  const memory::desc src({M, K}, dt::bf16, memory::format_tag::ab);
  const memory::desc wei({K, N}, dt::bf16, memory::format_tag::any);
  const memory::desc dst({M, N}, dt::f32, memory::dims{ldy, 1});
  dnnl::primitive_attr attr = user_scratchpad();
  if (act != Act::kNone) {
    dnnl::post_ops po;
    po.append_eltwise(1.0f, act_alg(act), 1.0f, 0.0f);
    attr.set_post_ops(po);
  }
  if (bias) {
    const memory::desc b({1, N}, dt::f32, memory::format_tag::ab);
    return dnnl::matmul::primitive_desc(dnnl::matmul::desc(src, wei, b, dst), attr, engine());
  }
  return dnnl::matmul::primitive_desc(dnnl::matmul::desc(src, wei, dst), attr, engine());
}

std::shared_ptr<LinearPrim> linear_prim(i64 M, i64 K, i64 N, i64 ldy, bool bias, Act act,
                                        const ThreadGrant& grant) {
  const LinearKey key{M, K, N, ldy, bias, static_cast<int>(act), grant.threads()};
  {
    std::shared_lock lock(g_prim_mu);
    auto it = g_prims.find(key);
    if (it != g_prims.end()) return it->second;
  }
  auto p = std::make_shared<LinearPrim>();
  create([&] {
    p->pd = make_linear_pd(M, K, N, ldy, bias, act);
    p->prim = dnnl::matmul(p->pd);
  });
  std::unique_lock lock(g_prim_mu);
  return g_prims.emplace(key, std::move(p)).first->second;
}

// The row count the weights are first packed for (the layout rarely depends on it).
constexpr i64 kPackRows = 256;

}  // namespace

struct Bf16Weight::Impl {
  std::mutex mu;
  // Packed copies by layout; the first is made at construction, others only if a shape's
  // primitive asks for another layout. A deque: callers keep references while others append.
  std::deque<std::pair<memory::desc, memory>> packed;

  const memory& for_desc(const memory::desc& want) {
    std::lock_guard lock(mu);
    for (auto& [d, m] : packed)
      if (d == want) return m;
    memory m(want, engine());
    reorder(packed.front().second, m);
    packed.emplace_back(want, std::move(m));
    return packed.back().second;
  }
};

Bf16Weight::Bf16Weight(const float* w, i64 N, i64 K)
    : n_(N), k_(K), impl_(std::make_unique<Impl>()) {
  if (N <= 0 || K <= 0) throw ModelError("Bf16Weight: empty weight");
  std::vector<std::uint16_t> bits(static_cast<std::size_t>(N * K));
  round_rows(bits.data(), w, N, K, K);
  // w[N, K] row-major is the matmul's weights [K, N] with strides {1, K} (format "ba").
  const memory::desc plain({K, N}, dt::bf16, memory::format_tag::ba);
  memory src(plain, engine(), bits.data());
  ThreadGrant grant;
  const auto pd = create([&] { return make_linear_pd(kPackRows, K, N, N, false, Act::kNone); });
  memory dst(pd.weights_desc(), engine());
  reorder(src, dst);
  impl_->packed.emplace_back(pd.weights_desc(), std::move(dst));
}

Bf16Weight::~Bf16Weight() = default;

std::size_t Bf16Weight::bytes() const {
  std::lock_guard lock(impl_->mu);
  std::size_t b = 0;
  for (const auto& [d, m] : impl_->packed) b += d.get_size();
  return b;
}

std::vector<std::uint16_t> Bf16Weight::plain() const {
  std::vector<std::uint16_t> bits(static_cast<std::size_t>(n_ * k_));
  const memory::desc plain({k_, n_}, dt::bf16, memory::format_tag::ba);
  memory dst(plain, engine(), bits.data());
  std::lock_guard lock(impl_->mu);
  memory& src = impl_->packed.front().second;
  reorder(src, dst);
  return bits;
}

void linear_bf16(float* y, i64 ldy, const float* x, i64 ldx, const Bf16Weight& w, const float* b,
                 i64 M, Act act) {
  const i64 K = w.k(), N = w.n();
  if (M <= 0) return;
  count_flops(2.0 * static_cast<double>(M) * K * N);
  const auto xs = bf16_buffer(M * K);
  round_rows(xs.get(), x, M, K, ldx);
  ThreadGrant grant;
  const auto p = linear_prim(M, K, N, ldy, b != nullptr, act, grant);
  const memory& wm = w.impl().for_desc(p->pd.weights_desc());
  memory src(p->pd.src_desc(), engine(), xs.get());
  memory dst(p->pd.dst_desc(), engine(), y);
  std::unordered_map<int, memory> args{
      {DNNL_ARG_SRC, src}, {DNNL_ARG_WEIGHTS, wm}, {DNNL_ARG_DST, dst}};
  if (b) {
    const memory::desc bd({1, N}, dt::f32, memory::format_tag::ab);
    args.emplace(DNNL_ARG_BIAS, memory(bd, engine(), const_cast<float*>(b)));
  }
  run(p->prim, p->pd.scratchpad_desc(), std::move(args));
}

// ---- int8 linear layers ------------------------------------------------------------------------

namespace {

// s8 x s8 -> f32 matmuls by shape, with the weight scales as runtime per-column output scales.
// The weight stays plain [N, K] ([K, N] with strides {1, K}): oneDNN 2.6 picks its int8 gemm for
// it, as fast as for a packed layout at the DiT's shapes, and no copy per layout is needed.
using Int8Key = std::tuple<i64, i64, i64, i64, int>;  // M, K, N, ldy, threads
std::shared_mutex g_int8_mu;
std::map<Int8Key, std::shared_ptr<LinearPrim>> g_int8_prims;

std::shared_ptr<LinearPrim> int8_prim(i64 M, i64 K, i64 N, i64 ldy, const ThreadGrant& grant) {
  const Int8Key key{M, K, N, ldy, grant.threads()};
  {
    std::shared_lock lock(g_int8_mu);
    auto it = g_int8_prims.find(key);
    if (it != g_int8_prims.end()) return it->second;
  }
  auto p = std::make_shared<LinearPrim>();
  create([&] {
    const memory::desc src({M, K}, dt::s8, memory::format_tag::ab);
    const memory::desc wei({K, N}, dt::s8, memory::format_tag::ba);
    const memory::desc dst({M, N}, dt::f32, memory::dims{ldy, 1});
    dnnl::primitive_attr attr = user_scratchpad();
    attr.set_output_scales(1 << 1, {DNNL_RUNTIME_F32_VAL});
    p->pd = dnnl::matmul::primitive_desc(dnnl::matmul::desc(src, wei, dst), attr, engine());
    p->prim = dnnl::matmul(p->pd);
  });
  std::unique_lock lock(g_int8_mu);
  return g_int8_prims.emplace(key, std::move(p)).first->second;
}

// The epilogue y = act(y · sx[m] + b[n]) in place: a binary multiply by the [M, 1] row scales with
// the bias add and the activation as post-ops (jit-compiled and threaded like the matmul).
using EpilogueKey = std::tuple<i64, i64, i64, bool, int, int>;  // M, N, ldy, bias, act, threads
struct EpiloguePrim {
  dnnl::binary::primitive_desc pd;
  dnnl::binary prim;
};
std::shared_mutex g_epilogue_mu;
std::map<EpilogueKey, std::shared_ptr<EpiloguePrim>> g_epilogues;

std::shared_ptr<EpiloguePrim> epilogue_prim(i64 M, i64 N, i64 ldy, bool bias, Act act,
                                            const ThreadGrant& grant) {
  const EpilogueKey key{M, N, ldy, bias, static_cast<int>(act), grant.threads()};
  {
    std::shared_lock lock(g_epilogue_mu);
    auto it = g_epilogues.find(key);
    if (it != g_epilogues.end()) return it->second;
  }
  auto p = std::make_shared<EpiloguePrim>();
  create([&] {
    const memory::desc y({M, N}, dt::f32, memory::dims{ldy, 1});
    const memory::desc rows({M, 1}, dt::f32, memory::format_tag::ab);
    dnnl::primitive_attr attr = user_scratchpad();
    dnnl::post_ops po;
    if (bias)
      po.append_binary(dnnl::algorithm::binary_add, {{1, N}, dt::f32, memory::format_tag::ab});
    if (act != Act::kNone) po.append_eltwise(1.0f, act_alg(act), 1.0f, 0.0f);
    attr.set_post_ops(po);
    p->pd = dnnl::binary::primitive_desc(
        dnnl::binary::desc(dnnl::algorithm::binary_mul, y, rows, y), attr, engine());
    p->prim = dnnl::binary(p->pd);
  });
  std::unique_lock lock(g_epilogue_mu);
  return g_epilogues.emplace(key, std::move(p)).first->second;
}

// Quantized activations live in per-call buffers, like the bf16 ones.
std::unique_ptr<std::int8_t[]> s8_buffer(i64 n) {
  return std::make_unique_for_overwrite<std::int8_t[]>(static_cast<std::size_t>(n));
}

}  // namespace

Int8Weight::Int8Weight(const float* w, i64 N, i64 K)
    : n_(N),
      k_(K),
      q_(static_cast<std::size_t>(std::max<i64>(N * K, 0))),
      scales_(static_cast<std::size_t>(std::max<i64>(N, 0))) {
  if (N <= 0 || K <= 0) throw ModelError("Int8Weight: empty weight");
  quantize_rows_s8(q_.data(), K, scales_.data(), w, K, N, K);
}

void linear_int8(float* y, i64 ldy, const float* x, i64 ldx, const Int8Weight& w, const float* b,
                 i64 M, Act act) {
  const i64 K = w.k(), N = w.n();
  if (M <= 0) return;
  count_flops(2.0 * static_cast<double>(M) * K * N);
  const auto xq = s8_buffer(M * K);
  std::vector<float> sx(static_cast<std::size_t>(M));
  quantize_rows_s8(xq.get(), K, sx.data(), x, ldx, M, K);
  ThreadGrant grant;
  const auto p = int8_prim(M, K, N, ldy, grant);
  memory dst(p->pd.dst_desc(), engine(), y);
  run(p->prim, p->pd.scratchpad_desc(),
      {{DNNL_ARG_SRC, memory(p->pd.src_desc(), engine(), xq.get())},
       {DNNL_ARG_WEIGHTS,
        memory(p->pd.weights_desc(), engine(), const_cast<std::int8_t*>(w.data()))},
       {DNNL_ARG_DST, dst},
       {DNNL_ARG_ATTR_OUTPUT_SCALES,
        memory({{N}, dt::f32, memory::format_tag::a}, engine(), const_cast<float*>(w.scales()))}});
  const auto e = epilogue_prim(M, N, ldy, b != nullptr, act, grant);
  std::unordered_map<int, memory> args{
      {DNNL_ARG_SRC_0, dst},
      {DNNL_ARG_SRC_1, memory(e->pd.src1_desc(), engine(), sx.data())},
      {DNNL_ARG_DST, dst}};
  if (b)
    args.emplace(
        DNNL_ARG_ATTR_MULTIPLE_POST_OP(0) | DNNL_ARG_SRC_1,
        memory({{1, N}, dt::f32, memory::format_tag::ab}, engine(), const_cast<float*>(b)));
  run(e->prim, e->pd.scratchpad_desc(), std::move(args));
}

// ---- convolutions ----------------------------------------------------------------------------

namespace {

struct ConvKey {
  i64 n, h, w, cin, cout, kh, kw, stride, pt, pb, pl, pr;
  bool bias;
  int threads;
  auto tie() const {
    return std::tie(n, h, w, cin, cout, kh, kw, stride, pt, pb, pl, pr, bias, threads);
  }
  bool operator<(const ConvKey& o) const { return tie() < o.tie(); }
};
struct ConvPrim {
  dnnl::convolution_forward::primitive_desc pd;
  dnnl::convolution_forward prim;
};
std::shared_mutex g_conv_mu;
std::map<ConvKey, std::shared_ptr<ConvPrim>> g_convs;

dnnl::convolution_forward::primitive_desc make_conv_pd(const ConvKey& k) {
  const i64 oh = (k.h + k.pt + k.pb - k.kh) / k.stride + 1;
  const i64 ow = (k.w + k.pl + k.pr - k.kw) / k.stride + 1;
  const memory::desc src({k.n, k.cin, k.h, k.w}, dt::bf16, memory::format_tag::nhwc);
  const memory::desc wei({k.cout, k.cin, k.kh, k.kw}, dt::bf16, memory::format_tag::any);
  const memory::desc dst({k.n, k.cout, oh, ow}, dt::f32, memory::format_tag::nhwc);
  const memory::dims strides{k.stride, k.stride}, pl{k.pt, k.pl}, pr{k.pb, k.pr};
  if (k.bias) {
    const memory::desc b({k.cout}, dt::f32, memory::format_tag::a);
    return dnnl::convolution_forward::primitive_desc(
        dnnl::convolution_forward::desc(dnnl::prop_kind::forward_inference,
                                        dnnl::algorithm::convolution_direct, src, wei, b, dst,
                                        strides, pl, pr),
        user_scratchpad(), engine());
  }
  return dnnl::convolution_forward::primitive_desc(
      dnnl::convolution_forward::desc(dnnl::prop_kind::forward_inference,
                                      dnnl::algorithm::convolution_direct, src, wei, dst, strides,
                                      pl, pr),
      user_scratchpad(), engine());
}

std::shared_ptr<ConvPrim> conv_prim(const ConvKey& key) {
  {
    std::shared_lock lock(g_conv_mu);
    auto it = g_convs.find(key);
    if (it != g_convs.end()) return it->second;
  }
  auto p = std::make_shared<ConvPrim>();
  create([&] {
    p->pd = make_conv_pd(key);
    p->prim = dnnl::convolution_forward(p->pd);
  });
  std::unique_lock lock(g_conv_mu);
  return g_convs.emplace(key, std::move(p)).first->second;
}

}  // namespace

struct Bf16ConvWeight::Impl : Bf16Weight::Impl {};

Bf16ConvWeight::Bf16ConvWeight(const float* ohwi, const float* b, i64 co, i64 ci, i64 h, i64 w)
    : cout(co), cin(ci), kh(h), kw(w), impl_(std::make_unique<Impl>()) {
  if (co <= 0 || ci <= 0 || h <= 0 || w <= 0) throw ModelError("Bf16ConvWeight: empty weight");
  if (b) bias.assign(b, b + co);
  std::vector<std::uint16_t> bits(static_cast<std::size_t>(co * h * w * ci));
  round_rows(bits.data(), ohwi, 1, static_cast<i64>(bits.size()), 0);
  const memory::desc plain({co, ci, h, w}, dt::bf16, memory::format_tag::ohwi);
  memory src(plain, engine(), bits.data());
  // The layout a 64 x 64 map prefers (others are reordered once on first use).
  ThreadGrant grant;
  const ConvKey key{1, 64,          64,    ci,          co,    h,     w,
                    1, (h - 1) / 2, h / 2, (w - 1) / 2, w / 2, false, grant.threads()};
  const auto pd = create([&] { return make_conv_pd(key); });
  memory dst(pd.weights_desc(), engine());
  reorder(src, dst);
  impl_->packed.emplace_back(pd.weights_desc(), std::move(dst));
}

Bf16ConvWeight::~Bf16ConvWeight() = default;

std::size_t Bf16ConvWeight::bytes() const {
  std::lock_guard lock(impl_->mu);
  std::size_t b = bias.size() * sizeof(float);
  for (const auto& [d, m] : impl_->packed) b += d.get_size();
  return b;
}

std::vector<std::uint16_t> Bf16ConvWeight::plain() const {
  std::vector<std::uint16_t> bits(static_cast<std::size_t>(cout * kh * kw * cin));
  const memory::desc plain({cout, cin, kh, kw}, dt::bf16, memory::format_tag::ohwi);
  memory dst(plain, engine(), bits.data());
  std::lock_guard lock(impl_->mu);
  memory& src = impl_->packed.front().second;
  reorder(src, dst);
  return bits;
}

void conv2d_bf16(float* y, const float* x, i64 batch, i64 h, i64 w, const Bf16ConvWeight& wt,
                 i64 stride, i64 pt, i64 pb, i64 pl, i64 pr) {
  const i64 oh = (h + pt + pb - wt.kh) / stride + 1, ow = (w + pl + pr - wt.kw) / stride + 1;
  if (batch <= 0 || oh <= 0 || ow <= 0) return;
  count_flops(2.0 * static_cast<double>(batch * oh * ow) * wt.kh * wt.kw * wt.cin * wt.cout);
  const auto xs = bf16_buffer(batch * h * w * wt.cin);
  round_rows(xs.get(), x, batch * h * w, wt.cin, wt.cin);
  ThreadGrant grant;
  const ConvKey key{batch, h,  w,  wt.cin, wt.cout,          wt.kh,          wt.kw, stride,
                    pt,    pb, pl, pr,     !wt.bias.empty(), grant.threads()};
  const auto p = conv_prim(key);
  const memory& wm = wt.impl().for_desc(p->pd.weights_desc());
  memory src(p->pd.src_desc(), engine(), xs.get());
  memory dst(p->pd.dst_desc(), engine(), y);
  std::unordered_map<int, memory> args{
      {DNNL_ARG_SRC, src}, {DNNL_ARG_WEIGHTS, wm}, {DNNL_ARG_DST, dst}};
  if (!wt.bias.empty())
    args.emplace(DNNL_ARG_BIAS,
                 memory(p->pd.bias_desc(), engine(), const_cast<float*>(wt.bias.data())));
  run(p->prim, p->pd.scratchpad_desc(), std::move(args));
}

void matmul_bf16(float* c, i64 ldc, const float* a, i64 lda, const float* b, i64 ldb, bool trans_b,
                 i64 M, i64 K, i64 N, float alpha) {
  if (M <= 0 || N <= 0) return;
  count_flops(2.0 * static_cast<double>(M) * K * N);
  const auto as = bf16_buffer(M * K), bs = bf16_buffer(K * N);
  round_rows(as.get(), a, M, K, lda);
  if (trans_b)
    round_rows(bs.get(), b, N, K, ldb);  // [N, K]
  else
    round_rows(bs.get(), b, K, N, ldb);  // [K, N]
  const memory::desc ad({M, K}, dt::bf16, memory::format_tag::ab);
  const memory::desc bd({K, N}, dt::bf16,
                        trans_b ? memory::format_tag::ba : memory::format_tag::ab);
  const memory::desc cd({M, N}, dt::f32, memory::dims{ldc, 1});
  dnnl::primitive_attr attr = user_scratchpad();
  if (alpha != 1.0f) attr.set_output_scales(0, {alpha});
  ThreadGrant grant;
  const auto [pd, prim] = create([&] {
    const dnnl::matmul::primitive_desc d(dnnl::matmul::desc(ad, bd, cd), attr, engine());
    return std::pair(d, dnnl::matmul(d));
  });
  memory am(ad, engine(), as.get()), bm(bd, engine(), bs.get()), cm(cd, engine(), c);
  run(prim, pd.scratchpad_desc(), {{DNNL_ARG_SRC, am}, {DNNL_ARG_WEIGHTS, bm}, {DNNL_ARG_DST, cm}});
}

namespace {

// Serial bf16 GEMMs by shape, strides and epilogue.
using GemmKey = std::tuple<i64, i64, i64, i64, i64, i64, bool, float, bool>;
struct GemmPrim {
  dnnl::matmul::primitive_desc pd;
  dnnl::matmul prim;
};
std::shared_mutex g_gemm_mu;
std::map<GemmKey, std::shared_ptr<GemmPrim>> g_gemms;

std::shared_ptr<GemmPrim> gemm_prim(const GemmKey& key) {
  {
    std::shared_lock lock(g_gemm_mu);
    auto it = g_gemms.find(key);
    if (it != g_gemms.end()) return it->second;
  }
  // Named copies, not a structured binding: clang 14 cannot capture bindings in the lambda.
  const i64 M = std::get<0>(key), K = std::get<1>(key), N = std::get<2>(key);
  const i64 lda = std::get<3>(key), ldb = std::get<4>(key), ldc = std::get<5>(key);
  const bool trans_b = std::get<6>(key), accumulate = std::get<8>(key);
  const float alpha = std::get<7>(key);
  auto p = std::make_shared<GemmPrim>();
  create([&] {
    const memory::desc ad({M, K}, dt::bf16, memory::dims{lda, 1});
    const memory::desc bd({K, N}, dt::bf16, trans_b ? memory::dims{1, ldb} : memory::dims{ldb, 1});
    const memory::desc cd({M, N}, dt::f32, memory::dims{ldc, 1});
    dnnl::primitive_attr attr = user_scratchpad();
    if (alpha != 1.0f) attr.set_output_scales(0, {alpha});
    if (accumulate) {
      dnnl::post_ops po;
      po.append_sum(1.0f);
      attr.set_post_ops(po);
    }
    omp_set_num_threads(1);  // split for one thread: it runs on the caller alone
    p->pd = dnnl::matmul::primitive_desc(dnnl::matmul::desc(ad, bd, cd), attr, engine());
    p->prim = dnnl::matmul(p->pd);
  });
  std::unique_lock lock(g_gemm_mu);
  return g_gemms.emplace(key, std::move(p)).first->second;
}

}  // namespace

void gemm_bf16_serial(float* c, i64 ldc, const std::uint16_t* a, i64 lda, const std::uint16_t* b,
                      i64 ldb, bool trans_b, i64 M, i64 K, i64 N, float alpha, bool accumulate) {
  if (M <= 0 || N <= 0) return;
  const auto p = gemm_prim({M, K, N, lda, ldb, ldc, trans_b, alpha, accumulate});
  // oneDNN reads the calling thread's OpenMP thread count when it runs: one, as it was split.
  omp_set_num_threads(1);
  memory am(p->pd.src_desc(), engine(), const_cast<std::uint16_t*>(a));
  memory bm(p->pd.weights_desc(), engine(), const_cast<std::uint16_t*>(b));
  memory cm(p->pd.dst_desc(), engine(), c);
  run(p->prim, p->pd.scratchpad_desc(),
      {{DNNL_ARG_SRC, am}, {DNNL_ARG_WEIGHTS, bm}, {DNNL_ARG_DST, cm}});
}

void passive_omp_wait(char** argv) {
  if (std::getenv("OMP_WAIT_POLICY") != nullptr || argv == nullptr) return;
  ::setenv("OMP_WAIT_POLICY", "passive", 0);
  ::execv("/proc/self/exe", argv);  // returns only on failure: run on with the default policy
}

bool cpu_has_native_bf16() {
  const auto isa = static_cast<unsigned>(dnnl::get_effective_cpu_isa());
  const auto bf16 = static_cast<unsigned>(dnnl_cpu_isa_avx512_core_bf16);
  return (isa & bf16) == bf16;
}

bool cpu_has_vnni() {
  const auto isa = static_cast<unsigned>(dnnl::get_effective_cpu_isa());
  const auto avx512 = static_cast<unsigned>(dnnl_cpu_isa_avx512_core_vnni);
  const auto avx2 = static_cast<unsigned>(dnnl_cpu_isa_avx2_vnni);
  return (isa & avx512) == avx512 || (isa & avx2) == avx2;
}

const char* dnnl_description() {
  static const std::string s = [] {
    const dnnl_version_t* v = dnnl_version();
    std::string r = "oneDNN " + std::to_string(v->major) + "." + std::to_string(v->minor) + "." +
                    std::to_string(v->patch);
    r += v->cpu_runtime == DNNL_RUNTIME_OMP   ? " (OpenMP)"
         : v->cpu_runtime == DNNL_RUNTIME_TBB ? " (TBB)"
                                              : " (other runtime)";
    return r;
  }();
  return s.c_str();
}

int dnnl_last_threads() {
  return g_last_threads.load(std::memory_order_relaxed);
}

namespace ref {

void linear_bf16(float* y, i64 ldy, const float* x, i64 ldx, const std::uint16_t* w_bits,
                 const float* b, i64 M, i64 K, i64 N, Act act) {
  for (i64 i = 0; i < M; ++i) {
    for (i64 j = 0; j < N; ++j) {
      double acc = b ? b[j] : 0.0;
      for (i64 k = 0; k < K; ++k)
        acc += static_cast<double>(bf16_to_float(float_to_bf16(x[i * ldx + k]))) *
               static_cast<double>(bf16_to_float(w_bits[j * K + k]));
      y[i * ldy + j] = apply_act(act, static_cast<float>(acc));
    }
  }
}

void linear_int8(float* y, i64 ldy, const float* x, i64 ldx, const std::int8_t* wq,
                 const float* w_scale, const float* b, i64 M, i64 K, i64 N, Act act) {
  std::vector<std::int8_t> xq(static_cast<std::size_t>(std::max<i64>(M * K, 0)));
  std::vector<float> sx(static_cast<std::size_t>(std::max<i64>(M, 0)));
  ref::quantize_rows_s8(xq.data(), K, sx.data(), x, ldx, M, K);
  for (i64 i = 0; i < M; ++i) {
    for (i64 j = 0; j < N; ++j) {
      std::int64_t acc = 0;
      for (i64 k = 0; k < K; ++k) acc += std::int64_t{xq[i * K + k]} * wq[j * K + k];
      float v = static_cast<float>(acc) * w_scale[j] * sx[static_cast<std::size_t>(i)];
      if (b) v += b[j];
      y[i * ldy + j] = apply_act(act, v);
    }
  }
}

}  // namespace ref

}  // namespace gen3d::models::kernels
