#include "models/cuda/backend.h"

#include <cublasLt.h>
#include <cuda_runtime.h>
#include <spdlog/spdlog.h>

#include <algorithm>
#include <atomic>
#include <chrono>
#include <cstdint>
#include <map>
#include <memory>
#include <mutex>
#include <string>
#include <vector>

#include "models/core/dtype.h"
#include "models/core/error.h"
#include "models/cuda/conv.h"
#include "models/cuda/cublaslt.h"
#include "models/cuda/gemm.h"
#include "models/cuda/kernels.h"
#include "models/cuda/runtime.h"
#include "models/kernels/flops.h"
#include "models/nn/device_ops.h"
#include "models/nn/layers.h"

namespace gen3d::models::cuda {

namespace {

cudaStream_t g_stream = nullptr;
cublasLtHandle_t g_lt = nullptr;

// Device tensors come from the stream-ordered pool, which keeps freed blocks for reuse, so a
// forward pass's many temporaries cost no cudaMalloc / cudaFree (and no device-wide sync).
class CudaMemory final : public DeviceMemory {
 public:
  void* allocate(std::size_t bytes) const override {
    void* p = nullptr;
    check(cudaMallocAsync(&p, bytes == 0 ? 256 : bytes, g_stream), "cudaMallocAsync");
    check(cudaMemsetAsync(p, 0, bytes == 0 ? 256 : bytes, g_stream), "cudaMemsetAsync");
    return p;
  }
  void release(void* p) const override { cudaFreeAsync(p, g_stream); }
  void copy(void* dst, Device dd, const void* src, Device sd, std::size_t bytes) const override {
    check(cudaMemcpyAsync(dst, src, bytes, kind(dd, sd), g_stream), "cudaMemcpyAsync");
    if (dd == Device::kCpu) check(cudaStreamSynchronize(g_stream), "cudaStreamSynchronize");
  }
  void copy_2d(void* dst, std::size_t dpitch, Device dd, const void* src, std::size_t spitch,
               Device sd, std::size_t width, std::size_t rows) const override {
    check(cudaMemcpy2DAsync(dst, dpitch, src, spitch, width, rows, kind(dd, sd), g_stream),
          "cudaMemcpy2DAsync");
    if (dd == Device::kCpu) check(cudaStreamSynchronize(g_stream), "cudaStreamSynchronize");
  }

 private:
  static cudaMemcpyKind kind(Device dst, Device src) {
    if (dst == Device::kCpu && src == Device::kCpu) return cudaMemcpyHostToHost;
    if (dst == Device::kCpu) return cudaMemcpyDeviceToHost;
    if (src == Device::kCpu) return cudaMemcpyHostToDevice;
    return cudaMemcpyDeviceToDevice;
  }
};

// A layer's parameters on the GPU: bf16 weight [out, in], float32 bias.
struct DeviceLinear {
  std::uint16_t* weight = nullptr;
  float* bias = nullptr;
  ~DeviceLinear() {
    cudaFree(weight);
    cudaFree(bias);
  }
};

template <typename T>
T* upload(const T* host, std::size_t n, const char* what) {
  T* p = nullptr;
  check(cudaMalloc(&p, n * sizeof(T)), what);
  // On the backend's stream, which does not wait for the legacy default stream: a plain
  // cudaMemcpy from pageable memory may return before its last DMA lands, and a kernel on
  // g_stream would not wait for it. Synchronised because `host` may be freed at return.
  check(cudaMemcpyAsync(p, host, n * sizeof(T), cudaMemcpyHostToDevice, g_stream), what);
  check(cudaStreamSynchronize(g_stream), what);
  return p;
}

std::shared_ptr<const DeviceLinear> device_linear(const nn::Linear& l) {
  auto made = l.device_copy.get([&]() -> std::shared_ptr<const void> {
    // Whatever the host storage, the GPU holds bf16 rounded from it (the CPU's bf16 rounding).
    std::vector<std::uint16_t> w;
    if (l.weight_bf16) {
      w = l.weight_bf16->plain();
    } else {
      const auto n = static_cast<std::size_t>(l.in * l.out);
      w.resize(n);
      for (std::size_t i = 0; i < n; ++i)
        w[i] =
            float_to_bf16(l.weight16.empty() ? l.weight.data()[i] : half_to_float(l.weight16[i]));
    }
    // Rows padded with zero columns to the GEMM's row length.
    const std::int64_t ld = gemm_padded_in(l.in);
    if (ld != l.in) {
      std::vector<std::uint16_t> padded(static_cast<std::size_t>(l.out * ld), 0);
      for (std::int64_t o = 0; o < l.out; ++o)
        std::copy_n(w.data() + o * l.in, l.in, padded.data() + o * ld);
      w.swap(padded);
    }
    auto d = std::make_shared<DeviceLinear>();
    d->weight = upload(w.data(), w.size(), "uploading a Linear weight");
    if (!l.bias.empty())
      d->bias = upload(l.bias.data(), static_cast<std::size_t>(l.bias.numel()),
                       "uploading a Linear bias");
    return d;
  });
  return std::static_pointer_cast<const DeviceLinear>(made);
}

std::shared_ptr<const float> device_scale(const nn::RMSNorm& n) {
  auto made = n.device_copy.get([&]() -> std::shared_ptr<const void> {
    float* p = upload(n.scale.data(), static_cast<std::size_t>(n.scale.numel()),
                      "uploading an RMSNorm scale");
    return std::shared_ptr<const float>(p, [](const float* q) { cudaFree(const_cast<float*>(q)); });
  });
  return std::static_pointer_cast<const float>(made);
}

std::shared_ptr<const float> upload_shared(const Tensor& t, const char* what) {
  float* p = upload(t.data(), static_cast<std::size_t>(t.numel()), what);
  return std::shared_ptr<const float>(p, [](const float* q) { cudaFree(const_cast<float*>(q)); });
}

const float* device_parameter(const Tensor& t, const nn::DeviceCopy& slot) {
  if (t.empty()) return nullptr;
  if (t.device() == Device::kCuda) return t.data();
  auto made = slot.get(
      [&]() -> std::shared_ptr<const void> { return upload_shared(t, "uploading a parameter"); });
  return static_cast<const float*>(made.get());
}

// A LayerNorm's weight and bias on the GPU (either may be absent).
struct DeviceNorm {
  std::shared_ptr<const float> weight, bias;
};

std::shared_ptr<const DeviceNorm> device_norm(const nn::LayerNorm& n) {
  auto made = n.device_copy.get([&]() -> std::shared_ptr<const void> {
    auto d = std::make_shared<DeviceNorm>();
    if (!n.weight.empty()) d->weight = upload_shared(n.weight, "uploading a LayerNorm weight");
    if (!n.bias.empty()) d->bias = upload_shared(n.bias, "uploading a LayerNorm bias");
    return d;
  });
  return std::static_pointer_cast<const DeviceNorm>(made);
}

// Frees stream-ordered memory in stream order.
struct PoolFree {
  void operator()(void* p) const { cudaFreeAsync(p, g_stream); }
};

// A host array copied into stream-ordered device memory for the kernels issued after it; freed
// in stream order, so the kernels that read it finish first. The host array may go as soon as
// the constructor returns (a copy from pageable memory is staged before the call returns).
template <typename T>
class Staged {
 public:
  Staged(const T* host, i64 n) {
    const std::size_t bytes = static_cast<std::size_t>(n) * sizeof(T);
    check(cudaMallocAsync(reinterpret_cast<void**>(&p_), bytes, g_stream), "cudaMallocAsync");
    check(cudaMemcpyAsync(p_, host, bytes, cudaMemcpyHostToDevice, g_stream), "cudaMemcpyAsync");
  }
  ~Staged() { cudaFreeAsync(p_, g_stream); }
  Staged(const Staged&) = delete;
  Staged& operator=(const Staged&) = delete;
  const T* get() const { return p_; }

 private:
  T* p_ = nullptr;
};

// Events around each operation while profiling is on.
struct Profile {
  std::atomic<bool> on{false};
  std::mutex mutex;
  std::vector<std::pair<const char*, std::pair<cudaEvent_t, cudaEvent_t>>> spans;
  std::vector<cudaEvent_t> spare;
  cudaEvent_t event() {
    if (!spare.empty()) {
      cudaEvent_t e = spare.back();
      spare.pop_back();
      return e;
    }
    cudaEvent_t e = nullptr;
    check(cudaEventCreate(&e), "cudaEventCreate");
    return e;
  }
};
Profile g_profile;

}  // namespace

namespace {

// The device timeline (DeviceOps::start_timeline / take_timeline): while a caller records, each
// ProfileSpan also brackets its work with a pair of events kept here (apart from the profile's,
// which take_profile recycles on its own schedule), numbered in issue order. Guarded by
// g_profile.mutex; the events come from and go back to the profile's spares.
struct Timeline {
  std::atomic<int> active{0};  // callers between start_timeline and take_timeline
  std::uint64_t next = 1;      // number of the next span; a caller's mark is `next` at its start
  // Recorded when the first caller started, on a stream of its own so it need not wait for the
  // work in flight, at the host time `reference_host`: event times map to the host clock from it.
  cudaStream_t stream = nullptr;
  cudaEvent_t reference = nullptr;
  std::chrono::steady_clock::time_point reference_host;
  struct Span {
    const char* name;
    cudaEvent_t start, end;
    std::uint64_t number;
  };
  std::vector<Span> spans;  // not yet taken, in issue order
};
Timeline g_timeline;

// Consecutive spans of one kind closer than this are one span of the timeline: back-to-back
// launches of one operation read as one stretch, not one span per launch.
constexpr auto kTimelineMergeGap = std::chrono::microseconds(4);

}  // namespace

ProfileSpan::ProfileSpan(const char* name) : name_(name) {
  const bool profile = g_profile.on.load(std::memory_order_relaxed);
  const bool timeline = g_timeline.active.load(std::memory_order_relaxed) > 0;
  if (!profile && !timeline) return;
  std::lock_guard lock(g_profile.mutex);
  if (profile) {
    start_ = g_profile.event();
    check(cudaEventRecord(start_, g_stream), "cudaEventRecord");
  }
  if (timeline) {
    timeline_start_ = g_profile.event();
    check(cudaEventRecord(timeline_start_, g_stream), "cudaEventRecord");
  }
}

ProfileSpan::~ProfileSpan() {
  if (!start_ && !timeline_start_) return;
  std::lock_guard lock(g_profile.mutex);
  if (start_) {
    cudaEvent_t end = g_profile.event();
    cudaEventRecord(end, g_stream);
    g_profile.spans.push_back({name_, {start_, end}});
  }
  if (timeline_start_) {
    if (g_timeline.active.load() == 0) {  // every caller took its timeline meanwhile
      g_profile.spare.push_back(timeline_start_);
      return;
    }
    cudaEvent_t end = g_profile.event();
    cudaEventRecord(end, g_stream);
    g_timeline.spans.push_back({name_, timeline_start_, end, g_timeline.next++});
  }
}

namespace {

std::uint64_t start_timeline() {
  std::lock_guard lock(g_profile.mutex);
  if (g_timeline.active.load() == 0) {
    if (!g_timeline.stream)
      check(cudaStreamCreateWithFlags(&g_timeline.stream, cudaStreamNonBlocking),
            "cudaStreamCreate");
    if (!g_timeline.reference) g_timeline.reference = g_profile.event();
    // The event runs at once on its idle stream: the host times around the wait bracket it.
    const auto before = std::chrono::steady_clock::now();
    check(cudaEventRecord(g_timeline.reference, g_timeline.stream), "cudaEventRecord");
    check(cudaEventSynchronize(g_timeline.reference), "cudaEventSynchronize");
    const auto after = std::chrono::steady_clock::now();
    g_timeline.reference_host = before + (after - before) / 2;
  }
  g_timeline.active.fetch_add(1);
  return g_timeline.next;
}

std::vector<nn::DeviceOps::TimelineSpan> take_timeline(std::uint64_t mark) {
  using clock = std::chrono::steady_clock;
  const auto ms = [](float t) {
    return std::chrono::duration_cast<clock::duration>(
        std::chrono::duration<double, std::milli>(t));
  };
  // Whatever fails, this caller stops recording (or every later operation would still be timed).
  cudaError_t error = cudaStreamSynchronize(g_stream);
  std::vector<nn::DeviceOps::TimelineSpan> out;
  {
    std::lock_guard lock(g_profile.mutex);
    if (g_timeline.active.load() == 0) return {};  // a take without a start
    std::vector<Timeline::Span> kept;
    for (const Timeline::Span& s : g_timeline.spans) {
      if (s.number < mark) {  // issued before this caller started: another caller's
        kept.push_back(s);
        continue;
      }
      // The start from the reference; the duration from the span's own pair, which keeps the
      // float milliseconds' precision however long the recording has run.
      float from_reference = 0.0f, duration = 0.0f;
      cudaError_t e = error;
      if (e == cudaSuccess)
        e = cudaEventElapsedTime(&from_reference, g_timeline.reference, s.start);
      if (e == cudaSuccess) e = cudaEventElapsedTime(&duration, s.start, s.end);
      g_profile.spare.push_back(s.start);
      g_profile.spare.push_back(s.end);
      if (e != cudaSuccess) {
        error = e;
        continue;
      }
      const clock::time_point start = g_timeline.reference_host + ms(from_reference);
      const clock::time_point end = start + ms(std::max(duration, 0.0f));
      if (!out.empty() && out.back().name == s.name && start - out.back().end < kTimelineMergeGap)
        out.back().end = std::max(out.back().end, end);
      else
        out.push_back({s.name, start, end});
    }
    g_timeline.spans = std::move(kept);
    if (g_timeline.active.fetch_sub(1) == 1) {  // the last caller: what is left is no one's
      for (const Timeline::Span& s : g_timeline.spans) {
        g_profile.spare.push_back(s.start);
        g_profile.spare.push_back(s.end);
      }
      g_timeline.spans.clear();
    }
  }
  check(error, "reading the device timeline");
  return out;
}

}  // namespace

namespace {

using Span = ProfileSpan;

// A convolution's weight on the GPU as the GEMM reads it: bf16 [cout, gemm_padded_in(k)] with
// rows (kh, kw, cin) then zeros, rounded from whatever the host keeps (the CPU's bf16 rounding);
// its float32 bias.
std::shared_ptr<const DeviceLinear> device_conv(const nn::Conv2d& c) {
  auto made = c.device_copy.get([&]() -> std::shared_ptr<const void> {
    const kernels::ConvWeight& wt = c.weight;
    const std::int64_t k = wt.kh * wt.kw * wt.cin;
    std::vector<std::uint16_t> w;
    const std::vector<float>* bias = &wt.bias;
    if (wt.bf16) {
      w = wt.bf16->plain();
      bias = &wt.bf16->bias;
    } else {
      w.resize(wt.w.size());
      for (std::size_t i = 0; i < w.size(); ++i) w[i] = float_to_bf16(wt.w[i]);
    }
    if (static_cast<std::int64_t>(w.size()) != wt.cout * k || k == 0)
      throw ModelError("conv2d on the GPU: the layer holds no weights");
    const std::int64_t ld = gemm_padded_in(k);
    if (ld != k) {
      std::vector<std::uint16_t> padded(static_cast<std::size_t>(wt.cout * ld), 0);
      for (std::int64_t o = 0; o < wt.cout; ++o)
        std::copy_n(w.data() + o * k, k, padded.data() + o * ld);
      w.swap(padded);
    }
    auto d = std::make_shared<DeviceLinear>();
    d->weight = upload(w.data(), w.size(), "uploading a Conv2d weight");
    if (!bias->empty()) d->bias = upload(bias->data(), bias->size(), "uploading a Conv2d bias");
    return d;
  });
  return std::static_pointer_cast<const DeviceLinear>(made);
}

// A GroupNorm's affine weight and bias on the GPU (either may be absent).
std::shared_ptr<const DeviceNorm> device_group_norm(const nn::GroupNorm& n) {
  auto made = n.device_copy.get([&]() -> std::shared_ptr<const void> {
    auto d = std::make_shared<DeviceNorm>();
    if (!n.weight.empty()) d->weight = upload_shared(n.weight, "uploading a GroupNorm weight");
    if (!n.bias.empty()) d->bias = upload_shared(n.bias, "uploading a GroupNorm bias");
    return d;
  });
  return std::static_pointer_cast<const DeviceNorm>(made);
}

class CudaOps final : public nn::DeviceOps {
 public:
  Device device() const override { return Device::kCuda; }
  void linear(const nn::Linear& layer, float* y, i64 ldy, const float* x, i64 ldx, i64 rows,
              kernels::Act act) const override {
    if (rows == 0) return;
    const auto w = device_linear(layer);
    const Span span("linear");
    std::lock_guard lock(gemm_mutex_);  // the bf16 staging buffer is shared
    gemm_bf16(y, ldy, x, ldx, w->weight, w->bias, rows, layer.in, layer.out, act);
    kernels::count_flops(2.0 * static_cast<double>(rows) * static_cast<double>(layer.in) *
                         static_cast<double>(layer.out));
  }
  void ln_modulate(float* y, i64 ysb, const float* x, i64 xsb, i64 batch, i64 tokens, i64 dim,
                   const float* shift, const float* scale, i64 mod_stride,
                   float eps) const override {
    const Span span("ln_modulate");
    cuda::ln_modulate(y, ysb, x, xsb, batch, tokens, dim, shift, scale, mod_stride, eps);
  }
  void gated_residual(float* h, i64 hsb, const float* y, i64 ysb, i64 batch, i64 tokens, i64 dim,
                      const float* gate, i64 gate_stride) const override {
    const Span span("gated_residual");
    cuda::gated_residual(h, hsb, y, ysb, batch, tokens, dim, gate, gate_stride);
  }
  void qk_rmsnorm(float* qkv, i64 rows, i64 ld, i64 heads, i64 head_dim, i64 head_stride,
                  i64 q_offset, i64 k_offset, const nn::RMSNorm& q_norm,
                  const nn::RMSNorm& k_norm) const override {
    const auto qs = device_scale(q_norm), ks = device_scale(k_norm);
    const Span span("qk_rmsnorm");
    cuda::qk_rmsnorm(qkv, rows, ld, heads, head_dim, head_stride, q_offset, k_offset, qs.get(),
                     ks.get(), q_norm.eps);
  }
  void attention(const kernels::HeadsOut& out, const kernels::HeadsView& q,
                 const kernels::HeadsView& k, const kernels::HeadsView& v,
                 const kernels::AttentionShape& s) const override {
    cuda::attention(out, q, k, v, s);  // profiles its packing and its kernel apart
    kernels::count_flops(4.0 * static_cast<double>(s.batch * s.heads) *
                         static_cast<double>(s.q_len) * static_cast<double>(s.kv_len) *
                         static_cast<double>(s.head_dim));
  }
  void layer_norm(const nn::LayerNorm& norm, float* y, i64 ldy, const float* x, i64 ldx,
                  i64 rows) const override {
    const auto d = device_norm(norm);
    const Span span("layer_norm");
    cuda::layer_norm(y, ldy, x, ldx, rows, norm.dim, d->weight.get(), d->bias.get(), norm.eps);
  }
  void swiglu(float* g, i64 ldg, const float* z, i64 ldz, i64 rows, i64 hidden) const override {
    const Span span("activation");
    cuda::swiglu(g, ldg, z, ldz, rows, hidden);
  }
  void fourier(float* out, const float* xyz, i64 points, const float* freqs,
               i64 num_freqs) const override {
    const Span span("fourier");
    cuda::fourier(out, xyz, points, freqs, num_freqs);
  }
  void act_inplace(kernels::Act a, float* x, i64 n) const override {
    const Span span("activation");
    cuda::act_copy(a, x, n, x, n, 1, n);
  }
  void act_copy(kernels::Act a, float* dst, i64 ld_dst, const float* src, i64 ld_src, i64 rows,
                i64 cols) const override {
    const Span span("activation");
    cuda::act_copy(a, dst, ld_dst, src, ld_src, rows, cols);
  }
  void add(float* y, const float* x, i64 n) const override {
    const Span span("add");
    cuda::add(y, x, n);
  }
  void add_scaled(float* y, const float* x, float s, i64 n) const override {
    const Span span("add");
    cuda::add_scaled(y, x, s, n);
  }
  void rotate_pairs(float* x, i64 ld, i64 rows, i64 len, i64 heads, i64 head_dim, const float* cos,
                    const float* sin, i64 per_table) const override {
    const Span span("rotary");
    cuda::rotate_pairs(x, ld, rows, len, heads, head_dim, cos, sin, per_table);
  }
  void copy_rows(float* dst, i64 ld_dst, const float* src, i64 ld_src, i64 rows,
                 i64 cols) const override {
    if (rows * cols == 0) return;
    check(cudaMemcpy2DAsync(dst, static_cast<std::size_t>(ld_dst) * sizeof(float), src,
                            static_cast<std::size_t>(ld_src) * sizeof(float),
                            static_cast<std::size_t>(cols) * sizeof(float),
                            static_cast<std::size_t>(rows), cudaMemcpyDeviceToDevice, g_stream),
          "copy_rows");
  }
  void rms_norm(const nn::RMSNorm& norm, float* y, i64 ldy, const float* x, i64 ldx,
                i64 rows) const override {
    const auto scale = device_scale(norm);
    const Span span("rms_norm");
    cuda::rms_norm(y, ldy, x, ldx, rows, norm.dim, scale.get(), norm.eps);
  }
  void linear_f32(float* y, i64 ldy, const float* x, i64 ldx, i64 rows, const Tensor& w,
                  const nn::DeviceCopy& slot) const override {
    const float* wd = device_parameter(w, slot);
    const Span span("linear_f32");
    cuda::linear_f32(y, ldy, x, ldx, wd, rows, w.dim(1), w.dim(0));
  }
  void gather_rows(float* dst, i64 ld_dst, const float* src, i64 ld_src, const i64* rows, i64 n,
                   i64 cols) const override {
    if (n * cols == 0) return;
    const Staged<i64> r(rows, n);
    const Span span("gather");
    cuda::gather_rows(dst, ld_dst, src, ld_src, r.get(), n, cols);
  }
  void scatter_add_rows(float* dst, i64 ld_dst, const float* src, i64 ld_src, const i64* rows,
                        const float* weight, i64 n, i64 cols) const override {
    if (n * cols == 0) return;
    const Staged<i64> r(rows, n);
    const Staged<float> w(weight, n);
    const Span span("gather");
    cuda::scatter_add_rows(dst, ld_dst, src, ld_src, r.get(), w.get(), n, cols);
  }
  void zero(float* x, i64 n) const override {
    if (n == 0) return;
    check(cudaMemsetAsync(x, 0, static_cast<std::size_t>(n) * sizeof(float), g_stream), "zero");
  }
  void selected_key_attention(const kernels::HeadsOut& out, const kernels::HeadsView& q,
                              const kernels::HeadsView& k, const kernels::HeadsView& v,
                              const kernels::AttentionShape& s, std::span<const i64> offsets,
                              i64 top_k, i64 stride) const override {
    if (s.batch != 1) throw ModelError("selected-key attention: batch must be 1");
    if (offsets.size() < 2 || offsets.back() == 0) return;
    const i64 K = std::min(top_k, s.kv_len);
    if (K >= s.kv_len) return attention(out, q, k, v, s);  // every key, in index order
    const i64 groups = static_cast<i64>(offsets.size()) - 1;
    const Staged<i64> offsets_d(offsets.data(), groups + 1);
    void* p = nullptr;
    check(
        cudaMallocAsync(&p, static_cast<std::size_t>(groups * s.heads * K) * sizeof(int), g_stream),
        "cudaMallocAsync");
    const std::unique_ptr<int, PoolFree> idx(static_cast<int*>(p));
    cuda::select_keys(idx.get(), q, k, offsets_d.get(), groups, s.heads, s.head_dim, s.kv_len, K,
                      stride);
    cuda::grouped_attention(out, q, k, v, s, idx.get(), offsets.data(), groups, K);
    kernels::count_flops(4.0 * static_cast<double>(s.heads) * static_cast<double>(s.q_len) *
                         static_cast<double>(K) * static_cast<double>(s.head_dim));
  }
  const float* parameter(const Tensor& t, const nn::DeviceCopy& slot) const override {
    return device_parameter(t, slot);
  }
  void synchronize() const override {
    check(cudaStreamSynchronize(g_stream), "cudaStreamSynchronize");
  }
  void conv2d(const nn::Conv2d& conv, float* y, const float* x, i64 batch, i64 h,
              i64 w) const override {
    const kernels::ConvWeight& wt = conv.weight;
    const i64 pixels = batch * conv.out_h(h) * conv.out_w(w);
    if (pixels <= 0 || wt.cout <= 0) return;
    const auto d = device_conv(conv);
    const Span span("conv2d");
    std::lock_guard lock(gemm_mutex_);  // the GEMM's plans and workspace are shared
    cuda::conv2d(y, x, batch, h, w, d->weight, d->bias, wt.cout, wt.cin, wt.kh, wt.kw,
                 conv.geometry);
    kernels::count_flops(2.0 * static_cast<double>(pixels) *
                         static_cast<double>(wt.kh * wt.kw * wt.cin) *
                         static_cast<double>(wt.cout));
  }
  void group_norm(const nn::GroupNorm& norm, float* y, const float* x, i64 batch, i64 pixels,
                  bool silu) const override {
    const auto d = device_group_norm(norm);
    const Span span("group_norm");
    cuda::group_norm(y, x, batch, pixels, norm.channels, norm.groups, norm.eps, d->weight.get(),
                     d->bias.get(), silu);
  }
  void upsample_nearest2x(float* y, const float* x, i64 batch, i64 h, i64 w, i64 c) const override {
    const Span span("upsample");
    cuda::upsample_nearest2x(y, x, batch, h, w, c);
  }
  void geglu(float* g, i64 ldg, const float* z, i64 ldz, i64 rows, i64 hidden) const override {
    const Span span("activation");
    cuda::geglu(g, ldg, z, ldz, rows, hidden);
  }
  void add_broadcast(float* y, const float* x, i64 batch, i64 rows, i64 cols) const override {
    const Span span("add");
    cuda::add_broadcast(y, x, batch, rows, cols);
  }

 private:
  mutable std::mutex gemm_mutex_;

 public:
  // The device timeline, from the ProfileSpan events (see Timeline above).
  std::uint64_t start_timeline() const override { return cuda::start_timeline(); }
  std::vector<TimelineSpan> take_timeline(std::uint64_t mark) const override {
    return cuda::take_timeline(mark);
  }
};

const CudaMemory kMemory;
const CudaOps kOps;

}  // namespace

cudaStream_t stream() {
  return g_stream;
}
cublasLtHandle_t lt_handle() {
  return g_lt;
}

void check(cudaError_t e, const char* what) {
  if (e != cudaSuccess)
    throw ModelError(std::string("CUDA: ") + what + ": " + cudaGetErrorString(e));
}

void check(cublasStatus_t s, const char* what) {
  if (s != CUBLAS_STATUS_SUCCESS)
    throw ModelError(std::string("cuBLASLt: ") + what + ": status " +
                     std::to_string(static_cast<int>(s)));
}

void check_launch(const char* what) {
  check(cudaGetLastError(), what);
}

bool gpu_visible() {
  int n = 0;
  return cudaGetDeviceCount(&n) == cudaSuccess && n > 0;
}

std::string describe_gpu() {
  if (!gpu_visible()) return {};
  cudaDeviceProp p{};
  if (cudaGetDeviceProperties(&p, 0) != cudaSuccess) return {};
  int driver = 0, runtime = 0;
  cudaDriverGetVersion(&driver);
  cudaRuntimeGetVersion(&runtime);
  return fmt::format("{}, {} SMs, {:.1f} GiB, driver {}.{}, runtime {}.{}", p.name,
                     p.multiProcessorCount, static_cast<double>(p.totalGlobalMem) / (1u << 30),
                     driver / 1000, (driver % 1000) / 10, runtime / 1000, (runtime % 1000) / 10);
}

void set_profiling(bool on) {
  g_profile.on.store(on);
}

std::vector<std::pair<std::string, double>> take_profile() {
  check(cudaStreamSynchronize(g_stream), "cudaStreamSynchronize");
  std::lock_guard lock(g_profile.mutex);
  std::map<std::string, double> ms;
  for (auto& [name, ev] : g_profile.spans) {
    float t = 0.0f;
    check(cudaEventElapsedTime(&t, ev.first, ev.second), "cudaEventElapsedTime");
    ms[name] += t;
    g_profile.spare.push_back(ev.first);
    g_profile.spare.push_back(ev.second);
  }
  g_profile.spans.clear();
  std::vector<std::pair<std::string, double>> out(ms.begin(), ms.end());
  std::sort(out.begin(), out.end(),
            [](const auto& a, const auto& b) { return a.second > b.second; });
  return out;
}

void install() {
  static std::once_flag once;
  std::call_once(once, [] {
    int n = 0;
    const cudaError_t e = cudaGetDeviceCount(&n);
    if (e != cudaSuccess || n == 0)
      throw ModelError(std::string("no CUDA GPU is visible to this process") +
                       (e != cudaSuccess ? std::string(" (") + cudaGetErrorString(e) + ")" : ""));
    check(cudaSetDevice(0), "cudaSetDevice");
    check(cudaStreamCreateWithFlags(&g_stream, cudaStreamNonBlocking), "cudaStreamCreate");
    // Keep freed pool memory for reuse instead of returning it at each synchronization.
    cudaMemPool_t pool = nullptr;
    check(cudaDeviceGetDefaultMemPool(&pool, 0), "cudaDeviceGetDefaultMemPool");
    std::uint64_t keep = UINT64_MAX;
    check(cudaMemPoolSetAttribute(pool, cudaMemPoolAttrReleaseThreshold, &keep),
          "cudaMemPoolSetAttribute");
    check(cublaslt().cublasLtCreate(&g_lt), "cublasLtCreate");
    register_device_memory(Device::kCuda, &kMemory);
    nn::register_device_ops(Device::kCuda, &kOps);
    spdlog::info("CUDA backend: {}", describe_gpu());
  });
}

}  // namespace gen3d::models::cuda
